"""Kernel arguments: the Python type -> C type table, packing plans and :class:`ParamHolder`.

The driver takes kernel arguments as a ``void**``: one pointer per parameter, each pointing to
the parameter's bytes. A *packing plan* is worked out once per kernel and tuple of argument
types: where each value goes in one reusable buffer, the ``struct`` format that writes all of
them in one call, and a generated function that writes the values and launches. A steady loop
therefore pays only for writing the values.

Type table (see ``docs/launching.rst``): ``bool`` -> ``bool`` (1 byte), ``int`` -> 64-bit
pointer-sized integer (at the parameter's width for an integer parameter of another width,
where the layout is known, as cuda.core's launches deliver it), ``float`` -> ``double``, ``complex`` -> ``complex<double>``; NumPy and
ctypes scalars keep their exact width; NumPy structured scalars and ``ctypes.Structure`` pass
by value with their own layout; ``Buffer``, ``ctypes.c_void_p``, ``__cuda_array_interface__``,
DLPack and ``.data_ptr()`` objects pass a device pointer; ``cuda.bindings`` ``CUtexObject``,
``CUsurfObject``, ``CUgraphConditionalHandle`` and ``CUdeviceptr`` pass their 8-byte value and
``CUtensorMap`` and :class:`TensorMapDescriptor` their 128 bytes (64-byte aligned); a graph ``GraphCondition`` passes its 8-byte
``cudaGraphConditionalHandle``.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any

import numpy as np

from . import _links
from ._compat import driver
from ._handles._backend import backend
from ._tensor_map import TensorMapDescriptor
from ._tensor_map import tensor_map_bytes as _tensor_map_bytes

__all__: list[str] = []  # private: launch() and PreparedLaunch are the public entry points

_U64 = 1 << 64
_I64_MIN = -(1 << 63)
_MAX_PLANS = 1024
_PACK_ERRORS = (struct.error, OverflowError, TypeError, AttributeError, ValueError)


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
    """

    __slots__ = ("align", "ctype", "expr", "fast", "fmt", "size")

    def __init__(
        self, size: int, align: int, fmt: str, expr: str, ctype: str, fast: str | None = None
    ) -> None:
        self.size, self.align, self.fmt, self.expr, self.ctype = size, align, fmt, expr, ctype
        self.fast = expr if fast is None else fast


_PTR = _Rule(8, 8, "Q", "{a}", "pointer")
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
_HANDLE_TYPES = (
    driver.CUtexObject,
    driver.CUsurfObject,
    driver.CUgraphConditionalHandle,
    driver.CUdeviceptr,
)
_CTYPES_BASES = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array)
_CTYPES_REJECT = (ctypes.c_char_p, ctypes.c_wchar_p, ctypes.c_longdouble)
_SUPPORTED = (
    "bool, int, float, complex, NumPy and ctypes scalars, NumPy structured scalars, "
    "ctypes.Structure, Buffer, objects with __cuda_array_interface__, __dlpack__ or "
    "data_ptr(), and cuda.bindings CUtexObject/CUsurfObject/CUgraphConditionalHandle/CUtensorMap, TensorMapDescriptor, GraphCondition"
)


# Handle types of the wings above (a graph's GraphCondition, ...) that pass as 8-byte kernel
# arguments: each wing registers its own here, so the hall imports no wing.
_REGISTERED: dict[type, tuple[str, str]] = {}


def register_handle_argument(cls: type, expr: str, c_name: str) -> None:
    """Pass instances of ``cls`` (and its subclasses) as 8-byte handles: ``expr`` is the value's
    expression with ``{a}`` standing for the argument, ``c_name`` the C type in messages."""
    _REGISTERED[cls] = (expr, c_name)


def _buffer_type() -> Any:
    return _links.Buffer  # None until the memory wing has loaded


