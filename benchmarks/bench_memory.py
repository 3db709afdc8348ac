"""Memory benchmark: 1 MiB allocate+close on a stream, 4 KiB H2D and D2H copies.

Compares cuda_core, NVIDIA's cuda.core and CuPy (its default memory pool) in one run; a peer
that is not installed shows "n/a". Copies include the stream synchronisation in every column.
The "pinned" rows copy between pinned host memory and device memory in every column (cuda.core
copies between Buffers only, so this is the like-for-like comparison); the "NumPy" rows copy
from and to an ordinary (pageable) NumPy array, which cuda.core cannot do. Run:
``python benchmarks/bench_memory.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _harness import Suite, environment_line

MIB = 1 << 20
KIB4 = 4096
OPS = (
    "alloc+close 1 MiB",
    "H2D 4 KiB pinned (+sync)",
    "D2H 4 KiB pinned (+sync)",
    "H2D 4 KiB NumPy (+sync)",
    "D2H 4 KiB NumPy (+sync)",
)


def _add_pool_and_pinned_ops(
    suite: Suite, impl: str, device_cls: Any, pinned_cls: Any
) -> tuple[Any, Any, Any]:
    """Register the rows both cuda_core and cuda.core run through the same API: allocate+close
    from the device's resource, and 4 KiB copies between a device buffer and a pinned buffer
    (with the stream synchronised). Returns ``(stream, device buffer, pinned buffer)``."""
    dev = device_cls()
    dev.set_current()
    s = dev.create_stream()
    alloc = dev.memory_resource.allocate

    def alloc_close() -> None:
        alloc(MIB, stream=s).close()

    suite.add(OPS[0], impl, alloc_close)
    pinned = pinned_cls().allocate(KIB4, stream=s)
    buf = alloc(KIB4, stream=s)

    def h2d() -> None:
        buf.copy_from(pinned, stream=s)
        s.sync()

    def d2h() -> None:
        buf.copy_to(pinned, stream=s)
        s.sync()

    suite.add(OPS[1], impl, h2d)
    suite.add(OPS[2], impl, d2h)
    return s, buf, pinned


def _closer(s: Any, *bufs: Any) -> Callable[[], None]:
    def cleanup() -> None:
        for b in bufs:
            b.close()
        s.sync()

    return cleanup


def bench_cuda_core(suite: Suite) -> Callable[[], None] | None:
    from cuda_core import Device, LegacyPinnedMemoryResource

    s, buf, pinned = _add_pool_and_pinned_ops(
        suite, "cuda_core", Device, LegacyPinnedMemoryResource
    )
    host = np.ones(KIB4, np.uint8)
    out = np.empty(KIB4, np.uint8)
    suite.add(OPS[3], "cuda_core", lambda: buf.copy_from(host, stream=s))  # synchronises
    suite.add(OPS[4], "cuda_core", lambda: buf.copy_to(out, stream=s))
    return _closer(s, buf, pinned)


def bench_nvidia(suite: Suite) -> Callable[[], None] | None:
    try:
        from cuda.core import Device, LegacyPinnedMemoryResource  # type: ignore[import-not-found]
    except Exception:
        try:
            from cuda.core.experimental import Device, LegacyPinnedMemoryResource  # type: ignore[import-not-found]
        except Exception:
            for op in OPS:
                suite.add(op, "cuda.core", None)
            return None
    # cuda.core copies between Buffers only: the host side is a pinned buffer.
    s, buf, pinned = _add_pool_and_pinned_ops(
        suite, "cuda.core", Device, LegacyPinnedMemoryResource
    )
    suite.add(OPS[3], "cuda.core", None)  # no copies from host objects
    suite.add(OPS[4], "cuda.core", None)
    return _closer(s, buf, pinned)


def bench_cupy(suite: Suite) -> Callable[[], None] | None:
    try:
        import cupy as cp
    except Exception:
        for op in OPS:
            suite.add(op, "cupy", None)
        return None
    s = cp.cuda.Stream(non_blocking=False)
    s.use()  # current for this thread while the operations are timed (round-robin, later)

    def alloc_close() -> None:
        cp.cuda.alloc(MIB)  # default pool; freed when the pointer object dies

    suite.add(OPS[0], "cupy", alloc_close)
    d = cp.empty(KIB4, cp.uint8)
    mem = cp.cuda.alloc_pinned_memory(KIB4)
    pinned = np.frombuffer(mem, np.uint8, KIB4)
    pinned[:] = 1

    def copy_in(src: np.ndarray) -> None:
        d.set(src, stream=s)
        s.synchronize()

    def copy_out(dst: np.ndarray) -> None:
        d.get(stream=s, out=dst)
        s.synchronize()

    suite.add(OPS[1], "cupy", lambda: copy_in(pinned))
    suite.add(OPS[2], "cupy", lambda: copy_out(pinned))
    host = np.ones(KIB4, np.uint8)
    out = np.empty(KIB4, np.uint8)
    suite.add(OPS[3], "cupy", lambda: copy_in(host))
    suite.add(OPS[4], "cupy", lambda: copy_out(out))

    def cleanup() -> None:
        s.synchronize()
        cp.cuda.Stream.null.use()

    return cleanup


def main() -> int:
    impls = ["cuda_core", "cuda.core", "cupy"]
    suite = Suite("Memory", impls, baseline="cuda.core")
    print(environment_line())
    cleanups = []
    for fn in (bench_cuda_core, bench_nvidia, bench_cupy):
        try:
            cleanup = fn(suite)
        except Exception as exc:  # a broken peer is reported, the others still run
            print(f"{fn.__name__} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        if cleanup is not None:
            cleanups.append(cleanup)
    suite.measure()  # round-robin: a noisy spell slows every column alike
    for cleanup in cleanups:
        cleanup()
    print(suite.table(ratios_to=["cuda.core", "cupy"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
