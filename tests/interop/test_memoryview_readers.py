"""StridedMemoryView's readers against each other: PyTorch's fast path against DLPack (on the
CPU and the GPU), from_buffer, and the backends' DLPack view."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core._interop import _dlpack as dl
from cuda_core._interop import _fast_arrays as bridge
from cuda_core._interop import _memoryview as mv
from cuda_core._interop._memoryview import StridedMemoryView
from tests.interop.test_memoryview import _expected_strides

TORCH_DTYPES = [
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128", "bfloat16", "float8_e4m3fn", "float8_e5m2",
]  # fmt: skip


def _fields(v):
    return (
        v.ptr,
        v.shape,
        v.strides,
        v.dtype,
        v.size,
        v.device_id,
        v.is_device_accessible,
        v.readonly,
        v.__dlpack_device__(),
    )


def _same(a, b):
    """Equal views; the address of an empty array is not compared (producers may report NULL)."""
    if a.size == 0:
        return _fields(a)[1:] == _fields(b)[1:]
    return _fields(a) == _fields(b)


def _via_dlpack(monkeypatch, tp, obj, stream_ptr):
    """The view the plain DLPack path gives for ``obj`` (the fast path switched off for ``tp``)."""
    with monkeypatch.context() as m:
        m.setitem(mv._kinds, tp, bridge.KIND_DLPACK)
        view = StridedMemoryView.from_dlpack(obj, stream_ptr)
    assert view._capsule is not None  # really went through __dlpack__
    return view


def _torch_layouts(torch, dtype, device="cpu"):
    base = (torch.arange(48, device=device) % 5).to(dtype).reshape(2, 3, 8)
    return [
        base,
        base[1:, 1:, 2:6],
        base[:, ::2, ::3],
        base.permute(2, 0, 1),
        base[0, 0, 3],
        base[:, :0],
        base.reshape(-1),
        base[:, 1:2, :],
    ]


@pytest.mark.parametrize("name", TORCH_DTYPES)
def test_torch_fast_path_equals_dlpack_path_on_cpu(name, monkeypatch):
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, name, None)
    if dtype is None:
        pytest.skip(f"this torch has no {name}")
    expected = bridge._numpy_equivalent(name)
    if expected is None:
        pytest.skip(f"no NumPy equivalent of {name} here (ml_dtypes missing)")
    for t in _torch_layouts(torch, dtype):
        fast = StridedMemoryView.from_dlpack(t, -1)
        assert fast._capsule is None, "an exact torch.Tensor takes the fast path"
        assert fast.exporting_obj is t
        assert (fast.ptr, fast.shape, fast.dtype) == (t.data_ptr(), tuple(t.shape), expected)
        assert type(fast.shape) is tuple
        assert fast.strides == tuple(t.stride())  # as given, as cuda.core reports them
        assert (fast.device_id, fast.is_device_accessible, fast.readonly) == (-1, False, False)
        assert _fields(fast) == _fields(_via_dlpack(monkeypatch, torch.Tensor, t, -1))
        for other in (
            StridedMemoryView.from_dlpack(t, None),
            StridedMemoryView.from_any_interface(t, -1),
            StridedMemoryView(t, -1),
        ):
            assert other._capsule is None and _fields(other) == _fields(fast)


def test_torch_fast_view_exports_back_and_keeps_tensor_alive():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, 1::2]
    view = StridedMemoryView.from_dlpack(t, -1)
    del t
    gc.collect()
    b = np.from_dlpack(view)
    np.testing.assert_array_equal(b, np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1::2])


def test_torch_unusual_tensors_fall_back_to_dlpack():
    torch = pytest.importorskip("torch")
    base = torch.arange(6).to(torch.complex64)
    negative = torch.tensor([1 + 2j, 3 + 4j]).conj().imag  # [-2, -4]; its memory holds [2, 4]
    with pytest.raises(BufferError, match="negative bit"):  # cuda.core 1.2 reads [2, 4]
        StridedMemoryView.from_dlpack(negative, -1)
    with pytest.raises(BufferError, match="resolve_neg"):
        bridge.torch_fields(negative, -1)
    view = StridedMemoryView.from_dlpack(negative.resolve_neg(), -1)
    assert np.from_dlpack(view).tolist() == negative.tolist() == [-2.0, -4.0]
    unusual = {
        "conjugate": base.conj(),
        "sparse": torch.eye(3).to_sparse(),
        "meta": torch.empty(3, device="meta"),
        "complex32": torch.zeros(3, dtype=torch.complex32),
        "quantized": torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8),
    }
    for label, t in unusual.items():
        assert type(t) is torch.Tensor
        assert bridge.torch_fields(t, -1) is None, label
    with pytest.raises(BufferError, match="conjugate"):  # PyTorch's own refusal, through DLPack
        StridedMemoryView.from_dlpack(unusual["conjugate"], -1)
    with pytest.raises(BufferError, match="layout"):
        StridedMemoryView.from_dlpack(unusual["sparse"], -1)


def test_torch_subclass_and_requires_grad():
    torch = pytest.importorskip("torch")

    class Sub(torch.Tensor):
        pass

    s = torch.arange(4.0).as_subclass(Sub)
    view = StridedMemoryView.from_dlpack(s, -1)
    assert view._capsule is not None and view.shape == (4,)  # a subclass goes through DLPack
    g = torch.ones(5, requires_grad=True)
    view = StridedMemoryView.from_dlpack(g, -1)  # the fast path views it (DLPack would refuse)
    assert (view.ptr, view.shape, view.dtype) == (g.data_ptr(), (5,), np.float32)
    with pytest.raises(BufferError, match="gradient"):
        g.__dlpack__()


def test_from_buffer_signature_and_argument_errors():
    import inspect

    sig = inspect.signature(StridedMemoryView.from_buffer)
    assert list(sig.parameters) == [
        "buffer",
        "shape",
        "strides",
        "itemsize",
        "dtype",
        "is_readonly",
    ]
    assert sig.parameters["dtype"].default is None and sig.parameters["itemsize"].default is None
    with pytest.raises(ValueError, match="itemsize or dtype"):
        StridedMemoryView.from_buffer(None, (4,))
    with pytest.raises(ValueError, match=r"itemsize must be dtype.itemsize \(4\)"):
        StridedMemoryView.from_buffer(None, (4,), itemsize=8, dtype=np.float32)
    with pytest.raises(ValueError, match="itemsize must be a positive int"):
        StridedMemoryView.from_buffer(None, (4,), itemsize=0)


def test_foreign_stream_borrow_sets_every_slot_like_wrap():
    from cuda_core import _stream

    owner = object()
    a = _stream._borrow(_stream.Stream, 0x1234, owner)
    b = _stream.Stream._wrap(0x1234, None, owner=owner)
    for name in _stream.Stream.__slots__:
        if name == "__weakref__":
            continue
        va, vb = getattr(a, name), getattr(b, name)
        if name == "_h":  # two StreamHandles borrowing the same stream for the same owner
            va, vb = (
                (va.address, va.owner, va.is_owned, va.ctx),
                (vb.address, vb.owner, vb.is_owned, vb.ctx),
            )
        assert va == vb, name
    assert a.is_closed is False and int(a.handle) == 0x1234 and a._h.owner is owner


def test_unrelated_types_are_not_foreign_stream_classes():
    from cuda_core._interop._foreign_streams import _foreign_handle_attr

    class NotAStream:
        pass

    assert _foreign_handle_attr(NotAStream) == ""


# GPU tier -----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_torch_fast_path_equals_dlpack_path(monkeypatch):
    torch = pytest.importorskip("torch")
    from cuda_core import Device

    dev = Device()
    dev.set_current()
    sp = torch.cuda.current_stream().cuda_stream or 1
    for name in TORCH_DTYPES:
        dtype = getattr(torch, name, None)
        if dtype is None or bridge._numpy_equivalent(name) is None:
            continue
        for t in _torch_layouts(torch, dtype, "cuda"):
            fast = StridedMemoryView.from_dlpack(t, sp)
            assert fast._capsule is None
            assert (fast.ptr, fast.device_id, fast.is_device_accessible) == (
                t.data_ptr(),
                dev.device_id,
                True,
            )
            assert fast.__dlpack_device__() == (dl.kDLCUDA, dev.device_id)
            assert fast.dtype == bridge._numpy_equivalent(name) and fast.shape == tuple(t.shape)
            assert fast.strides == tuple(t.stride())  # as given, as cuda.core reports them
            assert _fields(StridedMemoryView.from_dlpack(t, -1)) == _fields(fast)
            try:
                ref = _via_dlpack(monkeypatch, torch.Tensor, t, sp)
            except (BufferError, RuntimeError, TypeError):
                if name.startswith("float8"):
                    continue  # this PyTorch may not export float8 through DLPack
                raise
            assert _same(fast, ref), name
    with pytest.raises(BufferError, match="ambiguous"):
        StridedMemoryView.from_dlpack(torch.ones(2, device="cuda"), None)
    pinned = torch.arange(4.0).pin_memory()  # CPU memory, as cuda.core 1.2 reports it
    view = StridedMemoryView.from_dlpack(pinned, -1)
    assert (view.ptr, view.device_id, view.is_device_accessible) == (pinned.data_ptr(), -1, False)
    assert view.__dlpack_device__() == (dl.kDLCPU, 0)


@pytest.mark.gpu
def test_gpu_torch_host_tensors_read_natively_as_through_their_attributes(monkeypatch):
    """Host tensors (plain, pinned, strided, 0-d, empty) through the backend's reader (on the
    native backend, PyTorch's exchange API) give the view their attributes give
    (bridge.torch_fields), and, unpinned, the view DLPack gives; pinned or not, CPU memory, as
    cuda.core 1.2 reports a CPU tensor."""
    torch = pytest.importorskip("torch")
    from cuda_core import Device
    from cuda_core._handles._backend import NATIVE, backend

    Device().set_current()
    try:
        from cuda.core.utils import StridedMemoryView as peer
    except ImportError:
        peer = None
    base = torch.arange(24.0).reshape(4, 6)
    tensors = {
        "plain": base,
        "pinned": base.pin_memory(),
        "strided": base[:, ::2],
        "pinned strided": base.pin_memory()[1:, ::3],
        "0-d": torch.tensor(3.5),
        "empty": torch.empty(0, 3),
        "int16": torch.arange(5, dtype=torch.int16),
    }
    for label, t in tensors.items():
        view = StridedMemoryView.from_dlpack(t, -1)
        with monkeypatch.context() as m:  # the attribute reader: what the pure backend uses
            m.setattr(mv, "_torch_view", lambda *a: NotImplemented)
            by_attributes = StridedMemoryView.from_dlpack(t, -1)
        assert _same(view, by_attributes), label
        if not t.is_pinned():  # DLPack's own word on pinned memory varies between versions
            assert _same(view, _via_dlpack(monkeypatch, torch.Tensor, t, -1)), label
        assert not view.is_device_accessible and view.__dlpack_device__()[0] == dl.kDLCPU, label
        if peer is not None:  # what cuda.core says of the same tensor
            theirs = peer.from_dlpack(t, -1)
            assert (theirs.is_device_accessible, theirs.__dlpack_device__()) == (
                view.is_device_accessible,
                view.__dlpack_device__(),
            ), label
        if NATIVE and bridge._torch.get("native"):
            assert backend.torch_view(type(view), t, -1) is not NotImplemented, label


@pytest.mark.gpu
def test_gpu_cupy_fast_path_equals_dlpack_path(monkeypatch):
    cp = pytest.importorskip("cupy")
    from cuda_core import Device

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    sp = int(s.handle)
    base = cp.arange(48, dtype=cp.float32).reshape(2, 3, 8)
    cases = [
        base,
        base[1:, 1:, 2:6],
        base[:, ::2, ::3],
        base.transpose(2, 0, 1),
        base[0, 0, 3],
        base[:, :0],
    ]
    cases += [
        (cp.arange(48) % 5).astype(dt)
        for dt in (cp.int8, cp.uint16, cp.int64, cp.float16, cp.complex128, cp.bool_)
    ]
    for a in cases:
        fast = StridedMemoryView.from_dlpack(a, sp)
        assert fast._capsule is None and fast.exporting_obj is a
        assert fast.ptr == a.data.ptr and fast.shape == a.shape and fast.dtype == a.dtype
        assert _same(fast, _via_dlpack(monkeypatch, cp.ndarray, a, sp))
        assert _fields(StridedMemoryView.from_dlpack(a, -1)) == _fields(fast)
    with pytest.raises(BufferError, match="ambiguous"):
        StridedMemoryView.from_dlpack(base, None)
    s.sync()
    s.close()


FILL_COPY_SRC = r"""
extern "C" __global__ void delayed_fill(int* a, int n, int v, unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { __nanosleep(1000); asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = v;
}
extern "C" __global__ void copy_i32(const int* src, int* dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
"""


def _delay_env():
    from cuda_core import Device, LaunchConfig, Program, ProgramOptions

    dev = Device()
    dev.set_current()
    obj = Program(
        FILL_COPY_SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")
    ).compile("cubin")
    return (
        dev,
        obj.get_kernel("delayed_fill"),
        obj.get_kernel("copy_i32"),
        LaunchConfig(grid=4, block=256),
    )


def _query(handle_int):

    return driver.cuStreamQuery(driver.CUstream(handle_int))[0]


@pytest.mark.gpu
@pytest.mark.parametrize("producer_kind", ["default", "side"])
def test_gpu_torch_fast_path_orders_current_stream_before_consumer(producer_kind):
    torch = pytest.importorskip("torch")

    from cuda_core import Stream, launch

    dev, fill, copy, cfg = _delay_env()
    n = 1024
    t = torch.zeros(n, dtype=torch.int32, device="cuda")
    out = torch.zeros(n, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    producer = torch.cuda.default_stream() if producer_kind == "default" else torch.cuda.Stream()
    consumer = dev.create_stream()
    launch(
        Stream(producer), cfg, fill, t.data_ptr(), np.int32(n), np.int32(23), np.uint64(200_000_000)
    )
    with torch.cuda.stream(producer):
        view = StridedMemoryView.from_dlpack(t, int(consumer.handle))
    assert view._capsule is None, "the fast path was taken"
    assert _query(producer.cuda_stream) == driver.CUresult.CUDA_ERROR_NOT_READY, (
        "no host synchronisation"
    )
    launch(consumer, cfg, copy, view.ptr, out.data_ptr(), np.int32(n))
    consumer.sync()
    assert int(out.min()) == 23 and int(out.max()) == 23
    # -1 opts out: the consumer does not wait for new producer work
    launch(
        Stream(producer), cfg, fill, t.data_ptr(), np.int32(n), np.int32(5), np.uint64(100_000_000)
    )
    with torch.cuda.stream(producer):
        StridedMemoryView.from_dlpack(t, -1)
    consumer.sync()
    assert _query(producer.cuda_stream) == driver.CUresult.CUDA_ERROR_NOT_READY
    torch.cuda.synchronize()
    consumer.close()


@pytest.mark.gpu
def test_gpu_cupy_fast_path_orders_current_stream_before_consumer():
    cp = pytest.importorskip("cupy")

    from cuda_core import Stream, launch

    dev, fill, copy, cfg = _delay_env()
    n = 1024
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = dev.create_stream()
    a = cp.zeros(n, dtype=cp.int32)
    out = cp.zeros(n, dtype=cp.int32)
    cp.cuda.Device().synchronize()
    launch(
        Stream(producer), cfg, fill, a.data.ptr, np.int32(n), np.int32(31), np.uint64(200_000_000)
    )
    with producer:
        view = StridedMemoryView.from_dlpack(a, int(consumer.handle))
    assert view._capsule is None, "the fast path was taken"
    assert _query(producer.ptr) == driver.CUresult.CUDA_ERROR_NOT_READY, "no host synchronisation"
    launch(consumer, cfg, copy, view.ptr, out.data.ptr, np.int32(n))
    consumer.sync()
    assert int(out.min()) == 31 and int(out.max()) == 31
    producer.synchronize()
    consumer.close()


@pytest.mark.gpu
def test_gpu_wrap_torch_and_cupy_streams_reads_the_handle():
    from cuda_core import Device, Stream
    from cuda_core._stream import _foreign_handle_attrs, as_stream

    dev = Device()
    dev.set_current()
    found = 0
    try:
        import torch

        for ts in (torch.cuda.Stream(), torch.cuda.ExternalStream(torch.cuda.Stream().cuda_stream)):
            for s in (dev.create_stream(ts), Stream(ts), as_stream(ts), dev.create_stream(ts)):
                assert int(s.handle) == ts.cuda_stream and s._h.owner is ts and not s.is_closed
            assert _foreign_handle_attrs[type(ts)] == "cuda_stream"
            found += 1
    except ImportError:
        pass
    try:
        import cupy as cp

        inner = cp.cuda.Stream()
        for cs in (cp.cuda.Stream(non_blocking=True), cp.cuda.ExternalStream(inner.ptr)):
            for s in (dev.create_stream(cs), Stream(cs), as_stream(cs), dev.create_stream(cs)):
                assert int(s.handle) == cs.ptr and s._h.owner is cs
            assert _foreign_handle_attrs[type(cs)] == "ptr"
            found += 1
    except ImportError:
        pass
    if not found:
        pytest.skip("neither PyTorch nor CuPy is installed")


@pytest.mark.gpu
def test_gpu_from_buffer_itemsize_only_and_foreign_allocation():
    from cuda_core import Buffer, Device

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    buf = dev.allocate(64, stream=s)
    v = StridedMemoryView.from_buffer(buf, (4, 2), itemsize=8)
    assert (v.ptr, v.shape, v.strides, v.dtype, v.size) == (int(buf.handle), (4, 2), None, None, 8)
    with pytest.raises(BufferError, match="dtype"):
        v.__dlpack__()
    with pytest.raises(ValueError):
        StridedMemoryView.from_buffer(buf, (9,), itemsize=8)
    v2 = StridedMemoryView.from_buffer(
        buf, (2, 2), (4, 1), itemsize=8, dtype=np.float64, is_readonly=True
    )
    assert (v2.strides, v2.dtype, v2.readonly) == ((4, 1), np.float64, True)
    # A wrapped foreign allocation is not bounds-checked (cuda.core does the same).
    ext = Buffer.from_handle(int(buf.handle), 16, owner=buf)
    v3 = StridedMemoryView.from_buffer(ext, (8,), dtype=np.float64)
    assert v3.shape == (8,) and v3.exporting_obj is ext
    buf.close(s)
    s.close()


@pytest.mark.gpu
def test_torch_shim_stream_follows_torch_current_stream():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    from cuda_core import Device

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    t = torch.ones(1 << 20, device="cuda")
    side = torch.cuda.Stream()
    for _ in range(2):  # the first view registers the device's order event; the second is native
        with torch.cuda.stream(side):
            u = t * 2  # queued on the side stream: the view must order it before s
            view = StridedMemoryView.from_dlpack(u, int(s.handle))
        assert view._capsule is None
        out = np.empty(1 << 20, np.float32)
        from cuda_core._memory import Buffer

        buf = Buffer.from_handle(view.ptr, out.nbytes, owner=u)
        buf.copy_to(out, stream=s)
        assert (out == 2).all()


@pytest.mark.gpu
def test_torch_native_view_equals_pure_and_dlpack_paths(monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA")
    from cuda_core import Device
    from cuda_core._interop._memoryview import _view_of

    native = pytest.importorskip("cuda_core._handles._native")
    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    sp = int(s.handle)
    warm = torch.ones(4, device="cuda")
    StridedMemoryView.from_dlpack(warm, sp)  # binds torch and registers the device's order event
    if not bridge._torch.get("native"):
        pytest.skip(f"torch {torch.__version__} has no usable __dlpack_c_exchange_api__")
    served = 0
    for dtype in (torch.float32, torch.int8, torch.bfloat16, torch.complex64, torch.bool):
        for t in _torch_layouts(torch, dtype, "cuda"):
            for stream_ptr in (sp, -1, 0):
                view = native.torch_view(StridedMemoryView, t, stream_ptr)
                if view is NotImplemented:
                    continue
                served += 1
                assert (
                    type(view) is StridedMemoryView
                    and view.exporting_obj is t
                    and view._capsule is None
                )
                fields = bridge.torch_fields(t, stream_ptr)  # what the pure reader builds from
                assert fields is not None
                pure = _view_of(StridedMemoryView, fields, t)
                assert _fields(view) == _fields(pure) and view.strides == pure.strides
                assert _fields(view) == _fields(
                    _via_dlpack(monkeypatch, torch.Tensor, t, stream_ptr)
                )
    assert served > 0, "the native reader should serve CUDA tensors"
    base = torch.arange(6, device="cuda").to(torch.complex64)
    for unusual in (base.conj(), base.conj().imag):  # conjugate, negative
        assert native.torch_view(StridedMemoryView, unusual, sp) is NotImplemented
    host = torch.ones(3)  # host memory: served, ordered on no stream
    view = native.torch_view(StridedMemoryView, host, sp)
    fields = bridge.torch_fields(host, sp)
    assert view is not NotImplemented and fields is not None
    assert _fields(view) == _fields(_view_of(StridedMemoryView, fields, host))
    assert (
        native.torch_view(StridedMemoryView, warm, None) is NotImplemented
    )  # the pure reader raises
    with pytest.raises(BufferError):
        StridedMemoryView.from_dlpack(warm, None)

    class MyView(StridedMemoryView):
        __slots__ = ()

    assert type(native.torch_view(MyView, warm, sp)) is MyView
    assert type(MyView.from_dlpack(warm, sp)) is MyView
    s.sync()


def test_backend_dlpack_view_serves_numpy_and_subclasses():
    from cuda_core._handles._backend import backend

    ro = np.arange(6, dtype=np.int16)
    ro.setflags(write=False)
    arrays = [
        np.arange(12.0).reshape(3, 4),
        np.arange(32, dtype=np.int32).reshape(4, 8)[:, ::2],
        np.array(3.5, dtype=np.float32),
        np.zeros((0, 3)),
        ro,
        np.ones(5, dtype=np.complex64),
        np.zeros((2, 1, 3), dtype=bool),
        np.arange(24, dtype=np.uint8).reshape(2, 3, 4).transpose(2, 0, 1),
    ]
    for a in arrays:
        view = backend.dlpack_view(StridedMemoryView, a, -1)
        assert (
            type(view) is StridedMemoryView
            and view._capsule is not None
            and view.exporting_obj is a
        )
        assert _fields(view) == _fields(StridedMemoryView.from_dlpack(a, -1))
        assert view.readonly is (not a.flags.writeable)
        assert view.strides == _expected_strides(a)

    class MyView(StridedMemoryView):
        __slots__ = ()

    assert type(MyView.from_dlpack(arrays[0], -1)) is MyView
    with pytest.raises(TypeError, match="ViewInfo"):
        backend.dlpack_view(object, arrays[0], -1)
    with pytest.raises(BufferError, match="DLPack"):
        StridedMemoryView.from_dlpack(object(), -1)