def rule_for(value: Any, index: int = 0) -> _Rule:
    """The packing rule for ``value`` (argument ``index``), or ``TypeError`` if unsupported."""
    t = type(value)
    if t is bool:
        return _Rule(1, 1, "?", "{a}", "bool")
    if issubclass(t, int):
        return _Rule(
            8, 8, "Q", "({a} if {a} >= 0 else _neg({a}))", "int64_t/uint64_t/pointer", "{a}"
        )
    if issubclass(t, float):
        return _Rule(8, 8, "d", "{a}", "double")
    if issubclass(t, complex):
        return _Rule(16, 8, "dd", "{a}.real, {a}.imag", "complex<double>")
    if issubclass(t, np.generic):
        return _numpy_rule(value, index)
    if issubclass(t, _CTYPES_BASES):
        if issubclass(t, _CTYPES_REJECT):
            raise TypeError(
                f"argument {index} is a {t.__name__}, which has no device equivalent; "
                "pass a device pointer as ctypes.c_void_p or an int"
            )
        return _Rule(
            ctypes.sizeof(t), ctypes.alignment(t), f"{ctypes.sizeof(t)}s", "_bytes({a})", t.__name__
        )
    if issubclass(t, ctypes._Pointer):
        raise TypeError(
            f"argument {index} is a ctypes pointer to host memory ({t.__name__}); pass a device pointer"
        )
    buffer_type = _buffer_type()
    if buffer_type is not None and issubclass(t, buffer_type):
        if _is_closed_buffer(value):
            raise ValueError(f"argument {index} is a closed Buffer")
        return _Rule(8, 8, "Q", "{a}._ptr", "pointer")
    if issubclass(t, _HANDLE_TYPES):
        return _Rule(8, 8, "Q", "int({a})", t.__name__)
    for base in t.__mro__:
        registered = _REGISTERED.get(base)
        if registered is not None:
            return _Rule(8, 8, "Q", registered[0], registered[1])
    if issubclass(t, TensorMapDescriptor):
        return _Rule(128, 64, "128s", "{a}._bytes", "CUtensorMap")
    if issubclass(t, driver.CUtensorMap):
        return _Rule(128, 64, "128s", "_tensor_map_bytes({a})", "CUtensorMap")
    module = t.__module__ or ""
    if module.startswith("torch") and hasattr(value, "data_ptr"):
        _torch_ptr(value)  # refuse a CPU tensor now, with its message
        return _Rule(8, 8, "Q", "_torch_ptr({a})", "pointer")
    if module.startswith("cupy") and hasattr(getattr(value, "data", None), "ptr"):
        return _Rule(8, 8, "Q", "{a}.data.ptr", "pointer")
    if hasattr(value, "__cuda_array_interface__"):
        return _Rule(8, 8, "Q", "_cai_ptr({a})", "pointer")
    if callable(getattr(value, "data_ptr", None)):
        return _Rule(8, 8, "Q", "{a}.data_ptr()", "pointer")
    if hasattr(value, "__dlpack__"):
        _dlpack_ptr(value)  # refuse host memory now, with its message
        return _Rule(8, 8, "Q", "_dlpack_ptr({a})", "pointer")
    raise TypeError(
        f"argument {index} has unsupported type {t.__module__}.{t.__qualname__}; supported: {_SUPPORTED}"
    )


def _numpy_rule(value: Any, index: int) -> _Rule:
    dt = value.dtype
    key = (dt.kind, dt.itemsize)
    if key in _NP_FORMATS:
        fmt, ctype = _NP_FORMATS[key]
        return _Rule(dt.itemsize, dt.alignment, fmt, "{a}", ctype)
    if dt.kind == "c" and dt.itemsize in (8, 16):
        half = "f" if dt.itemsize == 8 else "d"
        ctype = "complex<float>" if half == "f" else "complex<double>"
        return _Rule(dt.itemsize, dt.alignment, half * 2, "{a}.real, {a}.imag", ctype)
    if dt.kind == "V":
        n = dt.itemsize
        if type(value) is np.void:  # structured: one Python type for every dtype
            return _Rule(n, dt.alignment, f"{n}s", f"_void_bytes({{a}}, {n})", f"struct ({dt})")
        return _Rule(n, dt.alignment, f"{n}s", "{a}.tobytes()", str(dt))  # ml_dtypes: bfloat16, ...
    raise TypeError(
        f"argument {index} is a NumPy {type(value).__name__} ({dt}) scalar, which has no fixed-width "
        f"device type; supported: {_SUPPORTED}"
    )


