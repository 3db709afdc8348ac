"""Clocks and performance of a GPU: :class:`ClockInfo`, :class:`ClockOffsets`, clock event
reasons, P-states and the dynamic P-state samples (:class:`GpuDynamicPstatesInfo`).

:class:`ClockQueries` holds the :class:`cuda_core.system.Device` members of this concept; the
device class inherits them.
"""

from __future__ import annotations

import ctypes
from typing import Any

from .._utils import check_int
from ._device_info import StructView, enum_arg, members_from_mask, scalar
from ._nvml import call, nvml
from .typing import ClockId, ClocksEventReasons, ClockType

__all__ = [
    "ClockInfo",
    "ClockOffsets",
    "ClockQueries",
    "GpuDynamicPstatesInfo",
    "GpuDynamicPstatesUtilization",
]

_CLOCK_TYPES = {
    ClockType.GRAPHICS: 0,  # NVML_CLOCK_GRAPHICS
    ClockType.SM: 1,
    ClockType.MEMORY: 2,
    ClockType.VIDEO: 3,
}
_CLOCK_IDS = {ClockId.CURRENT: 0, ClockId.CUSTOMER_BOOST_MAX: 3}
# nvmlClocksEventReasons bits (NONE is the empty mask, reported as an empty list).
_EVENT_REASONS = {
    1 << 0: ClocksEventReasons.GPU_IDLE,
    1 << 1: ClocksEventReasons.APPLICATIONS_CLOCKS_SETTING,
    1 << 2: ClocksEventReasons.SW_POWER_CAP,
    1 << 3: ClocksEventReasons.HW_SLOWDOWN,
    1 << 4: ClocksEventReasons.SYNC_BOOST,
    1 << 5: ClocksEventReasons.SW_THERMAL_SLOWDOWN,
    1 << 6: ClocksEventReasons.HW_THERMAL_SLOWDOWN,
    1 << 7: ClocksEventReasons.HW_POWER_BRAKE_SLOWDOWN,
    1 << 8: ClocksEventReasons.DISPLAY_CLOCK_SETTING,
    1 << 9: ClocksEventReasons.BOARD_LIMIT,
    1 << 10: ClocksEventReasons.RELIABILITY,
}
_PSTATE_UNKNOWN = 32  # NVML_PSTATE_UNKNOWN


def check_pstate(pstate: Any) -> int:
    """A performance state argument: an int from 0 (P0, fastest) to 15."""
    return check_int("pstate", pstate, 0, 15)


class ClockOffsets:
    """The clock offset range of one clock domain at one P-state, in MHz (a snapshot).

    Get one from :meth:`ClockInfo.get_offsets`.
    """

    __slots__ = ("_current", "_max", "_min")

    def __init__(self, clock_offset: Any) -> None:  # an nvml.ClockOffset_v1
        self._current = scalar(clock_offset.clock_offset_m_hz)
        self._max = scalar(clock_offset.max_clock_offset_m_hz)
        self._min = scalar(clock_offset.min_clock_offset_m_hz)

    @property
    def clock_offset_mhz(self) -> int:
        """The offset in force now, in MHz."""
        return self._current

    @property
    def max_offset_mhz(self) -> int:
        """The largest offset that may be set, in MHz."""
        return self._max

    @property
    def min_offset_mhz(self) -> int:
        """The smallest (most negative) offset that may be set, in MHz."""
        return self._min

    def __repr__(self) -> str:
        return f"ClockOffsets(clock_offset_mhz={self._current}, min={self._min}, max={self._max})"


