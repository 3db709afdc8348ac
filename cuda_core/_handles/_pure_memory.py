"""The pure-Python backend's allocations: pool memory freed on its stream, adopted memory freed
by its resource (see :mod:`cuda_core._handles._protocol`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._compat import driver
from ._pure_common import _check, _ctx_id, _Current, _is_finalizing, _warn
from ._pure_streams import ContextHandle, StreamHandle
from ._tokens import LAST_TOKEN as _LAST_TOKEN

__all__: list[str] = []  # private module

_CUstream = driver.CUstream
_CAPTURE_UNSUPPORTED = int(driver.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
_CAPTURE_NONE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_LEGACY = int(driver.CU_STREAM_LEGACY)


class Allocation:
    """Device memory freed once, stream-ordered: from a pool (``cuMemFreeAsync`` on the
    deallocation stream handle) or adopted (``free(ptr, size, stream)``)."""

    __slots__ = ("__weakref__", "_free", "_gen", "_open", "ctx", "ptr", "size", "stream")

    ptr: int
    size: int
    stream: Any  # StreamHandle (pool allocations), any object (adopted), or None
    ctx: ContextHandle | None
    _free: Callable[[int, int, Any], Any] | None
    _gen: int
    _open: bool

    @classmethod
    def adopt(
        cls,
        ptr: int,
        size: int,
        free: Callable[[int, int, Any], Any] | None,
        stream: Any,
        ctx: ContextHandle | None,
    ) -> Allocation:
        """Own memory freed by ``free(ptr, size, stream)`` (``None``: a pool allocation freed
        with ``cuMemFreeAsync`` on ``stream``, a StreamHandle)."""
        self = object.__new__(cls)
        self.ptr = int(ptr)
        self.size = int(size)
        self._free = free
        self.stream = stream
        self.ctx = ctx
        self._gen = ctx._id if ctx is not None else 0
        self._open = True
        return self

    @property
    def is_open(self) -> bool:
        return self._open

    def set_stream(self, stream: Any) -> None:
        """The stream the eventual free is ordered on."""
        if self._free is None and type(stream) is not StreamHandle:
            raise TypeError("a pool allocation's deallocation stream must be a StreamHandle")
        self.stream = stream

    def close(self, stream: Any = None) -> None:
        """Free the memory now (once), ordered on ``stream`` or the deallocation stream."""
        if not self._open:
            return
        self._open = False
        s = self.stream if stream is None else stream
        free = self._free
        if free is not None:
            free(self.ptr, self.size, s)
            return
        ctx = self.ctx
        if ctx is not None and _ctx_id(ctx.address) != self._gen:
            return  # the context was reset or destroyed: the memory died with it
        if s is None or s.is_released:
            # The deallocation stream was closed since: free on the legacy default stream of
            # the memory's context (ordered after the work of every blocking stream).
            if ctx is None:
                _check(driver.cuMemFreeAsync(self.ptr, _CUstream(_LEGACY))[0], "cuMemFreeAsync")
                return
            with _Current(ctx.address):
                _check(driver.cuMemFreeAsync(self.ptr, _CUstream(_LEGACY))[0], "cuMemFreeAsync")
            return
        h = _CUstream(s.address)
        if ctx is not None and s.address <= _LAST_TOKEN:
            with _Current(ctx.address):  # a token: the default stream of the memory's context
                err = int(driver.cuMemFreeAsync(self.ptr, h)[0])
        else:
            err = int(driver.cuMemFreeAsync(self.ptr, h)[0])
            if err and ctx is not None:
                with _Current(ctx.address):
                    err = int(driver.cuMemFreeAsync(self.ptr, h)[0])
        _check(err, "cuMemFreeAsync")

    def __del__(self) -> None:
        if self._open and not _is_finalizing():
            try:
                self.close()
            except Exception as exc:
                _warn(f"a garbage-collected allocation of {self.size} bytes at", self.ptr, exc)


def _alloc_outside_capture(size: int, pool: int, h: Any) -> tuple[int, Any, str]:
    """``(status, ptr, api)`` of ``cuMemAllocFromPoolAsync`` on ``h``, which is first checked
    not to be capturing (``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`` from "cuStreamIsCapturing"
    when it is; nothing is allocated then)."""
    err, status = driver.cuStreamIsCapturing(h)
    if err:
        return int(err), 0, "cuStreamIsCapturing"
    if status != _CAPTURE_NONE:
        return _CAPTURE_UNSUPPORTED, 0, "cuStreamIsCapturing"
    err, ptr = driver.cuMemAllocFromPoolAsync(size, driver.CUmemoryPool(pool), h)
    return int(err), ptr, "cuMemAllocFromPoolAsync"


def pool_allocate(
    pool: int, size: int, stream: StreamHandle, ctx: ContextHandle | None
) -> Allocation:
    """``cuMemAllocFromPoolAsync(size, pool, stream)``: with ``ctx`` current for a default-stream
    token; for a real stream as it is and, where that fails and ``ctx`` is given, once more
    with ``ctx`` current."""
    h = _CUstream(stream.address) if not stream.is_released else stream._live()
    if ctx is not None and stream.address <= _LAST_TOKEN:
        with _Current(ctx.address):  # a token: the default stream of ctx, not the current one's
            err, ptr, api = _alloc_outside_capture(size, pool, h)
    else:
        err, ptr, api = _alloc_outside_capture(size, pool, h)
        if err and ctx is not None and err != _CAPTURE_UNSUPPORTED:
            with _Current(ctx.address):
                err, ptr, api = _alloc_outside_capture(size, pool, h)
    _check(err, api)
    return Allocation.adopt(int(ptr), size, None, stream, ctx)