class Plan:
    """How one tuple of argument types packs for one parameter layout.

    ``pack(slot, args)`` fills a slot (see :meth:`new_slot`). For launches, :meth:`bind_launch`
    adds ``run(cfg, args)``: it packs ``args`` into a pooled slot and calls the driver's
    ``cuLaunchKernelEx`` for one kernel, returning the status (``0``: success).
    """

    __slots__ = (
        "_free",
        "fmt",
        "has_slow",
        "nargs",
        "offsets",
        "pack_all",
        "rules",
        "run",
        "setters",
        "size",
        "struct",
        "types",
    )

    def __init__(
        self, types: tuple[type, ...], rules: list[_Rule], offsets: list[int], size: int
    ) -> None:
        self.types = types
        self.rules = tuple(rules)
        self.offsets = tuple(offsets)
        self.nargs = len(rules)
        self.size = size
        fmt, pos = ["<"], 0
        for r, off in zip(rules, offsets):
            if off > pos:
                fmt.append(f"{off - pos}x")
            fmt.append(r.fmt)
            pos = off + r.size
        self.fmt = "".join(fmt)
        if struct.calcsize(self.fmt) != pos:  # an internal consistency check, never a user error
            raise AssertionError(
                f"packing format {self.fmt!r} is {struct.calcsize(self.fmt)} bytes, not {pos}"
            )
        # Native mode packs the same bytes faster (a copy, not a portable encoding) where the host
        # is little-endian and its alignment rules add no padding to the layout (same size).
        native = "@" + self.fmt[1:]
        same = sys.byteorder == "little" and struct.calcsize(native) == pos
        self.struct = struct.Struct(native if same else self.fmt)
        self.has_slow = any(r.fast != r.expr for r in self.rules)
        self._free: list[tuple[Any, ...]] = []
        self.run: Any = None
        self.setters, self.pack_all = self._generate_packers()

    def new_slot(self) -> tuple[Any, int, Any, Any, int]:
        """A fresh buffer: (writable view of the packed bytes, void** address, storage, pointer
        array, address of the packed bytes). The bytes start 64-byte aligned (CUtensorMap)."""
        raw = ctypes.create_string_buffer(self.size + 64)
        base = ctypes.addressof(raw)
        start = (base + 63) & ~63
        view = memoryview(raw).cast("B")[start - base : start - base + self.size]
        ptrs = (ctypes.c_void_p * max(self.nargs, 1))(*[start + o for o in self.offsets])
        addr = ctypes.addressof(ptrs) if self.nargs else 0
        return (view, addr, raw, ptrs, start)

    def pack(self, slot: tuple[Any, ...], args: tuple[Any, ...]) -> None:
        """Write ``args`` into ``slot``; raises ``OverflowError``/``TypeError``/``ValueError``
        naming the argument."""
        try:
            self.pack_all(slot[0], *args)
        except _PACK_ERRORS as exc:
            raise self.explain(args, exc) from None

    def explain(self, args: tuple[Any, ...], exc: BaseException) -> Exception:
        """The user-facing error for a failed pack: find the argument that failed."""
        scratch = memoryview(bytearray(self.size))
        for i, a in enumerate(args):
            if i < self.nargs and self.rules[i].expr == "{a}._ptr" and _is_closed_buffer(a):
                return ValueError(f"argument {i} is a closed Buffer")
            try:
                self.setters[i](scratch, a)
            except struct.error:
                return OverflowError(
                    f"argument {i} ({type(a).__name__} {a!r}) does not fit the {self.rules[i].size}-byte "
                    f"{self.rules[i].ctype} it packs to"
                )
            except Exception as inner:
                if isinstance(inner, (OverflowError, TypeError, ValueError)):
                    return type(inner)(f"argument {i}: {inner}")
                return TypeError(f"argument {i} ({type(a).__name__}) could not be packed: {inner}")
        # Every argument packs on its own: the failure was not an argument's; report it as is.
        return (
            exc
            if isinstance(exc, Exception)
            else TypeError(f"kernel arguments could not be packed: {exc}")
        )

    def _namespace(self) -> dict[str, Any]:
        return {
            "_neg": _neg,
            "_fit": _fit,
            "_bytes": bytes,
            "_void_bytes": _void_bytes,
            "_tensor_map_bytes": _tensor_map_bytes,
            "_torch_ptr": _torch_ptr,
            "_cai_ptr": _cai_ptr,
            "_dlpack_ptr": _dlpack_ptr,
            "_pack_into": self.struct.pack_into,
            "_struct_error": struct.error,
        }

    def _generate_packers(self) -> tuple[tuple[Any, ...], Any]:
        names = [f"a{i}" for i in range(self.nargs)]
        ns = self._namespace()
        params = "".join(f", {n}" for n in names)
        exprs = "".join(f", {r.expr.format(a=n)}" for r, n in zip(self.rules, names))
        src = [f"def pack_all(_v{params}):\n    _pack_into(_v, 0{exprs})\n"]
        for i, (r, off) in enumerate(zip(self.rules, self.offsets)):
            ns[f"_s{i}"] = struct.Struct("<" + r.fmt).pack_into
            src.append(f"def set{i}(_v, a):\n    _s{i}(_v, {off}, {r.expr.format(a='a')})\n")
        exec(compile("\n".join(src), f"<cuda_core packing plan {self.fmt}>", "exec"), ns)
        return tuple(ns[f"set{i}"] for i in range(self.nargs)), ns["pack_all"]

    def bind_launch(self, func: int) -> None:
        """Generate ``self.run(cfg, args) -> status`` for launching kernel ``func`` (the
        ``CUfunction`` address) with a ``LaunchConfigHandle`` ``cfg``.

        ``run`` first checks that ``args`` has this plan's types and returns :data:`MISS`
        (``-1``, no driver status) when not, so a caller can try a plan without looking it up.
        Every value is then written with one ``struct.pack_into`` into a slot taken from a pool
        (threads launching the same plan at once never share a buffer) and ``cfg.launch(func,
        params)`` is called; the driver copies the parameters during the call, so the slot is
        reusable as soon as it returns.
        """
        n = self.nargs
        ns = self._namespace()
        ns.update(
            _func=func,
            _pop=self._free.pop,
            _push=self._free.append,
            _new_slot=self.new_slot,
            _pack_all=self.pack_all,
            _type_list=list(self.types),
            _map=map,
            _type=type,
            _list=list,
        )
        lines = ["def run(_cfg, _args):"]
        if not n:
            lines += [
                "    if _args:",
                f"        return {MISS}",
                "    return _cfg.launch(_func, 0)",
                "",
            ]
        else:
            names = [f"a{i}" for i in range(n)]
            if n <= _INLINE_CHECKS:
                # Unpack and compare each type: cheaper than building the tuple of types.
                for i, t in enumerate(self.types):
                    ns[f"_t{i}"] = t
                checks = " or ".join(f"_type({a}) is not _t{i}" for i, a in enumerate(names))
                lines += [
                    "    try:",
                    f"        {', '.join(names)}, = _args",
                    "    except ValueError:",
                    f"        return {MISS}",
                    f"    if {checks}:",
                    f"        return {MISS}",
                ]
                values = ", ".join(r.fast.format(a=a) for r, a in zip(self.rules, names))
            else:
                ns.update(_types_match=backend.types_match, _types=self.types)
                lines += ["    if not _types_match(_args, _types):", f"        return {MISS}"]
                fast = [r.fast.format(a=a) for r, a in zip(self.rules, names)]
                if fast == names:
                    values = "*_args"
                else:
                    lines.append(f"    {', '.join(names)}, = _args")
                    values = ", ".join(fast)
            lines += [
                "    try:",
                "        _s = _pop()",
                "    except IndexError:",
                "        _s = _new_slot()",
            ]
            if self.has_slow:
                lines += [
                    "    try:",
                    f"        _pack_into(_s[0], 0, {values})",
                    "    except _struct_error:",
                    "        _pack_all(_s[0], *_args)",
                ]
            else:
                lines.append(f"    _pack_into(_s[0], 0, {values})")
            lines += ["    _r = _cfg.launch(_func, _s[1])", "    _push(_s)", "    return _r", ""]
        exec(compile("\n".join(lines), f"<cuda_core launch plan {self.fmt}>", "exec"), ns)
        self.run = ns["run"]


