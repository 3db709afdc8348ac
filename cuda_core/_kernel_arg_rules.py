"""Kernel argument types: the rule that packs each Python argument type into parameter bytes.

Type table (see ``docs/launching.rst``): ``bool`` -> ``bool`` (1 byte), ``int`` -> 64-bit
pointer-sized integer (at the parameter's width for an integer parameter of another width,
where the layout is known, as cuda.core's launches deliver it), ``float`` -> ``double``,
``complex`` -> ``complex<double>``; NumPy and ctypes scalars keep their exact width; NumPy
structured scalars and ``ctypes.Structure`` pass by value with their own layout; ``Buffer``,
``ctypes.c_void_p``, ``__cuda_array_interface__``, DLPack and ``.data_ptr()`` objects pass a
device pointer; ``cuda.bindings`` ``CUtexObject``, ``CUsurfObject``,
``CUgraphConditionalHandle`` and ``CUdeviceptr`` pass their 8-byte value and ``CUtensorMap``
and :class:`TensorMapDescriptor` their 128 bytes (64-byte aligned); a graph ``GraphCondition``
passes its 8-byte ``cudaGraphConditionalHandle``.

A rule's value expression (``{a}`` standing for the argument) is compiled into a packing plan
by :mod:`cuda_core._kernel_arg_handler`, whose plan namespace holds the helpers named here.

Where a kernel's parameter types are known (:class:`ParamType`, from its mangled name or its
PTX), :func:`type_message` refuses an argument of the wrong kind before the size check: a
``float`` for a pointer or an integer, a pointer or an integer for a floating-point parameter.
"""

from __future__ import annotations

import ctypes
import operator
import types
from typing import Any, NamedTuple

import numpy as np

from . import _links
from ._compat import driver
from ._tensor_map import TensorMapDescriptor
from ._tensor_map_args import tensor_map_bytes

__all__: list[str] = []  # private: the packing plans of _kernel_arg_handler use these

_U64 = 1 << 64
_I64_MIN = -(1 << 63)


def _neg(v: Any) -> int:
    # A negative Python int is an int64; wrap it to the uint64 with the same bits.
    if v < _I64_MIN:
        raise OverflowError(f"int {v} does not fit in a 64-bit kernel argument")
    return int(v) + _U64


def _fit(v: int, size: int) -> int:
    """``v`` as the unsigned ``size``-byte pattern the driver copies for an integer parameter of
    that size: the low bytes, as ``cuda.core`` passes a wider integer (a Python ``int`` for an
    ``int`` parameter). The value must fit the parameter, signed or unsigned."""
    bits = size * 8
    if not -(1 << (bits - 1)) <= v < 1 << bits:
        raise OverflowError(f"{v} does not fit a {size}-byte integer parameter")
    return v & ((1 << bits) - 1)


def _void_bytes(v: Any, size: int) -> bytes:
    b = v.tobytes()
    if len(b) != size:
        raise TypeError(
            f"a NumPy structured scalar of {len(b)} bytes was given where this launch was "
            f"planned for {size} bytes (dtype {v.dtype})"
        )
    return b


def _torch_ptr(v: Any) -> int:
    if v.is_cuda or v.is_pinned():
        return v.data_ptr()
    raise TypeError(
        f"a PyTorch tensor on {v.device} is not GPU-accessible memory; move it with .cuda()"
    )


def _cai_ptr(v: Any) -> int:
    return v.__cuda_array_interface__["data"][0]


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLTensorHead(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_uint32),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("byte_offset", ctypes.c_uint64),
    ]


_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_GetPointer.restype = ctypes.c_void_p
_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_GetName = ctypes.pythonapi.PyCapsule_GetName
_GetName.restype = ctypes.c_char_p
_GetName.argtypes = [ctypes.py_object]
# kDLCUDA, kDLCUDAHost (pinned), kDLCUDAManaged
_DL_GPU_ACCESSIBLE = frozenset({2, 3, 13})


