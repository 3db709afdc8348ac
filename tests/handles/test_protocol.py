"""The handle layer's protocol (cuda_core._handles._protocol) against both backends: every member
it names exists in the pure-Python backend and in the native one (where built), as an attribute,
a method or a class method as the protocol says, and neither backend has a public handle member
the protocol lacks. The members are read from the Protocol classes, so neither can drift."""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from pathlib import Path

import pytest

from cuda_core._handles import _backend, _protocol
from cuda_core._handles import _pure as pure

NATIVE_H = Path(_protocol.__file__).parent / "_csrc" / "native.h"
# What typing.Protocol puts in a protocol class's namespace besides its members.
_PROTOCOL_MACHINERY = {"_is_protocol", "_is_runtime_protocol", "_abc_impl"}


def _native():
    try:
        return importlib.import_module("cuda_core._handles._native")
    except ImportError:
        return None


def _backends():
    return [pytest.param("pure", id="pure"), pytest.param("native", id="native")]


def _resolve(name: str):
    if name == "pure":
        return pure
    mod = _native()
    if mod is None:
        pytest.skip("cuda_core._handles._native was not built (no C compiler)")
    return mod


def members(proto: type) -> dict[str, str]:
    """The members a Protocol class states (its bases' too): name -> "attribute", "method" or
    "classmethod". ``__init__`` is "constructor" where the protocol states one."""
    out: dict[str, str] = {}
    for klass in reversed(proto.__mro__):
        if klass is object or klass is typing.Protocol or klass is typing.Generic:
            continue
        for name in getattr(klass, "__annotations__", {}):
            out[name] = "attribute"
        for name, value in vars(klass).items():
            if (
                name == "__init__"
                and getattr(value, "__qualname__", "") == f"{klass.__qualname__}.__init__"
            ):
                out[name] = "constructor"  # stated in the protocol (typing supplies one otherwise)
            elif name.startswith("__") or name in _PROTOCOL_MACHINERY:
                continue
            elif isinstance(value, classmethod):
                out[name] = "classmethod"
            elif isinstance(value, property):
                out[name] = "attribute"
            elif inspect.isfunction(value):
                out[name] = "method"
    return out


def kind(cls: type, name: str) -> str | None:
    """What ``cls`` provides under ``name``: "attribute", "method", "classmethod" or None."""
    try:
        static = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    if isinstance(static, classmethod) or type(static).__name__ == "classmethod_descriptor":
        return "classmethod"
    if (
        isinstance(static, property)
        or inspect.isgetsetdescriptor(static)
        or inspect.ismemberdescriptor(static)
    ):
        return "attribute"
    if inspect.isfunction(static) or inspect.ismethoddescriptor(static):
        return "method"
    return "attribute"  # a plain class attribute


def _class_members(proto: type = _protocol.Backend) -> dict[str, type]:
    """Backend attribute name -> the Protocol its class implements, read from the hints of
    ``proto`` (``Backend``, or ``NativeBackend`` with the native module's own classes)."""
    out = {}
    for klass in proto.__mro__:
        for name, value in vars(klass).items():
            if isinstance(value, property):
                hint = typing.get_type_hints(value.fget, vars(_protocol))["return"]
                if typing.get_origin(hint) is type:
                    out[name] = typing.get_args(hint)[0]
    return out


NATIVE_ONLY = sorted(set(_class_members(_protocol.NativeBackend)) - set(_class_members()))


def test_protocol_states_every_handle_kind():
    assert set(_class_members()) == {
        "ContextHandle", "StreamHandle", "EventHandle", "Allocation", "LaunchConfigHandle", "ViewInfo",
    }  # fmt: skip
    assert members(_protocol.StreamHandle)["borrow"] == "classmethod"
    assert members(_protocol.StreamHandle)["sync"] == "method"
    assert members(_protocol.ViewInfo)["_dtype"] == "attribute"
    assert members(_protocol.ContextHandle)["__init__"] == "constructor"
    assert members(_protocol.NativeBackend).keys() > members(_protocol.Backend).keys()
    assert NATIVE_ONLY == [
        "AllocEntry", "ClassMethod", "CloseEntry", "CopyEntry", "LaunchEntry", "LaunchPlan",
        "PreparedLaunchBase", "RecordEntry", "SyncEntry", "ViewEntry",
    ]  # fmt: skip
    assert members(_protocol.PreparedLaunchBase) == {
        "_args": "attribute",
        "_fast_set": "method",
        "_handlers": "classmethod",
    }


def test_arg_kinds_are_the_same_list_on_both_sides():
    b = _resolve("native")
    assert b.ARG_KINDS == _protocol.ARG_KINDS