MISS = -1
"""What a plan's ``run`` returns for arguments of other types (no CUresult is negative)."""
_INLINE_CHECKS = 16


def kernel_label(name: str | None) -> str:
    return f"kernel {name!r}" if name else "the kernel"


def make_plan(
    types: tuple[type, ...],
    args: tuple[Any, ...],
    layout: tuple[tuple[int, int], ...] | None,
    kernel_name: str | None = None,
) -> Plan:
    """Work out the packing plan for ``args`` (whose types are ``types``).

    With a ``layout`` (the kernel's ``(offset, size)`` per parameter), the argument count and
    each size are checked, and each value is placed at its parameter's offset; without one,
    values are laid out with C alignment rules.

    Raises
    ------
    TypeError
        An unsupported argument type, a wrong argument count or a size mismatch; the message
        names the kernel, the parameter index, the expected size and what was given.
    """
    label = kernel_label(kernel_name)
    if layout is not None and len(layout) != len(args):
        raise TypeError(
            f"{label} takes {len(layout)} argument{'s' if len(layout) != 1 else ''} "
            f"but {len(args)} {'were' if len(args) != 1 else 'was'} given"
        )
    rules: list[_Rule] = []
    offsets: list[int] = []
    pos = 0
    for i, a in enumerate(args):
        try:
            r = rule_for(a, i)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{label}: {exc}") from None
        if layout is not None:
            off, size = layout[i]
            if r.size != size:
                resized = _resized_int_rule(a, r, size)
                if resized is None:
                    raise TypeError(_size_message(label, i, size, a, r))
                r = resized
            if off < pos:
                raise TypeError(
                    f"{label}: parameter {i} at offset {off} overlaps parameter {i - 1}"
                )
        else:
            off = (pos + r.align - 1) // r.align * r.align
        rules.append(r)
        offsets.append(off)
        pos = off + r.size
    return Plan(types, rules, offsets, pos)


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
    if issubclass(t, int):
        expr = f"_fit({{a}}, {size})"
    elif issubclass(t, np.integer):
        expr = f"_fit(int({{a}}), {size})"
    elif issubclass(t, ctypes._SimpleCData) and getattr(t, "_type_", "") in _CTYPES_INTS:
        expr = f"_fit({{a}}.value, {size})"
    else:
        return None
    return _Rule(size, size, fmt, expr, f"{r.ctype} passed as a {size}-byte integer")


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


