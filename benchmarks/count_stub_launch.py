"""Instructions per launch against the stub driver, counted by callgrind (no GPU, no noise).

Wall time on a shared machine is noisy; an instruction count is not. This runs the loops of
``benchmarks/bench_stub_launch.py`` (``for _ in range(n): launch(s, cfg, k, a0, ...)``, every
name a local; and ``launch(s, cfg, k, *a)`` as ``bench_launch.py`` writes it) under
``valgrind --tool=callgrind`` with collection switched on only around each loop, and prints
the instructions per launch of each, beside the C floor (``cuLaunchKernelEx`` called in a C
loop with everything packed in advance). The 4-argument case is ``bench_launch.py``'s: three
distinct ``Buffer`` objects and a ``numpy.uint64``.

    python benchmarks/count_stub_launch.py [--number 5000] [--backend native|python]
        [--native-so PATH] [--keep DIR]

``--keep DIR`` keeps the callgrind output (one dump per loop, ``callgrind.out.*``) for
``callgrind_annotate --inclusive=yes``. Needs valgrind and its ``callgrind.h``; a benchmark,
not a test.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "handles" / "native_stub"))
sys.path.insert(0, str(ROOT))

MARK_C = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_TOGGLE_COLLECT; }
void cg_stop(const char *name) { CALLGRIND_TOGGLE_COLLECT; CALLGRIND_DUMP_STATS_AT(name); }
"""


def child(opts: argparse.Namespace) -> None:
    """In callgrind: each loop of ``opts.number`` launches between two markers."""
    import numpy as np
    from bench_stub_launch import CASES, FLOOR_C, LaunchConfigABI, floor_bytes, loop_of
    from stub_package import StubPackage, c_layout

    P = StubPackage(opts.stub, opts.native_so)
    from cuda_core import PreparedLaunch, launch

    mark = ctypes.CDLL(opts.mark)
    mark.cg_stop.argtypes = [ctypes.c_char_p]
    floor = ctypes.CDLL(opts.floor)
    floor.floor_loop.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
    del FLOOR_C
    s = P.stream()
    cfg = P.config(s)
    bufs = [P.buffer(0x7F0000001000 + 0x1000 * i) for i in range(3)]
    native_cfg = LaunchConfigABI((1, 1, 1), (1, 1, 1), 0, s._h.address, None, 0)
    keep: list[Any] = [native_cfg]
    n = opts.number
    for case in opts.cases:
        sizes = CASES[case]
        kernel = P.kernel(c_layout(sizes))
        if case == "4args":
            args: tuple[Any, ...] = (*bufs, np.uint64(1 << 20))
        elif case == "10mixed":
            a, b, c = bufs
            args = (a, b, np.int32(3), np.float32(1.5), 2.5, np.uint64(7), c, np.int16(-2))
            args += (np.uint8(9), np.int64(-5))
        elif case == "0args":
            args = ()
        else:
            args = tuple(float(i) for i in range(512))
        values = floor_bytes(args, 0)
        storage = [ctypes.create_string_buffer(v, len(v)) for v in values]
        params = (ctypes.c_void_p * max(len(storage), 1))(*map(ctypes.addressof, storage))
        keep += [storage, params]
        cargs = (P.launch_ex, ctypes.addressof(native_cfg), int(kernel.handle), params)
        names = {f"a{i}": x for i, x in enumerate(args)}
        call = f"launch(s, cfg, k{''.join(f', {m}' for m in names)})"
        loops = {
            "floor": lambda m, c=cargs: floor.floor_loop(*c, m),
            "launch": loop_of(call, {"launch": launch, "s": s, "cfg": cfg, "k": kernel, **names}),
            "launch*a": loop_of(
                "launch(s, cfg, k, *a)",
                {"launch": launch, "s": s, "cfg": cfg, "k": kernel, "a": args},
            ),
            "prepared": loop_of("p()", {"p": PreparedLaunch(s, cfg, kernel, *args)}),
            "empty": loop_of("pass", {}),
        }
        for name, loop in loops.items():
            loop(50)  # warm: plans built, the fast path taken
            mark.cg_start()
            loop(n)
            mark.cg_stop(f"{case}|{name}".encode())
    counters = getattr(P.backend, "launch_counters", None)
    if counters is not None:
        print("counters", list(counters()), file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=5000)
    ap.add_argument("--backend", choices=("native", "python"), default="native")
    ap.add_argument("--native-so")
    ap.add_argument("--cases", nargs="*", default=["0args", "4args", "10mixed"])
    ap.add_argument("--keep")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--stub", "--floor", "--mark"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        child(opts)
        return
    from bench_stub_launch import FLOOR_C
    from stub_build import build_shared, build_stub, compiler

    cc = compiler()
    if cc is None or shutil.which("valgrind") is None:
        raise SystemExit("count_stub_launch: needs a C compiler and valgrind")
    with tempfile.TemporaryDirectory(prefix="count_stub_launch_") as tmp:
        out = Path(opts.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        for old in glob.glob(str(out / "callgrind.out.*")):
            os.unlink(old)
        stub = build_stub(cc, Path(tmp), opt="-O2")
        (Path(tmp) / "floor.c").write_text(FLOOR_C)
        (Path(tmp) / "mark.c").write_text(MARK_C)
        floor = build_shared(cc, [Path(tmp) / "floor.c"], Path(tmp) / "libfloor.so", ["-O2"])
        mark = build_shared(cc, [Path(tmp) / "mark.c"], Path(tmp) / "libmark.so", ["-O2"])
        cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--compress-strings=no"]
        cmd += [f"--callgrind-out-file={out}/callgrind.out.%p", sys.executable, __file__]
        cmd += ["--child", "--stub", str(stub), "--floor", str(floor), "--mark", str(mark)]
        cmd += ["--number", str(opts.number), "--cases", *opts.cases]
        if opts.native_so:
            cmd += ["--native-so", opts.native_so]
        env = {**os.environ, "CUDA_CORE_BACKEND": opts.backend, "PYTHONHASHSEED": "0"}
        env.pop("CUDA_CORE_NO_FASTPATH", None)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            raise SystemExit("count_stub_launch: the run failed")
        for line in proc.stderr.splitlines():
            if line.startswith("counters"):
                print(f"{opts.backend} backend: native launch counters {line.split(' ', 1)[1]}")
        counts: dict[str, int] = {}
        for path in sorted(glob.glob(str(out / "callgrind.out.*"))):
            text = Path(path).read_text()
            trigger = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
            total = re.search(r"^summary: (\d+)", text, re.M) or re.search(
                r"^totals: (\d+)", text, re.M
            )
            if trigger and total:
                counts[trigger.group(1).strip()] = int(total.group(1))
    print(f"instructions per launch ({opts.backend} backend, {opts.number} launches per loop)")
    for case in opts.cases:
        row = {
            k.split("|")[1]: v / opts.number for k, v in counts.items() if k.startswith(case + "|")
        }
        fl, empty = row.get("floor", 0.0), row.get("empty", 0.0)
        cells = "  ".join(f"{k} {v:7.0f}" for k, v in row.items())
        over = "  ".join(
            f"{k}-floor {row[k] - fl:6.0f}" for k in ("launch", "launch*a", "prepared") if k in row
        )
        print(f"{case:8s} {cells}  | {over}  (loop alone {empty:.0f})")


if __name__ == "__main__":
    main()
