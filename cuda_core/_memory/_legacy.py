"""LegacyPinnedMemoryResource: page-locked host memory from cuMemAllocHost (synchronous)."""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver

from .. import _stream as _stream_mod
from .._errors import CUDAError
from .._utils import SET_CURRENT_HINT, ensure_driver, handle_return, make_error
from ._buffer import Buffer, stream_context
from ._resource import MemoryResource, check_size, in_context

__all__ = ["LegacyPinnedMemoryResource"]

_cuCtxGetCurrent = driver.cuCtxGetCurrent


def current_context(api: str) -> Any:
    """The current context, or the house-style error asking for ``Device.set_current()``."""
    ensure_driver()
    ctx = _cuCtxGetCurrent()[1]
    if ctx is None or int(ctx) == 0:
        raise CUDAError(api, "CUDA_ERROR_INVALID_CONTEXT", SET_CURRENT_HINT, int(driver.CUresult.CUDA_ERROR_INVALID_CONTEXT))
    return ctx


class LegacyPinnedMemoryResource(MemoryResource):
    """Page-locked host memory from ``cuMemAllocHost``; allocation and free are synchronous.

    ``stream`` is optional for :meth:`allocate`. When a buffer has a deallocation stream, it is
    synchronised before the memory is freed (so work queued on it can finish); the free itself
    (``cuMemFreeHost``) is synchronous. Needs a current context (``Device.set_current()``).
    ``device_id`` is ``-1``.
    """

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """Allocate ``size`` bytes of pinned host memory.

        Parameters
        ----------
        size : int
            Number of bytes (``>= 0``).
        stream : Stream, optional
            Becomes the buffer's deallocation stream (synchronised before the free).

        Returns
        -------
        Buffer

        Raises
        ------
        TypeError, ValueError
            Bad ``size`` or ``stream``.
        CUDAError
            No current context, or the driver cannot allocate (the message names the size).
        """
        s = None if stream is None else _stream_mod.as_stream(stream)
        size = check_size(size)
        ctx = current_context("cuMemAllocHost") if s is None else (stream_context(s) or current_context("cuMemAllocHost"))
        if not size:
            return Buffer._owned(0, 0, self, s, ctx, self._free)
        err, ptr = in_context(ctx, driver.cuMemAllocHost, size)
        if err:
            raise make_error(err, "cuMemAllocHost", f"allocating {size} bytes failed")
        return Buffer._owned(int(ptr), size, self, s, ctx, self._free)

    def _free(self, ptr: int, size: int, stream: Any, ctx: Any) -> None:
        if stream is not None:
            handle_return(driver.cuStreamSynchronize(stream._handle), "cuStreamSynchronize")
        handle_return(in_context(ctx, driver.cuMemFreeHost, ptr), "cuMemFreeHost")

    def deallocate(self, ptr: int, size: int, *, stream: Any = None) -> None:
        """Free memory from :meth:`allocate` (after synchronising ``stream``, if given).

        Parameters
        ----------
        ptr : int
            The address.
        size : int
            The size that was allocated.
        stream : Stream, optional
            Synchronised before the free.

        Raises
        ------
        CUDAError
            The driver failed to free the memory.
        """
        s = None if stream is None else _stream_mod.as_stream(stream)
        ctx = stream_context(s) if s is not None else None
        self._free(int(ptr), size, s, ctx)

    @property
    def is_device_accessible(self) -> bool:
        """``True``: devices can access pinned host memory."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """``True``."""
        return True

    @property
    def device_id(self) -> int:
        """``-1``: host memory."""
        return -1

    def __repr__(self) -> str:
        return "<LegacyPinnedMemoryResource>"