def _dlpack_ptr(v: Any) -> int:
    capsule = v.__dlpack__()
    name = _GetName(capsule)
    if name != b"dltensor":
        raise TypeError(f"__dlpack__() of {type(v).__name__} returned a capsule named {name!r}")
    # DLManagedTensor starts with its DLTensor; the capsule's deleter frees it when dropped.
    head = _DLTensorHead.from_address(_GetPointer(capsule, b"dltensor"))
    if head.device.device_type not in _DL_GPU_ACCESSIBLE:
        raise TypeError(
            f"{type(v).__name__} lives on DLPack device type {head.device.device_type}, "
            "which a kernel cannot access (need CUDA, CUDA host or managed memory)"
        )
    return (head.data or 0) + head.byte_offset


def _is_closed_buffer(value: Any) -> bool:
    return getattr(value, "_ptr", 0) is None or getattr(value, "_closed", False) is True


class _Rule:
    """How one argument type packs: size, alignment, struct format, value expression.

    ``fast`` is the expression a launch tries first; where it differs from ``expr`` (``int``:
    the value as is, a negative one makes ``struct`` fail) a failure falls back to ``expr``.
    ``kind`` (a name of ``_handles._protocol.ARG_KINDS``) and ``getter`` say how the native
    launch path packs the same bytes in C; ``kind=None``: it leaves the type to Python.
    """

    __slots__ = ("align", "ctype", "expr", "fast", "fmt", "getter", "kind", "size")

    def __init__(
        self,
        size: int,
        align: int,
        fmt: str,
        expr: str,
        ctype: str,
        fast: str | None = None,
        kind: str | None = None,
        getter: Any = None,
    ) -> None:
        self.size, self.align, self.fmt, self.expr, self.ctype = size, align, fmt, expr, ctype
        self.fast = expr if fast is None else fast
        self.kind, self.getter = kind, getter


_NP_FORMATS = {
    ("b", 1): ("?", "bool"),
    ("i", 1): ("b", "int8_t"),
    ("i", 2): ("h", "int16_t"),
    ("i", 4): ("i", "int32_t"),
    ("i", 8): ("q", "int64_t"),
    ("u", 1): ("B", "uint8_t"),
    ("u", 2): ("H", "uint16_t"),
    ("u", 4): ("I", "uint32_t"),
    ("u", 8): ("Q", "uint64_t"),
    ("f", 2): ("e", "__half"),
    ("f", 4): ("f", "float"),
    ("f", 8): ("d", "double"),
}
_NP_KINDS = {"b": "bool", "i": "signed", "u": "unsigned", "f": "float"}
_cupy_ptr = operator.attrgetter("data.ptr")
_data_ptr = operator.methodcaller("data_ptr")
_to_bytes = operator.methodcaller("tobytes")


def _slot_getter(cls: type, name: str) -> Any:
    """What reads attribute ``name`` of ``cls``'s instances for the native path: the slot's
    member descriptor itself (C reads it without a name look-up), else an ``attrgetter``."""
    attr = getattr(cls, name, None)
    return attr if isinstance(attr, types.MemberDescriptorType) else operator.attrgetter(name)


_HANDLE_TYPES = (
    driver.CUtexObject,
    driver.CUsurfObject,
    driver.CUgraphConditionalHandle,
    driver.CUdeviceptr,
)
_CTYPES_BASES = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)
_CTYPES_REJECT = (ctypes.c_char_p, ctypes.c_wchar_p, ctypes.c_longdouble)
UNSUPPORTED_LEAD = "the argument is of unsupported type: "  # cuda.core's words, then ours
_SUPPORTED = (
    "bool, int, float, complex, NumPy and ctypes scalars, NumPy structured scalars, "
    "ctypes.Structure, Buffer, objects with __cuda_array_interface__, __dlpack__ or "
    "data_ptr(), and cuda.bindings CUtexObject/CUsurfObject/CUgraphConditionalHandle/CUtensorMap, TensorMapDescriptor, GraphCondition"
)


