"""Event: a marker in a stream, for waiting, timing and cross-process signalling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cuda.bindings import driver

from . import _fast
from ._utils import arg_error, check_or_create_options, handle_return, raise_status

if TYPE_CHECKING:
    from ._context import Context
    from ._device import Device

__all__ = ["Event", "EventOptions", "IPCEventDescriptor"]

_SUCCESS = driver.CUresult.CUDA_SUCCESS
_NOT_READY = int(driver.CUresult.CUDA_ERROR_NOT_READY)
_DISABLE_TIMING = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_BLOCKING_SYNC = int(driver.CUevent_flags.CU_EVENT_BLOCKING_SYNC)
_INTERPROCESS = int(driver.CUevent_flags.CU_EVENT_INTERPROCESS)
_cuEventCreate = driver.cuEventCreate
_EVENT = _fast.EVENT
_new_object = object.__new__

# Idle event handles kept for reuse, per (context, flags), as (handle, address) entries: creating
# an event then costs no driver call. Only events whose recorded work has completed are given
# back (so a recycled handle behaves as a new one), at most _POOL_CAP per key (_fast.own);
# IPC events are never kept.
_POOL_CAP = 64
_pool: dict[tuple[int, int], list[tuple[driver.CUevent, int]]] = {}


@dataclass
class EventOptions:
    """Options for a new event.

    Attributes
    ----------
    timing_enabled : bool
        Record timestamps so that ``end - start`` gives elapsed milliseconds (default ``False``:
        events without timing are cheaper).
    blocking_sync : bool
        :meth:`Event.sync` blocks the thread instead of spinning.
    ipc_enabled : bool
        The event can be shared with another process (:attr:`Event.ipc_descriptor`); requires
        ``timing_enabled=False``.
    """

    timing_enabled: bool = False
    blocking_sync: bool = False
    ipc_enabled: bool = False

    def __post_init__(self) -> None:
        for field in ("timing_enabled", "blocking_sync", "ipc_enabled"):
            value = getattr(self, field)
            if not isinstance(value, bool):
                raise arg_error(field, "a bool", value, exc=TypeError)
        if self.ipc_enabled and self.timing_enabled:
            raise arg_error(
                "timing_enabled", "False when ipc_enabled is True", True, "CUDA IPC events cannot record timing"
            )

    def _flags(self) -> int:
        flags = 0 if self.timing_enabled else _DISABLE_TIMING
        if self.blocking_sync:
            flags |= _BLOCKING_SYNC
        if self.ipc_enabled:
            flags |= _INTERPROCESS
        return flags


class IPCEventDescriptor:
    """A picklable description of an IPC-enabled event, to open it in another process."""

    __slots__ = ("_busy_wait", "_reserved")

    def __init__(self, reserved: bytes, busy_wait: bool = True) -> None:
        if not isinstance(reserved, bytes) or len(reserved) != 64:
            raise arg_error("reserved", "64 bytes from Event.ipc_descriptor", reserved, exc=TypeError)
        self._reserved = reserved
        self._busy_wait = busy_wait

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
    ``EventOptions(timing_enabled=True)``.
    """

    __slots__ = ("__weakref__", "_device", "_flags", "_handle", "_int", "_own", "_recorded")

    _handle: driver.CUevent | None  # None once closed
    _int: int
    _device: Device
    _flags: int  # the CUevent_flags it was created with
    _recorded: bool  # it may have been recorded: by Stream.record, or by anyone given .handle
    _own: _fast.Releaser

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Event cannot be constructed directly; use Device.create_event() or Stream.record()")

    @classmethod
    def _create(cls, device: Device, options: Any) -> Event:
        if options is None:
            flags = _DISABLE_TIMING
        else:
            flags = check_or_create_options(EventOptions, options, "options")._flags()
        if flags & _INTERPROCESS:
            pool = None
        else:
            key = (device._ctx_int, flags)
            pool = _pool.get(key)
            if pool is None:
                pool = _pool.setdefault(key, [])
        try:
            entry = pool.pop()  # type: ignore[union-attr]
        except (AttributeError, IndexError):  # no pool (IPC), or none idle
            with device._scope():
                handle = handle_return(_cuEventCreate(flags), "cuEventCreate")
            entry = (handle, int(handle))
        self = _new_object(cls)
        self._handle, self._int = entry
        self._device = device
        self._flags = flags
        self._recorded = False
        self._own = _fast.own(self, _EVENT, entry, pool, _POOL_CAP)
        return self

    @property
    def handle(self) -> driver.CUevent:
        """The driver handle (``cuda.bindings.driver.CUevent``)."""
        if self._handle is None:
            raise RuntimeError("the event is closed")
        self._recorded = True  # whoever holds the handle may record it: query before pooling
        return self._handle

    @property
    def device(self) -> Device:
        """The :class:`Device` the event was created on."""
        return self._device

    @property
    def context(self) -> Context:
        """The :class:`Context` the event was created in."""
        return self._device.context

    @property
    def is_timing_enabled(self) -> bool:
        """Whether the event records timestamps (``EventOptions(timing_enabled=True)``)."""
        return not self._flags & _DISABLE_TIMING

    @property
    def is_blocking_sync(self) -> bool:
        """Whether :meth:`sync` blocks the thread instead of spinning."""
        return bool(self._flags & _BLOCKING_SYNC)

    @property
    def is_timing_disabled(self) -> bool:
        """Whether the event records no timestamps."""
        return bool(self._flags & _DISABLE_TIMING)

    @property
    def is_sync_busy_waited(self) -> bool:
        """Whether :meth:`sync` spins (``True``) or blocks the thread."""
        return not self._flags & _BLOCKING_SYNC

    @property
    def is_ipc_enabled(self) -> bool:
        """Whether the event can be shared with another process."""
        return bool(self._flags & _INTERPROCESS)

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._handle is None

    @property
    def is_done(self) -> bool:
        """Whether all work recorded before the event has completed (never blocks)."""
        if self._handle is None:
            raise RuntimeError("the event is closed")
        err = _fast.event_query(self._int)
        if err == 0:
            return True
        if err == _NOT_READY:
            return False
        raise_status(err, "cuEventQuery")
        return False  # pragma: no cover

    def sync(self) -> None:
        """Block the calling thread until the event has completed."""
        h = self._handle  # not .handle: waiting records nothing (see _recorded)
        if h is None:
            raise RuntimeError("the event is closed")
        handle_return(driver.cuEventSynchronize(h), "cuEventSynchronize")

    def __sub__(self, other: Event) -> float:
        """Milliseconds elapsed from *other* (the start) to this event (the end)."""
        if not isinstance(other, Event):
            return NotImplemented
        for ev, role in ((other, "start"), (self, "end")):
            if ev._handle is None:
                raise RuntimeError(f"cannot time events: the {role} event is closed")
            if ev._flags & _DISABLE_TIMING:
                raise RuntimeError(
                    f"cannot time events: the {role} event was created without timing; "
                    "create both with EventOptions(timing_enabled=True)"
                )
            if not ev._recorded:
                raise RuntimeError(f"cannot time events: the {role} event was never recorded on a stream")
        err, ms = driver.cuEventElapsedTime(other._handle, self._handle)
        if err == _NOT_READY:
            raise RuntimeError("cannot time events: an event has not completed yet; call sync() on the end event first")
        return float(handle_return((err, ms), "cuEventElapsedTime"))

    @property
    def ipc_descriptor(self) -> IPCEventDescriptor:
        """A picklable descriptor another process opens with :meth:`from_ipc_descriptor`."""
        if not self._flags & _INTERPROCESS:
            raise RuntimeError("the event is not IPC-enabled; create it with EventOptions(ipc_enabled=True)")
        ipc = handle_return(driver.cuIpcGetEventHandle(self.handle), "cuIpcGetEventHandle")
        return IPCEventDescriptor(bytes(ipc.reserved), self.is_sync_busy_waited)

    @classmethod
    def from_ipc_descriptor(cls, ipc_descriptor: IPCEventDescriptor) -> Event:
        """Open an event shared by another process, on the current device.

        The returned event is owned by this process's handle and closed like any other event.
        """
        from ._device import Device

        if not isinstance(ipc_descriptor, IPCEventDescriptor):
            raise arg_error("ipc_descriptor", "an IPCEventDescriptor", ipc_descriptor, exc=TypeError)
        dev = Device()
        dev._require_ctx("Event.from_ipc_descriptor")
        ipc = driver.CUipcEventHandle()
        ipc.reserved = ipc_descriptor._reserved
        with dev._scope():
            handle = handle_return(driver.cuIpcOpenEventHandle(ipc), "cuIpcOpenEventHandle")
        entry = (handle, int(handle))
        self = _new_object(cls)
        self._handle, self._int = entry
        self._device = dev
        self._flags = _DISABLE_TIMING | _INTERPROCESS | (0 if ipc_descriptor._busy_wait else _BLOCKING_SYNC)
        self._recorded = True
        self._own = _fast.own(self, _EVENT, entry, None, 0)
        return self

    def close(self) -> None:
        """Destroy the event (idempotent)."""
        self._own.release(self._recorded)
        self._handle = None

    def __enter__(self) -> Event:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self is other or (
            self._handle is not None and other._handle is not None and int(self._handle) == int(other._handle)
        )

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        if self._handle is None:
            return "<Event closed>"
        return f"<Event handle=0x{int(self._handle):x}>"
