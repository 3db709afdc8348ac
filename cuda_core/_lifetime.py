"""Releasing raw handles when their owner is closed or collected, once, never raising.

The owners created and closed on hot paths (streams, events, buffers) use this instead of
``weakref.finalize``, whose registry costs about 1 us per owner; here the cost is one weak
reference and one dict entry. Owners off the hot paths (programs, modules, graphs) keep
``weakref.finalize`` on a small holder, as STYLE.md describes.

- ``token = track(owner, fn, *args)`` arranges ``fn(*args)`` to run once: at
  ``release(token)`` (``close()``), or when ``owner`` is garbage collected, on whichever
  thread drops it. ``untrack(token)`` forgets it and returns the entry ``(fn, *args)``
  (``None`` when it already ran). Whoever pops the entry runs it (a thread-safe claim).
- ``args`` must not reference ``owner`` (else it is never collected): pass raw handles only.
- It never raises: an exception from ``fn`` (a dead context, interpreter exit) becomes a
  ``ResourceWarning`` at most.
- Hot paths may inline ``track``: ``token = Token(owner, _collected)`` then
  ``_tracked[token] = (fn, *args)`` (one flat tuple).
"""

from __future__ import annotations

import ctypes
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

__all__: list[str] = []  # private module

class Token(weakref.ref):  # type: ignore[type-arg]
    """A weak reference to a tracked owner, compared and hashed by identity (a ``_tracked`` key).

    Identity keeps the key unique even for owners that define ``__eq__``/``__hash__`` (two
    streams over one handle compare equal).
    """

    __slots__ = ()
    __hash__ = object.__hash__
    __eq__ = object.__eq__  # type: ignore[assignment]
    __ne__ = object.__ne__  # type: ignore[assignment]

    def release(self, check: bool = True) -> bool:
        """:func:`release` of this token (the interface ``_fast.own``'s holders share; the
        tracked function does its own checks, so ``check`` changes nothing here)."""
        return release(self)

    def cancel(self) -> tuple[Any, ...] | None:
        """:func:`untrack` of this token."""
        return _tracked.pop(self, None)

    @property
    def pending(self) -> bool:
        """:func:`is_tracked` of this token."""
        return self in _tracked


# Pending releases, token -> (fn, *args). Popping an entry is the claim to run it, so a close()
# racing a collection on another thread cannot release a handle twice.
_tracked: dict[Token, tuple[Any, ...]] = {}


def _warn_release(exc: Exception) -> None:
    try:
        warnings.warn(f"cuda_core could not release a handle: {exc}", ResourceWarning, stacklevel=3)
    except Exception:
        pass


def _run(item: tuple[Any, ...]) -> None:
    try:
        item[0](*item[1:])
    except Exception as exc:  # a dead context, interpreter exit: warn, never raise
        _warn_release(exc)


def _collected(
    token: Token, _pop: Any = _tracked.pop, _warn: Any = _warn_release, _finalizing: Any = sys.is_finalizing
) -> None:
    # The weak reference's callback, on whichever thread drops the owner; the defaults keep
    # working while the module is torn down at interpreter exit. During that teardown nothing
    # is released: other libraries (PyTorch, CuPy) may already have destroyed the streams and
    # contexts a release would name, and the process exit frees everything anyway.
    item = _pop(token, None)
    if item is not None and not _finalizing():
        try:
            item[0](*item[1:])
        except Exception as exc:  # never raise from a callback
            _warn(exc)


def track(owner: object, fn: Callable[..., Any], *args: Any) -> Token:
    """Arrange ``fn(*args)`` to run once, when ``owner`` is collected or at :func:`release`.

    Parameters
    ----------
    owner : object
        A weak-referenceable object; ``args`` must not reference it.
    fn : callable
        The release function; its exceptions become a ``ResourceWarning``.
    *args
        Raw handles passed to ``fn``.

    Returns
    -------
    Token
        For :func:`release`, :func:`untrack` and :func:`is_tracked`.
    """
    token = Token(owner, _collected)
    _tracked[token] = (fn, *args)
    return token


def release(token: Token) -> bool:
    """Run the tracked release now unless it already ran; returns whether it ran here."""
    item = _tracked.pop(token, None)
    if item is None:
        return False
    _run(item)
    return True


def untrack(token: Token) -> tuple[Any, ...] | None:
    """Forget the tracked release without running it; returns its entry ``(fn, *args)``, or
    ``None`` when it already ran (or another thread claimed it)."""
    return _tracked.pop(token, None)


def is_tracked(token: Token) -> bool:
    """Whether the tracked release is still pending."""
    return token in _tracked


_incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", ctypes.pythonapi))


def immortal(callback: Any) -> Any:
    """Keep a ctypes callback alive until the process ends, and return it.

    Foreign code holds the addresses of some callbacks (DLPack deleters and capsule
    destructors, driver host functions) and may call them during interpreter teardown, after
    this module's globals are gone: a freed ctypes thunk would then be a jump into freed memory.
    One reference that is never dropped keeps the thunk valid for the life of the process.
    """
    _incref(callback)
    return callback
