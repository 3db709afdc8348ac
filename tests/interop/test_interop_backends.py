"""The interop protocol's conformance: the native readers (cuda_core._handles._native, interop.c) and the
pure ones (cuda_core._handles._pure_interop) on the same cases, in one process, with identical results."""

from __future__ import annotations

import ctypes
import gc
import sys
import weakref
from typing import ClassVar

import numpy as np
import pytest

from cuda_core._handles import _pure_interop as pure
from cuda_core._interop import _dlpack as dl

native = pytest.importorskip(
    "cuda_core._handles._native", reason="cuda_core._handles._native was not built"
)
BACKENDS = [pytest.param(pure, id="pure"), pytest.param(native, id="native")]


class Producer:
    """A DLPack producer handing out one prepared capsule and recording every call."""

    def __init__(self, capsule, device=(dl.kDLCPU, 0)):
        self.capsule = capsule
        self.device = device
        self.calls = []

    def __dlpack__(self, **kwargs):
        self.calls.append(kwargs)
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def _state(v):
    """Everything a view says, as plain values (the exporting object and capsule by identity)."""
    if isinstance(v, BaseException):
        return (type(v), str(v))
    return (v.ptr, v.shape, v._raw_strides, v._dtype, v.device_id, v.is_device_accessible, v.readonly,
            v._dl_device_type, v.strides, id(v.exporting_obj), v._capsule is None)  # fmt: skip


def _both(fn):
    """fn(backend) for each backend: its result's state, or the exception it raised."""
    out = []
    for b in (pure, native):
        try:
            out.append(_state(fn(b)))
        except Exception as exc:  # compared by type and message
            out.append(_state(exc))
    return out


def _agree(fn):
    a, b = _both(fn)
    assert a == b
    return a


def _numpy_arrays():
    ro = np.arange(6, dtype=np.int16)
    ro.setflags(write=False)
    base = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    out = [base, base[1:, ::2, ::-1], base.T, base[:, :0], np.array(7, dtype=np.uint8), ro,
           np.zeros((2, 1, 3), dtype=bool), np.ones(5, dtype=np.complex128), base[:, 1:2, :]]  # fmt: skip
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
                 "complex64"):  # fmt: skip
        out.append(np.arange(8).astype(name)[::2])
    return out


