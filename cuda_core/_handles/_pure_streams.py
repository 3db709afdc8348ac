"""The pure-Python backend's contexts, streams and events (see :mod:`cuda_core._handles._protocol`).

A context handle keeps the idle streams and events of its context; a released stream or event
goes back to those pools when its work is done and its context is unchanged.
"""

from __future__ import annotations

from typing import Any

from .._compat import driver
from . import _pure_common
from ._pure_common import _check, _closed, _ctx_id, _Current, _fail, _is_finalizing, _warn
from ._tokens import LAST_TOKEN as _LAST_TOKEN

__all__: list[str] = []  # private module

_CUstream = driver.CUstream
_CUevent = driver.CUevent
_SUCCESS = 0
_NOT_READY = int(driver.CUresult.CUDA_ERROR_NOT_READY)
_INTERPROCESS = int(driver.CUevent_flags.CU_EVENT_INTERPROCESS)
_STREAM_POOL_CAP = 32
_EVENT_POOL_CAP = 64

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
            raise _fail(int(driver.CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED), "cuCtxGetId")

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


class StreamHandle:
    """A stream: owned (pooled or destroyed at release) or borrowed (never destroyed)."""

    __slots__ = (
        "__weakref__",
        "_flags",
        "_gen",
        "_owns",
        "_priority",
        "address",
        "ctx",
        "is_released",
        "owner",
    )

    address: int
    ctx: ContextHandle | None
    owner: Any
    _owns: bool
    _flags: int
    _priority: int | None
    _gen: int
    is_released: bool  # a plain slot: read on every stream-ordered call

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
        self.is_released = False
        return self

    @classmethod
    def borrow(
        cls, address: int, ctx: ContextHandle | None = None, owner: Any = None
    ) -> StreamHandle:
        """A stream cuda_core does not own (``owner`` is kept alive until release)."""
        address = int(address)
        if address < 0 or address >> 64:  # an address, as the native backend reads it
            raise OverflowError(
                "can't convert negative int to unsigned"
                if address < 0
                else "int too big to convert"
            )
        self = object.__new__(cls)
        self.address = address
        self.ctx = ctx
        self.owner = owner
        self._owns = False
        self._flags = -1
        self._priority = None
        self._gen = 0
        self.is_released = False
        return self

    @property
    def is_owned(self) -> bool:
        return self._owns

    def _live(self) -> Any:
        if self.is_released:
            raise _closed("Stream")
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

    def context(self) -> ContextHandle | None:
        """The handle of the context work on this stream runs in (the rules: ``_protocol``)."""
        ctx = self.ctx
        if ctx is not None:
            return ctx
        token = self.address <= _LAST_TOKEN
        if token:  # a token's answer needs no stream: the current context
            err, cur = driver.cuCtxGetCurrent()
            if err or cur is None or not int(cur):
                return None  # no context is current: the token names no stream now
            address = int(cur)
        else:
            err, c = driver.cuStreamGetCtx(self._live())
            _check(err, "cuStreamGetCtx")
            address = int(c)
        found = _pure_common._context_of(address)
        if type(found) is not ContextHandle:
            raise TypeError(
                f"the context registry returned {type(found).__name__}, not a ContextHandle"
            )
        if token:
            return found  # "the current context's stream": never pinned to one context
        if self.ctx is None:
            self.ctx = found
        return self.ctx

    def release(self) -> None:
        """Give the stream back once: pooled when owned, idle and its context unchanged;
        destroyed when owned and busy; forgotten when its context is gone or it is borrowed."""
        if self.is_released:
            return
        self.is_released = True
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
        if not self.is_released and not _is_finalizing():
            try:
                self.release()
            except Exception as exc:
                _warn("a stream", self.address, exc)


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
            raise _closed("Event")
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
        """Give the event back once (the rules: ``EventHandle`` in ``_protocol``)."""
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
                _warn("an event", self.address, exc)
