"""Memory benchmark: 1 MiB allocate+close on a stream, 4 KiB H2D and D2H copies.

Compares cuda_core, NVIDIA's cuda.core and CuPy (its default memory pool) in one run; a peer
that is not installed shows "n/a". Copies include the stream synchronisation in every column
(cuda_core's host copies synchronise; the peers are synchronised explicitly). Run:
``python benchmarks/bench_memory.py``.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _harness import Suite, environment_line

MIB = 1 << 20
KIB4 = 4096


def bench_cuda_core(suite: Suite) -> None:
    from cuda_core import Device

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    mr = dev.memory_resource
    alloc = mr.allocate

    def alloc_close() -> None:
        alloc(MIB, stream=s).close()

    suite.run("alloc+close 1 MiB", "cuda_core", alloc_close)
    host = np.ones(KIB4, np.uint8)
    out = np.empty(KIB4, np.uint8)
    buf = alloc(KIB4, stream=s)
    suite.run("H2D 4 KiB (+sync)", "cuda_core", lambda: buf.copy_from(host, stream=s))
    suite.run("D2H 4 KiB (+sync)", "cuda_core", lambda: buf.copy_to(out, stream=s))
    buf.close()
    s.sync()


def bench_nvidia(suite: Suite) -> None:
    try:
        from cuda.core import Device, LegacyPinnedMemoryResource  # type: ignore[import-not-found]
    except Exception:
        try:
            from cuda.core.experimental import Device, LegacyPinnedMemoryResource  # type: ignore[import-not-found]
        except Exception:
            for op in ("alloc+close 1 MiB", "H2D 4 KiB (+sync)", "D2H 4 KiB (+sync)"):
                suite.run(op, "cuda.core", None)
            return
    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    mr = dev.memory_resource

    def alloc_close() -> None:
        mr.allocate(MIB, stream=s).close()

    suite.run("alloc+close 1 MiB", "cuda.core", alloc_close)
    # cuda.core copies between Buffers only: the host side is a pinned buffer.
    pinned = LegacyPinnedMemoryResource().allocate(KIB4, stream=s)
    buf = mr.allocate(KIB4, stream=s)

    def h2d() -> None:
        buf.copy_from(pinned, stream=s)
        s.sync()

    def d2h() -> None:
        buf.copy_to(pinned, stream=s)
        s.sync()

    suite.run("H2D 4 KiB (+sync)", "cuda.core", h2d)
    suite.run("D2H 4 KiB (+sync)", "cuda.core", d2h)
    buf.close()
    pinned.close()
    s.sync()


def bench_cupy(suite: Suite) -> None:
    try:
        import cupy as cp
    except Exception:
        for op in ("alloc+close 1 MiB", "H2D 4 KiB (+sync)", "D2H 4 KiB (+sync)"):
            suite.run(op, "cupy", None)
        return
    s = cp.cuda.Stream(non_blocking=False)
    with s:

        def alloc_close() -> None:
            cp.cuda.alloc(MIB)  # default pool; freed when the pointer object dies

        suite.run("alloc+close 1 MiB", "cupy", alloc_close)
        host = np.ones(KIB4, np.uint8)
        out = np.empty(KIB4, np.uint8)
        d = cp.empty(KIB4, cp.uint8)

        def h2d() -> None:
            d.set(host, stream=s)
            s.synchronize()

        def d2h() -> None:
            d.get(stream=s, out=out)
            s.synchronize()

        suite.run("H2D 4 KiB (+sync)", "cupy", h2d)
        suite.run("D2H 4 KiB (+sync)", "cupy", d2h)
    s.synchronize()


def main() -> int:
    impls = ["cuda_core", "cuda.core", "cupy"]
    suite = Suite("Memory", impls, baseline="cuda.core")
    print(environment_line())
    for fn in (bench_cuda_core, bench_nvidia, bench_cupy):
        try:
            fn(suite)
        except Exception as exc:  # a broken peer is reported, the others still run
            print(f"{fn.__name__} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(suite.table(ratios_to=["cuda.core", "cupy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
