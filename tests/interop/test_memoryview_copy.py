"""StridedMemoryView.view / copy_from / copy_to, and ManagedBuffer.

CPU tier: host-only views (NumPy memory): transposed and sliced copies, dtype views, errors.
GPU tier: device views copied byte for byte (host<->device, device<->device, strided);
ManagedBuffer advice and prefetch.
"""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import numpy as np
import pytest

import cuda_core
from cuda_core import ManagedBuffer
from cuda_core._compat import BINDINGS_MAJOR
from cuda_core.utils import StridedMemoryView as SMV


def _v(a):
    return SMV.from_array_interface(a)


def _layout(shape, strides, itemsize, slice_offset=0):
    return SimpleNamespace(
        shape=shape, strides=strides, itemsize=itemsize, slice_offset=slice_offset
    )


def test_signatures_follow_cuda_core():
    assert list(inspect.signature(SMV.view).parameters) == ["self", "layout", "dtype"]
    p = inspect.signature(SMV.copy_from).parameters
    assert list(p) == ["self", "other", "stream", "allocator", "blocking"]
    assert p["stream"].default is inspect.Parameter.empty
    p = inspect.signature(SMV.copy_to).parameters
    assert (
        list(p) == ["self", "other", "stream", "allocator", "blocking"]
        and p["stream"].default is None
    )


def test_host_copy_into_a_transposed_layout():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    b = np.zeros((6, 4), dtype=np.float32)
    dst = _v(b).view(_layout((4, 6), (1, 4), 4))
    assert dst.shape == (4, 6) and dst.strides == (1, 4)
    dst.copy_from(_v(a), None)
    assert np.array_equal(b, a.T)


def test_host_copy_to_with_slices_and_offsets():
    a = np.arange(60, dtype=np.int16).reshape(5, 12)
    out = np.zeros((5, 4), dtype=np.int16)
    _v(a[:, 1::3]).copy_to(_v(out))
    assert np.array_equal(out, a[:, 1::3])
    # slice_offset moves the first element
    flat = np.arange(10, dtype=np.int64)
    tail = _v(flat).view(_layout((3,), None, 8, slice_offset=7))
    got = np.zeros(3, dtype=np.int64)
    tail.copy_to(_v(got))
    assert got.tolist() == [7, 8, 9]


def test_view_dtype_and_copy_moves_bytes():
    a = np.array([1.0, -2.0], dtype=np.float32)
    vi = _v(a).view(dtype=np.int32)
    assert vi.dtype == np.int32 and vi.shape == (2,) and vi.ptr == _v(a).ptr
    got = np.zeros(2, dtype=np.int32)
    vi.copy_to(_v(got))
    assert np.array_equal(got, a.view(np.int32))
    same = _v(a).view()
    assert same is not None and same.shape == (2,) and same.dtype == np.float32


