"""Event: a marker in a stream, for waiting, timing and cross-process signalling."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _links
from ._compat import driver
from ._context import Context, adopt_child
from ._handles._backend import backend
from ._handles._driver import ensure_driver
from ._utils import TypeValueError, arg_error, check_or_create_options, handle_return
from ._utils._renamed import getter_method, renamed_fields, renamed_property

if TYPE_CHECKING:
    from ._device import Device

__all__ = ["Event", "EventOptions", "IPCEventDescriptor"]

_SUCCESS = driver.CUresult.CUDA_SUCCESS
_IPC_HANDLE_BYTES = 64  # CU_IPC_HANDLE_SIZE


def _handle_bytes(ipc: Any) -> bytes:
    # Through the struct's memory: its ``reserved`` field is not an attribute in every
    # cuda-bindings release (12.9 and 13.5 have none).
    return ctypes.string_at(ipc.getPtr(), _IPC_HANDLE_BYTES)


_NOT_READY = int(driver.CUresult.CUDA_ERROR_NOT_READY)
_DISABLE_TIMING = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_BLOCKING_SYNC = int(driver.CUevent_flags.CU_EVENT_BLOCKING_SYNC)
_INTERPROCESS = int(driver.CUevent_flags.CU_EVENT_INTERPROCESS)
_new_object = object.__new__


@renamed_fields(
    {
        "enable_timing": "timing_enabled",
        "busy_waited_sync": "blocking_sync",
        "support_ipc": "ipc_enabled",
    }
)
@dataclass
class EventOptions:
    """Options for a new event.

    The names earlier ``cuda.core`` releases used (``enable_timing``, ``busy_waited_sync``,
    ``support_ipc``) are taken too, with a ``DeprecationWarning`` naming the current one.

    Attributes
    ----------
    timing_enabled : bool
        Record timestamps so that ``end - start`` gives elapsed milliseconds (default ``False``:
        events without timing are cheaper).
    blocking_sync : bool
        :meth:`Event.sync` blocks the thread instead of spinning.
    ipc_enabled : bool
        The event can be shared with another process (:attr:`Event.ipc_descriptor`); requires
        ``timing_enabled=False``. As in ``cuda.core``, an IPC-enabled event is made by
        :meth:`Stream.record` (``stream.record(options=EventOptions(ipc_enabled=True))``) and
        recorded once: record a new one for each signal.
    """

    timing_enabled: bool | None = False
    blocking_sync: bool | None = False
    ipc_enabled: bool | None = False

    def __post_init__(self) -> None:
        for field in ("timing_enabled", "blocking_sync", "ipc_enabled"):
            value = getattr(self, field)
            # Exactly a bool or None (unset), as in cuda.core, which refuses 1 and numpy.True_ here.
            if value is not None and not isinstance(value, bool):
                raise arg_error(
                    field,
                    "True, False or None",
                    value,
                    exc=TypeError,
                    lead=f"Expected bool, got {type(value).__name__}",  # cuda.core's (Cython's)
                )

    def _flags(self) -> int:
        # Checked when an event is made, as in cuda.core (which raises TypeError there).
        if self.ipc_enabled and self.timing_enabled:
            raise arg_error(
                "timing_enabled",
                "False when ipc_enabled is True",
                True,
                "CUDA IPC events cannot record timing",
                exc=TypeValueError,
                lead="IPC-enabled events cannot use timing.",
            )
        flags = 0 if self.timing_enabled else _DISABLE_TIMING
        if self.blocking_sync:
            flags |= _BLOCKING_SYNC
        if self.ipc_enabled:
            flags |= _INTERPROCESS
        return flags


class IPCEventDescriptor:
    """A picklable description of an IPC-enabled event, to open it in another process.

    From :attr:`Event.ipc_descriptor`; opened by :meth:`Event.from_ipc_descriptor`. It carries
    no file descriptor and pickles anywhere.
    """

    __slots__ = ("_busy_wait", "_reserved")

    def __init__(self, reserved: bytes, busy_wait: bool = True) -> None:
        if not isinstance(reserved, bytes) or len(reserved) != 64:
            raise arg_error(
                "reserved", "64 bytes from Event.ipc_descriptor", reserved, exc=TypeError
            )
        self._reserved = reserved
        self._busy_wait = bool(busy_wait)

    def __reduce__(self) -> tuple[Any, ...]:
        return (IPCEventDescriptor, (self._reserved, self._busy_wait))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IPCEventDescriptor) and self._reserved == other._reserved

    def __hash__(self) -> int:
        return hash(self._reserved)

    def __repr__(self) -> str:
        return f"<IPCEventDescriptor {self._reserved[:8].hex()}...>"


class Event:
    """A CUDA event: records a point in a stream's work.

    Created by :meth:`Device.create_event` or :meth:`Stream.record`. ``end - start`` gives the
    elapsed time in milliseconds between two completed events created with
    ``EventOptions(timing_enabled=True)``. The event's driver handle is owned by an
    ``EventHandle`` of the handle layer, which holds the event's context handle; closing the
    event (or collecting it) gives the handle back to the context's idle pool or destroys it
    (an IPC-enabled event is always destroyed: another process may hold it).

    An IPC-enabled event (made by ``stream.record(options=EventOptions(ipc_enabled=True))``)
    is sent to another process through ``multiprocessing`` (a ``Process`` argument, a ``Queue``
    or a ``Pipe``: the receiver opens it), or as its :attr:`ipc_descriptor`. Keep it open
    until the other process has waited on it.
    """

    __slots__ = ("__weakref__", "_device_id", "_flags", "_h", "_handle", "_ipc")

    _h: Any  # the EventHandle (released once closed)
    _handle: driver.CUevent  # the binding object, set on first use of .handle (unset before)
    _device_id: int  # the ordinal of the device it was created on
    _flags: int  # the CUevent_flags it was created with
    _ipc: IPCEventDescriptor  # the descriptor of an IPC event, set once asked for (or opened from)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "Event objects cannot be instantiated directly. Please use Stream APIs (record): "
            "Stream.record() or Device.create_event()"
        )

    @classmethod
    def _wrap(cls, h: Any, device_id: int) -> Event:
        # Device.create_event and Stream.record() build their common case inline, as here.
        self = _new_object(cls)
        self._h = h
        self._device_id = device_id
        self._flags = h.flags
        return self

    @classmethod
    def _create(cls, device: Device, options: Any, ctx: Context | None = None) -> Event:
        """A new event on ``device``: in its primary context, or in ``ctx`` (an open context of
        it, the one ``Device.set_current(ctx)`` bound)."""
        flags = (
            _DISABLE_TIMING
            if options is None
            else check_or_create_options(EventOptions, options, "options")._flags()
        )
        if flags & _INTERPROCESS:
            raise TypeError(
                "IPC-enabled events must be bound; use Stream.record for creation: an IPC-enabled "
                "event is recorded when it is made, with "
                "stream.record(options=EventOptions(ipc_enabled=True)), not Device.create_event()"
            )
        if ctx is None:
            return cls._wrap(device._context_handle().create_event(flags), device._id)
        ctxh = ctx._context_handle()
        return cls._wrap(adopt_child(ctxh.create_event(flags), ctxh), device._id)

    def _check_open(self) -> None:
        if self._h.is_released:
            raise RuntimeError("Event has been closed")

    @property
    def handle(self) -> driver.CUevent:
        """The driver handle (``cuda.bindings.driver.CUevent``); ``CUevent(0)`` once closed."""
        if self._h.is_released:
            return driver.CUevent(0)  # as cuda.core: a closed event's handle is NULL, not an error
        self._h.expose()  # whoever holds the handle may record it: not pooled as never recorded
        try:
            return self._handle
        except AttributeError:  # first use (left unset by the factories: one store fewer)
            h = self._handle = driver.CUevent(self._h.address)
            return h

    @property
    def _recorded(self) -> bool:
        return bool(self._h.recorded)

    @property
    def device(self) -> Device:
        """The :class:`Device` the event was created on."""
        self._check_open()
        return _links.Device(self._device_id)  # type: ignore[no-any-return]

    @property
    def context(self) -> Context:
        """The :class:`Context` the event was created in (for an event recorded on a stream of
        a context made by :meth:`Device.create_context`, that context, green or not)."""
        self._check_open()
        dev = _links.Device(self._device_id)
        ctxh = self._h.ctx
        if ctxh is not None and ctxh.address != dev._ctx_int:
            return Context._from_ctx(driver.CUcontext(ctxh.address), dev)
        return Context._from_ctx(dev._require_ctx("Event.context"), dev)  # the primary context

    @property
    def is_timing_enabled(self) -> bool:
        """Whether the event records timestamps (``EventOptions(timing_enabled=True)``)."""
        self._check_open()
        return not self._flags & _DISABLE_TIMING

    @property
    def is_blocking_sync(self) -> bool:
        """Whether :meth:`sync` blocks the thread instead of spinning."""
        self._check_open()
        return bool(self._flags & _BLOCKING_SYNC)

    # Spellings of cuda.core before 1.0, each with a DeprecationWarning naming the current one.
    is_timing_disabled = renamed_property(
        "Event", "is_timing_disabled", "is_timing_enabled", convert=lambda v: not v
    )
    is_sync_busy_waited = renamed_property(
        "Event", "is_sync_busy_waited", "is_blocking_sync", convert=lambda v: not v
    )
    get_ipc_descriptor = getter_method("Event", "get_ipc_descriptor", "ipc_descriptor")

    @property
    def is_ipc_enabled(self) -> bool:
        """Whether the event can be shared with another process."""
        self._check_open()
        return bool(self._flags & _INTERPROCESS)

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._h.is_released

    @property
    def is_done(self) -> bool:
        """Whether all work recorded before the event has completed (never blocks)."""
        if self._h.is_released:
            raise RuntimeError("Event has been closed")
        return bool(self._h.query())

    def sync(self) -> None:
        """Block the calling thread until the event has completed."""
        if self._h.is_released:  # not .handle: waiting records nothing (see _recorded)
            raise RuntimeError("Event has been closed")
        self._h.sync()

    def __sub__(self, other: Event) -> float:
        """Milliseconds elapsed from *other* (the start) to this event (the end)."""
        if not isinstance(other, Event):
            return NotImplemented
        for ev, role in ((other, "start"), (self, "end")):
            if ev._h.is_released:
                raise RuntimeError(f"Event has been closed: the {role} event cannot be timed")
            if ev._flags & _DISABLE_TIMING:
                raise RuntimeError(
                    f"Both Events must be created with timing enabled: the {role} event was "
                    "created without timing; create both with EventOptions(timing_enabled=True)"
                )
            if not ev._recorded:
                raise RuntimeError(
                    f"Both Events must be recorded before they can be subtracted: the {role} "
                    "event was never recorded on a stream; record both with Stream.record()"
                )
        err, ms = driver.cuEventElapsedTime(
            driver.CUevent(other._h.address), driver.CUevent(self._h.address)
        )
        if err == _NOT_READY:
            raise RuntimeError(
                "One or both events have not completed: call sync() on the end event first (or "
                "Stream.sync(), Device.sync()) before subtracting them"
            )
        return float(handle_return((err, ms), "cuEventElapsedTime"))

    @property
    def ipc_descriptor(self) -> IPCEventDescriptor:
        """A picklable descriptor another process opens with :meth:`from_ipc_descriptor`.

        Returns
        -------
        IPCEventDescriptor
            Made once per event (an event opened from a descriptor returns that descriptor).

        Raises
        ------
        RuntimeError
            The event is closed or not IPC-enabled.
        """
        self._check_open()
        desc: IPCEventDescriptor | None = getattr(self, "_ipc", None)
        if desc is None:
            if not self._flags & _INTERPROCESS:
                raise RuntimeError(
                    "Event is not IPC-enabled; record one with "
                    "stream.record(options=EventOptions(ipc_enabled=True))"
                )
            ipc = handle_return(
                driver.cuIpcGetEventHandle(driver.CUevent(self._h.address)), "cuIpcGetEventHandle"
            )
            desc = self._ipc = IPCEventDescriptor(_handle_bytes(ipc), not self.is_blocking_sync)
        return desc

    @classmethod
    def from_ipc_descriptor(cls, ipc_descriptor: IPCEventDescriptor) -> Event:
        """Open an event shared by another process, in the current device's context.

        Parameters
        ----------
        ipc_descriptor : IPCEventDescriptor
            From :attr:`ipc_descriptor` in the exporting process.

        Returns
        -------
        Event
            Owned by this process (closing it closes this process's handle only). Wait on it
            with :meth:`Stream.wait` or :meth:`sync`; it cannot be recorded here.

        Raises
        ------
        TypeError
            ``ipc_descriptor`` is not an IPCEventDescriptor.
        CUDAError
            No context is current (call ``Device.set_current()`` first), or the driver cannot
            open the event.
        """
        Device = _links.Device

        if not isinstance(ipc_descriptor, IPCEventDescriptor):
            raise arg_error(
                "ipc_descriptor", "an IPCEventDescriptor", ipc_descriptor, exc=TypeError
            )
        dev = Device()
        dev._require_ctx("Event.from_ipc_descriptor")
        return cls._open(ipc_descriptor, dev)

    @classmethod
    def _open(cls, desc: IPCEventDescriptor, dev: Device) -> Event:
        ipc = driver.CUipcEventHandle()
        ctypes.memmove(ipc.getPtr(), desc._reserved, _IPC_HANDLE_BYTES)
        with dev._scope():
            handle = handle_return(driver.cuIpcOpenEventHandle(ipc), "cuIpcOpenEventHandle")
        flags = _DISABLE_TIMING | _INTERPROCESS | (0 if desc._busy_wait else _BLOCKING_SYNC)
        ev = cls._wrap(
            backend.EventHandle.adopt(int(handle), dev._context_handle(), flags), dev._id
        )
        ev._ipc = desc
        return ev

    def __reduce__(self) -> Any:
        raise TypeError(
            "an Event pickles only through multiprocessing (a Process argument, a Queue or a Pipe), "
            "and only when IPC-enabled; otherwise send event.ipc_descriptor and open it with "
            "Event.from_ipc_descriptor()"
        )

    def close(self) -> None:
        """Destroy the event (idempotent)."""
        self._h.release()

    def __enter__(self) -> Event:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self is other or (
            not self._h.is_released
            and not other._h.is_released
            and self._h.address == other._h.address
        )

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        if self._h.is_released:
            return "<Event closed>"
        return f"<Event handle=0x{self._h.address:x}>"


def rebuild_event(desc: IPCEventDescriptor, device_id: int) -> Event:
    """Unpickle an event sent through multiprocessing: open it in the current device's context,
    or, where no context is current yet (an argument of a new process), in the primary context
    of the sender's device ordinal ``device_id`` (not made current)."""
    Device = _links.Device

    ensure_driver()
    ordinal = backend.ctx_get_device()
    dev = Device(ordinal if ordinal >= 0 else device_id)
    dev._primary_ctx()
    return Event._open(desc, dev)
