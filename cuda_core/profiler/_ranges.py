"""Named ranges and marks on a profiler's timeline, through NVTX (NVIDIA's ``nvtx`` package).

Whether they are recorded is decided once per process, at the first range or mark, and then per
domain:

1. ``CUDA_CORE_NVTX=0`` (or ``false``, ``off``, ``no``): off, silently; ``nvtx`` is not imported.
2. ``nvtx`` missing (or older than 0.2.12): off, with one ``UserWarning`` naming the extra.
3. ``nvtx.enabled()`` false (its ``NVTX_DISABLE`` variable is set): off, silently.
4. For each domain, ``nvtx.get_domain(name)`` is an ``nvtx.Domain`` only where a tool (Nsight
   Systems, Nsight Compute) is attached; NVTX looks for one at its first call in the process and
   never again, so a domain found off stays off.

Off costs next to nothing: :func:`range` returns one shared :class:`Range` whose ``__enter__``
and ``__exit__`` do nothing, a decorated function is returned as it is (no wrapper), and
:func:`mark` returns after its look-up. On, a range is an ``nvtxDomainRangePushEx`` on entry
and an ``nvtxDomainRangePop`` on exit, with the event attributes (the registered name, the
colour) built once per name and kept.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .._utils import arg_error

__all__ = ["Range", "mark", "range"]

F = TypeVar("F", bound=Callable[..., Any])

NVTX_EXTRA = 'pip install "cudacore[nvtx]"'
_OFF_VALUES = frozenset({"0", "false", "off", "no"})
_CACHE_LIMIT = 4096  # names kept with their attributes; further ones are rebuilt at each call
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

# Colour names (as nvtx and matplotlib name them), opaque 0xAARRGGBB.
COLORS = {
    name: 0xFF000000 | rgb
    for name, rgb in (
        ("black", 0x000000),
        ("blue", 0x0000FF),
        ("cyan", 0x00FFFF),
        ("darkgreen", 0x006400),
        ("gray", 0x808080),
        ("green", 0x008000),
        ("grey", 0x808080),
        ("magenta", 0xFF00FF),
        ("orange", 0xFFA500),
        ("purple", 0x800080),
        ("red", 0xFF0000),
        ("white", 0xFFFFFF),
        ("yellow", 0xFFFF00),
    )
}
_HEX = re.compile(r"#([0-9a-fA-F]{6}|[0-9a-fA-F]{8})")
_COLOR_RULE = "a colour name, '#RRGGBB', '#AARRGGBB' or an int 0xRRGGBB or 0xAARRGGBB"


class Range:
    """A named range on the profiler's timeline: a context manager and a decorator.

    Made by :func:`range` (direct construction raises ``TypeError``). Entering pushes the range
    on the calling thread's NVTX range stack and leaving pops it, also when the block raises (the
    exception is never hidden); as a decorator, each call of the function is one range. One
    object serves any number of threads and nested uses: it keeps no state between entry and
    exit. Where ranges are not recorded (see :func:`range`), entering and leaving do nothing and
    decorating returns the function unchanged.
    """

    __slots__ = ("_attributes", "_color", "_domain", "_mark", "_name", "_pop", "_push")
    _attributes: Any  # nvtx's event attributes: the registered name and the colour
    _push: Callable[[Any], object]  # the domain's push_range, pop_range and mark (None when off)
    _pop: Callable[[], object]
    _mark: Callable[[Any], object] | None
    _name: str | None
    _color: int | None
    _domain: str | None

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError(
            "cuda_core.profiler.Range cannot be constructed directly; "
            "use cuda_core.profiler.range(name, color=..., domain=...)"
        )

    def __enter__(self) -> Range:
        self._push(self._attributes)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pop()

    def __call__(self, fn: F) -> F:
        """Decorate ``fn``: each call of it is one range, on the calling thread."""
        _check_decoratable(fn)
        push, pop, attributes = self._push, self._pop, self._attributes

        @functools.wraps(fn)
        def ranged(*args: Any, **kwargs: Any) -> Any:
            push(attributes)
            try:
                return fn(*args, **kwargs)
            finally:
                pop()

        return ranged  # type: ignore[return-value]

    def __repr__(self) -> str:
        color = "" if self._color is None else f", color=0x{self._color:08X}"
        domain = "" if self._domain is None else f", domain={self._domain!r}"
        return f"<cuda_core.profiler.Range {self._name!r}{color}{domain}>"


class _OffRange(Range):
    """The one range handed out wherever ranges are not recorded: it does nothing."""

    __slots__ = ("_why",)
    _why: str

    def __enter__(self) -> Range:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def __call__(self, fn: F) -> F:
        _check_decoratable(fn)
        return fn

    def __repr__(self) -> str:
        return f"<cuda_core.profiler.Range: not recorded ({self._why})>"


class _UnnamedRange(Range):
    """``range()`` or ``range(color=...)`` without a name: a decorator that names the range
    after the function; as a context manager, an error (wherever it runs)."""

    __slots__ = ()

    def __enter__(self) -> Range:
        raise TypeError(
            "a range without a name can only decorate a function (which names it); "
            "give it a name to use it in a with statement: "
            "with cuda_core.profiler.range('step'): ..."
        )

    def __call__(self, fn: F) -> F:
        _check_decoratable(fn)
        return _named(_qualname(fn), self._color, self._domain)(fn)

    def __repr__(self) -> str:
        return "<cuda_core.profiler.Range, named after the function it decorates>"


def _new(cls: type[Range], **slots: Any) -> Any:
    obj = object.__new__(cls)
    for name in Range.__slots__:
        setattr(obj, name, slots.get(name))
    return obj


_OFF = _new(_OffRange, _push=None, _pop=None)
_OFF._why = "not decided yet"


# ---------------------------------------------------------------------------------------------
# Argument checks: the same wherever the ranges go, so that code that runs without a profiler
# runs with one.


def _check_text(what: str, value: Any) -> str:
    if not isinstance(value, str):
        raise arg_error(what, "a non-empty str", value, exc=TypeError)
    if not value or "\0" in value:
        raise arg_error(what, "a non-empty str without NUL characters", value)
    return value


def _argb(color: Any) -> int | None:
    """``color`` as 0xAARRGGBB (an RGB value is made opaque), or ``None`` for NVTX's default."""
    if color is None:
        return None
    if isinstance(color, str):
        named = COLORS.get(color.lower())
        if named is not None:
            return named
        m = _HEX.fullmatch(color)
        if m is None:
            raise arg_error("color", _COLOR_RULE, color, f"the names are {', '.join(COLORS)}")
        value = int(m.group(1), 16)
        return value | 0xFF000000 if len(m.group(1)) == 6 else value
    if isinstance(color, bool) or not hasattr(color, "__index__"):
        raise arg_error("color", _COLOR_RULE, color, exc=TypeError)
    value = color.__index__()
    if not 0 <= value <= 0xFFFFFFFF:
        raise arg_error("color", f"{_COLOR_RULE}, within [0, 0xFFFFFFFF]", color)
    return value | 0xFF000000 if value <= 0xFFFFFF else value


