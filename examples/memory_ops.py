"""Device, pinned and managed buffers: copies, fill and DLPack views (checks its own results)."""

from __future__ import annotations

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LegacyPinnedMemoryResource, ManagedMemoryResource, PinnedMemoryResource


def main() -> int:
    dev = need_gpu()
    dev.set_current()
    s = dev.create_stream()
    n = 1 << 16
    failures = []

    src = (np.arange(n, dtype=np.uint32) * 7).astype(np.uint8)
    dbuf = dev.memory_resource.allocate(n, stream=s)
    dbuf.copy_from(src, stream=s)  # host -> device

    try:
        pinned_mr = PinnedMemoryResource()  # a pinned memory pool: CUDA 13
    except NotImplementedError as exc:  # cuda-bindings 12.x: page-locked memory without a pool
        print(f"pinned pool unavailable ({exc}); using LegacyPinnedMemoryResource")
        pinned_mr = LegacyPinnedMemoryResource()
    pinned = pinned_mr.allocate(n, stream=s)
    dbuf.copy_to(pinned, stream=s)  # device -> pinned host
    s.sync()
    host_view = np.from_dlpack(pinned)  # a NumPy view of pinned memory, no copy
    if not np.array_equal(host_view, src):
        failures.append("device -> pinned copy")

    dbuf.fill(np.uint16(0xBEEF), stream=s)
    out = np.empty(n, np.uint8)
    dbuf.copy_to(out, stream=s)
    if not (out.view(np.uint16) == 0xBEEF).all():
        failures.append("16-bit fill")

    try:
        managed = ManagedMemoryResource().allocate(n, stream=s)
    except Exception as exc:  # a driver without managed pools
        print(f"managed memory skipped: {exc}")
    else:
        managed.fill(0x5A, stream=s)
        managed.prefetch("host", stream=s)
        s.sync()
        mview = np.from_dlpack(managed)
        if not (mview == 0x5A).all():
            failures.append("managed fill")
        del mview
        managed.close()

    try:
        import cupy as cp
    except ImportError:
        print("CuPy not installed: skipping the CuPy view")
    else:
        arr = cp.from_dlpack(dbuf)
        arr += 1  # 0xEF -> 0xF0, 0xBE -> 0xBF on each byte
        cp.cuda.runtime.deviceSynchronize()
        dbuf.copy_to(out, stream=s)
        if not (out.view(np.uint16) == 0xBFF0).all():
            failures.append("CuPy view")
        del arr

    del host_view
    pinned.close()
    dbuf.close()
    s.close()
    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    print("memory_ops: all checks passed")
    return 0


if __name__ == "__main__":
    run_main(main)
