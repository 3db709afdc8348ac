"""The pure-Python backend of the handle layer, and the reference statement of its protocol.

A handle owns one driver object and holds strong references to the handles it depends on (a
stream holds its context handle; an allocation holds its context and its deallocation stream;
a launch config holds its stream), so a dependency can never be freed under it. The Python
classes (``Stream``, ``Event``, ``Buffer``, the pool resources, ``LaunchConfig``,
``PreparedLaunch``) hold handles and call their methods; they never touch raw addresses on
their hot paths.

The native backend (``cuda_core/_handles/_csrc``, module ``cuda_core._native``) implements the same
names with the same behaviour; :mod:`cuda_core._handles._backend` chooses one at import. Both run the
whole test suite, and ``tests/handles/test_handles.py`` runs the same cases against each.

Protocol (every name below exists in both backends):

``ABI_VERSION``
    The protocol version; the native module's must equal this one.
``bind(addresses, make_error)``
    Called once the driver is initialised: the entry points (native only; the pure backend
    calls ``cuda.bindings``) and ``make_error(status, api) -> Exception``, the error funnel.
``ctx_get_device() -> int``
    The current context's device ordinal, or ``-status`` (no current context, no driver).
``ContextHandle(address, device=-1)``
    A context. ``device >= 0`` marks the primary context of that device, which is
    re-initialised (retained again) when found reset. Idle streams and events hang off it
    and die with it: ``check()`` compares the driver's context id (``cuCtxGetId``) with the
    one seen before and drops the pools when the context was reset or destroyed (their
    handles died with it; destroying them could hit new handles at the same addresses).
    ``create_stream(flags, priority)``, ``create_event(flags)`` and
    ``record_event(flags, stream)`` hand out handles, pooled ones first.
``StreamHandle``
    ``StreamHandle.borrow(address, ctx, owner)`` wraps a stream cuda_core does not own.
    ``sync()``, ``query() -> bool``, ``record(event)``, ``wait(event)``,
    ``memcpy(dst, src, nbytes)``, ``release()``. An owned stream is pooled at release when its
    work is done and its context is unchanged, else destroyed (or forgotten, when its context
    is gone). A released handle refuses every use with ``RuntimeError``.
``EventHandle``
    ``EventHandle.adopt(address, ctx, flags)`` owns an event opened elsewhere (IPC): it is
    destroyed, never pooled. ``record(stream)``, ``query() -> bool``, ``sync()``,
    ``expose()`` (the raw handle was handed out: it may be recorded behind our back),
    ``release()``. A never-recorded event goes back to the clean pool; a recorded one to the
    recorded pool, which only ``record_event`` draws from (it records the event at once, so
    earlier work on it is unobservable). An interprocess event (``CU_EVENT_INTERPROCESS``) is
    never pooled: another process may hold it open and wait on its record.
``Allocation``
    ``pool_allocate(pool, size, stream, ctx)`` allocates from a memory pool, ordered on a
    stream handle; the allocation is freed with ``cuMemFreeAsync`` on its deallocation stream.
    A default-stream token (0, ``CU_STREAM_LEGACY``, ``CU_STREAM_PER_THREAD``) names the
    default stream of whichever context is current: with ``ctx`` given, both calls run with
    ``ctx`` current (a device's default stream, also on a thread where another device is
    current); a real stream is tried as it is and, where that fails, once more with ``ctx``.
    A stream that is capturing a graph (``cuStreamIsCapturing``: active or invalidated) is
    refused before anything is allocated, with the error of status
    ``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`` and api ``"cuStreamIsCapturing"`` (pools
    allocate outside graphs; the resource turns it into its ``RuntimeError``).
    ``Allocation.adopt(ptr, size, free, stream, ctx)`` owns memory freed by the Python
    callable ``free(ptr, size, stream)``. ``set_stream(stream)``, ``close(stream=None)``.
    Freed once: at ``close()`` or when collected (a failure then is a ``ResourceWarning``);
    never after its context was reset (the memory died with it).
``LaunchConfigHandle(stream, grid, block, shmem, cluster, cooperative, pss)``
    A native ``CUlaunchConfig`` bound to a stream handle; ``launch(function, params) ->
    status`` (``0``: success). Refuses a released stream. ``values``: ``(grid, block, shmem,
    cluster, cooperative, pss)`` read back from the stored struct (what a launch hands the
    driver).
``types_match(args, types) -> bool``
    ``len(args) == len(types)`` and each ``type(args[i]) is types[i]``.

Interop readers (pure statement: ``cuda_core/_handles/_pure_interop.py``, re-exported here; native:
``cuda_core/_handles/_csrc/interop.c``; ``tests/interop/test_interop_backends.py`` runs both on the same cases):

``ViewInfo``
    The fields of a strided view; ``StridedMemoryView`` derives from the backend's. Writable
    members ``ptr``, ``shape``, ``_raw_strides`` (elements, or None), ``_dtype`` (a DLPack
    dtype word from the readers: ``code | bits << 8 | lanes << 16`` in native byte order;
    Python builders store a NumPy dtype), ``device_id``, ``is_device_accessible``,
    ``readonly``, ``exporting_obj``, ``_capsule`` (keeps a producer's tensor alive),
    ``_dl_device_type``; the property ``strides`` (``_raw_strides``: the producer's strides as given).
``read_capsule(capsule) -> ViewInfo``
    Reads an unconsumed ``"dltensor_versioned"``/``"dltensor"`` capsule without consuming it:
    ``ptr = data + byte_offset``, the capsule's device, read-only flag (versioned only).
    ``BufferError`` for a non-capsule, another name (a consumed capsule), a major version
    above 1, ``ndim`` outside 0..32, or ``ndim > 0`` with no shape.
``dlpack_view(cls, obj, stream_ptr) -> cls``
    ``StridedMemoryView.from_dlpack``'s general path: ``obj.__dlpack_device__()`` (an
    ``AttributeError`` from it becomes ``BufferError``; every other exception propagates), the
    device rule (CPU, CUDA, CUDA host, CUDA managed; others ``BufferError``), ``stream_ptr``
    (``None`` on CUDA is ``BufferError(AMBIGUOUS)``; ignored for CPU; 0 becomes 1),
    ``obj.__dlpack__(stream=, max_version=(1, 0))`` called once. Its only retry: a
    ``TypeError`` (a producer older than DLPack 1.0) asks once more without ``max_version``
    and remembers the type; no other exception is caught or retried. Then the capsule read.
``torch_setup(tensor_type, exchange_api) -> bool``
    Native: reads ``tensor_type`` (exactly ``torch.Tensor``) through PyTorch's DLPack C
    exchange API (``torch.Tensor.__dlpack_c_exchange_api__``, a capsule named
    ``"dlpack_exchange_api"``, major version 1) when it fits. Pure: always False.
``torch_view(cls, tensor, stream_ptr) -> cls | NotImplemented``
    A view of an exact ``torch.Tensor`` with PyTorch's current stream ordered before
    ``stream_ptr`` (an event recorded on it, waited on by the consumer). Native: CUDA tensors
    only; ``NotImplemented`` for everything else (not set up, another type, a host tensor,
    a negative or conjugate view, a stream value DLPack treats specially, no order event yet,
    a failed record). Pure: always ``NotImplemented``. Where it declines, the caller reads the
    tensor through its Python attributes (``_array_bridge.torch_fields``), and where that
    declines too, takes ``dlpack_view``.
``set_order_event(device_id, event) -> bool``
    The event the native ``torch_view`` orders through on a device (ordinals 0..63).
``record_wait(event, producer, consumer) -> int``
    ``cuEventRecord(event, producer)`` then ``cuStreamWaitEvent(consumer, event)`` under one
    lock: 0, ``-status`` when the record failed (nothing ordered), ``+status`` when the wait
    failed.
``AMBIGUOUS``
    The message of a ``stream_ptr=None`` refusal.
"""