# Handle types of the wings above (a graph's GraphCondition, ...) that pass as 8-byte kernel
# arguments: each wing registers its own here, so the hall imports no wing.
_REGISTERED: dict[type, tuple[str, str, Any]] = {}


def register_handle_argument(cls: type, expr: str, c_name: str) -> None:
    """Pass instances of ``cls`` (and its subclasses) as 8-byte handles: ``expr`` is the value's
    expression with ``{a}`` standing for the argument, ``c_name`` the C type in messages."""
    getter = eval(f"lambda a: {expr.format(a='a')}", {"__builtins__": {"int": int}})
    _REGISTERED[cls] = (expr, c_name, getter)


def _buffer_type() -> Any:
    return _links.Buffer  # None until the memory wing has loaded


def rule_for(value: Any, index: int = 0) -> _Rule:
    """The packing rule for ``value`` (argument ``index``), or ``TypeError`` if unsupported."""
    t = type(value)
    if t is bool:
        return _Rule(1, 1, "?", "{a}", "bool", kind="bool")
    if issubclass(t, int):
        return _Rule(
            8,
            8,
            "Q",
            "({a} if {a} >= 0 else _neg({a}))",
            "int64_t/uint64_t/pointer",
            "{a}",
            kind="fit",
        )
    if issubclass(t, float):
        return _Rule(8, 8, "d", "{a}", "double", kind="float")
    if issubclass(t, complex):
        return _Rule(16, 8, "dd", "{a}.real, {a}.imag", "complex<double>", kind="complex")
    if issubclass(t, np.generic):
        return _numpy_rule(value, index)
    if issubclass(t, _CTYPES_BASES):
        if issubclass(t, _CTYPES_REJECT):
            raise TypeError(
                f"argument {index} is a {t.__name__}, which has no device equivalent; "
                "pass a device pointer as ctypes.c_void_p or an int"
            )
        n = ctypes.sizeof(t)
        return _Rule(n, ctypes.alignment(t), f"{n}s", "_bytes({a})", t.__name__, kind="bytes")
    if issubclass(t, ctypes._Pointer):
        raise TypeError(
            f"argument {index} is a ctypes pointer to host memory ({t.__name__}); pass a device pointer"
        )
    buffer_type = _buffer_type()
    if buffer_type is not None and issubclass(t, buffer_type):
        if _is_closed_buffer(value):
            raise ValueError(f"Buffer has been closed: argument {index} is a closed Buffer")
        # _ptr: the address, None once closed (the Python path says so); read as the type reads it.
        return _pointer_rule("{a}._ptr", _slot_getter(t, "_ptr"))
    if issubclass(t, _HANDLE_TYPES):
        return _Rule(8, 8, "Q", "int({a})", t.__name__, kind="call_index", getter=int)
    for base in t.__mro__:
        registered = _REGISTERED.get(base)
        if registered is not None:
            expr, c_name, getter = registered
            return _Rule(8, 8, "Q", expr, c_name, kind="call_index", getter=getter)
    if issubclass(t, TensorMapDescriptor):
        return _tensor_map_rule("{a}._bytes", _slot_getter(t, "_bytes"))
    if issubclass(t, driver.CUtensorMap):
        return _tensor_map_rule("_tensor_map_bytes({a})", tensor_map_bytes)
    module = t.__module__ or ""
    if module.startswith("torch") and hasattr(value, "data_ptr"):
        _torch_ptr(value)  # refuse a CPU tensor now, with its message
        return _pointer_rule("_torch_ptr({a})", _torch_ptr)
    if module.startswith("cupy") and hasattr(getattr(value, "data", None), "ptr"):
        return _pointer_rule("{a}.data.ptr", _cupy_ptr)
    if hasattr(value, "__cuda_array_interface__"):
        return _pointer_rule("_cai_ptr({a})", _cai_ptr)
    if callable(getattr(value, "data_ptr", None)):
        return _pointer_rule("{a}.data_ptr()", _data_ptr)
    if hasattr(value, "__dlpack__"):
        _dlpack_ptr(value)  # refuse host memory now, with its message
        return _pointer_rule("_dlpack_ptr({a})", _dlpack_ptr)
    raise TypeError(
        f"{UNSUPPORTED_LEAD}{t}: argument {index} has unsupported type "
        f"{t.__module__}.{t.__qualname__}; supported: {_SUPPORTED}"
    )


