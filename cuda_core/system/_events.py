"""NVML event sets: device events (:meth:`Device.register_events`) and system events
(:func:`register_events`). Linux only; each set is freed by ``close()`` or when collected."""

from __future__ import annotations

import weakref
from typing import Any

from .._errors import warn_release_failure
from ._device_info import scalar
from ._nvml import call, nvml
from .typing import EventType, SystemEventType

__all__ = [
    "DeviceEvents",
    "EventData",
    "RegisteredSystemEvents",
    "SystemEvent",
    "SystemEvents",
]

# EventType member -> NVML bit (NONE is 0; the others are the NVML event-type mask bits).
_EVENT_BITS = {
    EventType.NONE: 0,
    EventType.SINGLE_BIT_ECC_ERROR: 1 << 0,
    EventType.DOUBLE_BIT_ECC_ERROR: 1 << 1,
    EventType.PSTATE: 1 << 2,
    EventType.XID_CRITICAL_ERROR: 1 << 3,
    EventType.CLOCK: 1 << 4,
    EventType.POWER_SOURCE_CHANGE: 1 << 7,
    EventType.MIG_CONFIG_CHANGE: 1 << 8,
    EventType.SINGLE_BIT_ECC_ERROR_STORM: 1 << 9,
    EventType.DRAM_RETIREMENT_EVENT: 1 << 10,
    EventType.DRAM_RETIREMENT_FAILURE: 1 << 11,
    EventType.NON_FATAL_POISON_ERROR: 1 << 12,
    EventType.FATAL_POISON_ERROR: 1 << 13,
    EventType.GPU_UNAVAILABLE_ERROR: 1 << 14,
    EventType.GPU_RECOVERY_ACTION: 1 << 15,
}
_EVENT_BACK = {bit: member for member, bit in _EVENT_BITS.items()}
_SYSTEM_BITS = {SystemEventType.UNBIND: 1, SystemEventType.BIND: 2}
_SYSTEM_BACK = {bit: member for member, bit in _SYSTEM_BITS.items()}


def _mask(
    name: str, events: Any, enum_type: type, bits: dict[Any, int], *, allow_empty: bool = False
) -> int:
    """The NVML bit mask of ``events`` (a member or name, or a list of them). An empty list is
    mask 0 where ``allow_empty`` (device events: cuda.core registers it, and ``wait`` times out)."""
    if isinstance(events, str):  # a str-valued enum member is a str too
        items = [events]
    elif hasattr(events, "__iter__"):  # a list (cuda.core), or any other iterable
        items = list(events)
    else:  # None or an int, as cuda.core refuses them
        kind = enum_type.__name__
        article = "an" if kind[0] in "AEIOU" else "a"
        raise TypeError(
            f"{name} must be {article} {kind}, a str, or a list of them (got {events!r})"
        )
    if not items and not allow_empty:
        raise ValueError(f"{name} must name at least one event type (got {events!r})")
    mask = 0
    for item in items:
        try:
            mask |= bits[enum_type(item)]
        except ValueError:
            choices = ", ".join(repr(m.value) for m in enum_type)  # type: ignore[attr-defined]
            raise ValueError(
                f"Invalid event type: {item}: {name} must be one of {choices} (got {item!r})"
            ) from None
    return mask


def event_types_from_mask(mask: int) -> list[EventType]:
    """The :class:`EventType` members whose bits are set in ``mask``."""
    return [member for bit, member in _EVENT_BACK.items() if bit and mask & bit]


# The system Device class, set by cuda_core.system._device when it is defined: that module
# imports this one (Device.register_events), so this one does not import it back.
_DEVICE_CLASS: list[Any] = []


def _device_class() -> Any:
    return _DEVICE_CLASS[0]


def _free_event_set(free: Any, handle: int) -> None:
    try:
        free(handle)
    except Exception as exc:  # a finalizer never raises: a CUDAWarning (silent at exit)
        warn_release_failure("an NVML event set", handle, exc, "nvmlEventSetFree")


class EventData:
    """One event delivered by :meth:`DeviceEvents.wait`."""

    __slots__ = ("_ci", "_data", "_device", "_gi", "_type")

    def __init__(self, event_data: Any) -> None:  # an nvml.EventData
        raw = event_data
        self._device = _device_class()._from_handle(scalar(raw.device_))
        self._type = _EVENT_BACK.get(scalar(raw.event_type), EventType.NONE)
        self._data = scalar(raw.event_data)
        self._gi = scalar(raw.gpu_instance_id)
        self._ci = scalar(raw.compute_instance_id)

    @property
    def device(self) -> Any:
        """The :class:`cuda_core.system.Device` the event happened on."""
        return self._device

    @property
    def event_type(self) -> EventType:
        """The kind of event."""
        return self._type

    def _xid_only(self, what: str) -> None:
        if self._type is not EventType.XID_CRITICAL_ERROR:
            raise ValueError(
                f"{what} is only defined for xid_critical_error events (got {self._type.value})"
            )

    @property
    def event_data(self) -> int:
        """The Xid of an ``XID_CRITICAL_ERROR`` event (``ValueError`` for other kinds)."""
        self._xid_only("event_data")
        return self._data

    @property
    def gpu_instance_id(self) -> int:
        """The MIG GPU instance of an ``XID_CRITICAL_ERROR`` event."""
        self._xid_only("gpu_instance_id")
        return self._gi

    @property
    def compute_instance_id(self) -> int:
        """The MIG compute instance of an ``XID_CRITICAL_ERROR`` event."""
        self._xid_only("compute_instance_id")
        return self._ci


