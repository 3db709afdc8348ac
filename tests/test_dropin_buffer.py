"""Drop-in: Buffer.from_handle's argument forms, Buffer equality and hashing, and empty batches,
compared with NVIDIA's ``cuda.core`` 1.2.

cuda.core reads ``ptr`` with ``int(ptr)`` into a ``uintptr_t`` and ``size`` into a ``size_t``, so
NumPy integers work; a buffer equals another with the same address and size (a closed one is
``(0, 0)``) and hashes as that pair. Its batched operations (``copy_batch``, ``discard_batch``,
``prefetch_batch``, ``discard_prefetch_batch``) refuse an empty sequence of buffers with
``ValueError``. Buffers over fake addresses need no driver in either library, so most of this
runs on the CPU tier.
"""

from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import driver

import cuda_core as ours
from cuda_core import ManagedBuffer
from tests.helpers.dropin import outcome, same_outcome

_PTRS = [
    0x1000, np.uint64(0x1000), np.intp(0x1000), np.int64(0x1000), np.int32(0x1000), np.uint32(0x1000),
    np.uint8(16), np.uint64(2**47), driver.CUdeviceptr(0x1000), 0, -1, np.int64(-1), 2**64, None, "0x1000",
    object(), [0x1000],
]  # fmt: skip


@pytest.mark.parametrize("ptr", _PTRS, ids=repr)
def test_from_handle_pointer_forms_match_cuda_core(nv, ptr):
    nv_out = outcome(nv.Buffer.from_handle, ptr, 64)
    our_out = outcome(ours.Buffer.from_handle, ptr, 64)
    same_outcome(nv_out, our_out, f"Buffer.from_handle({ptr!r}, 64)")
    if nv_out[0] == "ok":
        assert our_out[1].handle == nv_out[1].handle == int(ptr)
        assert type(our_out[1].handle) is int
        assert our_out[1].size == 64


_SIZES = [
    64,
    np.uint64(64),
    np.int32(64),
    np.intp(0),
    np.uint8(255),
    -1,
    np.int8(-1),
    2**64,
    None,
    "4",
    [4],
]


@pytest.mark.parametrize("size", _SIZES, ids=repr)
def test_from_handle_size_forms_match_cuda_core(nv, size):
    nv_out = outcome(nv.Buffer.from_handle, np.uint64(0x1000), size)
    our_out = outcome(ours.Buffer.from_handle, np.uint64(0x1000), size)
    same_outcome(nv_out, our_out, f"Buffer.from_handle(np.uint64(0x1000), {size!r})")
    if nv_out[0] == "ok":
        assert our_out[1].size == nv_out[1].size == int(size)
        assert type(our_out[1].size) is int


def _buffers(lib):
    """Buffers over fake addresses: [0] and [1] alike, the others differ in address or size or
    keep an owner; the last one is closed."""
    b = lib.Buffer.from_handle
    bufs = [b(0x1000, 64), b(np.uint64(0x1000), 64), b(0x1000, 32), b(0x2000, 64), b(0x1000, 64, owner=bytearray(1)),
            b(0, 0), b(0x3000, 16)]  # fmt: skip
    bufs[-1].close()
    return bufs


def _relations(bufs):
    eq = [[a == b for b in bufs] for a in bufs]
    ne = [[a != b for b in bufs] for a in bufs]
    same_hash = [[hash(a) == hash(b) for b in bufs] for a in bufs]
    others = [(a == 0x1000, a == None, a != "x") for a in bufs]  # noqa: E711 (the == operator is the test)
    return eq, ne, same_hash, others, len(set(bufs))


def test_equality_and_hash_match_cuda_core(nv):
    theirs, mine = _relations(_buffers(nv)), _relations(_buffers(ours))
    assert mine == theirs
    eq = mine[0]
    assert eq[0][1] and eq[0][4] and not eq[0][2] and not eq[0][3]  # address and size, nothing else
    assert eq[5][6]  # a closed buffer is (0, 0)