@pytest.mark.parametrize("index", range(len(_numpy_arrays())))
def test_numpy_arrays_read_alike(index):
    a = _numpy_arrays()[index]
    state = _agree(lambda b: b.dlpack_view(b.ViewInfo, a, -1))
    ptr, shape, _raw, word, dev, accessible, readonly, devtype, strides = state[:9]
    assert (ptr, shape, dev, accessible, devtype) == (
        a.__array_interface__["data"][0],
        a.shape,
        -1,
        False,
        1,
    )
    assert dl.dtype_from_word(word) == a.dtype and readonly is (not a.flags.writeable)
    # NumPy's export: its strides for every array of one or more dimensions, none for 0-d; read as given.
    assert strides == (None if a.ndim == 0 else tuple(s // a.itemsize for s in a.strides))
    for versioned in (
        (True, False) if a.flags.writeable else (True,)
    ):  # NumPy needs 1.0 for read-only
        cap = a.__dlpack__(max_version=(1, 0)) if versioned else a.__dlpack__()
        _agree(lambda b, cap=cap: b.read_capsule(cap))


def _capsule(dtype=(dl.kDLFloat, 32, 1), shape=(2, 3), strides=None, versioned=True, readonly=False, offset=0,
             device=(dl.kDLCPU, 0), ndim=None, null_shape=False, major=1, name=None):  # fmt: skip
    """A hand-made capsule over a fake address (never dereferenced), kept alive by its arrays."""
    n = len(shape) if ndim is None else ndim
    shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    strides_arr = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
    m = dl.DLManagedTensorVersioned() if versioned else dl.DLManagedTensor()
    if versioned:
        m.version.major, m.version.minor = major, 0
        m.flags = dl.DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0
    t = m.dl_tensor
    t.data = 0x7F0000001000
    t.device.device_type, t.device.device_id = device
    t.ndim = n
    t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype
    if not null_shape:
        t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    if strides_arr is not None:
        t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = offset
    buf = ctypes.create_string_buffer(
        name or (dl.NAME_VERSIONED if versioned else dl.NAME_UNVERSIONED)
    )
    cap = dl._capsule_new(ctypes.addressof(m), buf, dl._Destructor())
    _keep[id(cap)] = (m, shape_arr, strides_arr, buf)
    return cap


_keep: dict[int, object] = {}
_DTYPES = [(code, bits, lanes) for code in range(18) for bits in (8, 16, 32, 64) for lanes in (1,)] + [
    (dl.kDLFloat, 32, 4), (dl.kDLComplex, 128, 1), (dl.kDLBool, 8, 1)]  # fmt: skip


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize("versioned", [True, False])
def test_every_dtype_code_reads_alike(dtype, versioned):
    cap = _capsule(dtype=dtype, versioned=versioned)
    state = _agree(lambda b: b.read_capsule(cap))
    assert dl.dtype_key(state[3]) == dtype
    p = Producer(cap)
    _agree(lambda b: b.dlpack_view(b.ViewInfo, p, -1))


CASES = {
    "versioned": dict(),
    "unversioned": dict(versioned=False),
    "readonly": dict(readonly=True),
    "readonly flag ignored unversioned": dict(versioned=False, readonly=True),
    "byte offset": dict(offset=24),
    "strides": dict(shape=(4, 5), strides=(1, 4)),
    "contiguous strides": dict(shape=(4, 5), strides=(5, 1)),
    "strides of extent 1": dict(shape=(4, 1), strides=(1, 99)),
    "empty": dict(shape=(0, 5), strides=(7, 3)),
    "0-d": dict(shape=()),
    "0-d with strides": dict(shape=(), strides=()),
    "32 dims": dict(shape=(1,) * 32),
    "CUDA": dict(device=(dl.kDLCUDA, 1)),
    "CUDA host": dict(device=(dl.kDLCUDAHost, 0)),
    "CUDA managed": dict(device=(dl.kDLCUDAManaged, 2)),
    "major 2": dict(major=2),
    "33 dims": dict(shape=(1,) * 33),
    "negative ndim": dict(shape=(3,), ndim=-1),
    "no shape": dict(null_shape=True),
    "consumed": dict(name=b"used_dltensor_versioned"),
    "other name": dict(name=b"not_a_tensor"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_capsule_cases_read_alike(case):
    kw = CASES[case]
    cap = _capsule(**kw)
    state = _agree(lambda b: b.read_capsule(cap))
    if case in ("major 2", "33 dims", "negative ndim", "no shape", "consumed", "other name"):
        assert state[0] is BufferError
        return
    assert state[0] == 0x7F0000001000 + kw.get("offset", 0)
    assert state[6] is (kw.get("readonly", False) and kw.get("versioned", True))
    given = kw.get("strides")
    assert (
        state[2] == state[8] == (None if given is None else tuple(given))
    )  # as given, cuda.core's rule
    for sp in (-1, 5, 0):
        p = Producer(cap, kw.get("device", (dl.kDLCPU, 0)))
        _agree(lambda b, p=p, sp=sp: b.dlpack_view(b.ViewInfo, p, sp))


def test_stream_rules_alike():
    seen = {}
    for device in ((dl.kDLCPU, 0), (dl.kDLCUDA, 1), (dl.kDLCUDAHost, 0), (dl.kDLCUDAManaged, 2)):
        for sp in (None, -1, 0, 7, False):
            calls = []
            for b in (pure, native):
                p = Producer(_capsule(device=device), device)
                try:
                    b.dlpack_view(b.ViewInfo, p, sp)
                except BufferError as exc:
                    assert str(exc) == pure.AMBIGUOUS == native.AMBIGUOUS
                calls.append(p.calls)
            assert calls[0] == calls[1], (device, sp)
            seen[device[0], sp] = calls[0]
    assert seen[dl.kDLCUDA, None] == []  # refused before asking the producer
    assert seen[dl.kDLCUDA, 0] == [{"stream": 1, "max_version": (1, 0)}]  # 0 is the legacy stream
    assert seen[dl.kDLCPU, 7] == [{"stream": None, "max_version": (1, 0)}]  # ignored for CPU
    assert seen[dl.kDLCUDAHost, None] == [{"stream": None, "max_version": (1, 0)}]


class _BadDevice:
    def __init__(self, device):
        self.device = device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        return self.capsule


@pytest.mark.parametrize(
    "device",
    [(1, 0, 0), (1,), 5, ("1", 0), (1, "0"), (4, 0), (99, 0), (1 << 70, 0), [1, 0], (True, 0)],
)
def test_device_answers_alike(device):
    obj = _BadDevice(device)
    obj.capsule = _capsule()
    _agree(lambda b: b.dlpack_view(b.ViewInfo, obj, -1))


@pytest.mark.parametrize("returned", [None, 42, "capsule", b"x"])
def test_non_capsules_from_dlpack_alike(returned):
    p = Producer(returned)
    state = _agree(lambda b: b.dlpack_view(b.ViewInfo, p, -1))
    assert state[0] is BufferError


def test_missing_protocol_and_bad_cls_alike():
    state = _agree(lambda b: b.dlpack_view(b.ViewInfo, object(), -1))
    assert state == (BufferError, "object does not support DLPack (no __dlpack_device__)")
    a = np.arange(3)
    state = _agree(lambda b: b.dlpack_view(object, a, -1))
    assert state[0] is TypeError
    state = _agree(lambda b: b.dlpack_view(b.ViewInfo if b is native else pure.ViewInfo, a, -1))
    with pytest.raises(TypeError):
        native.dlpack_view(pure.ViewInfo, a, -1)  # each backend builds its own type only
    with pytest.raises(TypeError):
        pure.dlpack_view(native.ViewInfo, a, -1)


@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt, MemoryError, SystemExit, AttributeError, ValueError]
)
@pytest.mark.parametrize("where", ["__dlpack__", "__dlpack_device__"])
@pytest.mark.parametrize("b", BACKENDS)
def test_producer_exceptions_propagate_and_are_called_once(b, exc, where):
    calls = []

    class Raising:
        def __dlpack_device__(self):
            calls.append("device")
            if where == "__dlpack_device__":
                raise exc("boom")
            return (1, 0)

        def __dlpack__(self, **kwargs):
            calls.append("dlpack")
            raise exc("boom")

    expected = BufferError if (exc is AttributeError and where == "__dlpack_device__") else exc
    with pytest.raises(expected):
        b.dlpack_view(b.ViewInfo, Raising(), -1)
    assert calls == (["device"] if where == "__dlpack_device__" else ["device", "dlpack"])


@pytest.mark.parametrize("b", BACKENDS)
def test_legacy_producer_is_retried_once_without_max_version_and_remembered(b):
    a = np.arange(4, dtype=np.int32)

    class Legacy:
        calls: ClassVar[list] = []

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, stream=None):
            Legacy.calls.append(stream)
            return a.__dlpack__()

    v = b.dlpack_view(b.ViewInfo, Legacy(), -1)
    assert v.shape == (4,) and Legacy.calls == [None]  # the kwargs call raised TypeError first
    b.dlpack_view(b.ViewInfo, Legacy(), -1)
    assert Legacy.calls == [None, None]  # remembered: asked once

    class Broken:
        calls = 0

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            Broken.calls += 1
            raise TypeError("broken producer")

    with pytest.raises(TypeError, match="broken producer"):
        b.dlpack_view(b.ViewInfo, Broken(), -1)
    assert Broken.calls == 2  # the one protocol fallback, then its error propagates


def test_view_strides_property_alike():
    for shape, raw in [((2, 3), (3, 1)), ((2, 3), (1, 2)), ((0, 3), (9, 9)), ((4, 1), (1, 7)), ((), None),
                       ((3,), None), ((2, 2), (2, 1)), ((2, 2), (-2, 1))]:  # fmt: skip
        results = []
        for b in (pure, native):
            v = b.ViewInfo()
            v.shape, v._raw_strides = shape, raw
            results.append((v.strides, v.strides))
        assert results[0] == results[1] == (raw, raw), (
            shape,
            raw,
        )  # as given, C-contiguous ones too


@pytest.mark.parametrize("b", BACKENDS)
def test_views_keep_capsule_and_producer_alive_and_collect_cycles(b):
    a = np.arange(10.0)
    p = Producer(a.__dlpack__(max_version=(1, 0)))
    v = b.dlpack_view(b.ViewInfo, p, -1)
    assert v.exporting_obj is p and v._capsule is p.capsule
    v.exporting_obj = v  # a cycle through the view
    r = weakref.ref(v)
    del v
    gc.collect()
    assert r() is None


def test_native_reader_leaks_no_references():
    a = np.arange(12.0).reshape(3, 4)
    cap = a.__dlpack__(max_version=(1, 0))
    p = Producer(cap)
    for _ in range(10):
        native.dlpack_view(native.ViewInfo, p, -1)
        native.read_capsule(cap)
    before = (sys.getrefcount(p), sys.getrefcount(cap), sys.getrefcount(Producer))
    for _ in range(1000):
        native.dlpack_view(native.ViewInfo, p, -1)
        native.read_capsule(cap)
        with pytest.raises(BufferError):
            native.dlpack_view(native.ViewInfo, Producer(None), -1)
    assert (sys.getrefcount(p), sys.getrefcount(cap), sys.getrefcount(Producer)) == before


def test_order_event_and_torch_setup_alike():
    from cuda_core._interop import _fast_arrays

    saved = dict(pure._order_events)
    try:
        for dev, event in ((0, 0x10), (63, 0x20), (64, 0x30), (-1, 0x40)):
            assert (
                pure.set_order_event(dev, event)
                == native.set_order_event(dev, event)
                == (0 <= dev < 64)
            )
    finally:  # the process's real events again: a later test in this process orders through them
        pure._order_events.clear()
        pure._order_events.update(saved)
        for dev in (0, 63):
            real = _fast_arrays._events.get(dev)
            native.set_order_event(dev, real[1] if real else 0)
    assert pure.torch_setup(int, object()) is False
    assert native.torch_setup(int, object()) is False  # not the exchange API's capsule
    assert native.torch_setup(int, _capsule()) is False  # a capsule of another name
    with pytest.raises(TypeError):
        pure.torch_setup(42, None)
    with pytest.raises(TypeError):
        native.torch_setup(42, None)
    # Not set up for this type: the native reader delegates (the documented sentinel).
    assert native.torch_view(native.ViewInfo, object(), -1) is NotImplemented
    with pytest.raises(TypeError):
        native.torch_view(object, object(), -1)


def test_record_wait_checks_its_arguments_before_the_driver():
    with pytest.raises(TypeError):
        native.record_wait("event", 1, 2)
    with pytest.raises(TypeError):
        native.record_wait(1, 2)
    if not native.is_bound():
        from cuda_core._utils import CUDAError

        with pytest.raises((CUDAError, RuntimeError)):
            native.record_wait(1, 2, 3)


def test_handles_reexports_the_pure_protocol():
    from cuda_core._handles import _pure as _handles

    for name in ("ViewInfo", "read_capsule", "dlpack_view", "torch_setup", "torch_view", "set_order_event",
                 "record_wait", "AMBIGUOUS"):  # fmt: skip
        assert getattr(_handles, name) is getattr(pure, name)
        assert hasattr(native, name), name


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 1, 1, 1, 3), ()], ids=["4-d", "5-d", "0-d"])
@pytest.mark.parametrize("field", ["ptr", "shape", "_raw_strides"])
def test_view_fields_written_or_deleted_before_their_first_read_alike(shape, field):
    # The native reader makes ptr, shape and strides on their first read (up to 4 dimensions);
    # a write or a delete before it wins, as on the pure reader's plain attributes.
    strides = tuple(range(len(shape), 0, -1))
    outcomes = []
    for b in (pure, native):
        written = b.read_capsule(_capsule(shape=shape, strides=strides))
        setattr(written, field, ("new",))
        deleted = b.read_capsule(_capsule(shape=shape, strides=strides))
        delattr(deleted, field)
        errors = []
        for act in (getattr, delattr):  # read, then delete again
            with pytest.raises(AttributeError) as e:
                act(deleted, field)
            errors.append(type(e.value))
        if field == "_raw_strides":
            with pytest.raises(AttributeError):
                deleted.strides  # noqa: B018
        outcomes.append((_state(written), errors, getattr(deleted, "shape", None)))
    assert outcomes[0] == outcomes[1]
    assert getattr(native.read_capsule(_capsule(shape=shape, strides=strides)), field) == (
        0x7F0000001000 if field == "ptr" else shape if field == "shape" else strides
    )


def test_lazy_view_fields_are_made_once_and_leak_nothing():
    cap = _capsule(shape=(3, 4), strides=(4, 1))
    v = native.read_capsule(cap)
    assert v.shape is v.shape and v.ptr is v.ptr and v.strides is v._raw_strides

    def churn(n):
        for _ in range(n):
            native.read_capsule(cap)  # dropped unread
            w = native.read_capsule(cap)
            w.ptr, w.shape, w.strides  # noqa: B018  (made, then freed with the view)
            del w.shape

    churn(100)
    gc.collect()
    blocks = sys.getallocatedblocks()
    churn(2000)
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 100  # a leak per view would be thousands
