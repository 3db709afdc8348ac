"""StridedMemoryView over NumPy (CPU tier) and CuPy / PyTorch (GPU tier)."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core._interop import _dlpack as dl
from cuda_core._interop._memoryview import StridedMemoryView
from cuda_core._interop._view_args import args_viewable_as_strided_memory

DTYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bool",
]


def _layouts(dtype):
    base = (np.arange(2 * 3 * 8) % 7).astype(dtype).reshape(2, 3, 8)
    return {
        "contiguous": base,
        "sliced": base[1:, 1:, 2:6],
        "strided": base[:, ::2, ::3],
        "transposed": base.T,
        "reversed": base[:, :, ::-1],
        "0-d": np.array(5, dtype=dtype),
        "empty": base[:, :0],
        "1-d": base.reshape(-1),
    }


def _expected_strides(a, protocol="dlpack"):
    """The strides (in elements) NumPy hands the consumer, as cuda.core 1.2 reports them: its
    DLPack export gives ``a.strides`` for every array of one or more dimensions (C-contiguous
    ones too) and none for a 0-d one; its ``__array_interface__`` gives none when the array is
    C-contiguous."""
    byte_strides = a.__array_interface__["strides"] if protocol == "array_interface" else a.strides
    if a.ndim == 0 or byte_strides is None:
        return None
    return tuple(s // a.itemsize for s in byte_strides)


def _check(view, a, device_id=-1, accessible=False, protocol="dlpack"):
    assert view.ptr == a.__array_interface__["data"][0]
    assert view.shape == a.shape
    assert view.strides == _expected_strides(a, protocol)
    assert view.dtype == a.dtype
    assert view.size == a.size
    assert view.device_id == device_id
    assert view.is_device_accessible is accessible
    assert view.exporting_obj is a


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", list(_layouts("int8")))
def test_numpy_view_matrix(dtype, layout):
    a = _layouts(dtype)[layout]
    with pytest.warns(DeprecationWarning, match="deprecated"):  # as cuda.core 1.2 warns
        direct = StridedMemoryView(a, -1)
    for view in (
        StridedMemoryView.from_dlpack(a, -1),
        StridedMemoryView.from_dlpack(a, None),
        StridedMemoryView.from_any_interface(a, -1),
        direct,
    ):
        _check(view, a)
        assert view.readonly is False
    # cuda.core gives a view made through __array_interface__ the current context's device
    _check(
        StridedMemoryView.from_array_interface(a),
        a,
        device_id=_current_device(),
        protocol="array_interface",
    )


def _current_device() -> int:
    """The current context's device, or -1 (no driver, no context)."""
    try:
        err, dev = driver.cuCtxGetDevice()
    except Exception:
        return -1
    return int(dev) if err == driver.CUresult.CUDA_SUCCESS else -1


def test_readonly_flag_from_versioned_dlpack_and_array_interface():
    a = np.arange(6.0)
    a.flags.writeable = False
    assert StridedMemoryView.from_dlpack(a, -1).readonly is True
    assert StridedMemoryView.from_array_interface(a).readonly is True


def test_view_keeps_producer_memory_alive():
    a = np.arange(1000, dtype=np.int64)
    view = StridedMemoryView.from_dlpack(a, -1)
    ptr = view.ptr
    del a
    gc.collect()
    assert view.exporting_obj.__array_interface__["data"][0] == ptr
    np.testing.assert_array_equal(np.from_dlpack(view), np.arange(1000))


def test_export_roundtrip_through_numpy():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::2]
    view = StridedMemoryView.from_dlpack(a, -1)
    assert view.__dlpack_device__() == (dl.kDLCPU, 0)
    b = np.from_dlpack(view)
    assert b.ctypes.data == a.ctypes.data
    assert b.strides == a.strides
    np.testing.assert_array_equal(a, b)
    b[0, 0] = -1  # shares memory
    assert a[0, 0] == -1


