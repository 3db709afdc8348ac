"""Host overhead of the basic objects without a GPU: events, records, Device(), allocations, copies.

The rows of ``bench_objects.py``, ``bench_memory.py``'s ``alloc+close 1 MiB`` and a 4 KiB copy
between two buffers with ``Stream.sync()`` (its pinned rows' shape), timed against
the CPU tier's stub driver (``tests/handles/native_stub/stub_cuda.c``), so that what is timed is
cuda_core's own work per operation. The whole package runs as on a GPU: ``cuda.bindings.driver``
is given a stand-in for each driver function the package calls (the stub's own, through
``ctypes``, where it has one; a constant answer for the few queries it lacks, such as the
device count or the memory pool), and the native backend gets the stub's entry points through
``cuGetProcAddress``, so ``Device(0).set_current()``, ``memory_resource`` and every factory take
their usual paths. Each backend runs in a process of its own (native, and the pure-Python one,
``CUDA_CORE_BACKEND=python``: its times include the stand-ins' ``ctypes`` calls, about what
``cuda.bindings`` costs). Rounds of ``--number`` operations run round-robin over the cases, and
the table shows the median over ``--repeat`` rounds in nanoseconds per operation.

    python benchmarks/bench_stub_objects.py [--number 2000] [--repeat 25] [--root CHECKOUT]

``--root`` times the ``cuda_core`` of another checkout (built in place), e.g. an older commit
in a ``git worktree``, with this checkout's stub. The output ends with one line per case,
``stub-overhead <backend>-<case> <ns>``. A benchmark, not a test: nothing is asserted about the
times. Without a C compiler it says so and exits 0.
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

CASES = (
    "Device()",
    "stream create+close",
    "event create+close",
    "record(event)",
    "record() dropped",
    "alloc+close 1 MiB",
    "copy_from+sync 4 KiB",
    "Stream.sync()",
)
BACKENDS = ("native", "python")
MIB = 1 << 20
POOL = 0x5000  # the made-up memory pool the device reports


def fake_driver(lib: Any) -> None:
    """Give ``cuda.bindings.driver`` a stand-in, over the stub library ``lib``, for each driver
    function cuda_core calls on these paths (before cuda_core is imported)."""
    from cuda.bindings import driver as d

    ok = d.CUresult.CUDA_SUCCESS
    vp, u64, c_int = ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_int

    def status(st: int) -> Any:
        return d.CUresult(st)

    def out_call(fn: Any, ctype: Any, wrap: Callable[[Any], Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            out = ctype()
            st = fn(ctypes.byref(out), *args)
            return (ok, wrap(out.value or 0)) if st == 0 else (status(st), None)

        return call

    def plain(fn: Any, *conv: Callable[[Any], Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            st = fn(*(c(a) for c, a in zip(conv, args)))
            return (status(st),)

        return call

    def addr(h: Any) -> int:
        return int(h) if h is not None else 0

    for name in ("cuStreamDestroy", "cuStreamQuery", "cuStreamSynchronize", "cuEventDestroy",
                 "cuEventQuery", "cuEventSynchronize", "cuCtxPushCurrent"):  # fmt: skip
        getattr(lib, name).argtypes = [vp]
    lib.cuEventRecord.argtypes = [vp, vp]
    lib.cuStreamWaitEvent.argtypes = [vp, vp, ctypes.c_uint]
    lib.cuMemAllocFromPoolAsync.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t, vp, vp]
    lib.cuMemFreeAsync.argtypes = [u64, vp]
    lib.cuMemcpyAsync.argtypes = [u64, u64, ctypes.c_size_t, vp]
    lib.cuCtxGetId.argtypes = [vp, ctypes.POINTER(u64)]
    lib.cuStreamIsCapturing.argtypes = [vp, ctypes.POINTER(c_int)]
    lib.cuStreamGetCtx.argtypes = [vp, ctypes.POINTER(vp)]
    lib.stub_set_current.argtypes = [vp]

    def ctx_get_id(ctx: Any) -> Any:
        out = u64()
        st = lib.cuCtxGetId(addr(ctx), ctypes.byref(out))
        return (ok, out.value) if st == 0 else (status(st), 0)

    def ctx_set_current(ctx: Any) -> Any:
        lib.stub_set_current(addr(ctx))
        return (ok,)

    def ctx_pop() -> Any:
        out = vp()
        st = lib.cuCtxPopCurrent(ctypes.byref(out))
        return (status(st), d.CUcontext(out.value or 0))

    def stream_is_capturing(s: Any) -> Any:
        out = c_int()
        st = lib.cuStreamIsCapturing(addr(s), ctypes.byref(out))
        return (status(st), d.CUstreamCaptureStatus(out.value))

    def alloc(size: int, pool: Any, s: Any) -> Any:
        out = u64()
        st = lib.cuMemAllocFromPoolAsync(ctypes.byref(out), size, addr(pool), addr(s))
        return (status(st), d.CUdeviceptr(out.value))

    def get_proc_address(name: bytes, version: int, flags: int) -> Any:
        fn = getattr(lib, name.decode(), None)
        if fn is None:
            not_found = d.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
            return (d.CUresult.CUDA_ERROR_NOT_FOUND, 0, not_found)
        found = d.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SUCCESS
        return (ok, ctypes.cast(fn, vp).value, found)

    lib.cuStreamCreateWithPriority.argtypes = [ctypes.POINTER(vp), ctypes.c_uint, c_int]
    retain = out_call(lib.cuDevicePrimaryCtxRetain, vp, d.CUcontext)
    stream_create = out_call(lib.cuStreamCreate, vp, d.CUstream)
    stream_create_prio = out_call(lib.cuStreamCreateWithPriority, vp, d.CUstream)
    event_create = out_call(lib.cuEventCreate, vp, d.CUevent)
    stand_ins: dict[str, Callable[..., Any]] = {
        "cuInit": lambda flags: (ok,),
        "cuDriverGetVersion": lambda: (ok, 13000),
        "cuDeviceGetCount": lambda: (ok, 1),
        "cuDeviceGet": lambda i: (ok, d.CUdevice(i)),
        "cuDeviceGetAttribute": lambda attr, dev: (ok, 1),
        "cuDeviceGetMemPool": lambda dev: (ok, d.CUmemoryPool(POOL)),
        "cuMemPoolGetAttribute": lambda pool, attr: (ok, d.cuuint64_t(_MAX)),
        "cuMemPoolSetAttribute": lambda pool, attr, value: (ok,),
        "cuThreadExchangeStreamCaptureMode": lambda mode: (ok, mode),
        "cuGetProcAddress": get_proc_address,
        "cuCtxSetCurrent": ctx_set_current,
        "cuCtxGetCurrent": out_call(lib.cuCtxGetCurrent, vp, d.CUcontext),
        "cuCtxGetDevice": out_call(lib.cuCtxGetDevice, c_int, d.CUdevice),
        "cuCtxGetId": ctx_get_id,
        "cuCtxPushCurrent": plain(lib.cuCtxPushCurrent, addr),
        "cuCtxPopCurrent": ctx_pop,
        "cuDevicePrimaryCtxRetain": lambda dev: retain(int(dev)),
        "cuDevicePrimaryCtxRelease": lambda dev: (status(lib.cuDevicePrimaryCtxRelease(int(dev))),),
        "cuStreamCreate": lambda flags: stream_create(int(flags)),
        "cuStreamCreateWithPriority": lambda flags, prio: stream_create_prio(int(flags), int(prio)),
        "cuStreamDestroy": plain(lib.cuStreamDestroy, addr),
        "cuStreamQuery": plain(lib.cuStreamQuery, addr),
        "cuStreamSynchronize": plain(lib.cuStreamSynchronize, addr),
        "cuStreamIsCapturing": stream_is_capturing,
        "cuStreamWaitEvent": plain(lib.cuStreamWaitEvent, addr, addr, int),
        "cuEventCreate": lambda flags: event_create(int(flags)),
        "cuEventDestroy": plain(lib.cuEventDestroy, addr),
        "cuEventRecord": plain(lib.cuEventRecord, addr, addr),
        "cuEventQuery": plain(lib.cuEventQuery, addr),
        "cuEventSynchronize": plain(lib.cuEventSynchronize, addr),
        "cuMemAllocFromPoolAsync": alloc,
        "cuMemFreeAsync": plain(lib.cuMemFreeAsync, int, addr),
        "cuMemcpyAsync": plain(lib.cuMemcpyAsync, int, int, int, addr),
    }  # fmt: skip
    for name, fn in stand_ins.items():
        setattr(d, name, fn)


_MAX = (1 << 64) - 1


def child(backend: str, stub_so: str, root: str, number: int, repeat: int) -> dict:
    """Time one backend in this process; the results as a JSON-able dict."""
    from _harness import run_rounds

    sys.path.insert(0, root)
    lib = ctypes.CDLL(stub_so)
    lib.stub_reset()
    fake_driver(lib)
    import cuda_core
    from cuda_core import Device
    from cuda_core._handles import _backend

    if _backend.NATIVE != (backend == "native"):
        return {"skipped": f"the {backend} backend is not in use here: {_backend.REASON}"}
    if not cuda_core.__file__.startswith(root):
        raise AssertionError(f"cuda_core came from {cuda_core.__file__}, not {root}")
    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    ev = dev.create_event()
    alloc = dev.memory_resource.allocate

    def loop(op: Callable[[], object]) -> Callable[[int], object]:
        def job(n: int) -> None:
            for _ in range(n):
                op()

        return job

    def event_cycle() -> None:
        dev.create_event().close()

    def stream_cycle() -> None:
        dev.create_stream().close()

    def alloc_close() -> None:
        alloc(MIB, stream=s).close()

    dst, src = alloc(4096, stream=s), alloc(4096, stream=s)

    def copy_sync() -> None:
        dst.copy_from(src, stream=s)
        s.sync()

    ops: dict[str, Callable[[], object]] = {
        "Device()": Device,
        "stream create+close": stream_cycle,
        "event create+close": event_cycle,
        "record(event)": lambda: s.record(ev),
        "record() dropped": lambda: s.record(),
        "alloc+close 1 MiB": alloc_close,
        "copy_from+sync 4 KiB": copy_sync,
        "Stream.sync()": s.sync,
    }
    jobs = {case: loop(op) for case, op in ops.items()}
    for job in jobs.values():  # warm up
        job(200)
    medians = run_rounds(jobs, number, repeat)
    errors = ctypes.c_int.in_dll(lib, "stub_errors").value
    if errors:
        raise AssertionError(f"the stub saw {errors} misuses")
    return medians


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=25)
    ap.add_argument("--root", default=str(ROOT), help="the checkout whose cuda_core is timed")
    ap.add_argument("--backend", choices=BACKENDS, action="append", help="(default: both)")
    ap.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    ap.add_argument("--stub", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    root = str(Path(opts.root).resolve())
    if opts.child:
        result = child(opts.child, opts.stub, root, opts.number, opts.repeat)
        print(json.dumps(result))
        return

    from _harness import environment_line, markdown_table, run_backend_child
    from stub_build import STUB_SOURCE, build_shared, compiler

    cc = compiler()
    if cc is None:
        print(
            "bench_stub_objects: skipped: no C compiler (cc, gcc or $CC) to build the stub driver"
        )
        return
    backends = opts.backend or list(BACKENDS)
    # Room for every allocation of the run (the stub keeps each one).
    n_allocs = (opts.number * opts.repeat + 1000) * 2
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_stub_objects_") as tmp:
        flags = ["-std=c11", "-Wall", "-Werror", "-O2", f"-DMAX_ALLOCS={n_allocs}"]
        stub = build_shared(cc, [STUB_SOURCE], Path(tmp) / "libstub_cuda.so", flags)
        for backend in backends:
            cmd = [sys.executable, __file__, "--child", backend, "--stub", str(stub)]
            cmd += ["--root", root, "--number", str(opts.number), "--repeat", str(opts.repeat)]
            results[backend] = run_backend_child("bench_stub_objects", backend, cmd)
    print(environment_line())
    print(
        f"stub driver, {opts.number} operations per round, median of {opts.repeat} rounds, "
        f"{os.cpu_count()} CPUs; cuda_core of {root}; ns per operation"
    )
    lines = [["operation", *backends]]
    for case in CASES:
        row = [case]
        for backend in backends:
            r = results[backend]
            row.append("n/a" if "skipped" in r else f"{r[case] * 1e9:.0f}")
        lines.append(row)
    print(markdown_table("Host cost per operation against the stub driver (ns)", lines))
    print()
    for backend in backends:
        r = results[backend]
        if "skipped" in r:
            print(f"{backend} backend: n/a ({r['skipped']})")
            continue
        for case in CASES:
            print(f"stub-overhead {backend}-{case.replace(' ', '_')} {r[case] * 1e9:.0f}")


if __name__ == "__main__":
    main()
