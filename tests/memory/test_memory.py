"""Memory, CPU tier: argument checking and Buffer.from_handle rules (no device needed)."""

from __future__ import annotations

import ctypes
import gc
import pickle
import sys

import numpy as np
import pytest

import cuda_core
from cuda_core import (
    Buffer,
    CUDAWarning,
    DeviceMemoryResourceOptions,
    IPCBufferDescriptor,
    ManagedMemoryResourceOptions,
    MemoryResource,
    PinnedMemoryResourceOptions,
)
from cuda_core._memory._resource import check_size
from cuda_core._stream import LEGACY_DEFAULT_STREAM


class HostIntResource(MemoryResource):
    """A user-written resource handing out fake addresses it tracks (never dereferenced)."""

    def __init__(self):
        self.live: dict[int, int] = {}
        self.freed: list[tuple[int, int, object]] = []
        self._next = 0x10000

    def allocate(self, size, *, stream=None):
        ptr = self._next
        self._next += max(size, 1)
        self.live[ptr] = size
        return Buffer.from_handle(ptr, size, mr=self)

    def deallocate(self, ptr, size, *, stream=None):
        assert self.live.pop(ptr) == size
        self.freed.append((ptr, size, stream))

    @property
    def is_device_accessible(self):
        return True

    @property
    def is_host_accessible(self):
        return False

    @property
    def device_id(self):
        return 0


def test_public_names_exported():
    for name in (
        "Buffer",
        "DeviceMemoryResource",
        "DeviceMemoryResourceOptions",
        "IPCAllocationHandle",
        "IPCBufferDescriptor",
        "LegacyPinnedMemoryResource",
        "ManagedMemoryResource",
        "ManagedMemoryResourceOptions",
        "MemoryPoolAttributes",
        "MemoryResource",
        "PinnedMemoryResource",
        "PinnedMemoryResourceOptions",
        "SynchronousMemoryResource",
    ):
        assert name in cuda_core.__all__, name
    assert callable(cuda_core._memory.default_memory_resource)
    assert "default_memory_resource" not in cuda_core.__all__


def test_legacy_pinned_resource_is_host_memory():
    # cuda.core 1.3: device_id is -1 (1.2 raised RuntimeError); no driver is asked.
    mr = cuda_core.LegacyPinnedMemoryResource()
    assert mr.device_id == -1
    assert mr.is_host_accessible and mr.is_device_accessible and not mr.is_managed


def test_buffer_cannot_be_constructed_directly():
    with pytest.raises(RuntimeError, match="from_handle"):
        Buffer()


def test_memory_resource_is_abstract():
    with pytest.raises(TypeError):
        MemoryResource()  # type: ignore[abstract]


@pytest.mark.parametrize("bad", [-1, -4096, 2**64, np.int64(-1)])
def test_negative_size(bad):
    with pytest.raises(
        OverflowError, match=r"size must be a non-negative integer below 2\*\*64 \(got "
    ):
        check_size(bad)
    with pytest.raises(ValueError, match="size must be"):
        Buffer.from_handle(0x1000, bad)


@pytest.mark.parametrize("bad", [1.5, "8", None, True, [4]])
def test_non_int_size(bad):
    with pytest.raises(TypeError, match="size must be a non-negative integer"):
        check_size(bad)


def test_size_accepts_index_types():
    assert check_size(np.int64(12)) == 12
    assert type(check_size(np.uint32(3))) is int


def test_from_handle_owner_keeps_object_alive_and_frees_nothing():
    owner = bytearray(64)
    b = Buffer.from_handle(0x2000, 64, owner=owner)
    assert b.handle == 0x2000 and b.size == 64
    assert b.owner is owner and b.memory_resource is None
    b.close()
    assert b.is_closed and b.owner is None
    b.close()  # idempotent


def test_from_handle_mr_and_owner_is_an_error():
    mr = HostIntResource()
    with pytest.raises(ValueError, match=r"^owner and memory resource cannot be both specified"):
        Buffer.from_handle(0x1000, 8, mr=mr, owner=object())


@pytest.mark.parametrize("ptr", [1.0, "0x10", None, True])
def test_from_handle_bad_ptr(ptr):
    with pytest.raises(TypeError, match="ptr must be"):
        Buffer.from_handle(ptr, 8)


def test_from_handle_bad_mr():
    with pytest.raises(TypeError, match="mr must be a MemoryResource"):
        Buffer.from_handle(0x1000, 8, mr=object())  # type: ignore[arg-type]


