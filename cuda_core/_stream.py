"""Stream: an owned or borrowed CUDA stream, StreamOptions and the default-stream constants."""

from __future__ import annotations

from contextlib import nullcontext as _nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _links
from ._compat import driver
from ._context import Context, adopt_child
from ._event import Event, EventOptions, _new_object
from ._handles._backend import backend
from ._handles._contexts import CtxScope, current_context_handle
from ._handles._driver import ensure_driver
from ._handles._tokens import LAST_TOKEN as _LAST_TOKEN
from ._host_callbacks import launch_host_func
from ._interop._foreign_streams import _foreign_handle_attrs as _foreign_handle_attrs
from ._interop._foreign_streams import foreign_stream_handle
from ._utils import TypeValueError, arg_error, check_or_create_options, handle_return

if TYPE_CHECKING:
    from ._device import Device
    from ._device_resources import DeviceResources
    from .graph._builder import GraphBuilder

__all__ = ["LEGACY_DEFAULT_STREAM", "PER_THREAD_DEFAULT_STREAM", "Stream", "StreamOptions"]

_LEGACY = int(driver.CU_STREAM_LEGACY)
_WAIT_RULE = "an Event, a Stream, a graph builder or an object with __cuda_stream__"
_NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
_DEFAULT_FLAGS = int(driver.CUstream_flags.CU_STREAM_DEFAULT)
_StreamHandle = backend.StreamHandle
_borrow_handle = _StreamHandle.borrow
_DISABLE_TIMING = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_INTERPROCESS = int(driver.CUevent_flags.CU_EVENT_INTERPROCESS)


@dataclass
class StreamOptions:
    """Options for a new stream.

    Attributes
    ----------
    nonblocking : bool
        ``True`` (default): the stream does not synchronise with the legacy default stream.
    priority : int, optional
        The stream's priority; lower numbers mean higher priority. Must lie in the device's
        range (``cuCtxGetStreamPriorityRange``), checked when the stream is created.
    """

    nonblocking: bool = True
    priority: int | None = None

    def __post_init__(self) -> None:
        self.nonblocking = bool(self.nonblocking)  # any truth value, as in cuda.core
        if self.priority is not None and (
            isinstance(self.priority, bool) or not isinstance(self.priority, int)
        ):
            raise arg_error(
                "priority",
                "None or an int",
                self.priority,
                exc=TypeError,
                lead=f"Expected int, got {type(self.priority).__name__}",  # cuda.core's (Cython's)
            )


