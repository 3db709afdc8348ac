"""Helpers of Buffer: the garbage-collection free, stream-ordered driver calls, host addresses."""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy

from . import _links
from ._compat import driver
from ._errors import CUDAError
from ._handles._backend import backend
from ._handles._contexts import in_context
from ._handles._tokens import LAST_TOKEN as _LAST_TOKEN
from ._utils import ValueOverflowError, arg_error, handle_return, raise_status

__all__: list[str] = []  # private module

_cuMemcpyAsync = driver.cuMemcpyAsync
_cuMemcpyPeerAsync = driver.cuMemcpyPeerAsync
_cuMemcpyHtoDAsync = driver.cuMemcpyHtoDAsync
_cuMemcpyDtoHAsync = driver.cuMemcpyDtoHAsync
_cuStreamSynchronize = driver.cuStreamSynchronize
_cuStreamIsCapturing = driver.cuStreamIsCapturing
_cuMemsetD8Async = driver.cuMemsetD8Async
_cuMemsetD16Async = driver.cuMemsetD16Async
_cuMemsetD32Async = driver.cuMemsetD32Async
_CUstream = driver.CUstream
_CUcontext = driver.CUcontext
_Allocation = backend.Allocation
_StreamHandle = backend.StreamHandle
_c_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof
_ndarray = numpy.ndarray


def stream_context(s: Any) -> Any:
    """The CUcontext that work on stream ``s`` runs in, read from its handle (``None``: a
    default-stream token while no context is current); see ``StreamHandle.context``."""
    ctxh = s._h.context()
    return None if ctxh is None else _CUcontext(ctxh.address)


def live_handle(s: Any) -> Any:
    """The driver handle (a ``CUstream``) of stream ``s``; ``RuntimeError`` when it is closed."""
    h = s._h
    if h.is_released:
        raise RuntimeError("Stream has been closed; stream-ordered work cannot be queued on it")
    return _CUstream(h.address)


def on_stream(s: Any, ctx: Any, fn: Any, *args: Any) -> tuple[Any, ...]:
    """Call the stream-ordered binding ``fn(*args)`` (work queued on stream ``s``).

    A real stream carries its own context, so the call is tried as it is; only if it fails
    and ``ctx`` was not current is it made current (pushed and popped) for a second try. The
    default-stream tokens mean "the current context's default stream", so for those ``ctx``
    is made current first. Returns the raw result tuple.
    """
    if s._h.address > _LAST_TOKEN or ctx is None:
        r = fn(*args)
        if not r[0] or ctx is None:
            return r  # type: ignore[no-any-return]
    return in_context(ctx, fn, *args)


def capture_status(s: Any, ctx: Any = None) -> Any:
    """The ``CUstreamCaptureStatus`` of stream ``s`` (``cuStreamIsCapturing``), asked in ``ctx``
    (default: the context its work runs in)."""
    h = live_handle(s)
    return handle_return(
        on_stream(s, ctx if ctx is not None else stream_context(s), _cuStreamIsCapturing, h),
        "cuStreamIsCapturing",
    )


def sync_stream(s: Any, ctx: Any) -> None:
    """Wait for stream ``s`` (``cuStreamSynchronize``)."""
    handle_return(on_stream(s, ctx, _cuStreamSynchronize, live_handle(s)), "cuStreamSynchronize")


def pool_allocation(ptr: int, size: int, s: Any) -> Any:
    """The Allocation of pool memory at ``ptr``, freed with ``cuMemFreeAsync`` on ``s``."""
    h = s._h
    return _Allocation.adopt(ptr, size, None, h, h.context())


def is_pool_allocation(h: Any) -> bool:
    """Whether the Allocation ``h`` is freed on a stream handle (a pool's memory) rather than
    by a resource's Python release function (which takes the Stream object)."""
    return type(h.stream) is _StreamHandle


class UserFree:
    """The release function of a buffer owned by a user-written resource (``mr.deallocate``)."""

    __slots__ = ("mr",)

    def __init__(self, mr: Any) -> None:
        self.mr = mr

    def __call__(self, ptr: int, size: int, stream: Any) -> None:
        # A default-stream token means the current context's stream at free time: no context.
        ctx = None if stream is None or stream._h.address <= _LAST_TOKEN else stream_context(stream)
        in_context(ctx, _call_deallocate, self.mr, ptr, size, stream)