def test_user_resource_close_frees_once():
    mr = HostIntResource()
    b = mr.allocate(100)
    ptr = b.handle
    assert b.memory_resource is mr and b.device_id == 0
    assert b.is_device_accessible and not b.is_host_accessible and not b.is_managed
    with b:
        pass
    assert b.is_closed
    b.close()
    assert mr.freed == [(ptr, 100, None)]
    assert mr.live == {}


def test_user_resource_gc_frees():
    mr = HostIntResource()
    b = mr.allocate(10)
    ptr = b.handle
    del b
    gc.collect()
    assert mr.freed == [(ptr, 10, None)]


def test_gc_after_close_does_not_free_twice():
    mr = HostIntResource()
    b = mr.allocate(10)
    b.close()
    del b
    gc.collect()
    assert len(mr.freed) == 1


def test_failed_deallocate_in_gc_warns_not_raises():
    class Failing(HostIntResource):
        def deallocate(self, ptr, size, *, stream=None):
            raise RuntimeError("boom")

    mr = Failing()
    b = mr.allocate(4)
    with pytest.warns(CUDAWarning, match="boom"):
        del b
        gc.collect()


def test_use_after_close_raises():
    b = Buffer.from_handle(0x3000, 16, owner=b"x")
    b.close()
    s = LEGACY_DEFAULT_STREAM
    # As in cuda.core 1.2: handle and size read 0 after close; everything else raises.
    assert b.handle == 0 and b.size == 0 and b.owner is None and b.memory_resource is None
    for call in (
        lambda: b.device_id,
        lambda: b.is_host_accessible,
        lambda: b.fill(0, stream=s),
        lambda: b.copy_to(bytearray(16), stream=s),
        lambda: b.copy_from(bytes(16), stream=s),
        lambda: b.__dlpack__(),
        lambda: b.__dlpack_device__(),
        lambda: b.ipc_descriptor,
        lambda: b.set_deallocation_stream(s),
    ):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    assert repr(b) == "<Buffer ptr=0x0 size=0>"


@pytest.mark.parametrize("bad", [None, 0, "stream", object()])
def test_wrong_stream_type(bad):
    b = Buffer.from_handle(0x3000, 16, owner=b"x")
    with pytest.raises(TypeError, match="stream must be a Stream"):
        b.fill(1, stream=bad)
    with pytest.raises(TypeError, match="stream must be a Stream"):
        b.copy_from(bytes(16), stream=bad)
    with pytest.raises(TypeError, match="stream must be a Stream"):
        b.copy_to(bytearray(16), stream=bad)
    with pytest.raises(TypeError, match="stream must be a Stream"):
        b.set_deallocation_stream(bad)


def test_copy_size_mismatch_with_host_objects():
    b = Buffer.from_handle(0x3000, 16, owner=b"x")
    s = LEGACY_DEFAULT_STREAM
    with pytest.raises(
        ValueError, match=r"dst must have the size of the source \(16 bytes\) \(got 8 bytes\)"
    ):
        b.copy_to(bytearray(8), stream=s)
    with pytest.raises(
        ValueError, match=r"src must have the size of the destination \(16 bytes\) \(got 32 bytes\)"
    ):
        b.copy_from(np.zeros(4, np.float64), stream=s)
    with pytest.raises(ValueError, match="writable"):
        b.copy_to(bytes(16), stream=s)
    with pytest.raises(ValueError, match="C-contiguous"):
        b.copy_from(np.zeros((4, 8), np.uint8)[:, ::2], stream=s)
    with pytest.raises(TypeError, match="buffer protocol"):
        b.copy_from([0] * 16, stream=s)


def test_copy_to_without_resource_needs_dst():
    b = Buffer.from_handle(0x3000, 16, owner=b"x")
    with pytest.raises(ValueError, match="dst must be given"):
        b.copy_to(stream=LEGACY_DEFAULT_STREAM)


@pytest.mark.parametrize(
    "value, exc, match",
    [
        (256, ValueError, r"\[0, 256\)"),
        (-1, ValueError, r"\[0, 256\)"),
        (True, TypeError, "value must be"),
        (1.5, TypeError, "value must be"),
        (b"abc", ValueError, "1-, 2- or 4-byte"),
        (np.float64(1.0), ValueError, "1-, 2- or 4-byte"),
        (b"", ValueError, "1-, 2- or 4-byte"),
    ],
)
def test_bad_fill_patterns(value, exc, match):
    b = Buffer.from_handle(0x3000, 16, owner=b"x")
    with pytest.raises(exc, match=match):
        b.fill(value, stream=LEGACY_DEFAULT_STREAM)


@pytest.mark.parametrize("pattern", [b"\x01\x02\x03\x04", np.uint16(3)])
def test_fill_size_must_be_multiple_of_pattern(pattern):
    b = Buffer.from_handle(0x3000, 6 if len(bytes(pattern)) == 4 else 5, owner=b"x")
    with pytest.raises(ValueError, match="multiple of the"):
        b.fill(pattern, stream=LEGACY_DEFAULT_STREAM)


