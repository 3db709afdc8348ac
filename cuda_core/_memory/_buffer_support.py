"""Helpers of Buffer: the finalizer's releaser, stream contexts, host-buffer addresses."""

from __future__ import annotations

import ctypes
import sys
import warnings
from typing import Any

import numpy
from cuda.bindings import driver

from .._utils import arg_error
from ._resource import MemoryResource, in_context

__all__: list[str] = []  # private module

_cuMemcpyAsync = driver.cuMemcpyAsync
_cuMemcpyHtoDAsync = driver.cuMemcpyHtoDAsync
_cuMemcpyDtoHAsync = driver.cuMemcpyDtoHAsync
_cuStreamSynchronize = driver.cuStreamSynchronize
_cuMemsetD8Async = driver.cuMemsetD8Async
_cuMemsetD16Async = driver.cuMemsetD16Async
_cuMemsetD32Async = driver.cuMemsetD32Async
_cuCtxGetCurrent = driver.cuCtxGetCurrent
_DEFAULT_TOKENS = frozenset({0, int(driver.CU_STREAM_LEGACY), int(driver.CU_STREAM_PER_THREAD)})
_c_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def stream_context(s: Any) -> Any:
    """The CUcontext that work on stream ``s`` runs in (the current one for default-stream tokens)."""
    ctx = s._ctx
    if ctx is not None:
        return ctx
    if s._int in _DEFAULT_TOKENS:
        cur = _cuCtxGetCurrent()[1]
        return cur if cur is not None and int(cur) != 0 else None
    return s._context_handle()


class _Releaser:
    """What the finalizer of an owning Buffer holds: raw address, size, the resource, the stream.

    It never references the Buffer. ``free`` is the resource's release function
    (``free(ptr, size, stream, ctx)``); built-in resources pass a fast one, other resources
    go through :meth:`MemoryResource.deallocate` with the deallocation stream's context current.
    """

    __slots__ = ("ctx", "free", "mr", "ptr", "size", "stream")

    def __init__(self, ptr: int, size: int, mr: MemoryResource, stream: Any, ctx: Any, free: Any) -> None:
        self.ptr = ptr
        self.size = size
        self.mr = mr
        self.stream = stream
        self.ctx = ctx
        self.free = free

    def release(self) -> None:
        free = self.free
        if free is not None:
            free(self.ptr, self.size, self.stream, self.ctx)
            return
        mr = self.mr
        stream = self.stream
        in_context(self.ctx, _call_deallocate, mr, self.ptr, self.size, stream)

    def __call__(self) -> None:
        # The garbage-collection path: may run on any thread, late in interpreter shutdown.
        try:
            self.release()
        except Exception as exc:  # never raise from a finalizer
            if not sys.is_finalizing():
                warnings.warn(
                    f"cuda_core: freeing a garbage-collected Buffer of {self.size} bytes at "
                    f"0x{self.ptr:x} failed: {exc}",
                    ResourceWarning,
                    stacklevel=1,
                )


def _call_deallocate(mr: MemoryResource, ptr: int, size: int, stream: Any) -> tuple[int]:
    mr.deallocate(ptr, size, stream=stream)
    return (0,)


def _closed_error() -> RuntimeError:
    return RuntimeError("the Buffer is closed; it cannot be used after close()")


def host_address(obj: Any, name: str, writable: bool) -> tuple[int, int, Any]:
    """(address, nbytes, keep-alive) of a C-contiguous host object with the buffer protocol."""
    try:
        mv = memoryview(obj)
    except TypeError:
        raise arg_error(
            name,
            "a Buffer or a host object exposing the buffer protocol (numpy array, bytearray, ...)",
            type(obj).__name__,
            exc=TypeError,
        ) from None
    if not mv.c_contiguous:
        raise arg_error(name, "C-contiguous", f"{type(obj).__name__} with strides {mv.strides}")
    n = mv.nbytes
    if n == 0:
        return 0, 0, mv
    if not mv.readonly:
        return _addressof(_c_char_from_buffer(mv)), n, mv
    if writable:
        raise arg_error(name, "writable", f"read-only {type(obj).__name__}")
    arr = numpy.frombuffer(mv, dtype=numpy.uint8)
    return int(arr.__array_interface__["data"][0]), n, arr
