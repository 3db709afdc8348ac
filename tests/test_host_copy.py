"""``HOST_COPY_FN`` and ``pack_host_copy_args`` (cuda.core 1.3), and how long what a C host
function needs is kept.

``HOST_COPY_FN`` is a ``CUhostFn`` that copies ``nbytes`` between host addresses read from a
``@PPN`` record; its body comes from the handle layer's backend (C under the native backend, a
ctypes callback under the pure-Python one), so the CPU tier calls it directly on each backend.
"""

from __future__ import annotations

import ctypes
import gc
import struct
import threading
import time

import numpy as np
import pytest

import cuda_core
from cuda_core import HOST_COPY_FN, host_launch, pack_host_copy_args
from cuda_core import _host_callbacks as _callbacks
from cuda_core import _trampolines as _table
from cuda_core._handles._backend import backend

HostFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
RECORD = struct.calcsize("@PPN")


def _address(obj):
    return ctypes.addressof((ctypes.c_char * len(obj)).from_buffer(obj))


# --------------------------------------------------------------------------------------------
# CPU tier: the public names, the record, the copy itself, and the argument checks.


def test_names_are_public_as_in_cuda_core_1_3():
    assert cuda_core.HOST_COPY_FN is HOST_COPY_FN
    assert cuda_core.pack_host_copy_args is pack_host_copy_args
    assert {"HOST_COPY_FN", "pack_host_copy_args"} <= set(cuda_core.__all__)
    assert HOST_COPY_FN.restype is None and tuple(HOST_COPY_FN.argtypes) == (ctypes.c_void_p,)
    assert ctypes.cast(HOST_COPY_FN, ctypes.c_void_p).value == backend.HOST_COPY_ADDRESS != 0


def test_the_record_is_three_native_fields_as_struct_packs_them():
    dst, src = bytearray(16), bytes(range(16))
    record = pack_host_copy_args(dst, src, 12)
    assert isinstance(record, bytes) and len(record) == RECORD
    assert struct.unpack("@PPN", record) == (
        _address(dst),
        np.frombuffer(src, np.uint8).ctypes.data,
        12,
    )
    assert pack_host_copy_args(0x1000, 0x2000, 7) == struct.pack("@PPN", 0x1000, 0x2000, 7)
    assert pack_host_copy_args(0, 0, 0) == struct.pack("@PPN", 0, 0, 0)  # a copy of nothing


def test_host_copy_fn_copies_what_the_record_says():
    src = np.arange(32, dtype=np.uint8)
    dst = np.zeros(32, dtype=np.uint8)
    record = ctypes.create_string_buffer(pack_host_copy_args(dst, src, 20), RECORD)
    HOST_COPY_FN(ctypes.addressof(record))
    assert dst[:20].tolist() == list(range(20)) and not dst[20:].any()
    HOST_COPY_FN(None)  # a NULL record copies nothing
    empty = ctypes.create_string_buffer(pack_host_copy_args(dst, src[::-1].copy(), 0), RECORD)
    HOST_COPY_FN(ctypes.addressof(empty))
    assert dst[:20].tolist() == list(range(20))


def test_host_copy_fn_handles_overlap_and_unaligned_records():
    data = bytearray(b"0123456789")
    base = _address(data)
    raw = bytearray(RECORD + 1)  # the record at an odd address
    raw[1:] = pack_host_copy_args(base + 2, base, 6)
    HOST_COPY_FN(_address(raw) + 1)
    assert data == bytearray(b"0101234589")


def test_bare_addresses_and_their_range():
    assert struct.unpack("@PPN", pack_host_copy_args(5, 6, 1)) == (5, 6, 1)
    with pytest.raises(ValueError, match="dst must be an address in"):
        pack_host_copy_args(-1, 0, 0)
    with pytest.raises(ValueError, match="src must be an address in"):
        pack_host_copy_args(0, 1 << 64, 0)
    with pytest.raises(ValueError, match="src must be a non-zero address when nbytes > 0"):
        pack_host_copy_args(8, 0, 1)


@pytest.mark.parametrize(
    "bad", [True, np.int64(8), np.uint64(8), ctypes.c_void_p(8), ctypes.c_size_t(8), 1.5, "x", None]
)
def test_what_is_not_an_address_or_a_buffer_is_a_type_error(bad):
    with pytest.raises(TypeError, match="dst must be"):
        pack_host_copy_args(bad, bytes(4), 0)
    with pytest.raises(TypeError, match="src must be"):
        pack_host_copy_args(bytearray(4), bad, 0)