from __future__ import annotations

import ctypes
import sys
import warnings
from collections.abc import Callable
from typing import Any

from .._compat import driver

__all__: list[str] = []  # private module

ABI_VERSION = 6

_CUcontext = driver.CUcontext
_CUstream = driver.CUstream
_CUevent = driver.CUevent
_SUCCESS = 0
_NOT_READY = int(driver.CUresult.CUDA_ERROR_NOT_READY)
_CAPTURE_UNSUPPORTED = int(driver.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
_CAPTURE_NONE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_INTERPROCESS = int(driver.CUevent_flags.CU_EVENT_INTERPROCESS)
_STREAM_POOL_CAP = 32
_EVENT_POOL_CAP = 64
_LEGACY = int(driver.CU_STREAM_LEGACY)
_LAST_TOKEN = int(driver.CU_STREAM_PER_THREAD)  # streams at or below this address are tokens
_is_finalizing = sys.is_finalizing


def _default_make_error(status: int, api: str) -> Exception:
    return RuntimeError(f"{api} failed with CUDA status {status}")


_make_error: Callable[[int, str], Exception] = _default_make_error
_launch_fn: Any = None  # cuLaunchKernelEx through ctypes (its entry point), or None


def bind(addresses: Any, make_error: Callable[[int, str], Exception]) -> None:
    """Take the error funnel (the entry points are ``cuda.bindings``' own here); ``addresses``
    may hold ``cuLaunchKernelEx``, which launches are then called through with ``ctypes``."""
    global _make_error, _launch_fn
    _make_error = make_error
    addr = (addresses or {}).get("cuLaunchKernelEx", 0)
    _launch_fn = _LAUNCH_PROTO(addr) if addr else None


def _check(status: Any, api: str) -> None:
    if status:
        raise _make_error(int(status), api)


def _warn(what: str, exc: BaseException) -> None:
    if _is_finalizing():
        return
    try:
        warnings.warn(f"cuda_core could not release {what}: {exc}", ResourceWarning, stacklevel=3)
    except Exception:
        pass


def ctx_get_device() -> int:
    """The current context's device ordinal (>= 0), or ``-status``."""
    err, dev = driver.cuCtxGetDevice()
    return -int(err) if err else int(dev)


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


# ---------------------------------------------------------------------------------------------
# Contexts and their idle pools.


class ContextHandle:
    """A context (borrowed: cuda_core never destroys it) and its idle streams and events."""

    __slots__ = ("__weakref__", "_events", "_id", "_streams", "address", "device")

    def __init__(self, address: int, device: int = -1) -> None:
        self.address = int(address)
        self.device = int(device)
        self._id = _ctx_id(self.address)
        self._streams: dict[tuple[int, int | None], list[int]] = {}
        self._events: dict[int, tuple[list[int], list[int]]] = {}

    @property
    def generation(self) -> int:
        """The driver's id of the context as last checked (``cuCtxGetId``)."""
        return self._id

    def check(self) -> bool:
        """Whether the context is alive and the same one as before. A context found reset
        or destroyed drops its pools; a reset primary context is re-initialised (and the
        check then passes with its new generation); any other dead context returns False."""
        ident = _ctx_id(self.address)
        if ident and ident == self._id:
            return True
        self.drop_pools()
        if not ident and self.device >= 0:
            # A reset primary context: retaining it again re-initialises it (our earlier
            # retain still counts, so the release keeps the count as it was).
            err, ctx = driver.cuDevicePrimaryCtxRetain(driver.CUdevice(self.device))
            _check(err, "cuDevicePrimaryCtxRetain")
            driver.cuDevicePrimaryCtxRelease(driver.CUdevice(self.device))
            self.address = int(ctx)
            ident = _ctx_id(self.address)
        self._id = ident
        return bool(ident)

    def _ensure(self) -> None:
        if not self.check():
            raise _make_error(int(driver.CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED), "cuCtxGetId")

    def drop_pools(self) -> None:
        """Forget every idle handle (without destroying them: their context is gone)."""
        self._streams = {}
        self._events = {}

    def pooled(self) -> tuple[int, int, int]:
        """(idle streams, clean idle events, recorded idle events): for tests."""
        return (
            sum(map(len, self._streams.values())),
            sum(len(c) for c, _ in self._events.values()),
            sum(len(d) for _, d in self._events.values()),
        )

    def create_stream(self, flags: int, priority: int | None) -> StreamHandle:
        """An owned stream: an idle pooled one, else ``cuStreamCreate[WithPriority]`` with
        this context current."""
        self._ensure()
        key = (flags, priority)
        pool = self._streams.get(key)
        if pool:
            try:
                return StreamHandle._owned(pool.pop(), self, flags, priority)
            except IndexError:  # emptied by another thread meanwhile
                pass
        with _Current(self.address):
            if priority is None:
                err, h = driver.cuStreamCreate(flags)
                _check(err, "cuStreamCreate")
            else:
                err, h = driver.cuStreamCreateWithPriority(flags, priority)
                _check(err, "cuStreamCreateWithPriority")
        return StreamHandle._owned(int(h), self, flags, priority)

    def _event_pools(self, flags: int) -> tuple[list[int], list[int]]:
        pools = self._events.get(flags)
        if pools is None:
            pools = self._events.setdefault(flags, ([], []))
        return pools

    def _new_event(self, flags: int) -> int:
        with _Current(self.address):
            err, h = driver.cuEventCreate(flags)
            _check(err, "cuEventCreate")
        return int(h)

    def create_event(self, flags: int) -> EventHandle:
        """An owned event that was never recorded: a clean pooled one, else ``cuEventCreate``."""
        self._ensure()
        clean, _ = self._event_pools(flags)
        try:
            address = clean.pop()
        except IndexError:
            address = self._new_event(flags)
        return EventHandle._owned(address, self, flags)

    def record_event(self, flags: int, stream: StreamHandle) -> EventHandle:
        """An owned event recorded on ``stream`` now: a recorded pooled one first (recording
        it again makes its earlier work unobservable), then a clean one, then a new one."""
        self._ensure()
        clean, dirty = self._event_pools(flags)
        try:
            address = dirty.pop()
            recorded = True
        except IndexError:
            recorded = False
            try:
                address = clean.pop()
            except IndexError:
                address = self._new_event(flags)
        ev = EventHandle._owned(address, self, flags)
        ev._recorded = (
            recorded  # a recorded one never goes back to the clean pool (record may fail)
        )
        ev.record(stream)
        return ev


# ---------------------------------------------------------------------------------------------
# Streams.


def _closed(what: str) -> RuntimeError:
    return RuntimeError(f"the {what} is closed")


class StreamHandle:
    """A stream: owned (pooled or destroyed at release) or borrowed (never destroyed)."""

    __slots__ = (
        "__weakref__",
        "_flags",
        "_gen",
        "_owns",
        "_priority",
        "_released",
        "address",
        "ctx",
        "owner",
    )

    address: int
    ctx: ContextHandle | None
    owner: Any
    _owns: bool
    _flags: int
    _priority: int | None
    _gen: int
    _released: bool

    @classmethod
    def _owned(
        cls, address: int, ctx: ContextHandle, flags: int, priority: int | None
    ) -> StreamHandle:
        self = object.__new__(cls)
        self.address = address
        self.ctx = ctx
        self.owner = None
        self._owns = True
        self._flags = flags
        self._priority = priority
        self._gen = ctx._id
        self._released = False
        return self

    @classmethod
    def borrow(
        cls, address: int, ctx: ContextHandle | None = None, owner: Any = None
    ) -> StreamHandle:
        """A stream cuda_core does not own (``owner`` is kept alive until release)."""
        self = object.__new__(cls)
        self.address = int(address)
        self.ctx = ctx
        self.owner = owner
        self._owns = False
        self._flags = -1
        self._priority = None
        self._gen = 0
        self._released = False
        return self

    @property
    def is_owned(self) -> bool:
        return self._owns

    @property
    def is_released(self) -> bool:
        return self._released

    def _live(self) -> Any:
        if self._released:
            raise _closed("stream")
        return _CUstream(self.address)

    def sync(self) -> None:
        """``cuStreamSynchronize``."""
        _check(driver.cuStreamSynchronize(self._live())[0], "cuStreamSynchronize")

    def query(self) -> bool:
        """Whether all work queued on the stream is done (``cuStreamQuery``)."""
        err = int(driver.cuStreamQuery(self._live())[0])
        if err == _NOT_READY:
            return False
        _check(err, "cuStreamQuery")
        return True

    def record(self, event: EventHandle) -> None:
        """``cuEventRecord(event, self)``."""
        event.record(self)

    def wait(self, event: EventHandle) -> None:
        """``cuStreamWaitEvent(self, event)``: later work waits for the event, on the device."""
        h = self._live()
        _check(driver.cuStreamWaitEvent(h, event._live(), 0)[0], "cuStreamWaitEvent")

    def memcpy(self, dst: int, src: int, nbytes: int) -> None:
        """``cuMemcpyAsync`` (unified addressing, any direction), ordered on this stream."""
        h = self._live()
        _check(driver.cuMemcpyAsync(dst, src, nbytes, h)[0], "cuMemcpyAsync")

    def release(self) -> None:
        """Give the stream back once: pooled when owned, idle and its context unchanged;
        destroyed when owned and busy; forgotten when its context is gone or it is borrowed."""
        if self._released:
            return
        self._released = True
        self.owner = None
        ctx = self.ctx
        if not self._owns or ctx is None:
            return
        if _ctx_id(ctx.address) != self._gen:
            return  # the context was reset or destroyed: the stream died with it
        h = _CUstream(self.address)
        if int(driver.cuStreamQuery(h)[0]) == _SUCCESS and ctx._id == self._gen:
            pool = ctx._streams.get((self._flags, self._priority))
            if pool is None:
                pool = ctx._streams.setdefault((self._flags, self._priority), [])
            if len(pool) < _STREAM_POOL_CAP:
                pool.append(self.address)
                return
        _check(driver.cuStreamDestroy(h)[0], "cuStreamDestroy")

    def __del__(self) -> None:
        if not self._released and not _is_finalizing():
            try:
                self.release()
            except Exception as exc:
                _warn("a stream", exc)


# ---------------------------------------------------------------------------------------------
# Events.


class EventHandle:
    """An event: owned by cuda_core, pooled at release (IPC-opened ones are destroyed)."""

    __slots__ = (
        "__weakref__",
        "_gen",
        "_poolable",
        "_recorded",
        "_released",
        "address",
        "ctx",
        "flags",
    )

    address: int
    ctx: ContextHandle
    flags: int
    _gen: int
    _poolable: bool
    _recorded: bool
    _released: bool

    @classmethod
    def _owned(
        cls, address: int, ctx: ContextHandle, flags: int, poolable: bool = True
    ) -> EventHandle:
        self = object.__new__(cls)
        self.address = address
        self.ctx = ctx
        self.flags = flags
        self._gen = ctx._id
        self._poolable = poolable and not flags & _INTERPROCESS  # another process may hold it
        self._recorded = False
        self._released = False
        return self

    @classmethod
    def adopt(cls, address: int, ctx: ContextHandle, flags: int) -> EventHandle:
        """Own an event opened elsewhere (``cuIpcOpenEventHandle``): destroyed, never pooled."""
        self = cls._owned(int(address), ctx, int(flags), poolable=False)
        self._recorded = True
        return self

    @property
    def recorded(self) -> bool:
        """Whether the event may have been recorded (by us, or by whoever had the handle)."""
        return self._recorded

    @property
    def is_released(self) -> bool:
        return self._released

    def _live(self) -> Any:
        if self._released:
            raise _closed("event")
        return _CUevent(self.address)

    def record(self, stream: StreamHandle) -> None:
        """``cuEventRecord(self, stream)``."""
        h = self._live()
        _check(driver.cuEventRecord(h, stream._live())[0], "cuEventRecord")
        self._recorded = True

    def query(self) -> bool:
        """Whether the work recorded before the event is done (``cuEventQuery``)."""
        err = int(driver.cuEventQuery(self._live())[0])
        if err == _NOT_READY:
            return False
        _check(err, "cuEventQuery")
        return True

    def sync(self) -> None:
        """``cuEventSynchronize``."""
        _check(driver.cuEventSynchronize(self._live())[0], "cuEventSynchronize")

    def expose(self) -> None:
        """The raw handle was handed out: whoever holds it may record it."""
        self._recorded = True

    def release(self) -> None:
        """Give the event back once (see the module docstring)."""
        if self._released:
            return
        self._released = True
        ctx = self.ctx
        if _ctx_id(ctx.address) != self._gen:
            return  # the context was reset or destroyed: the event died with it
        if self._poolable and ctx._id == self._gen:
            clean, dirty = ctx._event_pools(self.flags)
            pool = dirty if self._recorded else clean
            if len(pool) < _EVENT_POOL_CAP:
                pool.append(self.address)
                return
        _check(driver.cuEventDestroy(_CUevent(self.address))[0], "cuEventDestroy")

    def __del__(self) -> None:
        if not self._released and not _is_finalizing():
            try:
                self.release()
            except Exception as exc:
                _warn("an event", exc)


# ---------------------------------------------------------------------------------------------
# Allocations.


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
        if s is None or s._released:
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
                _warn(f"a garbage-collected allocation of {self.size} bytes at 0x{self.ptr:x}", exc)


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
    h = _CUstream(stream.address) if not stream._released else stream._live()
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


# ---------------------------------------------------------------------------------------------
# Launch configurations.

# CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void** params, void** extra)
# (CUDA 12.0 ABI). A CFUNCTYPE function releases the GIL during the call, as cuda.bindings does.
_LAUNCH_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
_ATTR = driver.CUlaunchAttributeID


class LaunchConfigHandle:
    """A native ``CUlaunchConfig`` (and its attributes) for one stream handle."""

    __slots__ = ("_address", "_cfg", "stream")

    def __init__(
        self,
        stream: StreamHandle,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shmem: int,
        cluster: tuple[int, int, int] | None,
        cooperative: bool,
        pss: bool,
    ) -> None:
        if type(stream) is not StreamHandle:
            raise TypeError("stream must be a StreamHandle")
        stream._live()
        cfg = driver.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes = shmem
        cfg.hStream = _CUstream(stream.address)
        attrs = []
        if cluster is not None:
            a = driver.CUlaunchAttribute()
            a.id = _ATTR.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            dim = a.value.clusterDim
            dim.x, dim.y, dim.z = cluster
            attrs.append(a)
        if cooperative:
            a = driver.CUlaunchAttribute()
            a.id = _ATTR.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
            a.value.cooperative = 1
            attrs.append(a)
        if pss:
            a = driver.CUlaunchAttribute()
            a.id = _ATTR.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            a.value.programmaticStreamSerializationAllowed = 1
            attrs.append(a)
        if attrs:
            cfg.attrs = attrs
        cfg.numAttrs = len(attrs)
        self._cfg = cfg  # owns the struct (and its attribute array) that _address points at
        self._address = cfg.getPtr()
        self.stream = stream

    @property
    def values(self) -> tuple[Any, ...]:
        """What the stored ``CUlaunchConfig`` hands the driver, read back from it: (grid in
        blocks, block, shared memory bytes, cluster or None, cooperative, pss)."""
        cfg = self._cfg
        cluster, coop, serial = None, False, False
        for i in range(cfg.numAttrs):
            a = cfg.attrs[i]
            if a.id == _ATTR.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
                dim = a.value.clusterDim
                cluster = (dim.x, dim.y, dim.z)
            elif a.id == _ATTR.CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
                coop = bool(a.value.cooperative)
            elif a.id == _ATTR.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
                serial = bool(a.value.programmaticStreamSerializationAllowed)
        return (
            (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
            (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ),
            cfg.sharedMemBytes,
            cluster,
            coop,
            serial,
        )

    def launch(self, function: int, params: int) -> int:
        """``cuLaunchKernelEx(config, function, params, NULL)``: the status (0: success)."""
        if self.stream._released:
            raise _closed("stream")
        fn = _launch_fn
        if fn is not None:
            return fn(self._address, function, params, None)  # type: ignore[no-any-return]
        return int(driver.cuLaunchKernelEx(self._cfg, driver.CUfunction(function), params, 0)[0])


def types_match(args: tuple[Any, ...], types: tuple[type, ...]) -> bool:
    """Whether ``args`` has exactly the types ``types``, in order."""
    return len(args) == len(types) and all(type(a) is t for a, t in zip(args, types))


# The interop readers (stated in cuda_core/_handles/_pure_interop.py; see the protocol above).
from ._pure_interop import (  # noqa: E402, I001
    AMBIGUOUS as AMBIGUOUS,
    ViewInfo as ViewInfo,
    dlpack_view as dlpack_view,
    read_capsule as read_capsule,
    record_wait as record_wait,
    set_order_event as set_order_event,
    torch_setup as torch_setup,
    torch_view as torch_view,
)