def _check_decoratable(fn: Any) -> None:
    if isinstance(fn, (staticmethod, classmethod)):
        raise TypeError(
            f"a range cannot decorate a {type(fn).__name__} object; put the range under "
            f"@{type(fn).__name__}, where it decorates the function itself"
        )
    if isinstance(fn, type) or not callable(fn):
        raise arg_error("the decorated object", "a function", fn, exc=TypeError)
    if (
        inspect.iscoroutinefunction(fn)
        or inspect.isasyncgenfunction(fn)
        or inspect.isgeneratorfunction(fn)
    ):
        raise TypeError(
            f"a range cannot decorate {_qualname(fn)!r}: calling it returns a coroutine or "
            "generator before its body runs, and NVTX ranges are pushed and popped on one "
            "thread, which other tasks share; use 'with cuda_core.profiler.range(...)' around "
            "code that does not await or yield"
        )


def _qualname(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name else type(fn).__qualname__


# ---------------------------------------------------------------------------------------------
# Where the ranges go: decided once per process, then once per domain.

_lock = threading.Lock()
_decided = False
_nvtx: Any = None  # the nvtx module where ranges may be recorded; None where they are off
_domains: dict[str | None, Any] = {}  # domain name -> nvtx.Domain, or None (not recorded)
# Ranges made, by name (the default colour and domain), by (name, 0xAARRGGBB, domain), and by
# the arguments as given where each is a str, an int or None: arguments of exactly these types
# that equal a key are that key, so a look-up there skips the checks (True == 1 is no bool).
_by_name: dict[Any, Range] = {}
_by_key: dict[Any, Range] = {}
_by_args: dict[Any, Range] = {}
_EXACT = frozenset({str, int, type(None)})


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside cuda_core."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def _decide() -> None:
    global _decided, _nvtx
    warning = None
    with _lock:
        if _decided:
            return
        if (os.environ.get("CUDA_CORE_NVTX") or "1").strip().lower() in _OFF_VALUES:
            _OFF._why = "CUDA_CORE_NVTX turns them off"
        else:
            _nvtx, _OFF._why, warning = _import_nvtx()
        _decided = True
    # Warned once the decision stands and the lock is free: under -W error the warning raises
    # once (not at every range), and a warning handler that opens a range does not deadlock.
    if warning is not None:
        warnings.warn(warning, UserWarning, stacklevel=_caller_stacklevel())


def _import_nvtx() -> tuple[Any, str, str | None]:
    """``(nvtx, why, warning)``: the module where ranges may be recorded (or ``None``), the
    reason ranges are not recorded, and the warning to give (or ``None``)."""
    try:
        import nvtx
    except Exception as exc:  # not installed, or broken (a binary mismatch): ranges stay off
        why = (
            "the nvtx package is not installed"
            if isinstance(exc, ImportError)
            else f"the nvtx package failed to import ({type(exc).__name__}: {exc})"
        )
    else:
        if getattr(nvtx, "get_domain", None) is None or getattr(nvtx, "Domain", None) is None:
            why = f"the installed nvtx ({_nvtx_version()}) is older than 0.2.12"
        elif not nvtx.enabled():
            return None, "nvtx is disabled (NVTX_DISABLE is set)", None
        else:
            return nvtx, "no profiler is attached", None
    warning = (
        f"cuda_core.profiler: {why}, so ranges and marks are not recorded (they cost nothing); "
        f"to see them in Nsight Systems, {NVTX_EXTRA}. Set CUDA_CORE_NVTX=0 to turn them off "
        "without this warning."
    )
    return None, why, warning


def _nvtx_version() -> str:
    try:
        return importlib.metadata.version("nvtx")
    except importlib.metadata.PackageNotFoundError:
        return "version unknown"


def _domain(name: str | None) -> Any:
    """The ``nvtx.Domain`` that records under ``name``, or ``None`` where nothing is recorded."""
    try:
        return _domains[name]
    except KeyError:
        pass
    if not _decided:
        _decide()
    found = None
    if _nvtx is not None:
        got = _nvtx.get_domain(name)
        found = got if isinstance(got, _nvtx.Domain) else None
    return _domains.setdefault(name, found)


def _named(name: str, argb: int | None, domain: str | None) -> Range:
    """The range for checked arguments: kept per name (up to a limit), or the shared no-op."""
    key: object = name
    cache = _by_name
    if argb is not None or domain is not None:
        cache = _by_key
        key = (name, argb, domain)
    hit = cache.get(key)
    if hit is not None:
        return hit
    d = _domain(domain)
    if d is None:
        r: Range = _OFF
    else:
        r = _new(
            Range,
            _attributes=d.get_event_attributes(name, argb),
            _push=d.push_range,
            _pop=d.pop_range,
            _mark=d.mark,
            _name=name,
            _color=argb,
            _domain=domain,
        )
    if len(cache) < _CACHE_LIMIT:
        r = cache.setdefault(key, r)
    return r


def _make(name: Any, color: Any, domain: Any) -> Any:
    fn = None
    if callable(name) or isinstance(name, (staticmethod, classmethod)):  # a bare @range
        _check_decoratable(name)
        fn, name = name, _qualname(name)
    elif name is not None:
        _check_text("name", name)
    argb = _argb(color)
    if domain is not None:
        _check_text("domain", domain)
    if name is None:
        return _new(_UnnamedRange, _color=argb, _domain=domain)
    r = _named(name, argb, domain)
    if fn is not None:
        return r(fn)
    if (
        (color is not None or domain is not None)
        and type(color) in _EXACT
        and type(domain) in _EXACT
        and len(_by_args) < _CACHE_LIMIT
    ):
        _by_args.setdefault((name, color, domain), r)
    return r


@overload
def range(name: F, /) -> F: ...
@overload
def range(
    name: str | None = None, *, color: int | str | None = None, domain: str | None = None
) -> Range: ...
def range(name: Any = None, *, color: Any = None, domain: Any = None) -> Any:
    """A named range on the profiler's timeline, as a context manager or a decorator.

    Parameters
    ----------
    name : str, optional
        The range's name on the timeline. Without one, the range can only decorate, and takes
        the function's qualified name (``Model.step``); ``@range`` without parentheses does the
        same.
    color : int or str, optional
        A colour name (``"red"``, ``"green"``, ``"blue"``, ``"yellow"``, ``"orange"``,
        ``"purple"``, ``"cyan"``, ``"magenta"``, ``"white"``, ``"black"``, ``"gray"``,
        ``"darkgreen"``), ``"#RRGGBB"``, ``"#AARRGGBB"``, or an int ``0xRRGGBB`` (opaque) or
        ``0xAARRGGBB``. Default: the profiler's.
    domain : str, optional
        The NVTX domain, a group of ranges that the profiler shows (and can filter) together.
        Default: NVTX's default domain.

    Returns
    -------
    Range
        A reusable context manager and decorator; ``@range`` without parentheses returns the
        decorated function. Ranges are pushed and popped on the calling thread (NVTX keeps one
        stack of ranges per thread): a range ends on the thread where it began, so it cannot
        decorate a coroutine or generator function, whose body runs later and between other
        tasks.

    Raises
    ------
    TypeError
        ``name`` or ``domain`` is not a str, ``color`` is neither an int nor a str, or the
        decorated object is not a plain function; a range without a name used in a ``with``.
    ValueError
        An empty ``name`` or ``domain``, or an unknown colour or one beyond 32 bits.

    Notes
    -----
    Ranges are recorded through NVIDIA's ``nvtx`` package (``pip install "cudacore[nvtx]"``)
    and only while a profiler is attached (``nsys profile --trace=cuda,nvtx``). Otherwise they
    cost next to nothing: ``range`` returns one shared object that does nothing, and a
    decorator returns the function unchanged. Without ``nvtx`` the first range warns once
    (``UserWarning``); ``CUDA_CORE_NVTX=0`` turns ranges off without the warning. The same
    arguments give the same object, so ``range("step")`` in a loop costs a dictionary look-up.

    Examples
    --------
    >>> from cuda_core import profiler
    >>> with profiler.range("load", color="green"):
    ...     data = [1, 2, 3]
    >>> @profiler.range
    ... def step(x):
    ...     return x + 1
    >>> step(1)
    2
    """
    if color is None and domain is None:
        try:
            hit = _by_name.get(name)
        except TypeError:  # an unhashable name, refused below
            hit = None
        if hit is not None:
            return hit
    elif type(name) is str and type(color) in _EXACT and type(domain) in _EXACT:
        hit = _by_args.get((name, color, domain))
        if hit is not None:
            return hit
    return _make(name, color, domain)


def mark(name: str, *, color: int | str | None = None, domain: str | None = None) -> None:
    """Mark an instant on the profiler's timeline (``nvtxDomainMarkEx``).

    Parameters
    ----------
    name : str
        The mark's name.
    color : int or str, optional
        As for :func:`range`.
    domain : str, optional
        As for :func:`range`.

    Raises
    ------
    TypeError, ValueError
        As for :func:`range`.

    Examples
    --------
    >>> from cuda_core import profiler
    >>> profiler.mark("checkpoint saved", color="orange")
    """
    if type(name) is str:
        if color is None and domain is None:
            hit = _by_name.get(name)
        elif type(color) in _EXACT and type(domain) in _EXACT:
            hit = _by_args.get((name, color, domain))
        else:
            hit = None
        if hit is not None:
            if hit._mark is not None:
                hit._mark(hit._attributes)
            return
    _check_text("name", name)
    r = _make(name, color, domain)
    if r._mark is not None:
        r._mark(r._attributes)