class ClockInfo:
    """One clock domain of a GPU; each method asks NVML anew. Speeds are in MHz.

    Get one from :meth:`cuda_core.system.Device.get_clock`.
    """

    __slots__ = ("_handle", "_type")

    def __init__(self, handle: int, clock_type: ClockType | str) -> None:
        self._handle = handle
        self._type = enum_arg(
            "clock_type", clock_type, ClockType, _CLOCK_TYPES, "Invalid clock type"
        )

    def get_current_mhz(self, clock_id: ClockId | str = ClockId.CURRENT) -> int:
        """The clock speed now (or the OEM boost maximum), in MHz.

        Parameters
        ----------
        clock_id : ClockId or str, optional
            ``"current"`` (default) or ``"customer_boost_max"``.

        Returns
        -------
        int
            The clock speed in MHz.
        """
        cid = enum_arg("clock_id", clock_id, ClockId, _CLOCK_IDS)
        return int(call(nvml.device_get_clock, self._handle, self._type, cid))

    def get_max_mhz(self) -> int:
        """The highest clock speed of this domain, in MHz.

        Returns
        -------
        int
            The maximum clock speed in MHz.
        """
        return int(call(nvml.device_get_max_clock_info, self._handle, self._type))

    def get_max_customer_boost_mhz(self) -> int:
        """The OEM-defined maximum boost clock of this domain, in MHz (Pascal or newer).

        Returns
        -------
        int
            The maximum customer boost clock in MHz.
        """
        return int(call(nvml.device_get_max_customer_boost_clock, self._handle, self._type))

    def get_min_max_clock_of_pstate_mhz(self, pstate: int) -> tuple[int, int]:
        """The ``(min, max)`` clock of this domain at performance state ``pstate``, in MHz.

        Parameters
        ----------
        pstate : int
            0 (P0, fastest) to 15.

        Returns
        -------
        tuple of int
            Minimum and maximum clock in MHz.

        Raises
        ------
        TypeError, ValueError
            ``pstate`` is not an int from 0 to 15.
        """
        p = check_pstate(pstate)
        lo, hi = call(nvml.device_get_min_max_clock_of_p_state, self._handle, self._type, p)
        return (int(lo), int(hi))

    def get_offsets(self, pstate: int) -> ClockOffsets:
        """The current, minimum and maximum clock offset of this domain at ``pstate`` (Maxwell
        or newer; many data-center boards answer :class:`~cuda_core.system.NotSupportedError`).

        Parameters
        ----------
        pstate : int
            0 (P0, fastest) to 15.

        Returns
        -------
        ClockOffsets
            The offsets in MHz.

        Raises
        ------
        TypeError, ValueError
            ``pstate`` is not an int from 0 to 15.
        """
        p = check_pstate(pstate)
        return ClockOffsets(call(nvml.device_get_clock_offsets, self._handle, self._type, p))


class _UtilizationDomain(ctypes.Structure):
    # One element of nvmlGpuDynamicPstatesInfo_t.utilization[] (an anonymous struct in NVML).
    _fields_ = [
        ("bIsPresent", ctypes.c_uint32),
        ("percentage", ctypes.c_uint32),
        ("incThreshold", ctypes.c_uint32),
        ("decThreshold", ctypes.c_uint32),
    ]


class GpuDynamicPstatesUtilization(StructView):
    """One utilization domain of :class:`GpuDynamicPstatesInfo` (read from its sample; made
    from the entry's address and the structure that owns it)."""

    __slots__ = ()
    _layout = _UtilizationDomain

    @property
    def is_present(self) -> bool:
        """Whether this utilization domain exists on the GPU."""
        return bool(self._raw.bIsPresent)

    @property
    def percentage(self) -> int:
        """Percent of the last 1-second interval during which the domain was busy."""
        return int(self._raw.percentage)

    @property
    def inc_threshold(self) -> int:
        """The utilization above which the driver may move to a faster P-state."""
        return int(self._raw.incThreshold)

    @property
    def dec_threshold(self) -> int:
        """The utilization below which the driver may move to a slower P-state."""
        return int(self._raw.decThreshold)

    def __repr__(self) -> str:
        return (
            f"GpuDynamicPstatesUtilization(is_present={self.is_present}, "
            f"percentage={self.percentage})"
        )


