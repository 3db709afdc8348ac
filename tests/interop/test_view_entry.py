"""CPU tier: ``StridedMemoryView.from_dlpack``'s C entry (native backend) gives what the Python
function gives, and hands every case it does not read to it."""

from __future__ import annotations

import numpy as np
import pytest

from cuda_core import StridedMemoryView
from cuda_core._handles import _backend
from cuda_core._interop import _memoryview as mv

native = pytest.mark.skipif(not _backend.NATIVE, reason="the native backend is not in use")


def _fields(v):
    return (v.ptr, v.shape, v.strides, v.dtype, v.device_id, v.is_device_accessible, v.readonly)


@native
def test_from_dlpack_is_the_c_entry_wrapping_the_python_function():
    entry = StridedMemoryView.__dict__["from_dlpack"].__func__
    assert type(entry).__name__ == "ViewEntry"
    assert entry.__wrapped__ is mv._from_dlpack_py
    assert entry.__doc__ == mv._from_dlpack_py.__doc__


@pytest.mark.parametrize(
    "array",
    [np.arange(12.0).reshape(3, 4), np.arange(32, dtype=np.int32).reshape(4, 8)[:, ::2],
     np.zeros((), dtype=np.uint8), np.ones(5, dtype=np.complex64)],
    ids=["2d", "strided", "0d", "complex"],
)  # fmt: skip
def test_every_call_form_gives_the_python_functions_view(array):
    py = mv._from_dlpack_py if _backend.NATIVE else StridedMemoryView.from_dlpack.__func__
    want = _fields(py(StridedMemoryView, array, -1))
    for _ in range(2):  # the first call classifies the type, later ones take the C path
        assert _fields(StridedMemoryView.from_dlpack(array, -1)) == want
    assert _fields(StridedMemoryView.from_dlpack(array, stream_ptr=-1)) == want  # a keyword
    assert _fields(StridedMemoryView.from_dlpack(array)) == want  # host memory: no stream


def test_a_subclass_gets_its_own_class():
    class Mine(StridedMemoryView):
        pass

    a = np.arange(4.0)
    StridedMemoryView.from_dlpack(a, -1)  # classified
    v = Mine.from_dlpack(a, -1)
    assert type(v) is Mine and v.shape == (4,)


def test_what_is_no_dlpack_producer_is_refused_as_before():
    with pytest.raises(BufferError, match="does not support DLPack") as e:
        StridedMemoryView.from_dlpack(object(), -1)
    assert isinstance(e.value, AttributeError)  # cuda.core's class too
    with pytest.raises(TypeError):
        StridedMemoryView.from_dlpack(np.arange(3.0), "a stream")


@native
@pytest.mark.parametrize(
    ("form", "takes_c"),
    [("position", True), ("keyword", True), ("none", False), ("other keyword", False)],
)
def test_which_call_forms_the_c_entry_takes_itself(form, takes_c):
    # A call the entry takes runs no Python frame of from_dlpack; the others run the function.
    import sys

    a = np.arange(6.0)
    StridedMemoryView.from_dlpack(a, -1)  # the type is classified
    calls = {
        "position": lambda: StridedMemoryView.from_dlpack(a, -1),
        "keyword": lambda: StridedMemoryView.from_dlpack(a, stream_ptr=-1),
        "none": lambda: StridedMemoryView.from_dlpack(a),
        "other keyword": lambda: StridedMemoryView.from_dlpack(obj=a, stream_ptr=-1),
    }
    seen = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is mv._from_dlpack_py.__code__:
            seen.append(frame.f_code)

    sys.setprofile(profile)
    try:
        view = calls[form]()
    finally:
        sys.setprofile(None)
    assert view.shape == (6,)
    assert (not seen) is takes_c, (form, seen)


@native
def test_the_c_entries_can_be_weakly_referenced_as_functions_can():
    # weakref.WeakMethod(stream.record) needs a weakly referenceable __func__ (a review finding).
    import weakref

    from cuda_core import Stream, launch

    entries = (
        Stream.__dict__["record"],
        launch,
        StridedMemoryView.__dict__["from_dlpack"].__func__,
    )
    for entry in entries:
        assert weakref.ref(entry)() is entry, type(entry).__name__


@native
def test_from_dlpack_and_from_array_interface_bind_as_class_methods():
    # ClassMethod is a classmethod that gives the method it bound again: one per class, not one
    # per call. Everything a caller can see of the method, and of the descriptor, is classmethod's.
    import inspect

    from cuda_core._handles import _native

    class Mine(StridedMemoryView):
        pass

    for name in ("from_dlpack", "from_array_interface"):
        raw = StridedMemoryView.__dict__[name]
        assert type(raw) is _native.ClassMethod
        m = getattr(StridedMemoryView, name)
        assert (
            inspect.ismethod(m) and m.__self__ is StridedMemoryView and m.__func__ is raw.__func__
        )
        assert getattr(StridedMemoryView, name) is m  # kept
        assert getattr(Mine, name).__self__ is Mine  # each class its own
        assert getattr(StridedMemoryView, name).__self__ is StridedMemoryView
        view = StridedMemoryView.from_dlpack(np.arange(3.0), -1)
        assert getattr(view, name).__self__ is StridedMemoryView  # an instance binds its class
        assert isinstance(raw, classmethod) and raw.__wrapped__ is raw.__func__
        assert raw.__doc__ == raw.__func__.__doc__
        assert "cls" not in inspect.signature(m).parameters
    assert type(Mine.from_dlpack(np.arange(4.0), -1)) is Mine


@native
def test_class_method_refuses_what_classmethod_refuses_and_is_collected():
    import gc
    import weakref

    from cuda_core._handles import _native

    with pytest.raises(TypeError):
        _native.ClassMethod(3)
    with pytest.raises(TypeError):
        _native.ClassMethod(func=len)

    def make(cls, x):
        return (cls, x)

    class Owner:
        m = _native.ClassMethod(make)

    assert Owner.m(1) == (Owner, 1) and Owner().m(2) == (Owner, 2)
    r = weakref.ref(Owner)
    del Owner  # the kept method holds its class: a cycle through the class dict
    gc.collect()
    assert r() is None