def test_export_refuses_copy_and_foreign_device():
    view = StridedMemoryView.from_dlpack(np.arange(3), -1)
    with pytest.raises(BufferError):
        view.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        view.__dlpack__(dl_device=(dl.kDLCUDA, 0))


def test_bfloat16_view():
    ml = pytest.importorskip("ml_dtypes")
    a = np.arange(8, dtype=np.float32).astype(ml.bfloat16)
    cap = dl.make_capsule(a.ctypes.data, 8, ml.bfloat16, dl.kDLCPU, 0, owner=a)

    class P:
        def __dlpack__(self, **kw):
            return cap

        def __dlpack_device__(self):
            return (dl.kDLCPU, 0)

    v2 = StridedMemoryView.from_dlpack(P(), -1)
    assert v2.dtype == np.dtype(ml.bfloat16)
    assert v2.ptr == a.ctypes.data


def test_legacy_producer_without_max_version():
    a = np.arange(5, dtype=np.int16)

    class Legacy:
        def __dlpack__(self, stream=None):
            return a.__dlpack__()

        def __dlpack_device__(self):
            return a.__dlpack_device__()

    view = StridedMemoryView.from_dlpack(Legacy(), -1)
    assert view.ptr == a.ctypes.data and view.shape == (5,) and view.dtype == np.int16


def test_cuda_array_interface_requires_stream_and_rejects_mask():
    class CAI:
        @property
        def __cuda_array_interface__(self):
            return {
                "shape": (4,),
                "typestr": "<f4",
                "data": (0, False),
                "version": 3,
                "stream": None,
            }

    with pytest.raises(BufferError, match="ambiguous"):
        StridedMemoryView.from_cuda_array_interface(CAI(), None)

    class Masked:
        @property
        def __array_interface__(self):
            return {
                "shape": (2,),
                "typestr": "<f4",
                "data": (0, False),
                "version": 3,
                "mask": object(),
            }

    with pytest.raises(BufferError, match="masked"):
        StridedMemoryView.from_array_interface(Masked())


def test_unviewable_objects_raise_buffererror():
    for fn in (
        lambda o: StridedMemoryView(o, -1),
        lambda o: StridedMemoryView.from_any_interface(o, -1),
        lambda o: StridedMemoryView.from_array_interface(o),
        lambda o: StridedMemoryView.from_dlpack(o, -1),
    ):
        with pytest.raises(BufferError):
            fn(object())


def test_empty_view_is_deprecated_as_in_cuda_core():
    with pytest.warns(DeprecationWarning, match="empty StridedMemoryView is deprecated"):
        v = StridedMemoryView()
    assert (v.ptr, v.device_id, v.is_device_accessible, v.readonly, v.exporting_obj, v.dtype) == (
        0,
        0,
        False,
        False,
        None,
        None,
    )
    assert v.__dlpack_device__() == (dl.kDLCPU, 0)
    with pytest.raises(AttributeError):  # no layout (cuda.core: ValueError)
        _ = v.shape


def test_decorator_wraps_selected_arguments():
    @args_viewable_as_strided_memory((0, 2))
    def f(x, y, z):
        return x.view(-1), y, z.view(-1)

    a, b = np.arange(4.0), np.arange(6).reshape(2, 3)
    vx, y, vz = f(a, "keep", b)
    assert y == "keep"
    _check(vx, a)
    _check(vz, b)
    with pytest.raises(TypeError):
        args_viewable_as_strided_memory([0])


def test_strides_in_elements_not_bytes():
    a = np.zeros((4, 4), dtype=np.complex128)[:, ::2]
    assert StridedMemoryView.from_dlpack(a, -1).strides == (4, 2)
    assert StridedMemoryView.from_array_interface(a).strides == (4, 2)