def test_abi_version_is_the_one_number_of_both_sides():
    m = re.search(r"^#define CC_ABI_VERSION (\d+)$", NATIVE_H.read_text(), re.MULTILINE)
    assert m, "CC_ABI_VERSION not found in native.h"
    assert int(m.group(1)) == _protocol.ABI_VERSION == pure.ABI_VERSION


@pytest.mark.parametrize("which", _backends())
def test_backend_module_provides_every_member(which):
    b = _resolve(which)
    proto = _protocol.NativeBackend if which == "native" else _protocol.Backend
    classes = _class_members(proto)
    for name, k in members(proto).items():
        assert hasattr(b, name), f"{b.__name__} lacks {name}"
        value = getattr(b, name)
        if name in classes:
            assert isinstance(value, type), f"{b.__name__}.{name} is not a class"
        elif k == "method":
            assert callable(value) and not isinstance(value, type), f"{b.__name__}.{name}"
        else:
            hint = typing.get_type_hints(getattr(proto, name).fget)["return"]
            hint = typing.get_origin(hint) or hint  # tuple[str, ...]: a tuple
            assert isinstance(value, hint), f"{b.__name__}.{name} is not {hint.__name__}"
    assert b.ABI_VERSION == _protocol.ABI_VERSION


def test_native_module_has_no_public_name_outside_the_protocol():
    b = _resolve("native")
    public = {n for n in dir(b) if not n.startswith("_")}
    assert public <= set(members(_protocol.NativeBackend))


@pytest.mark.parametrize(
    "which,name",
    [(w, n) for w in ("pure", "native") for n in sorted(_class_members())]
    + [("native", n) for n in NATIVE_ONLY],
)
def test_handle_class_provides_every_member(which, name):
    b = _resolve(which)
    proto = _class_members(_protocol.NativeBackend)[name]
    cls = getattr(b, name)
    expected = members(proto)
    for member, k in expected.items():
        if k == "constructor":
            assert callable(cls)
            continue
        got = kind(cls, member)
        assert got == k, f"{b.__name__}.{name}.{member}: protocol says {k}, backend has {got}"
    extra = {
        n for n in dir(cls) if not n.startswith("_") and n not in expected and n not in vars(object)
    }
    assert not extra, f"{b.__name__}.{name} has public members the protocol lacks: {sorted(extra)}"


def test_pure_backend_signatures_match_the_protocol():
    # The pure backend's parameter names and defaults are the protocol's (the native one's
    # signatures are not introspectable; tests/handles/test_handles.py calls them by keyword).

    def params(fn):
        sig = inspect.signature(fn)
        return [
            (p.name, p.default) for p in sig.parameters.values() if p.name not in ("self", "cls")
        ]

    checked = 0
    for name, k in members(_protocol.Backend).items():
        if k == "method":
            assert params(getattr(pure, name)) == params(getattr(_protocol.Backend, name)), name
            checked += 1
    for name, proto in _class_members().items():
        cls = getattr(pure, name)
        for member, k in members(proto).items():
            if k in ("method", "classmethod", "constructor"):
                got, want = getattr(cls, member), getattr(proto, member)
                assert params(got) == params(want), f"{name}.{member}"
                checked += 1
    assert checked > 30


@pytest.mark.parametrize("which", _backends())
def test_view_fields_are_writable(which):
    b = _resolve(which)
    view = b.ViewInfo.__new__(b.ViewInfo)
    for name, k in members(_protocol.ViewInfo).items():
        if k == "attribute" and name != "strides":
            setattr(view, name, 7)
            assert getattr(view, name) == 7, name
    assert view.strides == 7  # _raw_strides, read through the property


def test_chosen_backend_is_typed_as_the_protocol():
    hints = typing.get_type_hints(_backend, vars(_backend))
    assert hints["backend"] is _protocol.Backend


@pytest.mark.parametrize("which", _backends())
def test_stream_context_is_found_by_the_handle_on_both_backends(which):
    # No setter: a stream handle finds its context itself (StreamHandle.context); once released
    # before it was found, it refuses without a driver call. Driver paths: the native stub
    # (tests/handles/native_stub/drive.py, check stream_context) and test_handles.py.
    b = _resolve(which)
    h = b.StreamHandle.borrow(0x1234)
    assert h.ctx is None and not hasattr(h, "set_ctx")
    h.release()
    with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
        h.context()
    assert h.ctx is None


@pytest.mark.parametrize("which", _backends())
def test_borrow_takes_only_an_address_on_both_backends(which):
    # Stream.from_handle and foreign streams pass the int on as it is: the handle checks it.
    b = _resolve(which)
    assert b.StreamHandle.borrow(2**64 - 1).address == 2**64 - 1
    for bad in (-1, 2**64):
        with pytest.raises(OverflowError):
            b.StreamHandle.borrow(bad)
