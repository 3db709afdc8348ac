"""Host overhead per launch without a GPU: launch() and PreparedLaunch against the stub driver.

The CPU tier's stub driver (``tests/handles/native_stub/stub_cuda.c``, where ``cuLaunchKernelEx``
checks its stream and returns) stands in for libcuda, so what is timed is cuda_core's own work
per launch. Beside it runs the floor: the same ``cuLaunchKernelEx`` called in a C loop with the
configuration and the parameters packed in advance (built here with the system C compiler).
Each backend runs in a process of its own (the native one as built in this checkout or
installed, and the pure-Python one, ``CUDA_CORE_BACKEND=python``); in each, rounds of
``--number`` calls run round-robin over every implementation and argument list, and the table
shows the median over ``--repeat`` rounds in nanoseconds per launch. The Python calls are timed
as a loop that launches reads (``for _ in range(n): launch(s, cfg, k, a0, a1, ...)``), so the
loop's own cost counts as overhead. Before timing, the bytes each launch hands the stub are
checked against the floor's.

    python benchmarks/bench_stub_launch.py [--number 2000] [--repeat 15]

The output ends with one line per case, ``stub-overhead <case> <ns over the C floor>``. A
benchmark, not a test: nothing is asserted about the times. Without a C compiler it says so
and exits 0; a backend that is not available shows "n/a".
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "handles" / "native_stub"))
sys.path.insert(0, str(ROOT))  # the checkout's cuda_core, where it is run from one
from _harness import environment_line, markdown_table, run_backend_child, run_rounds  # noqa: E402

# The kernels of benchmarks/bench_launch.py: name -> parameter sizes in declaration order.
K10_SIZES = (8, 8, 4, 4, 8, 8, 8, 2, 1, 8)  # float*, float*, int, float, double, u64, float*,
# short, unsigned char, long long
CASES = {
    "0args": (),
    "4args": (8, 8, 8, 8),  # 3 pointers + u64
    "10mixed": K10_SIZES,
    "512doubles": (8,) * 512,
}
ENTRIES = ("launch", "prepared")
BACKENDS = ("native", "python")

FLOOR_C = r"""
typedef int (*launch_ex_t)(const void *config, void *function, void **params, void **extra);
/* number launches through the entry point at fn, with everything packed in advance */
int floor_loop(void *fn, const void *config, void *function, void **params, int number)
{
    launch_ex_t launch = (launch_ex_t)fn;
    for (int i = 0; i < number; ++i) {
        int r = launch(config, function, params, 0);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}
"""


class LaunchConfigABI(ctypes.Structure):
    """``CUlaunchConfig`` (CUDA 12.0 ABI), for the floor."""

    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shmem", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("num_attrs", ctypes.c_uint),
    ]


def make_args(case: str, buf: Any) -> tuple[Any, ...]:
    """The arguments of ``case`` (bench_launch.py's): Buffers for the pointers."""
    import numpy as np

    if case == "0args":
        return ()
    if case == "4args":
        return (buf, buf, buf, np.uint64(1 << 20))
    if case == "10mixed":
        return (
            buf,
            buf,
            np.int32(3),
            np.float32(1.5),
            2.5,
            np.uint64(7),
            buf,
            np.int16(-2),
            np.uint8(9),
            np.int64(-5),
        )
    return tuple(float(i) for i in range(512))


def floor_bytes(args: tuple[Any, ...], ptr: int) -> list[bytes]:
    """Each argument's bytes, packed by hand (independently of cuda_core's packer)."""
    import numpy as np

    out = []
    for a in args:
        if isinstance(a, float):
            out.append(bytes(ctypes.c_double(a)))
        elif isinstance(a, np.generic):
            out.append(a.tobytes())
        else:  # a Buffer: its device pointer
            out.append(bytes(ctypes.c_uint64(ptr)))
    return out


def loop_of(call: str, names: dict[str, Any]) -> Callable[[int], object]:
    """``loop(n)``: ``call`` written out ``n`` times in a Python loop, as code that launches in a
    loop reads (every name a local, no lambda or ``*args`` in between)."""
    params = "".join(f", {k}={k}" for k in names)
    ns = dict(names)
    exec(
        f"def make({', '.join(names)}):\n    def loop(n{params}):\n        for _ in range(n):\n"
        f"            {call}\n    return loop\n",
        ns,
    )
    return ns["make"](**names)  # type: ignore[no-any-return]


def child(
    backend: str, stub_so: str, floor_so: str, number: int, repeat: int, native_so: str | None
) -> dict:
    """Time one backend in this process; the results as a JSON-able dict."""
    from stub_package import StubPackage, c_layout

    P = StubPackage(stub_so, native_so if backend == "native" else None)
    if P.native != (backend == "native"):
        from cuda_core._handles import _backend

        return {"skipped": f"the {backend} backend is not in use here: {_backend.REASON}"}
    from cuda_core import PreparedLaunch, launch

    floor = ctypes.CDLL(floor_so)
    floor.floor_loop.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int]
    s = P.stream()
    cfg = P.config(s)
    buf = P.buffer()
    native_cfg = LaunchConfigABI((1, 1, 1), (1, 1, 1), 0, s._h.address, None, 0)
    jobs: dict[tuple[str, str], Callable[[int], object]] = {}
    keep: list[Any] = [native_cfg]
    for case, sizes in CASES.items():
        kernel = P.kernel(c_layout(sizes))
        args = make_args(case, buf)
        # The floor's parameters: each value in its own storage, a void* per parameter.
        values = floor_bytes(args, int(buf.handle))
        storage = [ctypes.create_string_buffer(v, len(v)) for v in values]
        params = (ctypes.c_void_p * max(len(storage), 1))(*map(ctypes.addressof, storage))
        keep += [storage, params]
        prepared = PreparedLaunch(s, cfg, kernel, *args)
        fn, f = P.launch_ex, int(kernel.handle)
        cargs = (fn, ctypes.addressof(native_cfg), f, ctypes.addressof(params) if args else None)
        # What each one hands the driver must be the floor's bytes.
        P.expect_params(sizes)
        for call in (
            lambda k=kernel, a=args: launch(s, cfg, k, *a),
            prepared,
            lambda c=cargs: floor.floor_loop(*c, 1),
        ):
            call()
            if P.params() != b"".join(values):
                raise AssertionError(f"{case}: the stub received other parameter bytes")
        P.expect_params(())
        names = {f"a{i}": a for i, a in enumerate(args)}
        call = f"launch(s, cfg, k{''.join(f', {n}' for n in names)})"
        jobs[(case, "C floor")] = lambda n, c=cargs: floor.floor_loop(*c, n)
        jobs[(case, "launch")] = loop_of(
            call, {"launch": launch, "s": s, "cfg": cfg, "k": kernel, **names}
        )
        jobs[(case, "prepared")] = loop_of("p()", {"p": prepared})
    for job in jobs.values():  # warm up
        job(200)
    medians = run_rounds(jobs, number, repeat)
    if P.errors:
        raise AssertionError(f"the stub saw {P.errors} misuses")
    out: dict[str, Any] = {f"{case}|{impl}": t for (case, impl), t in medians.items()}
    counters = getattr(P.backend, "launch_counters", None)
    if counters is not None:
        out["counters"] = list(counters())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument(
        "--native-so",
        help="a build of cuda_core._handles._native to time instead of the one cuda_core finds "
        "(to compare builds, e.g. one made with CFLAGS=-DCC_LAUNCH_KEEPS_GIL)",
    )
    ap.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    ap.add_argument("--stub", help=argparse.SUPPRESS)
    ap.add_argument("--floor", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        result = child(opts.child, opts.stub, opts.floor, opts.number, opts.repeat, opts.native_so)
        print(json.dumps(result))
        return

    from stub_build import build_shared, build_stub, compiler

    cc = compiler()
    if cc is None:
        print("bench_stub_launch: skipped: no C compiler (cc, gcc or $CC) to build the stub driver")
        return
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_stub_launch_") as tmp:
        stub = build_stub(cc, Path(tmp), opt="-O2")
        src = Path(tmp) / "floor.c"
        src.write_text(FLOOR_C)
        floor = build_shared(cc, [src], Path(tmp) / "libfloor.so", ["-O2"])
        for backend in BACKENDS:
            cmd = [sys.executable, __file__, "--child", backend, "--stub", str(stub)]
            cmd += ["--floor", str(floor), "--number", str(opts.number)]
            cmd += ["--repeat", str(opts.repeat)]
            if opts.native_so:
                cmd += ["--native-so", opts.native_so]
            results[backend] = run_backend_child("bench_stub_launch", backend, cmd)
    print(environment_line())
    print(
        f"stub driver, {opts.number} launches per round, median of {opts.repeat} rounds, "
        f"{os.cpu_count()} CPUs; ns per launch"
    )
    head = ["arguments"]
    for backend in BACKENDS:
        head += [f"{backend}: C floor", "launch", "prepared", "launch - floor", "prepared - floor"]
    lines = [head]
    for case in CASES:
        row = [case]
        for backend in BACKENDS:
            r = results[backend]
            if "skipped" in r:
                row += ["n/a"] * 5
                continue
            fl, la, pr = (r[f"{case}|{impl}"] * 1e9 for impl in ("C floor", "launch", "prepared"))
            row += [f"{fl:.0f}", f"{la:.0f}", f"{pr:.0f}", f"{la - fl:.0f}", f"{pr - fl:.0f}"]
        lines.append(row)
    print(markdown_table("Host cost per launch against the stub driver (ns)", lines))
    for backend in BACKENDS:
        r = results[backend]
        if "skipped" in r:
            print(f"{backend} backend: n/a ({r['skipped']})")
        elif "counters" in r:
            print(f"{backend} backend: native launch counters {r['counters']}")
    print()
    for backend in BACKENDS:
        r = results[backend]
        if "skipped" in r:
            continue
        for entry in ENTRIES:
            for case in CASES:
                over = (r[f"{case}|{entry}"] - r[f"{case}|C floor"]) * 1e9
                print(f"stub-overhead {backend}-{entry}-{case} {over:.0f}")


if __name__ == "__main__":
    main()
