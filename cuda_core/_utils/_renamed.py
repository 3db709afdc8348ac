"""Names ``cuda.core`` renamed, still taken from code written for its earlier releases.

Code written for ``cuda.core`` 0.x, 1.0 or 1.1 (often chosen by ``cuda.core.__version__``) may
use a name that 1.2 spells otherwise: ``EventOptions(enable_timing=True)``,
``buffer.get_ipc_descriptor()``, ``kernel.attributes.num_regs()``. Each such name works as the
current one does and warns ``DeprecationWarning`` naming the current name. Only names that mean
nothing else in 1.2 are taken (1.2 raises ``AttributeError`` or ``TypeError`` for each).

The helpers build the old spellings from the new ones, so each class lists its old names in one
place: :func:`renamed_method`, :func:`getter_method` (a ``get_x()`` that became the property
``x``), :func:`renamed_property`, :func:`renamed_keywords` (keyword arguments) and
:func:`renamed_fields` (options dataclasses: keywords, dict keys and attributes).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

__all__: list[str] = []  # private module

T = TypeVar("T")


def warn_renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that *old* (the spelling the caller used) is deprecated in favour of *new*."""
    warnings.warn(
        f"{old} is deprecated (the name earlier cuda.core releases used): use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def renamed_method(owner: str, old: str, new: str) -> Callable[..., Any]:
    """A method *old* that warns and calls the method *new* with the same arguments."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        warn_renamed(f"{owner}.{old}()", f"{owner}.{new}()")
        return getattr(self, new)(*args, **kwargs)

    method.__name__ = method.__qualname__ = old
    method.__doc__ = f"Deprecated spelling of :meth:`{new}` (warns ``DeprecationWarning``)."
    return method


def getter_method(owner: str, old: str, new: str) -> Callable[[Any], Any]:
    """A method *old*\\ ``()`` that warns and returns the property *new* (a getter that became a
    property)."""

    def method(self: Any) -> Any:
        warn_renamed(f"{owner}.{old}()", f"{owner}.{new}")
        return getattr(self, new)

    method.__name__ = method.__qualname__ = old
    method.__doc__ = f"Deprecated spelling of :attr:`{new}` (warns ``DeprecationWarning``)."
    return method


def renamed_property(
    owner: str, old: str, new: str, convert: Callable[[Any], Any] | None = None
) -> property:
    """A property *old* that warns and reads (and, where *new* can be set, sets) *new*.

    *convert* maps the new value to the old meaning (``not`` for a flag whose sense flipped);
    such a property is read-only.
    """
    hint = f"{owner}.{new}" + (" (the opposite flag)" if convert is not None else "")

    def get(self: Any) -> Any:
        warn_renamed(f"{owner}.{old}", hint)
        value = getattr(self, new)
        return value if convert is None else convert(value)

    def set(self: Any, value: Any) -> None:
        warn_renamed(f"{owner}.{old}", hint)
        setattr(self, new, value)

    get.__doc__ = f"Deprecated spelling of :attr:`{new}` (warns ``DeprecationWarning``)."
    return property(get, None if convert is not None else set)


def renamed_keywords(owner: str, renames: Mapping[str, str], kwargs: dict[str, Any]) -> None:
    """Rename, in place, the old keyword arguments in *kwargs* to their new names, warning for
    each; passing both spellings of one argument is a ``TypeError``."""
    for old, new in renames.items():
        if old in kwargs:
            if new in kwargs:
                raise TypeError(f"{owner}() got both {old!r} and its new name {new!r}")
            warn_renamed(f"{owner}({old}=...)", f"{owner}({new}=...)", stacklevel=4)
            kwargs[new] = kwargs.pop(old)


def renamed_fields(renames: Mapping[str, str]) -> Callable[[type[T]], type[T]]:
    """Class decorator for an options dataclass whose fields *renames* maps from old names.

    The old names are taken as keyword arguments, as keys of the options dict that
    ``check_or_create_options`` turns into an instance, and as attributes; each warns.
    Decorate above ``@dataclass`` and ``@suggest_fields``.
    """

    def decorate(cls: type[T]) -> type[T]:
        init = cls.__init__
        owner = cls.__name__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if kwargs:
                renamed_keywords(owner, renames, kwargs)
            init(self, *args, **kwargs)

        cls.__init__ = __init__  # type: ignore[method-assign]
        cls._renamed_fields = dict(renames)  # type: ignore[attr-defined]
        for old, new in renames.items():
            setattr(cls, old, renamed_property(owner, old, new))
        return cls

    return decorate