class Stream:
    """A CUDA stream: an ordered queue of work on one device.

    Obtain one from :meth:`Device.create_stream`, from ``Stream()`` / ``Stream(options=...)``
    (a new stream on the current device, or on device 0's primary context when no context is
    current, made current as the CUDA runtime does), from :meth:`Stream.from_handle` (borrowed)
    or by wrapping an object with ``__cuda_stream__`` (borrowed; the object is kept alive).
    Owned streams are destroyed by :meth:`close`, by leaving a ``with`` block, or when collected;
    borrowed and default streams are never destroyed.

    Examples
    --------
    >>> with Stream() as s:
    ...     launch(s, config, kernel, *args)
    ...     s.sync()
    """

    __slots__ = ("__weakref__", "_device_id", "_h", "_nonblocking", "_priority")

    # The StreamHandle: owns (or borrows) the driver stream, released at close(). The one source
    # of the stream's address (``_h.address``), of whether it is closed (``_h.is_released``) and
    # of its context (``_h.context()``: a borrowed stream's is found once and kept there).
    _h: Any
    _device_id: int  # the ordinal of its device; -1 until asked (a borrowed stream)
    _nonblocking: bool | None
    _priority: int | None

    def __new__(cls, obj: Any = None, options: StreamOptions | dict | None = None) -> Stream:
        Device = _links.Device

        if obj is not None:
            if options is not None:
                raise ValueError(
                    "obj and options cannot be both specified: options must be None when obj is "
                    "given (a borrowed stream keeps its own)"
                )
            return cls._from_foreign(obj)
        ensure_driver()
        dev = Device()
        if dev._ctx is None:
            if Device._has_current():
                dev._primary_ctx()
                # A context is current (perhaps not the primary one): create the stream there.
                return cls._create(dev, options, use_current=True)
            dev.set_current()
        return cls._create(dev, options)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def _wrap(
        cls, address: int, device: Device | None, ctxh: Any = None, *, owner: Any = None
    ) -> Stream:
        """A borrowed stream at ``address`` (of ``device`` when known; in the context of the
        ContextHandle ``ctxh`` when known, else found by its handle on first use)."""
        self = _new_stream(cls)
        self._h = _borrow_handle(address, ctxh, owner)
        self._device_id = -1 if device is None else device._id
        self._nonblocking = None
        self._priority = None
        return self

    @classmethod
    def _create(
        cls, device: Device, options: Any, use_current: bool = False, ctxh: Any = None
    ) -> Stream:
        """A new owned stream on ``device``: in its primary context, in the current one
        (``use_current``), or through the ContextHandle ``ctxh`` (a context cuda_core made)."""
        if options is None:
            flags, priority = _NON_BLOCKING, None
        else:
            opts = check_or_create_options(StreamOptions, options, "options")
            flags = _NON_BLOCKING if opts.nonblocking else _DEFAULT_FLAGS
            priority = opts.priority
        if ctxh is None:
            ctxh = current_context_handle(device._ctxh) if use_current else device._context_handle()
        if priority is not None:
            # (the range of the context the stream is made in, made current for the query)
            at = ctxh.address
            with _nullcontext() if use_current else CtxScope(_CUcontext(at), at):
                least, greatest = handle_return(
                    driver.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange"
                )
            if not greatest <= priority <= least:
                raise arg_error(
                    "priority",
                    f"in [{greatest}, {least}] on {device.name} (lower is higher priority)",
                    priority,
                )
        return cls._adopt(ctxh.create_stream(flags, priority), device, flags, priority)

    @classmethod
    def _adopt(cls, h: Any, device: Device, flags: int, priority: int | None) -> Stream:
        """An owned stream over the StreamHandle ``h`` (pooled or destroyed when closed or
        collected, by the handle)."""
        self = _new_stream(cls)
        self._h = h
        self._device_id = device._id
        self._nonblocking = flags == _NON_BLOCKING
        self._priority = priority
        return self

    @classmethod
    def _from_foreign(cls, obj: Any) -> Stream:
        raw = foreign_stream_handle(obj)
        ensure_driver()
        return _borrow(cls, raw, obj)

    @classmethod
    def from_handle(cls, handle: int) -> Stream:
        """Wrap an existing stream handle (an ``int`` address or ``CUstream``) without owning it.

        The stream is never destroyed by cuda_core; the caller keeps it alive while in use.
        """
        if isinstance(handle, driver.CUstream):
            handle = int(handle)
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise arg_error("handle", "an int stream address or a CUstream", handle, exc=TypeError)
        ensure_driver()
        return _borrow(cls, handle, None)

    @classmethod
    def _legacy_default(cls, device: Device) -> Stream:
        """``device.default_stream``: bound to the device's primary context once it has one
        (a :class:`_DeviceDefaultStream`); before that, the token as it is (it then follows
        whatever context is current, as :data:`LEGACY_DEFAULT_STREAM` does)."""
        ctxh = device._ctxh
        if ctxh is None:
            return cls._wrap(_LEGACY, device)
        # Its context goes with it to the handle layer; the plain twin shares the handle.
        bound: Any = _DeviceDefaultStream._wrap(_LEGACY, device, ctxh)
        bound._plain = plain = _new_stream(Stream)
        plain._h = bound._h
        plain._device_id = device._id
        plain._nonblocking = None
        plain._priority = None
        return bound

    # -- facts --------------------------------------------------------------------------------

    def _live(self) -> int:
        """The stream's address; ``RuntimeError`` once closed."""
        h = self._h
        if h.is_released:
            raise RuntimeError("Stream has been closed")
        return h.address  # type: ignore[no-any-return]

    @property
    def handle(self) -> driver.CUstream:
        """The driver handle (``cuda.bindings.driver.CUstream``); ``int(handle)`` is its address.

        ``CUstream(0)`` once the stream is closed (as in ``cuda.core``; every other query
        raises ``RuntimeError`` then). A new ``CUstream`` each time, made from the handle.
        """
        h = self._h
        return _CUstream(0 if h.is_released else h.address)

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._h.is_released  # type: ignore[no-any-return]

    @property
    def is_nonblocking(self) -> bool:
        """Whether the stream does not synchronise with the legacy default stream."""
        h = self._live()
        if self._nonblocking is None:
            flags = handle_return(driver.cuStreamGetFlags(h), "cuStreamGetFlags")
            self._nonblocking = bool(int(flags) & _NON_BLOCKING)
        return self._nonblocking

    @property
    def priority(self) -> int:
        """The stream's priority (lower is higher priority)."""
        h = self._live()
        if self._priority is None:
            self._priority = int(
                handle_return(driver.cuStreamGetPriority(h), "cuStreamGetPriority")
            )
        return self._priority

    @property
    def device(self) -> Device:
        """The :class:`Device` the stream belongs to."""
        h = self._live()
        ordinal = self._device_id
        if ordinal < 0:
            ordinal = int(handle_return(driver.cuStreamGetDevice(h), "cuStreamGetDevice"))
            if h > _LAST_TOKEN:
                self._device_id = ordinal  # the default streams follow the current context
        return _links.Device(ordinal)  # type: ignore[no-any-return]

    def _context_address(self) -> int:
        """The address of the context work on this stream runs in, from its handle (a default
        stream's: the current context's; none current: the driver's ``cuStreamGetCtx`` error)."""
        address = self._live()
        ctxh = self._h.context()
        if ctxh is None:  # a default-stream token, no context current: the driver says so
            return int(handle_return(driver.cuStreamGetCtx(address), "cuStreamGetCtx"))
        return ctxh.address  # type: ignore[no-any-return]

    @property
    def context(self) -> Context:
        """The :class:`Context` the stream belongs to."""
        ordinal = self._device_id
        device = None if ordinal < 0 else _links.Device(ordinal)
        return Context._from_ctx(driver.CUcontext(self._context_address()), device)

    @property
    def resources(self) -> DeviceResources:
        """The resources provisioned for the stream's context (a green context's partition,
        else the whole device's); see :attr:`Context.resources`."""
        return self.context.resources

    def __cuda_stream__(self) -> tuple[int, int]:
        """The stream protocol: ``(0, handle_address)``; ``RuntimeError`` once closed."""
        return (0, self._live())

    def __int__(self) -> int:
        return self._h.address  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Stream):
            return NotImplemented
        a, b = self._h, other._h
        return a.address == b.address and a.is_released == b.is_released  # type: ignore[no-any-return]

    def __hash__(self) -> int:
        return hash(("Stream", self._h.address))

    def __repr__(self) -> str:
        h = self._h
        if h.is_released:
            return f"<Stream handle=0x{h.address:x} closed>"
        try:  # cuda.core's format; the context is found once (and kept) for a non-default stream
            ctx = self._context_address()
        except Exception:  # no current context for a default stream: say so rather than raise
            ctx = 0
        return f"<Stream handle=0x{h.address:x} context=0x{ctx:x}>"

    # -- work ---------------------------------------------------------------------------------

    def sync(self) -> None:
        """Block the calling thread until all work queued on the stream is done."""
        self._h.sync()  # a released handle refuses: RuntimeError("Stream has been closed")

    def record(
        self, event: Event | None = None, options: EventOptions | dict | None = None
    ) -> Event:
        """Record *event* (a new one made with *options* if none is given) on this stream.

        Returns
        -------
        Event
            The recorded event; it completes when all work queued before it has.

        Raises
        ------
        TypeError
            ``event`` is IPC-enabled: such an event is recorded once, when it is made (as in
            ``cuda.core``); record a new one with ``options=EventOptions(ipc_enabled=True)``.
        """
        if event is None:
            h, ordinal = self._h, self._device_id
            ctxh = h.ctx
            if options is None and ctxh is not None and ordinal >= 0 and ctxh.device >= 0:
                if not h.is_released:  # the usual case (the branch below, Event._wrap inlined)
                    ev = _new_object(Event)
                    ev._h, ev._device_id = ctxh.record_event(_DISABLE_TIMING, h), ordinal
                    ev._flags = _DISABLE_TIMING
                    return ev
            if h.is_released:
                raise RuntimeError("Stream has been closed: nothing can be recorded on it")
            if options is None:
                flags = _DISABLE_TIMING
            else:
                flags = check_or_create_options(EventOptions, options, "options")._flags()
            if ctxh is not None and ordinal >= 0 and ctxh.device >= 0:
                # the usual case: a stream of a primary context; the event is pooled there
                ev = Event._wrap(ctxh.record_event(flags, h), ordinal)
            else:
                dev = None if ordinal < 0 else _links.Device(ordinal)
                if dev is None or dev._ctxh is None:
                    dev = self._owning_device()
                if ctxh is None or ctxh is dev._ctxh:
                    ev = Event._wrap(dev._ctxh.record_event(flags, h), dev._id)
                else:  # a stream of another context: the event is made (pooled) in that context
                    ev = Event._wrap(adopt_child(ctxh.record_event(flags, h), ctxh), dev._id)
            if flags & _INTERPROCESS:
                # Its descriptor is made now, on this thread: multiprocessing pickles a Queue's
                # items on a thread of its own, which then calls no driver function.
                try:
                    ev.ipc_descriptor  # noqa: B018  (made and kept by the event)
                except BaseException:
                    ev.close()
                    raise
            return ev  # type: ignore[no-any-return]
        if type(event) is Event and options is None and not event._flags & _INTERPROCESS:
            # Re-recording an event, the common case: nothing else to decide. A closed stream
            # or event has released its handle, which refuses: "... has been closed".
            event._h.record(self._h)
            return event
        if type(event) is not Event and not isinstance(event, Event):
            raise arg_error(
                "event",
                "an Event or None",
                event,
                exc=TypeError,
                lead=f"Event expected, got {type(event).__name__}",
            )
        if options is not None:
            raise ValueError("options must be None when an event is given")
        if event._flags & _INTERPROCESS:
            raise TypeError(
                "IPC-enabled events should not be re-recorded, instead create a new event by "
                "supplying options: an IPC-enabled event is recorded once, when it is made "
                "(another process may be waiting on that record); record a new one with "
                "options=EventOptions(ipc_enabled=True)"
            )
        # A closed stream or event has released its handle, which refuses: "... has been closed".
        event._h.record(self._h)
        return event

    def wait(self, event_or_stream: Any) -> None:
        """Make later work on this stream wait for an event, or for all work now on another stream.

        Waiting is done on the device; the calling thread does not block.

        Parameters
        ----------
        event_or_stream : Event, Stream, GraphBuilder or IsStreamType
            What to wait for: an event's last record, or everything queued so far on a stream
            (a PyTorch or CuPy stream, or any object with ``__cuda_stream__``, works as it is).

        Raises
        ------
        TypeError, ValueError
            ``event_or_stream`` is none of these (one exception of both classes: ``cuda.core``
            raises ``ValueError`` there).
        RuntimeError
            The stream or the event is closed.
        """
        if isinstance(event_or_stream, Event):
            if event_or_stream._h.is_released:  # not .handle: waiting records nothing
                raise RuntimeError("Event has been closed")
            self._live()
            self._h.wait(event_or_stream._h)
            return
        self._live()
        try:
            other = as_stream(event_or_stream, "event_or_stream", _WAIT_RULE)
        except TypeError as exc:
            if isinstance(exc, ValueError):
                raise
            # cuda.core raises ValueError for what it cannot wait on: ours is both classes.
            raise TypeValueError(
                "only an Event, Stream, or object supporting __cuda_stream__ can be waited, got "
                f"{type(event_or_stream)}: {exc}"
            ) from exc
        a, b = self._h, other._h
        if a.address == b.address and (a.address > _LAST_TOKEN or a.ctx is b.ctx):
            return
        # An event made in *other*'s context and recorded on it (a stream of another device
        # takes only events of its own context), which this stream then waits for: a stream may
        # wait for an event of any device. A plain default-stream token is recorded in this
        # stream's context. Waiting captures the record, so the event is given back at once.
        with self._owning_device()._scope():
            ev = other.record()
        try:
            self._h.wait(ev._h)
        finally:
            ev.close()

    def _owning_device(self) -> Device:
        dev = self.device
        if dev._ctx is None:
            dev._primary_ctx()
        return dev

    def create_graph_builder(self) -> GraphBuilder:
        """A graph builder that captures work on this stream."""
        self._live()
        return _links.graph_builder(self, False)

    def launch_host_func(self, fn: Any, *args: Any) -> None:
        """Run the Python callable ``fn(*args)`` on a driver thread once earlier work is done.

        The callable must not call CUDA. An exception it raises is reported through
        ``sys.unraisablehook``; it never crashes the process.
        """
        launch_host_func(self, fn, *args)

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Destroy the stream if cuda_core owns it (idempotent; borrowed streams are left alone).

        Work already queued on the stream still completes.
        """
        self._h.release()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _DeviceDefaultStream(Stream):
    """``Device.default_stream`` of a device with a context: its primary context's legacy
    default stream, whatever context is current on the calling thread.

    The driver names the legacy default stream of every context with one token
    (``CU_STREAM_LEGACY``), which means "the current context's". So that work queued here runs
    on this device (also from a thread where another device is current), each operation makes
    the device's context current for the call and restores the caller's: the methods below;
    launches (``launch`` runs the plain twin ``_plain`` inside the scope); allocations, frees,
    copies and fills (their context goes with the stream: the handle's ``ctx``).
    """

    __slots__ = ("_plain",)

    _plain: Stream  # the same stream as a plain Stream, for calls made with the context current

    def _scope(self) -> CtxScope:
        """The device's primary context made current (its handle carries it), from any thread."""
        address = self._h.ctx.address  # type: ignore[union-attr]
        return CtxScope(driver.CUcontext(address), address)

    def sync(self) -> None:
        """Block the calling thread until all work queued on the stream is done."""
        with self._scope():
            Stream.sync(self)

    def record(
        self, event: Event | None = None, options: EventOptions | dict | None = None
    ) -> Event:
        """Record *event* (a new one made with *options* if none is given) on this stream."""
        with self._scope():
            return Stream.record(self, event, options)

    def wait(self, event_or_stream: Any) -> None:
        """Make later work on this stream wait for an event, or for all work now on another stream."""
        with self._scope():
            Stream.wait(self, event_or_stream)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _DeviceDefaultStream):  # one token, but two devices' streams
            a, b = self._h, other._h
            return a.ctx.address == b.ctx.address and a.is_released == b.is_released  # type: ignore[no-any-return]
        return Stream.__eq__(self, other)

    def __hash__(self) -> int:
        return Stream.__hash__(self)


