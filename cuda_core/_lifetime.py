"""Finalizer: the safety net that releases a raw handle when its owner is collected.

It does what ``weakref.finalize`` does for cuda_core's owners at a third of the cost (a weak
reference with a callback, kept alive in a module set): owners are created and closed on hot
paths (streams, events, buffers), where ``weakref.finalize``'s registry costs about 1 us.

- ``Finalizer(owner, fn, *args)`` arranges ``fn(*args)`` to run once: at the first explicit
  call (``close()``), or when ``owner`` is garbage collected, on whichever thread drops it.
- ``args`` must not reference ``owner`` (else it is never collected): pass raw handles only.
- It never raises: an exception from ``fn`` (a dead context, interpreter exit) becomes a
  ``ResourceWarning`` at most.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from typing import Any

__all__: list[str] = []  # private module

# Pending finalizers. Membership is the claim to run: whoever removes an entry runs it, so a
# close() racing a collection on another thread cannot release a handle twice.
_pending: set[Finalizer] = set()


class Finalizer:
    """Run ``fn(*args)`` once: when called, or when ``owner`` is collected."""

    __slots__ = ("_args", "_fn", "_ref")

    def __init__(self, owner: object, fn: Callable[..., Any], *args: Any) -> None:
        self._fn = fn
        self._args = args
        self._ref: weakref.ref[Any] | None = weakref.ref(owner, self._collected)
        _pending.add(self)

    def _collected(self, _ref: object) -> None:
        self()

    def __call__(self) -> None:
        try:
            _pending.remove(self)
        except KeyError:  # already ran (or is running on another thread)
            return
        fn, args = self._fn, self._args
        self._ref = None  # break the finalizer <-> weakref cycle
        try:
            fn(*args)
        except Exception as exc:  # a dead context, interpreter exit: warn, never raise
            try:
                warnings.warn(f"cuda_core could not release a handle: {exc}", ResourceWarning, stacklevel=2)
            except Exception:
                pass

    def detach(self) -> bool:
        """Forget the release without running it; returns whether it was still pending."""
        try:
            _pending.remove(self)
        except KeyError:
            return False
        self._ref = None
        return True

    @property
    def alive(self) -> bool:
        """Whether the release has not run yet."""
        return self in _pending