class GpuDynamicPstatesInfo:
    """The performance monitor's sample of a GPU: a sequence of
    :class:`GpuDynamicPstatesUtilization`, one per utilization domain (NVML's
    ``NVML_MAX_GPU_UTILIZATIONS`` of them: graphics, frame buffer, video decode, ...).

    Get one from :attr:`cuda_core.system.Device.dynamic_pstates_info`.
    """

    __slots__ = ("_info",)

    def __init__(self, gpu_dynamic_pstates_info: Any) -> None:  # an nvml.GpuDynamicPstatesInfo
        self._info = gpu_dynamic_pstates_info

    def __len__(self) -> int:
        return int(getattr(nvml, "MAX_GPU_UTILIZATIONS", 8))

    def __getitem__(self, idx: int) -> GpuDynamicPstatesUtilization:
        return GpuDynamicPstatesUtilization.element(
            self._info.utilization, idx, len(self), self._info, "utilization domain"
        )


class ClockQueries:
    """The clock and performance members of :class:`cuda_core.system.Device`."""

    __slots__ = ()
    _handle: int

    def get_clock(self, clock_type: ClockType | str) -> ClockInfo:
        """A :class:`ClockInfo` for one clock domain (``"graphics"``, ``"sm"``, ``"memory"``,
        ``"video"``).

        Parameters
        ----------
        clock_type : ClockType or str
            The clock domain.

        Returns
        -------
        ClockInfo
            Queries of that clock.

        Raises
        ------
        ValueError
            An unknown clock domain.
        """
        return ClockInfo(self._handle, clock_type)

    @property
    def is_auto_boosted_clocks_enabled(self) -> tuple[bool, bool]:
        """``(current, default)``: whether auto boosted clocks are on now, and whether they are
        on by default (Kepler or newer; on Pascal and newer they follow the application clocks,
        and many boards answer :class:`~cuda_core.system.NotSupportedError`)."""
        current, default = call(nvml.device_get_auto_boosted_clocks_enabled, self._handle)
        return (int(current) == 1, int(default) == 1)  # NVML_FEATURE_ENABLED

    @property
    def current_clock_event_reasons(self) -> list[ClocksEventReasons]:
        """Why the clocks are held below their maximum now, as
        :class:`~cuda_core.system.typing.ClocksEventReasons` (an empty list: nothing holds
        them). ``ValueError`` if NVML reports a reason this version does not know."""
        mask = int(call(nvml.device_get_current_clocks_event_reasons, self._handle))
        return members_from_mask(mask, _EVENT_REASONS, "clock event reason")

    @property
    def supported_clock_event_reasons(self) -> list[ClocksEventReasons]:
        """The :class:`~cuda_core.system.typing.ClocksEventReasons` this GPU can report in
        :attr:`current_clock_event_reasons` (not in vGPU guests)."""
        mask = int(call(nvml.device_get_supported_clocks_event_reasons, self._handle))
        return members_from_mask(mask, _EVENT_REASONS, "clock event reason")

    @property
    def performance_state(self) -> int | None:
        """The current performance state, 0 (P0, fastest) to 15; ``None`` if unknown."""
        value = int(call(nvml.device_get_performance_state, self._handle))
        return value if 0 <= value <= 15 else None

    @property
    def supported_pstates(self) -> list[int]:
        """The performance states this GPU supports, each 0 to 15."""
        values = call(nvml.device_get_supported_performance_states, self._handle)
        return [int(v) for v in values if 0 <= int(v) <= 15 and int(v) != _PSTATE_UNKNOWN]

    @property
    def dynamic_pstates_info(self) -> GpuDynamicPstatesInfo:
        """The performance monitor's utilization sample, a :class:`GpuDynamicPstatesInfo`."""
        return GpuDynamicPstatesInfo(call(nvml.device_get_dynamic_pstates_info, self._handle))