def test_errors():
    a = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="same shape"):
        _v(a).copy_from(_v(np.zeros((3, 2), np.float32)), None)
    with pytest.raises(ValueError, match="same item size"):
        _v(a).copy_from(_v(np.zeros((2, 3), np.float64)), None)
    ro = np.zeros((2, 3), dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _v(ro).copy_from(_v(a), None)
    with pytest.raises(TypeError, match="other must be a StridedMemoryView"):
        _v(a).copy_from(a, None)
    with pytest.raises(TypeError, match="blocking"):
        _v(a).copy_from(_v(a.copy()), None, blocking="yes")
    with pytest.raises(TypeError, match="allocator"):
        _v(a).copy_from(_v(a.copy()), None, allocator=object())
    with pytest.raises(ValueError, match="item size"):
        _v(a).view(dtype=np.float64)
    with pytest.raises(ValueError, match="itemsize is 8"):
        _v(a).view(_layout((3,), None, 8), dtype=np.float32)
    with pytest.raises(TypeError, match="layout must be"):
        _v(a).view(layout=(2, 3))


def test_managed_buffer_is_a_buffer_with_advice_api():
    assert issubclass(ManagedBuffer, cuda_core.Buffer)
    assert ManagedBuffer.__slots__ == ()
    for name in ("read_mostly", "preferred_location", "accessed_by"):
        prop = getattr(ManagedBuffer, name)
        assert isinstance(prop, property) and prop.fset is not None
    for name in ("prefetch", "discard_prefetch"):
        assert list(inspect.signature(getattr(ManagedBuffer, name)).parameters) == [
            "self",
            "location",
            "stream",
        ]
    assert list(inspect.signature(ManagedBuffer.discard).parameters) == ["self", "stream"]
    buf = ManagedBuffer.from_handle(0x1000, 64, owner=object())
    assert type(buf) is ManagedBuffer
    with pytest.raises(TypeError, match="location must be a Device or a Host"):
        buf.prefetch("gpu", stream=None)
    with pytest.raises(ValueError, match="location is required"):
        buf.prefetch(None, stream=None)
    buf.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = buf.read_mostly


# -- GPU tier ----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_device_views_copy_byte_for_byte(dev):
    s = dev.create_stream()
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2**31, size=(64, 48), dtype=np.int32)
    d1 = dev.allocate(a.nbytes, stream=s)
    d2 = dev.allocate(a.nbytes, stream=s)
    v1 = SMV.from_buffer(d1, a.shape, dtype=np.int32)
    v1.copy_from(_v(a), s)  # host -> device, blocking by default
    # device -> device into the transposed layout of d2
    v2t = SMV.from_buffer(d2, (48, 64), dtype=np.int32).view(_layout((64, 48), (1, 64), 4))
    v2t.copy_from(v1, s, blocking=False)
    s.sync()
    back = np.empty((48, 64), dtype=np.int32)
    SMV.from_buffer(d2, (48, 64), dtype=np.int32).copy_to(_v(back), s)
    assert np.array_equal(back, a.T)
    # strided device source (every other column) -> contiguous host
    cols = SMV.from_buffer(d1, (64, 24), (48, 2), dtype=np.int32)
    out = np.empty((64, 24), dtype=np.int32)
    cols.copy_to(_v(out), s)
    assert np.array_equal(out, a[:, ::2])
    # strided host source -> strided device destination, then all bytes back
    d1.fill(0, stream=s)
    dst = SMV.from_buffer(d1, (64, 24), (48, 2), dtype=np.int32)
    dst.copy_from(_v(a[:, 1::2]), s)
    whole = np.empty_like(a)
    v1.copy_to(_v(whole), s)
    expect = np.zeros_like(a)
    expect[:, ::2] = a[:, 1::2]
    assert np.array_equal(whole, expect)
    assert whole.tobytes() == expect.tobytes()
    d1.close()
    d2.close()
    s.close()


@pytest.mark.gpu
def test_device_views_on_two_shapes_are_refused(dev):
    s = dev.create_stream()
    d = dev.allocate(256, stream=s)
    with pytest.raises(ValueError, match="same shape"):
        SMV.from_buffer(d, (64,), dtype=np.int32).copy_from(_v(np.zeros(32, np.int32)), s)
    with pytest.raises(ValueError, match="outside the buffer"):
        SMV.from_buffer(d, (64,), dtype=np.int32).view(_layout((65,), None, 4))
    d.close()
    s.close()


@pytest.mark.gpu
def test_managed_buffer_advice_and_prefetch(dev):
    from cuda.bindings import driver

    from cuda_core import CUDAError, Host, ManagedMemoryResource

    s = dev.create_stream()
    if BINDINGS_MAJOR >= 13:  # managed memory pools are a CUDA 13 feature
        mr = ManagedMemoryResource()
        pooled = mr.allocate(1 << 20, stream=s)
        assert type(pooled) is ManagedBuffer and pooled.is_managed
        try:
            pooled.read_mostly = True
            pooled.read_mostly = False
        except CUDAError as exc:
            # Driver 580 (CUDA 13.0) refuses advice on memory from a managed pool; the same calls
            # work on cuMemAllocManaged memory below.
            assert exc.name == "CUDA_ERROR_NOT_SUPPORTED", exc
        pooled.close()
    err, raw = driver.cuMemAllocManaged(1 << 20, int(driver.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL))
    assert err == driver.CUresult.CUDA_SUCCESS
    buf = ManagedBuffer.from_handle(int(raw), 1 << 20, owner=raw)
    assert type(buf) is ManagedBuffer and buf.is_managed
    buf.read_mostly = True
    assert buf.read_mostly is True
    buf.read_mostly = False
    assert buf.read_mostly is False
    buf.preferred_location = dev
    assert buf.preferred_location == dev
    buf.preferred_location = Host()
    assert buf.preferred_location is Host()
    buf.preferred_location = None
    assert buf.preferred_location is None
    buf.accessed_by.add(dev)
    assert dev in buf.accessed_by and len(buf.accessed_by) == 1
    buf.accessed_by = []
    assert len(buf.accessed_by) == 0
    buf.fill(5, stream=s)
    buf.prefetch(dev, stream=s)
    buf.prefetch(Host(), stream=s)
    s.sync()
    assert (np.from_dlpack(buf) == 5).all()
    buf.close()
    assert driver.cuMemFree(raw)[0] == driver.CUresult.CUDA_SUCCESS
    s.close()