def _pointer_rule(expr: str, getter: Any) -> _Rule:
    """A device pointer (8 bytes) that ``expr`` (and ``getter``, for the native path) reads."""
    return _Rule(
        8, 8, "Q", expr, "pointer", kind=None if getter is None else "call_index", getter=getter
    )


def _tensor_map_rule(expr: str, getter: Any) -> _Rule:
    return _Rule(128, 64, "128s", expr, "CUtensorMap", kind="call_bytes", getter=getter)


def _numpy_rule(value: Any, index: int) -> _Rule:
    dt = value.dtype
    key = (dt.kind, dt.itemsize)
    if key in _NP_FORMATS:
        fmt, ctype = _NP_FORMATS[key]
        return _Rule(dt.itemsize, dt.alignment, fmt, "{a}", ctype, kind=_NP_KINDS[dt.kind])
    if dt.kind == "c" and dt.itemsize in (8, 16):
        half = "f" if dt.itemsize == 8 else "d"
        ctype = "complex<float>" if half == "f" else "complex<double>"
        return _Rule(
            dt.itemsize, dt.alignment, half * 2, "{a}.real, {a}.imag", ctype, kind="complex"
        )
    if dt.kind == "V":
        n = dt.itemsize
        if type(value) is np.void:  # structured: one Python type for every dtype
            expr = f"_void_bytes({{a}}, {n})"
            return _Rule(n, dt.alignment, f"{n}s", expr, f"struct ({dt})", kind="bytes")
        # ml_dtypes: bfloat16, ...
        return _Rule(
            n, dt.alignment, f"{n}s", "{a}.tobytes()", str(dt), kind="call_bytes", getter=_to_bytes
        )
    raise TypeError(
        f"argument {index} is a NumPy {type(value).__name__} ({dt}) scalar, which has no fixed-width "
        f"device type; supported: {_SUPPORTED}"
    )


_UINT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}
_CTYPES_INTS = frozenset("bBhHiIlLqQ")


def _resized_int_rule(value: Any, r: _Rule, size: int) -> _Rule | None:
    """The rule for an integer argument whose width differs from its integer parameter's.

    ``cuda.core`` hands the driver a pointer to each argument's own storage, and the driver
    copies the parameter's size from it: a Python ``int`` (8 bytes) for an ``int`` parameter
    arrives as its low 4 bytes, which is the value whenever it fits. We pack the same bytes,
    and refuse a value that does not fit (``OverflowError``, where ``cuda.core`` truncates). A
    narrower integer for a wider parameter (``np.int32`` for ``size_t``) is widened keeping its
    value (``cuda.core`` would pass whatever bytes follow it). ``None`` for anything else.
    """
    fmt = _UINT_FORMATS.get(size)
    t = type(value)
    if fmt is None or t is bool:
        return None
    kind: str | None = "fit"
    if issubclass(t, int):
        expr = f"_fit({{a}}, {size})"
    elif issubclass(t, np.integer):
        expr = f"_fit(int({{a}}), {size})"
    elif issubclass(t, ctypes._SimpleCData) and getattr(t, "_type_", "") in _CTYPES_INTS:
        expr, kind = f"_fit({{a}}.value, {size})", None
    else:
        return None
    return _Rule(size, size, fmt, expr, f"{r.ctype} passed as a {size}-byte integer", kind=kind)


def _size_message(label: str, i: int, size: int, value: Any, r: _Rule) -> str:
    t = type(value)
    msg = (
        f"{label}: parameter {i} is {size} bytes, but argument {i} ({t.__name__}) "
        f"packs to {r.size} bytes ({r.ctype})"
    )
    if t is float or issubclass(t, np.floating):
        fits = {2: "np.float16", 4: "np.float32", 8: "float or np.float64"}
        if size in fits:
            msg += f"; wrap it in a {size}-byte type such as {fits[size]}"
    return msg