def _call_deallocate(mr: Any, ptr: int, size: int, stream: Any) -> tuple[int]:
    mr.deallocate(ptr, size, stream=stream)
    return (0,)


def closed_error() -> RuntimeError:
    return RuntimeError("Buffer has been closed; it cannot be used after close()")


def host_address(obj: Any, name: str, writable: bool) -> tuple[int, int, Any]:
    """(address, nbytes, keep-alive) of a C-contiguous host object with the buffer protocol."""
    if type(obj) is _ndarray:  # the common case, without a memoryview
        n = obj.nbytes
        if not n:
            return 0, 0, obj
        try:
            return _addressof(_c_char_from_buffer(obj)), n, obj  # type: ignore[arg-type]
        except (TypeError, ValueError, BufferError):
            pass  # read-only or not contiguous: the general path decides
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


def host_copy_fast(dst: int, src: int, n: int, s: Any) -> bool:
    """Copy ``n`` bytes (unified addressing, any direction) on a real stream and wait for it.

    The hot path of the host copies (one ``cuMemcpyAsync`` and a stream synchronisation through
    :mod:`cuda_core._handles._pure`' ``StreamHandle``). Returns ``False`` when the caller should take :func:`host_copy`
    instead: a default-stream token, a closed stream, or a copy the driver refused (the slow
    path then reports the error with its context made current).
    """
    h = s._h
    if h.address <= _LAST_TOKEN or h.is_released:
        return False
    try:
        h.memcpy(dst, src, n)
    except CUDAError:
        return False
    h.sync()
    return True


def host_copy(unified: bool, to_host: bool, dst: int, src: int, n: int, s: Any) -> None:
    """The context-aware host copy (after :func:`host_copy_fast` declined): queue it and wait.

    ``unified``: the device side is host-accessible (pinned or managed), so a unified-address
    ``cuMemcpyAsync`` is used; otherwise ``cuMemcpyDtoHAsync`` / ``cuMemcpyHtoDAsync``.
    """
    h = live_handle(s)
    ctx = stream_context(s)
    if unified:
        fn, api = _cuMemcpyAsync, "cuMemcpyAsync"
    elif to_host:
        fn, api = _cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync"
    else:
        fn, api = _cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync"
    r = on_stream(s, ctx, fn, dst, src, n, h)
    if r[0]:
        raise_status(r[0], api)
    sync_stream(s, ctx)


def copy_between(dst: Any, src: Any, s: Any, tried: bool = False) -> Any:
    """Queue a copy of Buffer ``src`` into Buffer ``dst`` (open, same size) on stream ``s``.

    A unified-address ``cuMemcpyAsync`` first (``tried``: the caller's failed already); where
    the driver refuses it for device memory of two devices, or of another device than the
    stream's (pools that do not grant the stream's device access), ``cuMemcpyPeerAsync``
    between the devices' primary contexts.
    """
    dptr = dst._ptr
    sptr = src._ptr
    if dptr is None or sptr is None:
        raise closed_error()
    n = src._size
    if dst._size != n:
        raise ValueError(
            f"buffer sizes mismatch between src and dst (sizes are: src={n}, dst={dst._size}): "
            f"dst must have the size of the source ({n} bytes) (got {dst._size} bytes)"
        )
    if not n:
        return dst
    error = None
    if not tried:
        try:
            device_copy(dptr, sptr, n, s)
            return dst
        except CUDAError as exc:
            error = exc
    try:
        pair = peer_devices(dst._pointer_attrs(), src._pointer_attrs(), stream_device_id(s))
    except CUDAError:  # the stream's device is unknown (a token with no context current)
        pair = None
    if pair is not None:
        peer_copy(dptr, pair[0], sptr, pair[1], n, s)
    elif error is not None:
        raise error
    else:
        device_copy(dptr, sptr, n, s)  # reports the driver's error, with the context current
    return dst


def stream_device_id(s: Any) -> int:
    """The ordinal of the device stream ``s`` belongs to (the current one for a plain token)."""
    ordinal = s._device_id
    return int(s.device._id) if ordinal < 0 else ordinal