def test_view_releases_producer_when_it_dies():
    import weakref

    for versioned in (True, False):
        a = np.arange(100, dtype=np.float32)
        ref = weakref.ref(a)
        src = a if versioned else _Unversioned(a)
        view = StridedMemoryView.from_dlpack(src, -1)
        del a, src
        gc.collect()
        assert ref() is not None and view.shape == (100,)
        del view
        gc.collect()
        assert ref() is None  # the kept capsule released the tensor, nothing leaked


class _Unversioned:
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class _CapsuleProducer:
    """Hands out one prepared capsule and records the stream it was asked for (no cycles)."""

    def __init__(self, capsule, device):
        self.capsule = capsule
        self.device = device
        self.stream = "unset"

    def __dlpack__(self, stream=None, max_version=None):
        self.stream = stream
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def test_unknown_dlpack_dtype_raises_on_dtype_access():
    a = np.zeros(4, dtype=np.uint8)
    cap = dl.make_capsule(a.ctypes.data, 4, (dl.kDLFloat, 8, 1), dl.kDLCPU, 0, owner=a)
    view = StridedMemoryView.from_dlpack(_CapsuleProducer(cap, (dl.kDLCPU, 0)), -1)
    assert view.shape == (4,) and view.ptr == a.ctypes.data
    with pytest.raises(BufferError, match="no NumPy equivalent"):
        _ = view.dtype


def test_array_interface_strides_must_be_item_multiples():
    class Odd:
        @property
        def __array_interface__(self):
            return {
                "shape": (2,),
                "typestr": "<f8",
                "data": (0, False),
                "version": 3,
                "strides": (12,),
            }

    with pytest.raises(BufferError, match="multiples"):
        StridedMemoryView.from_array_interface(Odd())
    with pytest.raises(ValueError, match="multiples"):  # cuda.core's class for it
        StridedMemoryView.from_array_interface(Odd())


def test_device_rules_for_host_kinds():
    a = np.arange(4, dtype=np.int32)
    for dev, dev_id, accessible in (
        (dl.kDLCUDAHost, -1, True),
        (dl.kDLCUDAManaged, 0, True),
        (dl.kDLCPU, -1, False),
    ):
        producer = _CapsuleProducer(
            dl.make_capsule(a.ctypes.data, 4, np.int32, dev, 0, owner=a), (dev, 0)
        )
        view = StridedMemoryView.from_dlpack(producer, 1234)
        assert (view.device_id, view.is_device_accessible) == (dev_id, accessible)
        assert producer.stream == (None if dev == dl.kDLCPU else 1234)
        assert view.__dlpack_device__() == (dev, 0)
        assert view.dtype == np.int32 and view.shape == (4,)


def test_public_name_in_utils():
    utils = pytest.importorskip("cuda_core.utils")
    assert utils.StridedMemoryView is StridedMemoryView
    assert utils.args_viewable_as_strided_memory is args_viewable_as_strided_memory


# --------------------------------------------------------------------------------------------
# GPU tier


