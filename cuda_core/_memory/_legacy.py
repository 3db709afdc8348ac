"""LegacyPinnedMemoryResource: page-locked host memory from cuMemAllocHost (synchronous)."""

from __future__ import annotations

from typing import Any

from .._compat import driver
from .._errors import CUDAError
from .._handles._driver import ensure_driver
from .._stream_ops import stream_context
from .._utils import SET_CURRENT_HINT
from ._sync import _SyncResource

__all__ = ["LegacyPinnedMemoryResource"]

_cuCtxGetCurrent = driver.cuCtxGetCurrent


def current_context(api: str) -> Any:
    """The current context, or the house-style error asking for ``Device.set_current()``."""
    ensure_driver()
    ctx = _cuCtxGetCurrent()[1]
    if ctx is None or int(ctx) == 0:
        raise CUDAError(
            api,
            "CUDA_ERROR_INVALID_CONTEXT",
            SET_CURRENT_HINT,
            int(driver.CUresult.CUDA_ERROR_INVALID_CONTEXT),
        )
    return ctx


class LegacyPinnedMemoryResource(_SyncResource):
    """Page-locked host memory from ``cuMemAllocHost``; allocation and free are synchronous.

    ``stream`` is optional for :meth:`allocate`. When a buffer has a deallocation stream, it is
    synchronised before the memory is freed (so work queued on it can finish); the free itself
    (``cuMemFreeHost``) is synchronous. Needs a current context (``Device.set_current()``).
    ``device_id`` is ``-1``.
    """

    _alloc_fn = staticmethod(driver.cuMemAllocHost)
    _alloc_name = "cuMemAllocHost"
    _free_fn = staticmethod(driver.cuMemFreeHost)
    _free_name = "cuMemFreeHost"

    def _alloc_ctx(self, s: Any) -> Any:
        if s is None:
            return current_context("cuMemAllocHost")
        return stream_context(s) or current_context("cuMemAllocHost")

    def _dealloc_ctx(self, s: Any) -> Any:
        return stream_context(s) if s is not None and not s._h.is_released else None

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
