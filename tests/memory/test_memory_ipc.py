"""Memory, GPU tier: sharing a pool's buffer with another process (IPC over POSIX fds)."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import uuid
from multiprocessing.reduction import ForkingPickler

import pytest

from tests.helpers import cuda13_bindings

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
    desc = buf.ipc_descriptor
    assert desc.size == N
    handle = mr.allocation_handle
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
    with pytest.raises(RuntimeError, match="IPC-enabled"), pytest.warns(DeprecationWarning):
        mr.get_allocation_handle()  # the name before cuda.core 1.0
    with pytest.raises(RuntimeError, match="not IPC-enabled"):
        _ = mr.allocation_handle
    with pytest.raises(TypeError, match="IPC-enabled"):
        ForkingPickler.dumps(mr)  # what multiprocessing would send
    with pytest.raises(RuntimeError, match="not IPC-enabled"):
        mr.register(uuid.uuid4())
    b = mr.allocate(16, stream=dev.default_stream)
    with pytest.raises(RuntimeError, match="IPC-enabled"):
        _ = b.ipc_descriptor
    with pytest.raises(TypeError, match="IPC-enabled"):
        pickle.dumps(b)
    b.close()
    mr.close()


def _pickled_child(mr, a, b, later, results):
    # Runs in a spawned process: the resource and buffers arrived pickled.
    try:
        from cuda_core import Device, DeviceMemoryResource, PinnedMemoryResource

        dev = Device(0)
        dev.set_current()
        s = dev.create_stream()
        assert mr.is_mapped and mr.uuid is not None
        assert type(mr).from_registry(mr.uuid) is mr
        other = (
            PinnedMemoryResource if isinstance(mr, DeviceMemoryResource) else DeviceMemoryResource
        )
        try:  # one registry, but a lookup names the class it expects
            other.from_registry(mr.uuid)
        except RuntimeError as exc:
            assert "not a" in str(exc), exc
        else:
            raise AssertionError(f"{other.__name__}.from_registry found a {type(mr).__name__}")
        ok = a.is_mapped and a._mr is mr and b._mr is mr
        for buf, fill in ((a, 0x11), (b, 0x22)):
            out = bytearray(buf.size)
            buf.copy_to(out, stream=s)
            ok = ok and bytes(out) == bytes([fill]) * buf.size
        c = later.get(timeout=60)  # pickled on its own: the mapping is found by uuid
        ok = ok and c._mr is mr
        c.fill(0x44, stream=s)
        s.sync()
        for buf in (a, b, c):
            buf.close()
        results.put("ok" if ok else "bad")
    except BaseException as exc:
        import traceback

        results.put(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")


def _share_by_pickling(mr, s):
    a, b, c = (mr.allocate(N, stream=s) for _ in range(3))
    a.fill(0x11, stream=s)
    b.fill(0x22, stream=s)
    c.fill(0x00, stream=s)
    s.sync()
    ctx = mp.get_context("spawn")
    results, later = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_pickled_child, args=(mr, a, b, later, results))
    proc.start()
    later.put(c)
    status = results.get(timeout=120)
    proc.join(timeout=60)
    assert status == "ok", status
    assert proc.exitcode == 0
    out = bytearray(N)
    c.copy_to(out, stream=s)
    assert bytes(out) == b"\x44" * N
    for buf in (a, b, c):
        buf.close()


def test_resource_and_buffers_pickle_to_another_process():
    from cuda_core import Device, DeviceMemoryResource, DeviceMemoryResourceOptions

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 26))
    _share_by_pickling(mr, s)
    mr.close()


@cuda13_bindings
def test_pinned_resource_and_buffers_pickle_to_another_process():
    from cuda_core import CUDAError, Device, PinnedMemoryResource, PinnedMemoryResourceOptions

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    try:
        mr = PinnedMemoryResource(PinnedMemoryResourceOptions(ipc_enabled=True, max_size=1 << 26))
    except CUDAError as exc:
        pytest.skip(f"this machine cannot make an IPC-enabled pinned pool: {exc}")
    assert mr.allocation_handle.uuid == mr.uuid is not None
    _share_by_pickling(mr, s)
    mr.close()


def test_registry_in_one_process():
    from cuda_core import Device, DeviceMemoryResource, DeviceMemoryResourceOptions

    dev = Device(0)
    dev.set_current()
    s = dev.create_stream()
    plain = DeviceMemoryResource(dev)
    assert plain.uuid is None
    with pytest.raises(TypeError, match="IPC-enabled"):
        pickle.dumps(plain)
    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 26))
    assert isinstance(mr.uuid, uuid.UUID) and mr.allocation_handle.uuid == mr.uuid
    assert DeviceMemoryResource.from_registry(mr.uuid) is mr  # an exporter is found by its uuid
    assert pickle.loads(pickle.dumps(mr)) is mr  # unpickled where it was made: the same object
    buf = mr.allocate(64, stream=s)
    with pytest.raises(RuntimeError, match="another process"):
        pickle.loads(pickle.dumps(buf))
    assert mr.register(mr.uuid) is mr  # an exporter is registered under its own uuid already
    assert DeviceMemoryResource.from_allocation_handle(dev, mr.allocation_handle) is mr
    from cuda_core import PinnedMemoryResource

    with pytest.raises(TypeError, match=r"^Cannot convert DeviceMemoryResource to PinnedMemory"):
        PinnedMemoryResource.from_allocation_handle(
            mr.allocation_handle
        )  # a TypeError in cuda.core
    with pytest.raises(RuntimeError, match=r"registered under .* already"):
        mr.register(uuid.uuid4())
    with pytest.raises(
        RuntimeError, match="Memory resource is not IPC-enabled"
    ):  # cuda.core's words
        plain.register(uuid.uuid4())
    with pytest.raises(RuntimeError, match=r"^Memory resource [0-9a-f-]{36} was not found"):
        DeviceMemoryResource.from_registry(uuid.uuid4())
    with pytest.raises(TypeError, match="uuid"):
        DeviceMemoryResource.from_registry(str(mr.uuid))
    buf.close()
    key = mr.uuid
    mr.close()
    with pytest.raises(RuntimeError, match=f"^Memory resource {key} was not found"):
        DeviceMemoryResource.from_registry(key)
