"""Contexts in the handle layer: one ContextHandle per live context, found by its address, and
the one way to run code with a context current (:class:`CtxScope`, :func:`in_context`).

Every stream, event and allocation of a context goes through that context's handle, so they
share its idle pools and its generation. A handle whose check fails (the context was destroyed
or reset, its address reused) is replaced. Threads of one process share the contexts, so the
registry is process-wide.
"""

from __future__ import annotations

import threading
from typing import Any

from .._compat import driver
from .._logging import logger as _log
from .._utils import handle_return
from ._backend import backend

__all__: list[str] = []  # private module

_SUCCESS = driver.CUresult.CUDA_SUCCESS
_cuCtxGetCurrent = driver.cuCtxGetCurrent
_cuCtxPushCurrent = driver.cuCtxPushCurrent
_cuCtxPopCurrent = driver.cuCtxPopCurrent
_handles: dict[int, Any] = {}
_handles_lock = threading.Lock()


def context_handle(address: int, device: int = -1) -> Any:
    """The ContextHandle of the context at ``address`` (``device >= 0``: the primary context
    of that device, which the handle re-initialises when it finds it reset)."""
    h = _handles.get(address)
    if h is not None and (device < 0 or h.device >= 0) and h.check():
        return h
    with _handles_lock:  # two threads meeting a new context make one handle, not two
        h = _handles.get(address)
        if h is None or (device >= 0 and h.device < 0) or not h.check():
            if h is not None:
                _log.debug(
                    "context 0x%x was reset or destroyed: its idle pools are dropped", address
                )
            h = _handles[address] = backend.ContextHandle(address, device)
            _log.debug(
                "context 0x%x (device %d): new handle, generation %d", address, device, h.generation
            )
    return h


def current_context_handle(known: Any = None) -> Any:
    """The ContextHandle of the context current on this thread (``known``, when it is that
    context's handle, is returned without a registry look-up)."""
    address = int(handle_return(_cuCtxGetCurrent(), "cuCtxGetCurrent"))
    if known is not None and known.address == address:
        return known
    return context_handle(address)


def forget_context(address: int, h: Any) -> None:
    """Drop ``h`` from the registry (its context was destroyed), unless it was replaced."""
    with _handles_lock:
        if _handles.get(address) is h:
            del _handles[address]


def in_context(ctx: Any, fn: Any, *args: Any) -> tuple[Any, ...]:
    """Call the binding ``fn(*args)`` with ``ctx`` current; return its raw result tuple.

    When ``ctx`` is already current (the usual case) this costs one ``cuCtxGetCurrent``;
    otherwise ``ctx`` is pushed for the call and popped afterwards, so the call is safe on
    any thread (a garbage-collection finalizer, a worker thread with no context).
    """
    if ctx is None:
        return fn(*args)  # type: ignore[no-any-return]
    cur = _cuCtxGetCurrent()[1]
    if cur == ctx:
        return fn(*args)  # type: ignore[no-any-return]
    handle_return(_cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
    try:
        return fn(*args)  # type: ignore[no-any-return]
    finally:
        _cuCtxPopCurrent()


class CtxScope:
    """``with CtxScope(ctx, address):`` runs the block with ``ctx`` current (pushed only when
    another context is current), then restores the caller's. ``Device._scope()`` makes one."""

    __slots__ = ("_ctx", "_int", "_pushed")

    def __init__(self, ctx: driver.CUcontext, ctx_int: int) -> None:
        self._ctx = ctx
        self._int = ctx_int
        self._pushed = False

    def __enter__(self) -> CtxScope:
        err, cur = _cuCtxGetCurrent()
        if err != _SUCCESS or int(cur) != self._int:
            handle_return(_cuCtxPushCurrent(self._ctx), "cuCtxPushCurrent")
            self._pushed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            self._pushed = False
            handle_return(_cuCtxPopCurrent(), "cuCtxPopCurrent")
