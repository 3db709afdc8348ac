"""Shared internals of the pure-Python backend: the error funnel, context ids, the scope that
makes a context current, and the messages of released handles.

The backend is :mod:`cuda_core._handles._pure` (its protocol: :mod:`cuda_core._handles._protocol`);
``_pure.bind`` sets the error funnel and the context registry here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .._compat import driver
from .._errors import warn_release_failure

__all__: list[str] = []  # private module

_CUcontext = driver.CUcontext
_is_finalizing = sys.is_finalizing


def _default_make_error(status: int, api: str) -> Exception:
    return RuntimeError(f"{api} failed with CUDA status {status}")


_make_error: Callable[[int, str], Exception] = _default_make_error


def _unbound_context_of(address: int) -> Any:
    raise _make_error(3, "cuda_core._handles._pure")  # CUDA_ERROR_NOT_INITIALIZED: bind() first


_context_of: Callable[[int], Any] = _unbound_context_of
"""The context registry ``bind`` was given: ``address -> ContextHandle``."""


def _fail(status: int, api: str) -> Exception:
    """The exception of the error funnel bound now for ``status`` from ``api``."""
    return _make_error(status, api)


def _check(status: Any, api: str) -> None:
    if status:
        raise _make_error(int(status), api)


def _warn(what: str, handle: int, exc: BaseException) -> None:
    """A finalizer's failed release: a CUDAWarning naming what, its handle and the error (the
    native backend's finalizers report the same way)."""
    warn_release_failure(what, handle, exc)


def _ctx_id(address: int) -> int:
    """The driver's unique id of the context at ``address``, or 0 when it is gone."""
    err, ident = driver.cuCtxGetId(_CUcontext(address))
    return 0 if err else int(ident)


class _Current:
    """``with _Current(address):`` makes a context current for a block (pushed only when
    another one is current), then restores the caller's."""

    __slots__ = ("_address", "_pushed")

    def __init__(self, address: int) -> None:
        self._address = address
        self._pushed = False

    def __enter__(self) -> None:
        err, cur = driver.cuCtxGetCurrent()
        if err or int(cur) != self._address:
            _check(driver.cuCtxPushCurrent(_CUcontext(self._address))[0], "cuCtxPushCurrent")
            self._pushed = True

    def __exit__(self, *exc: object) -> None:
        if self._pushed:
            self._pushed = False
            _check(driver.cuCtxPopCurrent()[0], "cuCtxPopCurrent")


def _closed(what: str) -> RuntimeError:
    return RuntimeError(f"{what} has been closed")  # cuda.core's wording