def peer_devices(
    dst: tuple[int, bool, bool, bool], src: tuple[int, bool, bool, bool], stream_dev: int
) -> tuple[int, int] | None:
    """``(dst device, src device)`` when a copy between the memory described by the pointer
    attributes ``dst`` and ``src`` (``Buffer._pointer_attrs()``) is a peer copy: both are
    device memory (neither host-accessible nor managed) and they are on two devices, or on
    another device than the stream's. ``None`` for every other copy."""
    dd, _, dhost, dmanaged = dst
    sd, _, shost, smanaged = src
    if dd < 0 or sd < 0 or dhost or shost or dmanaged or smanaged:
        return None
    if dd == sd == stream_dev:
        return None
    return dd, sd


def peer_copy(dst: int, dst_dev: int, src: int, src_dev: int, n: int, s: Any) -> None:
    """Queue ``cuMemcpyPeerAsync`` of ``n`` bytes from device ``src_dev``'s memory at ``src``
    to device ``dst_dev``'s at ``dst`` on stream ``s`` (between the primary contexts)."""
    Device = _links.Device

    dctx = Device(dst_dev)._primary_ctx()
    sctx = Device(src_dev)._primary_ctx()
    h = live_handle(s)
    ctx = stream_context(s)
    r = on_stream(s, ctx, _cuMemcpyPeerAsync, dst, dctx, src, sctx, n, h)
    if r[0]:
        raise_status(
            r[0],
            "cuMemcpyPeerAsync",
            f"copying {n} bytes from device {src_dev} to device {dst_dev} on a stream of device "
            f"{stream_device_id(s)}",
        )


def copy_across_devices(dst: int, dst_dev: int, src: int, src_dev: int, n: int, s: Any) -> None:
    """Queue a copy of ``n`` bytes between device memory of two devices on stream ``s``: direct
    (``cuMemcpyAsync``) where the pools grant access, else ``cuMemcpyPeerAsync``."""
    try:
        device_copy(dst, src, n, s)
    except CUDAError:
        peer_copy(dst, dst_dev, src, src_dev, n, s)


def device_copy(dst: int, src: int, n: int, s: Any) -> None:
    """Queue a copy of ``n`` bytes between two buffers on stream ``s`` (no wait)."""
    h = s._h
    if h.address > _LAST_TOKEN and not h.is_released:
        try:
            h.memcpy(dst, src, n)
            return
        except CUDAError:
            pass  # retried below with the stream's context current, which reports the error
    h = live_handle(s)
    ctx = stream_context(s)
    r = on_stream(s, ctx, _cuMemcpyAsync, dst, src, n, h)
    if r[0]:
        raise_status(r[0], "cuMemcpyAsync")


_PATTERN_RULE = "an int in [0, 256) or a 1-, 2- or 4-byte buffer"
_MEMSET = {
    1: (_cuMemsetD8Async, "cuMemsetD8Async"),
    2: (_cuMemsetD16Async, "cuMemsetD16Async"),
    4: (_cuMemsetD32Async, "cuMemsetD32Async"),
}


def fill(ptr: int, size: int, value: Any, s: Any) -> None:
    """Queue a fill of ``size`` bytes at ``ptr`` with the 1-, 2- or 4-byte pattern ``value``."""
    if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
        if not 0 <= value < 256:  # cuda.core: OverflowError (a uint8 conversion)
            raise arg_error("value", _PATTERN_RULE, value, exc=ValueOverflowError)
        width, pattern = 1, int(value)
    else:
        try:
            raw = memoryview(value).tobytes()
        except TypeError:
            raise arg_error(
                "value",
                _PATTERN_RULE,
                value,
                exc=TypeError,
                lead="value must be an int or support the buffer protocol, got "
                f"{type(value).__name__}",
            ) from None
        width = len(raw)
        if width not in _MEMSET:
            raise arg_error(
                "value", _PATTERN_RULE, value, lead=f"value must be 1, 2, or 4 bytes, got {width}"
            )
        pattern = int.from_bytes(raw, sys.byteorder)
    if size % width:
        raise ValueError(
            f"buffer size ({size}) must be divisible by {width}: the buffer size must be a "
            f"multiple of the {width}-byte fill pattern"
        )
    if not size:
        return
    fn, api = _MEMSET[width]
    h = live_handle(s)
    ctx = stream_context(s)
    r = on_stream(s, ctx, fn, ptr, pattern, size // width, h)
    if r[0]:
        raise_status(r[0], api)