_CUstream = driver.CUstream
_CUcontext = driver.CUcontext
_new_stream = object.__new__


def _borrow(cls: type[Stream], raw: int, owner: Any) -> Stream:
    """``Stream._wrap(raw, None, owner=owner)``, inlined for foreign streams."""
    self = _new_stream(cls)
    self._h = _borrow_handle(raw, None, owner)
    self._device_id = -1
    self._nonblocking = None
    self._priority = None
    return self


def as_stream(
    obj: Any,
    name: str = "stream",
    rule: str = "a Stream, a graph builder or an object with __cuda_stream__",
) -> Stream:
    """Resolve a stream argument: a Stream, a graph builder, or an object with ``__cuda_stream__``
    (``TypeError`` naming ``name`` and ``rule`` for anything else)."""
    if type(obj) is Stream:
        return obj
    if isinstance(obj, Stream):
        return obj
    if _foreign_handle_attrs.get(obj.__class__):  # a PyTorch or CuPy stream class seen before
        return Stream._from_foreign(obj)
    inner = getattr(obj, "_cuda_core_stream", None)
    if isinstance(inner, Stream):
        return inner
    if obj is not None and (
        hasattr(obj, "__cuda_stream__") or type(obj).__module__.startswith(("cupy", "torch"))
    ):
        return Stream._from_foreign(obj)
    raise arg_error(
        name,
        rule,
        obj,
        "create one with Device.create_stream()" if obj is None else "",
        exc=TypeError,
    )


LEGACY_DEFAULT_STREAM: Stream = Stream._wrap(_LEGACY, None)
"""The legacy default stream of the current context (synchronises with blocking streams)."""

PER_THREAD_DEFAULT_STREAM: Stream = Stream._wrap(int(driver.CU_STREAM_PER_THREAD), None)
"""The per-thread default stream of the current context."""


_links.Stream = Stream
_links.as_stream = as_stream