def _gpu_arrays(xp_name):
    if xp_name == "cupy":
        cp = pytest.importorskip("cupy")
        base = cp.arange(2 * 3 * 8, dtype=cp.float32).reshape(2, 3, 8)

        def ptr(a):
            return a.data.ptr

        def strides(a):  # CuPy's DLPack export gives its strides, C-contiguous ones too
            return tuple(s // a.itemsize for s in a.strides)

        def stream_of():
            return cp.cuda.get_current_stream().ptr

        dtypes = [
            cp.int8,
            cp.int32,
            cp.int64,
            cp.uint16,
            cp.float16,
            cp.float64,
            cp.complex64,
            cp.bool_,
        ]
        make = lambda dt: (cp.arange(48) % 5).astype(dt).reshape(2, 3, 8)  # noqa: E731
        return base, ptr, strides, make, dtypes, stream_of, lambda a: np.dtype(a.dtype)
    torch = pytest.importorskip("torch")
    base = torch.arange(48, dtype=torch.float32, device="cuda").reshape(2, 3, 8)

    def ptr(t):
        return t.data_ptr()

    def strides(t):  # what PyTorch gives (DLPack and cuda.core's tensor path alike)
        return tuple(t.stride())

    def stream_of():
        return torch.cuda.current_stream().cuda_stream

    dtypes = [
        torch.int8,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.float16,
        torch.float64,
        torch.complex64,
        torch.bool,
    ]
    make = lambda dt: (torch.arange(48, device="cuda") % 5).to(dt).reshape(2, 3, 8)  # noqa: E731
    name = {
        torch.int8: "int8",
        torch.int32: "int32",
        torch.int64: "int64",
        torch.uint8: "uint8",
        torch.float16: "float16",
        torch.float64: "float64",
        torch.complex64: "complex64",
        torch.bool: "bool",
        torch.float32: "float32",
    }
    return base, ptr, strides, make, dtypes, stream_of, lambda t: np.dtype(name[t.dtype])


@pytest.mark.gpu
@pytest.mark.parametrize("xp_name", ["cupy", "torch"])
def test_gpu_view_matrix(xp_name):
    from cuda_core import Device

    dev = Device()
    dev.set_current()
    base, ptr, strides, make, dtypes, stream_of, np_dtype = _gpu_arrays(xp_name)
    sp = stream_of()
    swapped = base.permute(0, 2, 1) if xp_name == "torch" else base.transpose(0, 2, 1)
    cases = [base, base[1:, 1:, 2:6], base[:, ::2, ::3], swapped, base[0, 0, 3]]
    cases += [make(dt) for dt in dtypes]
    for a in cases:
        for view in (
            StridedMemoryView.from_dlpack(a, sp),
            StridedMemoryView.from_dlpack(a, -1),
            StridedMemoryView(a, sp),
            StridedMemoryView.from_any_interface(a, sp),
        ):
            assert view.ptr == ptr(a)
            assert view.shape == tuple(a.shape)
            assert view.strides == strides(a)
            assert view.dtype == np_dtype(a)
            assert view.device_id == dev.device_id
            assert view.is_device_accessible is True
            assert view.exporting_obj is a
        if xp_name == "cupy":
            cai = StridedMemoryView.from_cuda_array_interface(a, sp)
            # CuPy's __cuda_array_interface__ leaves the strides out for a C-contiguous array.
            cai_strides = None if a.flags.c_contiguous else strides(a)
            assert (cai.ptr, cai.shape, cai.strides, cai.dtype) == (
                ptr(a),
                tuple(a.shape),
                cai_strides,
                np_dtype(a),
            )
            assert cai.device_id == dev.device_id
    with pytest.raises(BufferError, match="ambiguous"):
        StridedMemoryView.from_dlpack(base, None)


@pytest.mark.gpu
def test_gpu_view_exports_back_to_cupy_and_from_buffer():
    cp = pytest.importorskip("cupy")
    from cuda_core import Device

    dev = Device()
    dev.set_current()
    a = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    view = StridedMemoryView.from_dlpack(a, -1)
    b = cp.from_dlpack(view)
    assert b.data.ptr == a.data.ptr
    cp.testing.assert_array_equal(a, b)

    s = dev.create_stream()
    buf = dev.allocate(64, stream=s)
    v = StridedMemoryView.from_buffer(buf, (4, 2), dtype=np.float64)
    assert (v.ptr, v.shape, v.strides, v.dtype, v.device_id) == (
        int(buf.handle),
        (4, 2),
        None,
        np.float64,
        dev.device_id,
    )
    assert v.exporting_obj is buf
    v2 = StridedMemoryView.from_buffer(buf, (2, 2), (4, 1), dtype="f8")
    assert v2.strides == (4, 1)
    with pytest.raises(ValueError):
        StridedMemoryView.from_buffer(buf, (9,), dtype=np.float64)
    c = cp.from_dlpack(v)
    c[...] = 7
    s.sync()
    assert float(c.sum()) == 56.0
    buf.close(s)
    s.close()
