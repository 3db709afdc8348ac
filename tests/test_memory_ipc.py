"""Memory, GPU tier: sharing a pool's buffer with another process (IPC over POSIX fds)."""

from __future__ import annotations

import multiprocessing as mp

import pytest

pytestmark = pytest.mark.gpu

N = 1 << 16


def _child(handle, desc, results, mode):
    # Runs in a spawned process: map the pool and the buffer, check and rewrite the bytes.
    try:
        from cuda_core import Buffer, Device, DeviceMemoryResource, IPCAllocationHandle

        dev = Device(0)
        dev.set_current()
        s = dev.create_stream()
        if mode == "send_handle":
            from multiprocessing import reduction

            conn = handle
            handle = IPCAllocationHandle.from_fd(reduction.recv_handle(conn))
        mr = DeviceMemoryResource.from_allocation_handle(dev, handle)
        assert mr.is_mapped
        buf = Buffer.from_ipc_descriptor(mr, desc, stream=s)
        out = bytearray(buf.size)
        buf.copy_to(out, stream=s)
        ok = bytes(out) == b"\x5a" * N and buf.is_mapped
        buf.fill(0x33, stream=s)
        s.sync()
        buf.close()
        s.sync()
        mr.close()
        handle.close()
        results.put(("ok" if ok else "bad bytes", buf.is_closed))
    except BaseException as exc:  # report, do not hang the parent
        results.put((f"{type(exc).__name__}: {exc}", False))


@pytest.mark.parametrize("mode", ["pickle", "send_handle"])
def test_ipc_between_processes(mode):
    from cuda_core import Device, DeviceMemoryResource, DeviceMemoryResourceOptions

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 26))
    assert mr.is_ipc_enabled and not mr.is_mapped
    buf = mr.allocate(N, stream=s)
    assert not buf.is_mapped
    buf.fill(0x5A, stream=s)
    s.sync()
    desc = buf.get_ipc_descriptor()
    assert desc.size == N
    handle = mr.get_allocation_handle()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    if mode == "pickle":
        proc = ctx.Process(target=_child, args=(handle, desc, results, mode))
        proc.start()
    else:
        parent_conn, child_conn = ctx.Pipe()
        proc = ctx.Process(target=_child, args=(child_conn, desc, results, mode))
        proc.start()
        from multiprocessing import reduction

        reduction.send_handle(parent_conn, handle.handle, proc.pid)
    status, closed = results.get(timeout=120)
    proc.join(timeout=60)
    assert status == "ok", status
    assert closed
    assert proc.exitcode == 0
    out = bytearray(N)
    buf.copy_to(out, stream=s)
    assert bytes(out) == b"\x33" * N
    buf.close()
    s.sync()
    mr.close()
    assert handle.is_closed
    s.close()


def test_non_ipc_resource_refuses_to_export():
    from cuda_core import Device, DeviceMemoryResource, DeviceMemoryResourceOptions

    dev = Device(0)
    dev.set_current()
    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions())
    with pytest.raises(RuntimeError, match="IPC-enabled"):
        mr.get_allocation_handle()
    b = mr.allocate(16, stream=dev.default_stream)
    with pytest.raises(RuntimeError, match="IPC-enabled"):
        b.get_ipc_descriptor()
    b.close()
    mr.close()
