"""Pass C structs by value, from ctypes and from NumPy (exits non-zero on a wrong result).

Each struct keeps its own size, alignment and padding; cuda_core checks its size against the
kernel's parameter before launching.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
struct Particle { signed char kind; double mass; float pos[3]; short id; };
extern "C" __global__ void describe(Particle p, double scale, double* out) {
    out[0] = p.kind; out[1] = p.mass * scale;
    out[2] = p.pos[0]; out[3] = p.pos[1]; out[4] = p.pos[2]; out[5] = p.id;
}
"""


class Particle(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int8),
        ("mass", ctypes.c_double),
        ("pos", ctypes.c_float * 3),
        ("id", ctypes.c_int16),
    ]


PARTICLE = np.dtype(
    [("kind", np.int8), ("mass", np.float64), ("pos", np.float32, 3), ("id", np.int16)], align=True
)


def main() -> int:
    dev = need_gpu()
    dev.set_current()
    s = dev.create_stream()
    prog = Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    ker = prog.compile("cubin").get_kernel("describe")
    out = dev.allocate(6 * 8, stream=s)
    expected = [-3.0, 5.0, 1.0, 2.0, 3.0, 42.0]
    ok = True
    for label, value in (
        ("ctypes.Structure", Particle(-3, 2.5, (ctypes.c_float * 3)(1, 2, 3), 42)),
        ("NumPy structured scalar", np.array([(-3, 2.5, (1, 2, 3), 42)], dtype=PARTICLE)[0]),
    ):
        launch(s, LaunchConfig(grid=1, block=1), ker, value, 2.0, out)
        host = np.empty(6, np.float64)
        out.copy_to(host, stream=s)
        s.sync()
        good = host.tolist() == expected
        ok &= good
        print(f"{label}: {host.tolist()} {'OK' if good else 'WRONG'}")
    # A struct of the wrong size is refused before the launch, naming the parameter.
    try:
        launch(
            s,
            LaunchConfig(grid=1, block=1),
            ker,
            np.array([(1, 2.0)], dtype=[("a", "i1"), ("b", "f8")])[0],
            2.0,
            out,
        )
        print("a wrongly sized struct was not refused", file=sys.stderr)
        ok = False
    except TypeError as exc:
        print(f"refused as expected: {exc}")
    out.close()
    s.close()
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