def test_zero_size_operations_need_no_device():
    b = Buffer.from_handle(0, 0, owner=b"")
    s = LEGACY_DEFAULT_STREAM
    b.fill(7, stream=s)
    b.copy_from(b"", stream=s)
    out = bytearray()
    assert b.copy_to(out, stream=s) is out


def test_dlpack_argument_checks():
    b = Buffer.from_handle(0x3000, 16, owner=b"x")
    with pytest.raises(BufferError, match="copy"):
        b.__dlpack__(copy=True)
    with pytest.raises(TypeError, match="stream must be None or an int"):
        b.__dlpack__(stream="s")  # type: ignore[arg-type]


def test_buffer_does_not_pickle():
    b = Buffer.from_handle(0x3000, 16, owner=b"x")
    with pytest.raises(TypeError, match="ipc_descriptor"):
        pickle.dumps(b)


def test_options_validation():
    assert DeviceMemoryResourceOptions() == DeviceMemoryResourceOptions(
        ipc_enabled=False, max_size=0
    )
    assert (
        DeviceMemoryResourceOptions(ipc_enabled=1).ipc_enabled is True
    )  # as in cuda.core: bool(value)
    with pytest.raises(ValueError, match="max_size must be an integer >= 0"):
        DeviceMemoryResourceOptions(max_size=-1)
    with pytest.raises(TypeError, match="max_size"):
        PinnedMemoryResourceOptions(max_size=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="numa_id"):
        PinnedMemoryResourceOptions(numa_id=-2)
    with pytest.raises(ValueError, match="preferred_location_type"):
        ManagedMemoryResourceOptions(preferred_location_type="gpu")
    with pytest.raises(ValueError, match="preferred_location must be None"):
        ManagedMemoryResourceOptions(preferred_location=0, preferred_location_type="host")
    with pytest.raises(ValueError, match="preferred_location must be an integer >= -1"):
        ManagedMemoryResourceOptions(preferred_location=-2)
    assert ManagedMemoryResourceOptions(preferred_location=-1)._location()[0] == 2  # HOST
    assert ManagedMemoryResourceOptions()._location() == (0, 0)  # no preference


def test_ipc_descriptor_pickles():
    d = IPCBufferDescriptor(bytes(range(64)), 4096)
    d2 = pickle.loads(pickle.dumps(d))
    assert d2 == d and d2.size == 4096 and d2.payload == bytes(range(64))
    with pytest.raises(TypeError, match="payload must be 64 bytes"):
        IPCBufferDescriptor(b"short", 1)


def test_allocation_handle_owns_fd(tmp_path):
    import os

    from cuda_core import IPCAllocationHandle

    fd = os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR)
    h = IPCAllocationHandle.from_fd(fd)
    assert h.handle == fd and not h.is_closed
    h.close()
    h.close()
    assert h.is_closed
    with pytest.raises(OSError):
        os.fstat(fd)
    with pytest.raises(TypeError, match="fd must be"):
        IPCAllocationHandle.from_fd("3")  # type: ignore[arg-type]


def test_closed_buffer_has_no_address_to_pass_on():
    # close() drops the address itself, so nothing (the kernel-argument packer included) can
    # pass a freed pointer on: packing a closed Buffer fails and names the argument.
    from cuda_core._kernel_arg_handler import make_plan

    b = Buffer.from_handle(0x4000, 16, owner=b"x")
    args = (b, 3)
    plan = make_plan(tuple(map(type, args)), args, None)
    slot = plan.new_slot()
    plan.pack(slot, args)
    b.close()
    assert b._ptr is None and b.is_closed
    with pytest.raises(Exception, match="argument 0") as info:
        plan.pack(slot, args)
    assert isinstance(info.value, (OverflowError, TypeError, RuntimeError, ValueError))


# -- Buffer.from_handle(stream=), is_mapped, the buffer protocol -------------------------------


class HostBytesResource(HostIntResource):
    """A user-written resource handing out real host memory (ctypes buffers it keeps alive)."""

    def __init__(self):
        super().__init__()
        self.blocks: dict[int, ctypes.Array] = {}

    def allocate(self, size, *, stream=None):
        block = ctypes.create_string_buffer(max(size, 1))
        ptr = ctypes.addressof(block)
        self.blocks[ptr] = block
        self.live[ptr] = size
        return Buffer.from_handle(ptr, size, mr=self, stream=stream)

    def deallocate(self, ptr, size, *, stream=None):
        super().deallocate(ptr, size, stream=stream)
        del self.blocks[ptr]

    @property
    def is_device_accessible(self):
        return False

    @property
    def is_host_accessible(self):
        return True

    @property
    def device_id(self):
        return -1