def test_equality_follows_close_and_subclasses(nv):
    for lib in (nv, ours):
        a, b = lib.Buffer.from_handle(0x1000, 64), lib.Buffer.from_handle(0x1000, 64)
        assert a == b and hash(a) == hash(b)
        a.close()
        assert a != b and a == lib.Buffer.from_handle(0, 0)
    managed = ManagedBuffer.from_handle(
        0x1000, 64, owner=object()
    )  # a subclass compares as a Buffer
    assert managed == ours.Buffer.from_handle(0x1000, 64) and hash(managed) == hash(
        ours.Buffer.from_handle(0x1000, 64)
    )


# -- empty batches -------------------------------------------------------------------------------

_BATCH_CALLS = {
    "discard_batch([])": lambda u, s: u.discard_batch(s, []),
    "discard_batch(())": lambda u, s: u.discard_batch(s, ()),
    "prefetch_batch([], [])": lambda u, s: u.prefetch_batch(s, [], []),
    "prefetch_batch([], None)": lambda u, s: u.prefetch_batch(s, [], None),
    "discard_prefetch_batch([], [])": lambda u, s: u.discard_prefetch_batch(s, [], []),
    "discard_batch('ab')": lambda u, s: u.discard_batch(s, "ab"),
    "discard_batch(iter)": lambda u, s: u.discard_batch(s, iter([])),
    "copy_batch(None, [], [])": lambda u, s: u.copy_batch(None, [], []),
}


@pytest.mark.parametrize("call", list(_BATCH_CALLS))
def test_empty_batches_refused_as_in_cuda_core(nv, call):
    # cuda.core checks the buffers before the stream in the managed-memory batches (so the
    # stream can be None here) and the stream's type first in copy_batch.
    fn = _BATCH_CALLS[call]
    nv_out, our_out = outcome(fn, nv.utils, None), outcome(fn, ours.utils, None)
    assert nv_out[0] == "raises"
    same_outcome(nv_out, our_out, call)


def test_a_bare_buffer_is_not_a_batch(nv):
    for lib in (nv, ours):
        buf = lib.Buffer.from_handle(0x1000, 64)
        with pytest.raises(TypeError):
            lib.utils.discard_batch(None, buf)
        with pytest.raises(TypeError):
            lib.utils.prefetch_batch(None, buf, [])


@pytest.mark.gpu
def test_empty_copy_batch_refused_on_a_real_stream_as_in_cuda_core(nv, dev):
    nv_dev = nv.Device(dev.device_id)
    nv_dev.set_current()
    nv_s = nv_dev.create_stream()
    dev.set_current()
    s = dev.create_stream()
    buf = dev.allocate(64, stream=s)
    cases = {
        "copy_batch(s, [], [])": lambda lib, st, b: lib.utils.copy_batch(st, [], []),
        "copy_batch(s, (), ())": lambda lib, st, b: lib.utils.copy_batch(st, (), ()),
        "copy_batch(s, [], [b])": lambda lib, st, b: lib.utils.copy_batch(st, [], [b]),
        "prefetch_batch(s, [], dev)": lambda lib, st, b: lib.utils.prefetch_batch(
            st, [], lib.Device(dev.device_id)
        ),
        "discard_batch(s, [])": lambda lib, st, b: lib.utils.discard_batch(st, []),
    }
    nv_buf = nv.Buffer.from_handle(int(buf.handle), 64)
    for name, fn in cases.items():
        nv_out, our_out = outcome(fn, nv, nv_s, nv_buf), outcome(fn, ours, s, buf)
        same_outcome(nv_out, our_out, name)
        assert our_out[0] == "raises" and issubclass(our_out[1], ValueError), name
    buf.close(s)
    s.close()
    nv_s.close()


@pytest.mark.gpu
def test_allocated_buffer_equals_its_wrapper_as_in_cuda_core(nv, dev):
    s = dev.create_stream()
    buf = dev.allocate(256, stream=s)
    view = ours.Buffer.from_handle(np.uint64(int(buf.handle)), np.int32(256), owner=buf)
    assert buf == view and hash(buf) == hash(view) and len({buf, view}) == 1
    nv_view = nv.Buffer.from_handle(np.uint64(int(buf.handle)), np.int32(256), owner=buf)
    assert int(nv_view.handle) == int(view.handle) and nv_view.size == view.size
    assert buf != ours.Buffer.from_handle(int(buf.handle), 128)
    buf.close(s)
    assert buf != view  # closed: (0, 0)
    s.close()
