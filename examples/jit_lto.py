"""JIT link-time optimisation: two translation units compiled to LTO-IR, linked with nvJitLink.

A library unit defines a device function; the main unit's kernel calls it. Each is compiled
separately to LTO-IR, and the Linker optimises across both (the call is inlined) into one
cubin. The compile-and-link half needs no GPU (it targets sm_90 without one) and checks the
cubin; with a GPU the script then launches the kernel and checks the result.
"""

from __future__ import annotations

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LaunchConfig, Linker, LinkerOptions, Program, ProgramOptions, launch

LIBRARY = r"""
__device__ float polynomial(float x) {
    return 3.0f * x * x + 2.0f * x + 1.0f;
}
"""

MAIN = r"""
__device__ float polynomial(float x);  // defined in the other unit

extern "C" __global__ void apply(const float* x, float* out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = polynomial(x[i]);
}
"""


def compile_and_link(arch: str):
    """Compile both units to LTO-IR for ``arch`` and link them into one cubin (no GPU needed)."""
    opts = dict(arch=arch, relocatable_device_code=True, link_time_optimization=True)
    lib = Program(LIBRARY, options=ProgramOptions(name="library.cu", **opts)).compile("ltoir")
    main_unit = Program(MAIN, options=ProgramOptions(name="main.cu", **opts)).compile("ltoir")
    linker = Linker(main_unit, lib, options=LinkerOptions(arch=arch, link_time_optimization=True))
    return linker.link("cubin"), linker.backend


def main() -> int:
    from cuda_core import system

    try:
        has_gpu = system.get_num_devices() > 0
    except Exception:  # no driver: compile and link only
        has_gpu = False
    if not has_gpu:
        linked, backend = compile_and_link("sm_90")
        code = bytes(linked.code)
        if not code.startswith(b"\x7fELF"):
            print(f"FAILED: the linker returned {len(code)} bytes that are not a cubin")
            return 1
        print(
            f"compiled two units to LTO-IR and linked them with {backend} into {len(code)} bytes of sm_90 cubin"
        )
    dev = need_gpu()  # launching needs a GPU
    dev.set_current()
    linked, backend = compile_and_link(f"sm_{dev.arch}")
    ker = linked.get_kernel("apply")

    n = 10_000
    x = np.linspace(-2.0, 2.0, n, dtype=np.float32)
    s = dev.create_stream()
    dx = dev.allocate(x.nbytes, stream=s)
    dout = dev.allocate(x.nbytes, stream=s)
    dx.copy_from(x, stream=s)
    launch(s, LaunchConfig(grid=(n + 127) // 128, block=128), ker, dx, dout, np.uint32(n))
    out = np.empty_like(x)
    dout.copy_to(out, stream=s)
    s.sync()
    expected = 3.0 * x * x + 2.0 * x + 1.0
    if not np.allclose(out, expected, rtol=1e-5, atol=1e-5):
        print(f"FAILED: max error {np.abs(out - expected).max()}")
        return 1
    print(f"LTO-linked kernel ({backend}) agrees with NumPy on {n} elements")
    return 0


if __name__ == "__main__":
    run_main(main)