_plans: dict[tuple[Any, ...], Plan] = {}


def get_plan(
    args: tuple[Any, ...],
    layout: tuple[tuple[int, int], ...] | None = None,
    kernel_name: str | None = None,
) -> Plan:
    """A cached :class:`Plan` for ``args`` and ``layout`` (shared module-wide cache)."""
    types = tuple(map(type, args))
    key = (layout, types)
    plan = _plans.get(key)
    if plan is None:
        plan = make_plan(types, args, layout, kernel_name)
        if len(_plans) >= _MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    return plan


class ParamHolder:
    """Kernel arguments packed into the ``void**`` the driver takes.

    Parameters
    ----------
    args : tuple
        The kernel arguments (see the type table in the module docstring).
    layout : tuple of (offset, size), optional
        The kernel's parameter layout (``Kernel._param_layout()``); when given, the count and
        each size are checked and each value is placed at its parameter's offset.
    kernel_name : str, optional
        Used in error messages.

    Raises
    ------
    TypeError
        Unsupported argument type, wrong count or wrong size (message names the parameter).
    OverflowError
        A value does not fit its C type (e.g. an ``int`` outside the 64-bit range).

    Notes
    -----
    The holder keeps references to ``args`` (so buffers passed by pointer stay alive) and owns
    its buffer; :attr:`ptr` stays valid while the holder lives.
    """

    __slots__ = ("_args", "_layout", "_name", "_plan", "_slot")

    def __init__(
        self,
        args: tuple[Any, ...],
        layout: tuple[tuple[int, int], ...] | None = None,
        kernel_name: str | None = None,
    ) -> None:
        args = tuple(args)
        self._plan = get_plan(args, layout, kernel_name)
        self._slot = self._plan.new_slot()
        self._plan.pack(self._slot, args)
        self._args = args
        self._layout = layout
        self._name = kernel_name

    @property
    def ptr(self) -> int:
        """Address of the ``void*`` array (0 when there are no arguments)."""
        return self._slot[1]

    @property
    def data(self) -> bytes:
        """The packed parameter bytes (each value at its offset, padding zero)."""
        return self._slot[0].tobytes()

    @property
    def offsets(self) -> tuple[int, ...]:
        """Offset of each argument in :attr:`data`."""
        return self._plan.offsets

    @property
    def sizes(self) -> tuple[int, ...]:
        """Size in bytes of each packed argument."""
        return tuple(r.size for r in self._plan.rules)

    @property
    def args(self) -> tuple[Any, ...]:
        """The arguments as given."""
        return self._args

    def pointers(self) -> tuple[int, ...]:
        """The addresses held in the ``void*`` array, one per argument."""
        n = self._plan.nargs
        if not n:
            return ()
        arr = (ctypes.c_void_p * n).from_address(self._slot[1])
        return tuple(p or 0 for p in arr)

    def set_arg(self, index: int, value: Any) -> None:
        """Replace argument ``index`` in place (re-planning if its type changes).

        Raises
        ------
        IndexError
            ``index`` is out of range.
        TypeError, OverflowError
            As for the constructor.
        """
        self._args, self._plan, self._slot = set_arg(
            self._plan, self._slot, self._args, index, value, self._layout, self._name
        )


def set_arg(
    plan: Plan,
    slot: tuple[Any, ...],
    args: tuple[Any, ...],
    index: int,
    value: Any,
    layout: tuple[tuple[int, int], ...] | None,
    kernel_name: str | None,
) -> tuple[tuple[Any, ...], Plan, tuple[Any, ...]]:
    """Shared by ``ParamHolder`` and ``PreparedLaunch``: update one argument, return new state."""
    n = plan.nargs
    if isinstance(index, bool) or not isinstance(index, int) or not -n <= index < n:
        raise IndexError(f"index must be an int in [{-n}, {n}) (got {index!r})")
    if index < 0:
        index += n
    new_args = (*args[:index], value, *args[index + 1 :])
    if type(value) is plan.types[index]:
        try:
            plan.setters[index](slot[0], value)
        except _PACK_ERRORS as exc:
            raise plan.explain(new_args, exc) from None
        return new_args, plan, slot
    new_plan = get_plan(new_args, layout, kernel_name)
    new_slot = new_plan.new_slot()
    new_plan.pack(new_slot, new_args)
    return new_args, new_plan, new_slot