class ParamType(NamedTuple):
    """A kernel parameter's type, where the kernel's mangled name or its PTX tells it.

    Attributes
    ----------
    c_type : str
        As messages name it: ``"float*"``, ``"unsigned long"``, ``"float (.f32)"``.
    kind : str
        ``"pointer"``, ``"int"``, ``"float"``, ``"bool"``, ``"word"`` (a PTX ``.u64``: a pointer
        or a 64-bit integer) or ``"other"`` (structs, enums, ...: not checked).
    size : int or None
        Bytes, where known; a type whose size differs from the driver's layout means the
        types were misread, and none of them is used.
    """

    c_type: str
    kind: str
    size: int | None


# What each kind of parameter refuses, by the class of the argument (_arg_class).
_REFUSED = {
    "pointer": frozenset({"float", "complex"}),
    "word": frozenset({"float", "complex"}),
    "int": frozenset({"float", "complex"}),
    "bool": frozenset({"float", "complex"}),
    "float": frozenset({"int", "bool", "pointer", "complex"}),
}
_CTYPES_CLASSES = {"f": "float", "d": "float", "?": "bool", "P": "pointer"}


def _arg_class(value: Any, r: _Rule) -> str:
    """``"int"``, ``"float"``, ``"bool"``, ``"complex"``, ``"pointer"`` or ``"other"``."""
    t = type(value)
    if t is bool or t is np.bool_:
        return "bool"
    if issubclass(t, (int, np.integer)):
        return "int"
    if issubclass(t, (float, np.floating)):
        return "float"
    if issubclass(t, (complex, np.complexfloating)):
        return "complex"
    if issubclass(t, ctypes._SimpleCData):
        code = getattr(t, "_type_", "")
        return "int" if code in _CTYPES_INTS else _CTYPES_CLASSES.get(code, "other")
    if r.ctype == "pointer" or issubclass(t, driver.CUdeviceptr):
        return "pointer"
    return "other"


def _describe(value: Any, cls: str) -> str:
    t = type(value)
    if cls == "pointer":
        return f"a pointer ({t.__name__})"
    if issubclass(t, np.generic):
        shown, what = str(value), f"NumPy {t.__name__}"
    elif issubclass(t, ctypes._SimpleCData):
        shown, what = repr(value.value), f"ctypes {t.__name__}"
    else:  # float, int, bool, complex, or a subclass of one
        shown, what = repr(value), t.__name__
    article = "an" if what[0] in "aeiou" else "a"
    return f"{article} {what} ({shown.strip('()')})"


def _float_example(param: ParamType, value: Any, cls: str) -> str:
    x = int(value) if cls in ("int", "bool") else 2
    if param.size == 8:
        return f"{float(x)!r} or np.float64({x})"
    if param.size == 2:
        return f"np.float16({x})"
    return f"np.float32({x})"


def type_message(label: str, i: int, param: ParamType, value: Any, r: _Rule) -> str | None:
    """Why argument ``i`` (``value``, packed by rule ``r``) cannot be parameter ``i`` of type
    ``param``, or ``None`` where it can (as far as its kind tells)."""
    refused = _REFUSED.get(param.kind)
    if refused is None:
        return None
    cls = _arg_class(value, r)
    if cls not in refused:
        return None
    if param.kind == "pointer":
        remedy = "pass a device pointer (a Buffer, an array or an int address)"
    elif param.kind == "word":
        remedy = "pass a device pointer (a Buffer, an array or an int address) or an integer"
    elif param.kind == "int":
        remedy = "pass an int or a NumPy integer"
    elif param.kind == "bool":
        remedy = "pass a bool"
    else:
        remedy = f"pass a floating-point value such as {_float_example(param, value, cls)}"
    return (
        f"{label}: parameter {i} is {param.c_type} but {_describe(value, cls)} was given; {remedy}"
    )
