"""Host cost per kernel launch: cuda_core vs NVIDIA cuda.core, CuPy, raw cuda.bindings and C.

Kernels have empty bodies, so the host is the bottleneck. Each implementation launches on a
non-blocking stream; a round is ``--number`` launches timed back to back (the stream is
synchronised between rounds, outside the timing). Rounds run round-robin over every
implementation and argument count, so that a slow phase of a shared machine weighs on all
columns alike; the table shows the median over ``--repeat`` rounds, in microseconds per
launch, with ratios to ``cuda.core`` and to C. Every Python column is timed as a loop that
launches (``for _ in range(n): launch(s, cfg, k, *a)``, every name a local), as the C loops
are: no lambda per launch weighs on one side only.

    python benchmarks/bench_launch.py [--number 500] [--repeat 31]

Peers that are not installed (cuda.core, CuPy) or cannot be built (no gcc or cuda.h for the
C loop) show "n/a".
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
from _harness import Suite, environment_line

IMPLS = [
    "cuda_core.launch",
    "cuda_core prepared",
    "cuda.core",
    "cupy RawKernel",
    "cuda.bindings void**",
    "ctypes void**",
    "C loop",
    "C loop Ex",
    "no-op call",
]
# "no-op call": the same call with the same arguments to a C function that does nothing with them
# (str.format on ""): what CPython itself spends passing them (for 512 arguments given as *a, a
# 515-item tuple built and dropped per call), paid by every Python launch function alike.

# (name, parameter list, argument makers)
K10_PARAMS = (
    "float* a, float* b, int i, float f, double d, unsigned long long n, float* c, "
    "short s, unsigned char u, long long l"
)
K512_PARAMS = ", ".join(f"double x{i}" for i in range(512))
KERNELS = {
    "0 args": ("k0", ""),
    "4 args (3 ptr + u64)": ("k4", "float* a, float* b, float* c, unsigned long long n"),
    "10 mixed args": ("k10", K10_PARAMS),
    "512 doubles": ("k512", K512_PARAMS),
}
SOURCE = "\n".join(f'extern "C" __global__ void {n}({p}) {{}}' for n, p in KERNELS.values())


def scalars_10(ptrs):
    a, b, c = ptrs
    return (
        a,
        b,
        np.int32(3),
        np.float32(1.5),
        2.5,
        np.uint64(7),
        c,
        np.int16(-2),
        np.uint8(9),
        np.int64(-5),
    )


def make_args(op, ptrs):
    if op == "0 args":
        return ()
    if op.startswith("4 args"):
        return (*ptrs, np.uint64(1 << 20))
    if op == "10 mixed args":
        return scalars_10(ptrs)
    return tuple(float(i) for i in range(512))


LAUNCH_EX_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)


def loop_of(call, names, number):
    """``run()``: ``number`` executions of the statement ``call`` in a Python loop whose names
    (the keys of ``names``) are locals."""
    params = "".join(f", {k}={k}" for k in names)
    ns = dict(names)
    exec(f"def loop(n{params}):\n    for _ in range(n):\n        {call}\n", ns)
    loop = ns["loop"]
    return lambda: loop(number)


def measure(fn, sync, number, repeat, warmup=200):
    """Queue one measurement: ``number`` calls of ``fn`` per round (timed in :func:`run_all`)."""
    return _Job(fn, sync, number, warmup)


class _Job:
    __slots__ = ("fn", "number", "rounds", "sync", "warmup")

    def __init__(self, fn, sync, number, warmup):
        self.fn, self.sync, self.number, self.warmup, self.rounds = fn, sync, number, warmup, []


def run_all(jobs, repeat):
    """Time every job, round-robin: round r of every implementation runs before round r + 1 of
    any, so that a slow phase of a shared machine affects all columns alike. Returns the median
    seconds per call of each job."""
    failed = {}
    for key, job in jobs.items():
        try:
            for _ in range(job.warmup):
                job.fn()
            job.sync()
        except Exception as exc:
            failed[key] = f"error: {exc}"
            print(f"[{key[0]} / {key[1]}] {exc}", file=sys.stderr)
    jobs = {k: j for k, j in jobs.items() if k not in failed}
    for _ in range(repeat):
        for job in jobs.values():
            fn, number = job.fn, job.number
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            job.rounds.append((time.perf_counter() - t0) / number)
            job.sync()
    return {**failed, **{key: statistics.median(job.rounds) for key, job in jobs.items()}}


# ---------------------------------------------------------------------------------------------
# The C loop: a tiny shared library that launches `number` times and returns, built on the spot.

C_LOOP = r"""
#include <cuda.h>
#include <dlfcn.h>
typedef CUresult (*launch_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
typedef CUresult (*launch_ex_t)(const CUlaunchConfig*, CUfunction, void**, void**);
static launch_t launch_fn;
static launch_ex_t launch_ex_fn;
int setup(void) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return -1;
    launch_fn = (launch_t)dlsym(h, "cuLaunchKernel");
    launch_ex_fn = (launch_ex_t)dlsym(h, "cuLaunchKernelEx");
    return launch_fn && launch_ex_fn ? 0 : -2;
}
int loop_ex(const void* cfg, void* f, void** params, int number) {
    for (int i = 0; i < number; ++i) {
        CUresult r = launch_ex_fn((const CUlaunchConfig*)cfg, (CUfunction)f, params, 0);
        if (r != CUDA_SUCCESS) return (int)r;
    }
    return 0;
}
int loop(void* f, void* stream, void** params, int number) {
    for (int i = 0; i < number; ++i) {
        CUresult r = launch_fn((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, (CUstream)stream, params, 0);
        if (r != CUDA_SUCCESS) return (int)r;
    }
    return 0;
}
"""


def build_c_loop():
    """The loaded C library, or a reason string why it cannot be built."""
    include = None
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        include = find_nvidia_header_directory("cudart")
    except Exception:
        pass
    candidates = [include] if include else []
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidates.append(os.path.join(home, "include"))
    include = next((d for d in candidates if d and os.path.exists(os.path.join(d, "cuda.h"))), None)
    if include is None:
        return "no cuda.h"
    tmp = tempfile.mkdtemp(prefix="bench_launch_")
    src, lib = os.path.join(tmp, "loop.c"), os.path.join(tmp, "libloop.so")
    with open(src, "w") as f:
        f.write(C_LOOP)
    try:
        subprocess.run(
            ["gcc", "-O2", "-shared", "-fPIC", f"-I{include}", src, "-o", lib, "-ldl"],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        return f"gcc failed: {exc}"
    so = ctypes.CDLL(lib)
    so.loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    so.loop_ex.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    if so.setup() != 0:
        return "libcuda.so.1 not loadable"
    return so


def pack_void_pp(values):
    """ctypes storage for a void** built by hand (independent of cuda_core's packer)."""
    keep, ptrs = [], []
    for v in values:
        if isinstance(v, float):
            c = ctypes.c_double(v)
        elif isinstance(v, np.generic):
            c = (ctypes.c_char * v.nbytes).from_buffer_copy(v.tobytes())
        else:
            c = ctypes.c_uint64(int(v))
        keep.append(c)
        ptrs.append(ctypes.addressof(c))
    arr = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
    keep.append(arr)
    return (ctypes.addressof(arr) if values else 0), keep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=31)
    opts = ap.parse_args()
    N, R = opts.number, opts.repeat

    from cuda.bindings import driver

    from cuda_core import Device, LaunchConfig, PreparedLaunch, Program, ProgramOptions, launch
    from cuda_core._handles import _backend

    dev = Device()
    dev.set_current()
    s = dev.create_stream()  # non-blocking by default
    obj = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )
    cfg = LaunchConfig(grid=1, block=1)
    bufs = [dev.allocate(1024, stream=s) for _ in range(3)]
    sync = s.sync
    suite = Suite("Host cost per launch (median us per launch)", IMPLS, baseline="cuda.core")
    results: dict[tuple[str, str], object] = {}
    per_call: dict[tuple[str, str], int] = {}  # launches per call of a job (all loops: N)

    def looped(key, call, names, sync=sync):
        """Time ``call`` (a statement) written in a loop, every name a local, as code that
        launches in a loop reads: no lambda or wrapper per launch, as the C loops have none."""
        results[key] = measure(loop_of(call, names, N), sync, 1, R, warmup=2)
        per_call[key] = N

    # cuda.core peer
    try:
        import cuda.core as cc

        cdev = cc.Device()
        cdev.set_current()
        cs = cdev.create_stream(options=cc.StreamOptions(nonblocking=True))
        cobj = cc.Program(
            SOURCE, code_type="c++", options=cc.ProgramOptions(arch=f"sm_{dev.arch}")
        ).compile("cubin")
        ccfg = cc.LaunchConfig(grid=1, block=1)
        cbufs = [cdev.allocate(1024, stream=cs) for _ in range(3)]
    except Exception as exc:
        cc = None
        print(f"cuda.core: n/a ({type(exc).__name__}: {exc})", file=sys.stderr)

    # CuPy peer
    try:
        import cupy as cp

        cpstream = cp.cuda.Stream(non_blocking=True)
        cpmod = cp.RawModule(code=SOURCE)
        cparrs = [cp.zeros(256, dtype=cp.float32) for _ in range(3)]
    except Exception as exc:
        cp = None
        print(f"CuPy: n/a ({type(exc).__name__}: {exc})", file=sys.stderr)

    cloop = build_c_loop()
    if isinstance(cloop, str):
        print(f"C loop: n/a ({cloop})", file=sys.stderr)
        cloop = None

    for op, (kname, _) in KERNELS.items():
        ker = obj.get_kernel(kname)
        args = make_args(op, bufs)
        looped(
            (op, "cuda_core.launch"),
            "launch(s, cfg, k, *a)",
            {"launch": launch, "s": s, "cfg": cfg, "k": ker, "a": args},
        )
        prep = PreparedLaunch(s, cfg, ker, *args)
        looped((op, "cuda_core prepared"), "p()", {"p": prep})
        looped(
            (op, "no-op call"),
            "launch(s, cfg, k, *a)",
            {"launch": "".format, "s": s, "cfg": cfg, "k": ker, "a": args},
        )

        if cc is not None:
            try:
                cker = cobj.get_kernel(kname)
                cargs = make_args(op, cbufs)
                looped(
                    (op, "cuda.core"),
                    "launch(s, cfg, k, *a)",
                    {"launch": cc.launch, "s": cs, "cfg": ccfg, "k": cker, "a": cargs},
                    cs.sync,
                )
            except Exception as exc:
                results[(op, "cuda.core")] = f"error: {exc}"
                print(f"[{op} / cuda.core] {exc}", file=sys.stderr)
        if cp is not None:
            try:
                rk = cpmod.get_function(kname)
                pargs = make_args(op, cparrs)
                if op == "512 doubles":
                    pargs = tuple(np.float64(v) for v in pargs)
                looped(
                    (op, "cupy RawKernel"),
                    "rk((1,), (1,), a, stream=st)",
                    {"rk": rk, "a": pargs, "st": cpstream},
                    cpstream.synchronize,
                )
            except Exception as exc:
                results[(op, "cupy RawKernel")] = f"error: {exc}"
                print(f"[{op} / cupy] {exc}", file=sys.stderr)

        raw_values = [
            b.handle if hasattr(b, "handle") and not isinstance(b, (float, np.generic)) else b
            for b in args
        ]
        addr, keep = pack_void_pp(raw_values)
        func = driver.CUfunction(int(ker.handle))
        hs = s.handle
        lk = driver.cuLaunchKernel
        looped(
            (op, "cuda.bindings void**"),
            "lk(func, 1, 1, 1, 1, 1, 1, 0, hs, addr, 0)",
            {"lk": lk, "func": func, "hs": hs, "addr": addr, "_keep": keep},
        )
        # The floor of a Python caller through ctypes: cuLaunchKernelEx's entry point, with the
        # native config and the void** packed in advance.
        native_cfg = driver.CUlaunchConfig()
        native_cfg.gridDimX = native_cfg.gridDimY = native_cfg.gridDimZ = 1
        native_cfg.blockDimX = native_cfg.blockDimY = native_cfg.blockDimZ = 1
        native_cfg.hStream = hs
        cfg_addr = native_cfg.getPtr()
        ex = _backend.entry_point("cuLaunchKernelEx")
        if ex:
            fn, fptr = LAUNCH_EX_PROTO(ex), int(ker.handle)
            looped(
                (op, "ctypes void**"),
                "fn(c, f, a, None)",
                {"fn": fn, "c": cfg_addr, "f": fptr, "a": addr, "_k": native_cfg},
            )
        else:
            results[(op, "ctypes void**")] = "n/a"
        if cloop is not None:
            fptr, sptr = int(ker.handle), int(hs)
            rc = cloop.loop(fptr, sptr, addr, 1)
            if rc:
                results[(op, "C loop")] = f"error: CUresult {rc}"
            else:
                results[(op, "C loop")] = measure(
                    lambda f=fptr, st=sptr, a=addr: cloop.loop(f, st, a, N), sync, 1, R, warmup=2
                )
                per_call[(op, "C loop")] = N
            rc = cloop.loop_ex(cfg_addr, fptr, addr, 1)
            if rc:
                results[(op, "C loop Ex")] = f"error: CUresult {rc}"
            else:
                results[(op, "C loop Ex")] = measure(
                    lambda c=cfg_addr, f=fptr, a=addr: cloop.loop_ex(c, f, a, N),
                    sync,
                    1,
                    R,
                    warmup=2,
                )
                per_call[(op, "C loop Ex")] = N

    timed = run_all({k: v for k, v in results.items() if isinstance(v, _Job)}, R)
    for key, seconds in timed.items():
        results[key] = seconds / per_call.get(key, 1) if isinstance(seconds, float) else seconds
    for (op, impl), v in results.items():
        suite.run(op, impl, None)
        next(r for r in suite.rows if r.op == op).results[impl] = v
    print(environment_line())
    print(
        f"{N} launches per round, median of {R} rounds, non-blocking stream, grid=1 block=1; "
        f"handle layer: {'native' if _backend.NATIVE else 'pure Python'} ({_backend.REASON})"
    )
    print(suite.table(ratios_to=["cuda.core", "C loop"]))
    print("\ncuda_core.launch less the no-op call and the C loop (what is left to cuda_core), us:")
    for op in KERNELS:
        parts = [results.get((op, impl)) for impl in ("cuda_core.launch", "no-op call", "C loop")]
        if all(isinstance(v, float) for v in parts):
            la, call, floor = (v * 1e6 for v in parts)  # type: ignore[operator]
            print(f"  {op}: {la - call - floor:+.3f}")


if __name__ == "__main__":
    main()
