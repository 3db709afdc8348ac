"""The handle of a context cuda_core made (``Device.create_context``): plain or green.

One implementation that both backends share (a cold kind: made and destroyed off the hot
paths). An :class:`OwnedContext` holds what the context depends on and what depends on it:

* the driver handles (``CUcontext``, and the ``CUgreenCtx`` of a green context) and the
  device resources a green context was made from;
* its :class:`ContextHandle` (the idle pools of its streams and events);
* its children: the handles of the streams and events made in it (weakly: a child that is
  collected releases itself).

It is destroyed once: by :meth:`destroy` (``Context.close``), or when no ``Context`` object
stands for it any more (:meth:`orphan`) and every child is released. The live owned
contexts are found by address (:func:`owner_of`), so that a stream made in one reports it as
its context also after the user's ``Context`` object was collected.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .._compat import driver
from .._errors import warn_release_failure
from .._utils import handle_return
from ._backend import backend
from ._contexts import context_handle, forget_context

__all__: list[str] = []  # private module

_owners: dict[int, OwnedContext] = {}


def owner_of(address: int) -> OwnedContext | None:
    """The live owned context at ``address``, if cuda_core made it."""
    return _owners.get(address)


class OwnedContext:
    """Owns one context made by cuda_core and closes its children with it."""

    __slots__ = ("__weakref__", "address", "children", "closed", "ctx", "ctxh", "device_id",
                 "green", "lock", "orphaned", "resources", "users")  # fmt: skip

    def __init__(self, ctx: Any, green: Any, resources: list[Any], device_id: int) -> None:
        self.ctx = ctx
        self.address = int(ctx)
        self.ctxh = context_handle(self.address)
        self.green = green
        self.resources = resources  # the CUdevResource structs the descriptor was made from
        self.device_id = device_id
        self.children: weakref.WeakSet[Any] = weakref.WeakSet()
        self.closed = False
        self.orphaned = False
        self.users = 0  # which Context object stands for it now (see orphan)
        self.lock = threading.Lock()
        _owners[self.address] = self

    def adopt(self, child: Any) -> None:
        """Make the stream or event handle ``child`` (made through :attr:`ctxh`) a child: it
        is released when the context is destroyed, and the context may go once it is."""
        if not isinstance(child, (backend.StreamHandle, backend.EventHandle)):
            raise TypeError(
                f"an owned context adopts stream and event handles, not {type(child).__name__}"
            )
        self.children.add(child)
        weakref.finalize(child, self._child_gone)

    def new_user(self) -> int:
        """A new ``Context`` object stands for the context; returns its token for :meth:`orphan`."""
        self.users += 1
        self.orphaned = False
        return self.users

    def orphan(self, token: int) -> None:
        """The ``Context`` object of ``token`` was collected: the context goes once its
        children are released (unless a newer ``Context`` object stands for it)."""
        if token != self.users:
            return
        self.orphaned = True
        self._release_if_unused()

    def _child_gone(self) -> None:
        if self.orphaned:
            self._release_if_unused()

    def _release_if_unused(self) -> None:
        if any(not c.is_released for c in list(self.children)):
            return
        try:
            self.destroy()
        except Exception as exc:  # a finalizer never raises: a CUDAWarning instead
            warn_release_failure(self._what(), self.address, exc)

    def _what(self) -> str:
        return "a green context" if self.green is not None else "a context"

    def destroy(self) -> None:
        """Release the children, then destroy the context (``cuGreenCtxDestroy`` /
        ``cuCtxDestroy``); idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        live = [c for c in list(self.children) if not c.is_released]
        if self.green is not None:
            # cuGreenCtxDestroy leaves the context's streams to their owner (detached, only
            # cuStreamDestroy works on them then, and not once no context is current): they are
            # released first, while the context lives. Work already queued still completes.
            streams = [c for c in live if isinstance(c, backend.StreamHandle)]
            self._release(streams)
            live = [c for c in live if not isinstance(c, backend.StreamHandle)]
        try:
            if self.green is not None:
                handle_return(driver.cuGreenCtxDestroy(self.green), "cuGreenCtxDestroy")
            else:
                handle_return(driver.cuCtxDestroy(self.ctx), "cuCtxDestroy")
        finally:
            # The idle handles died with the context; the live ones are released (their
            # handles see the context gone and forget them).
            self.ctxh.drop_pools()
            forget_context(self.address, self.ctxh)
            if _owners.get(self.address) is self:
                del _owners[self.address]
            self._release(live)

    def _release(self, children: list[Any]) -> None:
        for child in children:
            try:
                child.release()
            except Exception as exc:  # the context's own outcome is what propagates
                kind = "a stream" if isinstance(child, backend.StreamHandle) else "an event"
                warn_release_failure(f"{kind} of {self._what()}", child.address, exc)