class DeviceEvents:
    """Device events being recorded; get one from :meth:`cuda_core.system.Device.register_events`.

    Owns an NVML event set, freed by :meth:`close` (idempotent), on ``with`` exit, or when
    collected.
    """

    def __init__(self, device_handle: int, events: Any) -> None:
        mask = _mask("events", events, EventType, _EVENT_BITS, allow_empty=True)
        handle = int(call(nvml.event_set_create))
        self._handle = handle
        self._finalizer = weakref.finalize(self, _free_event_set, nvml.event_set_free, handle)
        try:
            call(nvml.device_register_events, device_handle, mask, handle)
        except BaseException:
            self.close()
            raise

    def wait(self, timeout_ms: int = 0) -> EventData:
        """Wait for the next event (``timeout_ms=0``: no time limit).

        Returns
        -------
        EventData
            The event.

        Raises
        ------
        TimeoutError
            :class:`cuda_core.system.TimeoutError` (an ``NvmlError``): no event came in time.
        GpuIsLostError
            The GPU fell off the bus.
        """
        _check_timeout(timeout_ms)
        return EventData(call(nvml.event_set_wait_v2, self._handle, timeout_ms))

    def close(self) -> None:
        """Free the event set (idempotent)."""
        self._finalizer()

    @property
    def is_closed(self) -> bool:
        """``True`` once :meth:`close` ran."""
        return not self._finalizer.alive

    def __enter__(self) -> DeviceEvents:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SystemEvent:
    """One system event (a GPU bound to or unbound from the driver)."""

    __slots__ = ("_gpu_id", "_type")

    def __init__(self, event_data: Any) -> None:  # one nvml.SystemEventData_v1
        self._type = scalar(event_data.event_type)
        self._gpu_id = scalar(event_data.gpu_id)

    @property
    def event_type(self) -> SystemEventType:
        """``SystemEventType.BIND`` or ``UNBIND`` (``ValueError`` for a kind NVML added later)."""
        try:
            return _SYSTEM_BACK[self._type]
        except KeyError:
            raise ValueError(
                f"NVML reported an unknown system event type {self._type:#x}"
            ) from None

    @property
    def gpu_id(self) -> int:
        """The GPU, as NVML's packed PCI id."""
        return self._gpu_id

    @property
    def device(self) -> Any:
        """The :class:`cuda_core.system.Device` this event is about (found by PCI bus id)."""
        return _device_class()(pci_bus_id=pci_bus_id_from_gpu_id(self._gpu_id))


class SystemEvents:
    """The system events one :meth:`RegisteredSystemEvents.wait` delivered (a sequence)."""

    __slots__ = ("_events",)

    def __init__(self, event_data: Any) -> None:  # an nvml.SystemEventData_v1 array
        self._events = [SystemEvent(event_data[i]) for i in range(len(event_data))]

    def __len__(self) -> int:
        return len(self._events)

    def __getitem__(self, idx: int) -> SystemEvent:
        return self._events[idx]


class RegisteredSystemEvents:
    """System events being recorded; get one from :func:`register_events`.

    Owns an NVML system event set, freed by :meth:`close`, on ``with`` exit, or when collected.
    """

    def __init__(self, events: Any) -> None:
        mask = _mask("events", events, SystemEventType, _SYSTEM_BITS)
        handle = int(call(nvml.system_event_set_create))
        self._handle = handle
        self._finalizer = weakref.finalize(
            self, _free_event_set, nvml.system_event_set_free, handle
        )
        try:
            call(nvml.system_register_events, mask, handle)
        except BaseException:
            self.close()
            raise

    def wait(self, timeout_ms: int = 0, buffer_size: int = 1) -> SystemEvents:
        """Wait for system events (``timeout_ms=0``: no time limit).

        Parameters
        ----------
        timeout_ms : int, optional
            The time limit in milliseconds.
        buffer_size : int, optional
            The most events to return (at least 1).

        Returns
        -------
        SystemEvents
            The events received (possibly fewer than ``buffer_size``).

        Raises
        ------
        TimeoutError
            :class:`cuda_core.system.TimeoutError`: no event came in time.
        """
        _check_timeout(timeout_ms)
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise ValueError(f"buffer_size must be an int >= 1 (got {buffer_size!r})")
        return SystemEvents(call(nvml.system_event_set_wait, self._handle, timeout_ms, buffer_size))

    def close(self) -> None:
        """Free the event set (idempotent)."""
        self._finalizer()

    @property
    def is_closed(self) -> bool:
        """``True`` once :meth:`close` ran."""
        return not self._finalizer.alive

    def __enter__(self) -> RegisteredSystemEvents:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_timeout(timeout_ms: Any) -> None:
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
        raise ValueError(f"timeout_ms must be an int >= 0 (got {timeout_ms!r})")


def pci_bus_id_from_gpu_id(gpu_id: int) -> str:
    """NVML's packed system-event GPU id -> ``"domain:bus:device.function"``."""
    domain, bus = (gpu_id >> 16) & 0xFFFFFFFF, (gpu_id >> 8) & 0xFF
    return f"{domain:08x}:{bus:02x}:{(gpu_id >> 3) & 0x1F:02x}.{gpu_id & 0x7}"
