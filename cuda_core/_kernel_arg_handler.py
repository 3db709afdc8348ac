"""Kernel arguments: packing plans and :class:`ParamHolder`.

The driver takes kernel arguments as a ``void**``: one pointer per parameter, each pointing to
the parameter's bytes. A *packing plan* is worked out once per kernel and tuple of argument
types: where each value goes in one reusable buffer, the ``struct`` format that writes all of
them in one call, and a generated function that writes the values and launches. A steady loop
therefore pays only for writing the values. How each argument type packs (the type table) is
in :mod:`cuda_core._kernel_arg_rules`.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any, cast

from ._handles._backend import NATIVE, backend
from ._handles._protocol import ARG_KINDS, NativeBackend
from ._kernel_arg_rules import (
    UNSUPPORTED_LEAD,
    ParamType,
    _cai_ptr,
    _dlpack_ptr,
    _fit,
    _is_closed_buffer,
    _neg,
    _resized_int_rule,
    _Rule,
    _size_message,
    _torch_ptr,
    _void_bytes,
    rule_for,
    type_message,
)
from ._kernel_arg_rules import register_handle_argument as register_handle_argument
from ._tensor_map_args import tensor_map_bytes as _tensor_map_bytes

__all__: list[str] = []  # private: launch() and PreparedLaunch are the public entry points

_MAX_PLANS = 1024
_PACK_ERRORS = (struct.error, OverflowError, TypeError, AttributeError, ValueError)


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
        "native",
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
        self.native: Any = None  # the LaunchPlan of the native backend (see bind_launch)
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
                return ValueError(f"Buffer has been closed: argument {i} is a closed Buffer")
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
        self.native = _native_plan(self, func)


def _native_plan(plan: Plan, func: int) -> Any:
    """The native backend's ``LaunchPlan`` of ``plan`` for kernel ``func``: the same bytes, packed
    in C by launch() and PreparedLaunch; ``None`` on the pure backend or where an argument's
    type has no native kind (those launches take the Python path)."""
    if not NATIVE or any(r.kind is None for r in plan.rules):
        return None
    try:
        return cast(NativeBackend, backend).LaunchPlan(
            func,
            plan.types,
            tuple(ARG_KINDS.index(r.kind) for r in plan.rules),  # type: ignore[arg-type]
            plan.offsets,
            tuple(r.size for r in plan.rules),
            tuple(r.getter for r in plan.rules),
            plan.size,
        )
    except (TypeError, ValueError):  # a rule C cannot take: the Python path packs it
        return None


MISS = -1
"""What a plan's ``run`` returns for arguments of other types (no CUresult is negative)."""
_INLINE_CHECKS = 16


def kernel_label(name: str | None) -> str:
    return f"kernel {name!r}" if name else "the kernel"


ParamTypes = tuple[ParamType | None, ...]


def _usable(
    param_types: ParamTypes | None, layout: tuple[tuple[int, int], ...] | None, n: int
) -> ParamTypes | None:
    """``param_types`` where they agree with the argument count and the driver's layout (count
    and every known size), else ``None``: types misread are never used."""
    if param_types is None or len(param_types) != n:
        return None
    if layout is not None:
        for t, (_, size) in zip(param_types, layout):
            if t is not None and t.size is not None and t.size != size:
                return None
    return param_types


def make_plan(
    types: tuple[type, ...],
    args: tuple[Any, ...],
    layout: tuple[tuple[int, int], ...] | None,
    kernel_name: str | None = None,
    param_types: ParamTypes | None = None,
) -> Plan:
    """Work out the packing plan for ``args`` (whose types are ``types``).

    With a ``layout`` (the kernel's ``(offset, size)`` per parameter), the argument count and
    each size are checked, and each value is placed at its parameter's offset; without one,
    values are laid out with C alignment rules. With ``param_types`` (the kernel's parameter
    types, where known: ``Kernel._param_types()``), each argument's kind is checked against
    its parameter's first (a ``float`` for a pointer is refused); a ``None`` entry, or types
    that disagree with the layout, leave the size check alone.

    Raises
    ------
    TypeError
        An unsupported argument type, a wrong argument count, an argument of the wrong kind
        for its parameter's type or a size mismatch; the message names the kernel, the
        parameter index, the expected type or size and what was given.
    """
    label = kernel_label(kernel_name)
    if layout is not None and len(layout) != len(args):
        raise TypeError(
            f"{label} takes {len(layout)} argument{'s' if len(layout) != 1 else ''} "
            f"but {len(args)} {'were' if len(args) != 1 else 'was'} given"
        )
    param_types = _usable(param_types, layout, len(args))
    rules: list[_Rule] = []
    offsets: list[int] = []
    pos = 0
    for i, a in enumerate(args):
        try:
            r = rule_for(a, i)
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            if msg.startswith(UNSUPPORTED_LEAD):  # cuda.core's words stay first
                raise type(exc)(f"{msg} (in {label})") from None
            raise type(exc)(f"{label}: {msg}") from None
        pt = None if param_types is None else param_types[i]
        if pt is not None:
            wrong = type_message(label, i, pt, a, r)
            if wrong is not None:
                raise TypeError(wrong)
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


_plans: dict[tuple[Any, ...], Plan] = {}


def get_plan(
    args: tuple[Any, ...],
    layout: tuple[tuple[int, int], ...] | None = None,
    kernel_name: str | None = None,
    param_types: ParamTypes | None = None,
) -> Plan:
    """A cached :class:`Plan` for ``args``, ``layout`` and ``param_types`` (shared module-wide
    cache)."""
    types = tuple(map(type, args))
    key = (layout, param_types, types)
    plan = _plans.get(key)
    if plan is None:
        plan = make_plan(types, args, layout, kernel_name, param_types)
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
    param_types : tuple of ParamType, optional
        The kernel's parameter types (``Kernel._param_types()``), where known: each
        argument's kind is then checked against its parameter's (a ``float`` for a pointer is
        refused).

    Raises
    ------
    TypeError
        Unsupported argument type, wrong count, wrong kind or wrong size (message names the
        parameter).
    OverflowError
        A value does not fit its C type (e.g. an ``int`` outside the 64-bit range).

    Notes
    -----
    The holder keeps references to ``args`` (so buffers passed by pointer stay alive) and owns
    its buffer; :attr:`ptr` stays valid while the holder lives.
    """

    __slots__ = ("_args", "_layout", "_name", "_plan", "_slot", "_types")

    def __init__(
        self,
        args: tuple[Any, ...],
        layout: tuple[tuple[int, int], ...] | None = None,
        kernel_name: str | None = None,
        *,
        param_types: ParamTypes | None = None,
    ) -> None:
        args = tuple(args)
        self._plan = get_plan(args, layout, kernel_name, param_types)
        self._slot = self._plan.new_slot()
        self._plan.pack(self._slot, args)
        self._args = args
        self._layout = layout
        self._name = kernel_name
        self._types = param_types

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
            self._plan, self._slot, self._args, index, value, self._layout, self._name, self._types
        )


def set_arg(
    plan: Plan,
    slot: tuple[Any, ...],
    args: tuple[Any, ...],
    index: int,
    value: Any,
    layout: tuple[tuple[int, int], ...] | None,
    kernel_name: str | None,
    param_types: ParamTypes | None = None,
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
    new_plan = get_plan(new_args, layout, kernel_name, param_types)
    new_slot = new_plan.new_slot()
    new_plan.pack(new_slot, new_args)
    return new_args, new_plan, new_slot
