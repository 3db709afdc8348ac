"""Plumbing shared by every module: the one error funnel, option checking, lazy driver start.

Every call into ``cuda.bindings`` goes through :func:`handle_return` (or :func:`call`, which
names the API for it). Argument errors are worded ``"<name> must be <rule> (got <value!r>)"``
by :func:`arg_error`.

The submodule :mod:`cuda_core._utils.cuda_utils` offers, at the path code written for
``cuda.core`` imports them from, the helpers of ``cuda.core._utils.cuda_utils``; it builds on
this module and is not used by cuda_core itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import threading
from collections import namedtuple
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar, overload

from cuda.bindings import nvrtc

from .._compat import driver
from .._errors import CUDAError, warn_release_failure

__all__: list[str] = []  # private module

T = TypeVar("T")

_CU_SUCCESS = driver.CUresult.CUDA_SUCCESS
_CUresult = driver.CUresult
_nvrtcResult = nvrtc.nvrtcResult

# Statuses whose usual cause is a missing current context; the error says how to fix it.
_NEEDS_CONTEXT = frozenset(
    {
        int(driver.CUresult.CUDA_ERROR_INVALID_CONTEXT),
        int(driver.CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED),
    }
)
SET_CURRENT_HINT = "no CUDA context is current; perhaps you forgot to call Device.set_current()?"

# Public as cuda_core.ComputeCapability (through _device); defined here, in the base layer, so
# that _utils.cuda_utils offers the same class at the path cuda.core keeps it.
ComputeCapability = namedtuple("ComputeCapability", ["major", "minor"])
ComputeCapability.__doc__ = "A device's compute capability as ``(major, minor)``, e.g. ``(9, 0)``."


def handle_return(result: tuple[Any, ...], api: str = "") -> Any:
    """Check a ``cuda.bindings`` result tuple and return its payload.

    ``result[0]`` is the status; on success the remaining items are returned (``None`` when
    there are none, the item itself when there is one, else a tuple). On failure a
    :class:`CUDAError` is raised whose message is ``"<api>: <ERROR_NAME>: <explanation>"``.
    """
    if result[0]:
        raise_status(result[0], api)
    n = len(result)
    if n == 2:
        return result[1]
    if n == 1:
        return None
    return result[1:]


def call(fn: Callable[..., tuple[Any, ...]], *args: Any) -> Any:
    """Call a ``cuda.bindings`` function and funnel its result through :func:`handle_return`."""
    return handle_return(fn(*args), fn.__name__)


def note_failed_rollback(exc: BaseException, result: tuple[Any, ...] | None, api: str) -> None:
    """A rollback ``api`` ran while ``exc`` propagates: where its ``cuda.bindings`` result says
    it failed, say so in a note on ``exc`` (the original error stays the one raised)."""
    if result is not None and result[0]:
        exc.add_note(f"(and undoing the work done so far failed: {make_error(result[0], api)})")


def check_cleanup(result: tuple[Any, ...], api: str, what: str, handle: Any) -> None:
    """A cleanup ``api`` that must not raise (its caller's outcome is already decided): a
    failure is a :class:`~cuda_core.CUDAWarning` naming it, the handle and the error."""
    if result[0]:
        warn_release_failure(what, handle, make_error(result[0], api), api)


def raise_status(status: Any, api: str, extra: str = "") -> None:
    """Raise the :class:`CUDAError` for a failed status code (never returns)."""
    raise make_error(status, api, extra)


def make_error(status: Any, api: str, extra: str = "") -> CUDAError:
    """Build the :class:`CUDAError` for a status code of any CUDA library."""
    code = int(status)
    if isinstance(status, _nvrtcResult):
        name = status.name
        explanation = ""
    else:
        try:
            status = _CUresult(code)
            name = status.name
        except ValueError:
            name = f"CUDA_ERROR_UNKNOWN_{code}"
        explanation = _driver_error_string(status)
        if code in _NEEDS_CONTEXT:
            explanation = f"{explanation} ({SET_CURRENT_HINT})" if explanation else SET_CURRENT_HINT
    if extra:
        explanation = f"{explanation}; {extra}" if explanation else extra
    return CUDAError(api, name, explanation, code)


def _driver_error_string(status: Any) -> str:
    try:
        err, text = driver.cuGetErrorString(status)
    except Exception:  # no driver loaded: describe by name only
        return ""
    if err != _CU_SUCCESS or text is None:
        return ""
    return text.decode() if isinstance(text, bytes) else str(text)


# ---------------------------------------------------------------------------------------------
# Argument checking.


class TypeValueError(TypeError, ValueError):
    """A wrong argument we report as a TypeError where cuda.core raises ValueError (or the
    reverse): it is both, so code catching either class written for cuda.core still works."""


class ValueOverflowError(ValueError, OverflowError):
    """A negative size: a ValueError here, an OverflowError in cuda.core (which converts to size_t)."""


class ValueRuntimeError(ValueError, RuntimeError):
    """A bad value that cuda.core reports as RuntimeError."""


class BufferAttributeError(BufferError, AttributeError):
    """An object without the array protocol asked for: a BufferError, as every protocol failure
    here, and the AttributeError cuda.core raises when it reads the missing attribute."""


class BufferValueError(BufferError, ValueError):
    """A malformed array description we refuse when the view is made (a BufferError, as every
    protocol failure here) that cuda.core reports as ValueError when the layout is first read."""


def arg_error(
    name: str,
    rule: str,
    value: Any,
    hint: str = "",
    exc: type[Exception] = ValueError,
    *,
    lead: str = "",
) -> Exception:
    """Build the house-style argument error ``"<name> must be <rule> (got <value!r>)"``.

    ``lead`` is ``cuda.core``'s wording for the same refusal, put first (``"<lead>: <name> must
    be ..."``; after a lead that ends a sentence, a space) so that code matching the start of
    ``cuda.core``'s message keeps working.
    """
    msg = f"{name} must be {rule} (got {value!r})"
    if hint:
        msg += f"; {hint}"
    if lead:
        msg = f"{lead} {msg}" if lead.endswith(".") else f"{lead}: {msg}"
    return exc(msg)


def ordinal_lead(ordinal: int, count: int) -> str:
    """``cuda.core``'s words for a device ordinal out of range (``Device(-1)``)."""
    if ordinal < 0:
        return f"device_id must be >= 0, got {ordinal}"
    return f"device_id must be within [0, {count}), got {ordinal}"


def as_flag(value: Any) -> bool | None:
    """An optional on/off option read as ``cuda.core`` reads it: ``None`` stays ``None`` (unset),
    anything else by its truth value (``1``, ``numpy.True_`` -> ``True``)."""
    return None if value is None else bool(value)


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """Check that *value* is an integer (not a bool) within the given bounds and return it."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        rule = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise arg_error(name, rule, value, exc=TypeError)
    v = value.__index__()
    if minimum is not None and v < minimum:
        raise arg_error(name, f"an integer >= {minimum}", value)
    if maximum is not None and v > maximum:
        raise arg_error(name, f"an integer <= {maximum}", value)
    return v


def unknown_field_error(cls: type, names: Iterable[str], where: str = "") -> TypeError:
    """A ``TypeError`` naming the unknown field(s) of options class *cls*, with close matches.

    ``where`` names a dict the names came from (``"options"``); empty for keyword arguments.
    The fields are not listed: a close match ("did you mean 'use_fast_math'?") helps more.
    """
    fields = [f.name for f in dataclasses.fields(cls)]
    parts = []
    for name in names:
        close = difflib.get_close_matches(str(name), fields, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        parts.append(f"{name!r}{hint}")
    what = f"unknown {cls.__name__} field{'s' if len(parts) > 1 else ''} {', '.join(parts)}"
    head = f"{where} has {what}" if where else f"{cls.__name__}() got {what}"
    return TypeError(f"{head}; help({cls.__name__}) lists the fields")


def suggest_fields(cls: type[T]) -> type[T]:
    """Class decorator for an options dataclass: an unknown keyword names the close matches.

    ``ProgramOptions(fast_math=True)`` then raises ``TypeError: ProgramOptions got unknown
    keyword argument 'fast_math' (did you mean 'use_fast_math'?)`` instead of the bare message
    of the generated ``__init__``. The check is one set difference per construction.
    """
    init = cls.__init__
    known = frozenset(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs and not known.issuperset(kwargs):
            raise unknown_field_error(cls, sorted(set(kwargs) - known)) from None
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]
    return cls


def options_repr(obj: Any) -> str:
    """``Cls(field=value, ...)`` for the fields of dataclass *obj* that differ from their default."""
    parts = []
    for f in dataclasses.fields(obj):
        if not f.repr:
            continue
        value = getattr(obj, f.name)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            parts.append(f"{f.name}={value!r}")
            continue
        if value is not default and value != default:
            parts.append(f"{f.name}={value!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"


@overload
def check_or_create_options(
    cls: type[T], options: Any, options_description: str = ..., keep_none: Literal[False] = ...
) -> T: ...
@overload
def check_or_create_options(
    cls: type[T], options: Any, options_description: str = ..., keep_none: bool = ...
) -> T | None: ...
def check_or_create_options(
    cls: type[T], options: Any, options_description: str = "", keep_none: bool = False
) -> T | None:
    """Accept ``None``, a dict or an instance of the options dataclass *cls*; return an instance.

    ``None`` gives the defaults (or stays ``None`` with ``keep_none``). An unknown dict key
    raises ``TypeError`` naming it and its close matches among the fields; any other type
    raises the ``TypeError`` ``cuda.core`` raises, which names *options_description* (the
    signature is ``cuda.core``'s too).
    """
    what = options_description or "options"
    if options is None:
        return None if keep_none else cls()
    if isinstance(options, cls):
        return options
    if isinstance(options, dict):
        if dataclasses.is_dataclass(cls):
            known = {f.name for f in dataclasses.fields(cls)}
            known.update(getattr(cls, "_renamed_fields", ()))  # old names (_utils._renamed)
            unknown = sorted(set(options) - known, key=str)
            if unknown:
                raise unknown_field_error(cls, unknown, f"the {what} dict")
        return cls(**options)
    raise TypeError(
        f"The {what} must be provided as an object of type {cls.__name__} or as a dict with "
        f"valid {what}. The provided object is '{options}'."
    )


def cast_to_3_tuple(label: str, cfg: Any, *, strict: bool = True) -> tuple[int, int, int]:
    """Turn an int or a tuple of up to three ints (each >= 1) into a 3-tuple padded with 1.

    The messages begin as ``cuda.core``'s (``"<label> must be an int, or a tuple with up to 3
    ints (got ...)"``, ``"<label> value(s) must be >= 1 (got ...)"``). ``strict`` (cuda_core's
    own use) refuses a ``bool``, which ``cuda.core`` takes as an int, raises a value of the wrong
    type as a :class:`TypeValueError` (cuda.core: ``ValueError``) and adds the rule and the value
    to the message; without it (``_utils.cuda_utils``, for code outside cuda_core) this behaves
    exactly as ``cuda.core``'s helper.
    """

    def refuse(lead: str, exc: type[Exception]) -> Exception:
        if not strict:
            return ValueError(lead)
        return exc(
            f"{lead}; {label} takes an int or a tuple of 1 to 3 ints, each >= 1 (got {cfg!r})"
        )

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not (strict and isinstance(v, bool))

    shape = f"{label} must be an int, or a tuple with up to 3 ints"
    if isinstance(cfg, tuple):
        if len(cfg) > 3:
            raise refuse(f"{shape} (got tuple with length {len(cfg)})", TypeValueError)
        if not all(is_int(v) for v in cfg):
            raise refuse(f"{shape} (got {cfg})", TypeValueError)
        if any(v < 1 for v in cfg):
            word = "value" if len(cfg) == 1 else "values"
            raise refuse(f"{label} {word} must be >= 1 (got {cfg})", ValueError)
        items = tuple(int(v) for v in cfg) if strict else cfg
    elif is_int(cfg):
        if cfg < 1:
            raise refuse(f"{label} value must be >= 1 (got {cfg})", ValueError)
        items = (cfg,)
    else:
        raise refuse(f"{shape} (got {type(cfg)})", TypeValueError)
    out = (*items, 1, 1, 1)
    return (out[0], out[1], out[2])


def nvrtc_version() -> tuple[int, int]:
    """The (major, minor) version of the NVRTC library in use."""
    return tuple(handle_return(nvrtc.nvrtcVersion(), "nvrtcVersion"))  # type: ignore[return-value]


def run_once(fn: Callable[[], T]) -> Callable[[], T]:
    """Decorate a zero-argument function so that it runs once; later calls return its result."""
    lock = threading.Lock()
    box: list[T] = []

    def wrapper() -> T:
        if box:
            return box[0]
        with lock:
            if not box:
                box.append(fn())
        return box[0]

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper
