"""HandleHolder: the small object an owner's finalizer releases, holding only a raw handle.

An owner (``ObjectCode``, ``Program``, ``GraphBuilder``, ``Graph``) keeps a holder and registers
``weakref.finalize(owner, holder.release)``: the finalizer then references the raw handle and
its destroy function, never the owner, so the owner can be collected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__: list[str] = []  # private module


class HandleHolder:
    """Owns one raw handle and destroys it at most once with ``destroy(handle)``.

    ``handle`` may be set (or replaced, after releasing the old one) after construction;
    ``None`` means nothing to release.
    """

    __slots__ = ("__weakref__", "_destroy", "handle")

    def __init__(self, destroy: Callable[[Any], object], handle: Any = None) -> None:
        self._destroy = destroy
        self.handle = handle

    def release(self) -> None:
        """Destroy the handle (if any) and forget it; never raises."""
        h, self.handle = self.handle, None
        if h is not None:
            try:
                self._destroy(h)
            except Exception:  # interpreter exit or driver gone: never raise from a finalizer
                pass