def test_from_handle_stream_is_the_deallocation_stream():
    mr = HostIntResource()
    s = LEGACY_DEFAULT_STREAM
    b = Buffer.from_handle(0x5000, 32, mr=mr, stream=s)
    mr.live[0x5000] = 32
    b.close()
    assert mr.freed == [(0x5000, 32, s)]
    # also when collected
    c = Buffer.from_handle(0x6000, 8, mr=mr, stream=s)
    mr.live[0x6000] = 8
    del c
    gc.collect()
    assert mr.freed[-1] == (0x6000, 8, s)


def test_from_handle_with_a_host_only_resource_needs_no_context():
    # cuda.core 1.2.1: a resource that is not device-accessible records no deallocation
    # stream, and making and closing its buffers asks the driver nothing (none is here).
    mr = HostBytesResource()
    b = mr.allocate(64)  # real host memory, through Buffer.from_handle(ptr, 64, mr=mr)
    ptr = b.handle
    assert b.device_id == -1 and not b.is_device_accessible and b.is_host_accessible
    b.close()
    assert mr.freed == [(ptr, 64, None)]
    c = mr.allocate(32)
    ptr = c.handle
    del c
    gc.collect()
    assert mr.freed[-1] == (ptr, 32, None)


@pytest.mark.gpu
def test_from_handle_with_a_host_only_resource_leaves_no_context_current():
    import threading

    from tests.helpers.kernels import current_context_int

    seen: list[object] = []

    def work() -> None:  # a new thread: no context is current, and none is made
        try:
            mr = HostBytesResource()
            before = current_context_int()
            b = mr.allocate(128)
            b.close()
            seen.extend([before, current_context_int(), mr.freed[-1][2]])
        except BaseException as exc:
            seen.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == [0, 0, None]


def test_from_handle_stream_checked_and_unused_without_mr():
    with pytest.raises(TypeError, match="stream must be a Stream"):
        Buffer.from_handle(0x5000, 32, mr=HostIntResource(), stream="s")
    with pytest.raises(TypeError, match="stream must be a Stream"):
        Buffer.from_handle(0x5000, 32, owner=b"x", stream=3.0)
    b = Buffer.from_handle(0x5000, 32, owner=b"x", stream=LEGACY_DEFAULT_STREAM)
    assert b.owner == b"x"
    b.close()


def test_is_mapped_false_for_local_memory():
    mr = HostIntResource()
    b = mr.allocate(8)
    assert b.is_mapped is False
    b.close()
    assert Buffer.from_handle(0x7000, 4, owner=b"x").is_mapped is False


def test_buffer_protocol_on_host_accessible_memory():
    mr = HostBytesResource()
    b = mr.allocate(16)
    view = b.__buffer__(0)
    assert isinstance(view, memoryview)
    assert view.format == "B" and view.shape == (16,) and not view.readonly
    view[:4] = b"\x01\x02\x03\x04"
    assert mr.blocks[b.handle].raw[:4] == b"\x01\x02\x03\x04"
    assert np.frombuffer(view, np.uint8)[:4].tolist() == [1, 2, 3, 4]
    if sys.version_info >= (3, 12):
        assert bytes(memoryview(b)[:4]) == b"\x01\x02\x03\x04"  # type: ignore[arg-type]
    del view
    b.close()
    with pytest.raises(RuntimeError, match="closed"):
        b.__buffer__(0)
    empty = mr.allocate(0)
    assert empty.__buffer__(0).nbytes == 0


def test_buffer_protocol_keeps_buffer_alive():
    mr = HostBytesResource()
    b = mr.allocate(8)
    view = b.__buffer__(0)
    del b
    gc.collect()
    assert mr.freed == []  # the view still holds the Buffer
    view[0] = 9
    del view
    gc.collect()
    assert len(mr.freed) == 1


def test_buffer_protocol_refuses_device_memory():
    b = HostIntResource().allocate(8)  # device-accessible only
    with pytest.raises(BufferError, match="not host-accessible"):
        b.__buffer__(0)
    with pytest.raises(TypeError, match="flags must be an int"):
        b.__buffer__("0")  # type: ignore[arg-type]
    b.close()


# -- owning buffers of a user-written resource are freed once ------------------------------------


def test_buffer_closed_then_collected_frees_once():
    mr = HostIntResource()
    bufs = [mr.allocate(4) for _ in range(10)]
    for b in bufs[:5]:
        b.close()
    del bufs
    gc.collect()
    assert len(mr.freed) == 10 and mr.live == {}