def test_sizes_writability_and_contiguity_are_checked():
    with pytest.raises(ValueError, match=r"nbytes must be at most the size of dst \(4 bytes\)"):
        pack_host_copy_args(bytearray(4), bytes(8), 5)
    with pytest.raises(ValueError, match=r"nbytes must be at most the size of src \(2 bytes\)"):
        pack_host_copy_args(bytearray(4), bytes(2), 3)
    with pytest.raises(ValueError, match="dst must be writable"):
        pack_host_copy_args(b"read-only", bytearray(9), 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        pack_host_copy_args(np.zeros(8, np.uint8)[::2], bytes(4), 1)
    with pytest.raises(ValueError, match="nbytes must be an integer >= 0"):
        pack_host_copy_args(bytearray(4), bytes(4), -1)
    with pytest.raises(TypeError, match="nbytes must be"):
        pack_host_copy_args(bytearray(4), bytes(4), 2.0)
    with pytest.raises(TypeError, match="nbytes must be"):
        pack_host_copy_args(bytearray(4), bytes(4), True)
    # A NumPy integer is a fine count (only addresses must be ints).
    assert struct.unpack("@PPN", pack_host_copy_args(1, 2, np.int32(3)))[2] == 3


@pytest.mark.parametrize("user_data", [None, 0, b"", b"x" * (RECORD - 1), bytearray(RECORD + 1)])
def test_host_copy_fn_needs_a_packed_record(user_data):
    with pytest.raises(ValueError, match="pack_host_copy_args"):
        _table.host_callback(HOST_COPY_FN, user_data)
    # The same pointer made again from its address is HOST_COPY_FN too.
    with pytest.raises(ValueError, match="pack_host_copy_args"):
        _table.host_callback(HostFn(backend.HOST_COPY_ADDRESS), user_data)


def test_host_copy_fn_takes_a_record_or_its_address():
    record = pack_host_copy_args(1, 2, 0)
    py_fn, addr, ud, keep = _table.host_callback(HOST_COPY_FN, record)
    assert py_fn is None and addr == backend.HOST_COPY_ADDRESS
    assert ctypes.string_at(ud, RECORD) == record  # a copy the returned object keeps
    assert keep[0] is HOST_COPY_FN
    assert _table.host_callback(HOST_COPY_FN, 0x1234)[2] == 0x1234
    with pytest.raises(TypeError, match="user_data must be"):
        _table.host_callback(HOST_COPY_FN, 1.5)
    # Other C functions keep cuda.core 1.2's rules: any bytes, or none.
    other = HostFn(lambda p: None)
    assert _table.host_callback(other, None)[2] == 0
    assert _table.host_callback(other, b"x")[2] != 0


# --------------------------------------------------------------------------------------------
# GPU tier


def _wait_for_pending(target, timeout=10.0):
    t0 = time.monotonic()
    while _callbacks.pending_callbacks()[0] > target and time.monotonic() - t0 < timeout:
        gc.collect()
        time.sleep(0.01)
    return _callbacks.pending_callbacks()[0]


def _pinned(n):
    from cuda_core import LegacyPinnedMemoryResource

    buf = LegacyPinnedMemoryResource().allocate(n)
    return buf, np.from_dlpack(buf).view(np.uint8)


@pytest.mark.gpu
def test_host_copy_runs_in_stream_order_after_a_device_copy(dev):
    s = dev.create_stream()
    n = 1 << 16
    before = _callbacks.pending_callbacks()[0]
    device_buf = dev.allocate(n, stream=s)
    device_buf.fill(0x5A, stream=s)
    staging, staged = _pinned(n)
    out = bytearray(n)
    staging.copy_from(device_buf, stream=s)
    host_launch(s, HOST_COPY_FN, user_data=pack_host_copy_args(out, staging, n))
    s.sync()
    assert out == bytearray(b"\x5a" * n)
    assert staged.all()
    assert _wait_for_pending(before) == before  # the copied record was released
    staging.close()
    device_buf.close(s)
    s.close()


@pytest.mark.gpu
def test_the_record_is_copied_at_the_call_and_an_address_is_read_when_it_runs(dev):
    s = dev.create_stream()
    gate = threading.Event()
    src, dst = bytes(range(8)), bytearray(8)
    host_launch(s, lambda: gate.wait(30))  # holds the stream until both records below changed
    record = bytearray(pack_host_copy_args(dst, src, 4))
    host_launch(s, HOST_COPY_FN, user_data=record)  # copied: later changes do not matter
    record[:] = pack_host_copy_args(dst, src, 0)
    own = ctypes.create_string_buffer(pack_host_copy_args(dst, src, 1), RECORD)
    host_launch(s, HOST_COPY_FN, user_data=ctypes.addressof(own))  # read when it runs
    ctypes.memmove(own, pack_host_copy_args(_address(dst) + 6, src, 2), RECORD)
    assert dst == bytearray(8)
    gate.set()
    s.sync()
    assert dst == bytearray([0, 1, 2, 3, 0, 0, 0, 1])
    s.close()


@pytest.mark.gpu
def test_host_copy_fn_misuse_on_a_stream(dev):
    s = dev.create_stream()
    before = _callbacks.pending_callbacks()[0]
    with pytest.raises(ValueError, match="pack_host_copy_args"):
        host_launch(s, HOST_COPY_FN)
    with pytest.raises(ValueError, match="pack_host_copy_args"):
        host_launch(s, HOST_COPY_FN, user_data=b"too short")
    device_buf = dev.allocate(64, stream=s)
    with pytest.raises(ValueError, match="host-accessible"):
        pack_host_copy_args(bytearray(64), device_buf, 64)
    device_buf.close(s)
    with pytest.raises(RuntimeError, match="closed"):
        pack_host_copy_args(bytearray(64), device_buf, 64)
    s.sync()
    assert _callbacks.pending_callbacks()[0] == before
    s.close()


@pytest.mark.gpu
def test_what_a_c_function_keeps_survives_closing_its_stream_until_it_ran(dev):
    s = dev.create_stream()
    before = _callbacks.pending_callbacks()[0]
    gate = threading.Event()
    got = []
    host_launch(s, lambda: gate.wait(30))
    host_launch(
        s, HostFn(lambda p: got.append(ctypes.string_at(p, 4))), user_data=bytearray(b"kept")
    )
    dst = bytearray(4)
    host_launch(s, HOST_COPY_FN, user_data=pack_host_copy_args(dst, b"copy", 4))
    s.close()  # the stream goes; its queued work still runs, with what it needs
    gc.collect()
    gate.set()
    t0 = time.monotonic()
    while dst != bytearray(b"copy") and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    assert got == [b"kept"] and dst == bytearray(b"copy")
    dev.sync()
    assert _wait_for_pending(before) == before


@pytest.mark.gpu
def test_host_copy_fn_in_a_captured_graph_copies_on_every_replay(dev):
    s = dev.create_stream()
    counter = np.zeros(1, np.int64)
    history = np.zeros(1, np.int64)
    record = pack_host_copy_args(history.view(np.uint8), counter.view(np.uint8), 8)
    b = s.create_graph_builder().begin_building()
    host_launch(b, lambda: counter.__iadd__(1))
    host_launch(b, HOST_COPY_FN, user_data=record)  # copied into the graph
    del record
    seen = []
    host_launch(b, lambda: seen.append(int(history[0])))
    g = b.end_building().complete()
    for _ in range(3):
        g.launch(s)
    s.sync()
    assert seen == [1, 2, 3]
    g.close()
    b.close()
    s.close()


@pytest.mark.gpu
def test_callbacks_of_a_destroyed_context_are_not_kept(dev):
    # Host functions queued in a context that is destroyed before they ran can never run; what
    # they keep is released once the context is found gone (or at once, where destroying the
    # context first ran them).
    before = _callbacks.pending_callbacks()[0]
    ctx = dev.create_context()
    s = ctx.create_stream()
    gate = threading.Event()
    host_launch(s, lambda: gate.wait(2))
    host_launch(s, HostFn(lambda p: None), user_data=bytearray(b"data"))
    host_launch(s, lambda: None)
    dev.set_current()
    ctx.close()
    gate.set()
    assert _wait_for_pending(before) == before
