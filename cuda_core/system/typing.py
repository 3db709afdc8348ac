"""Enumerations taken and returned by :mod:`cuda_core.system` (as ``cuda.core.system.typing``).

String enumerations compare equal to their values, so ``device.get_clock("sm")`` and
``device.get_clock(ClockType.SM)`` are the same call. Importing this module loads no library.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = [
    "ClockId",
    "ClockType",
    "DeviceArch",
    "EventType",
    "GpuP2PCapsIndex",
    "GpuP2PStatus",
    "GpuTopologyLevel",
    "SystemEventType",
    "TemperatureThresholds",
]


class ClockType(StrEnum):
    """A clock domain of a GPU (speeds are in MHz)."""

    GRAPHICS = "graphics"
    SM = "sm"
    MEMORY = "memory"
    VIDEO = "video"


class ClockId(StrEnum):
    """Which reading of a clock domain: the current clock or the OEM boost maximum."""

    CURRENT = "current"
    CUSTOMER_BOOST_MAX = "customer_boost_max"


class GpuP2PCapsIndex(StrEnum):
    """A peer-to-peer capability asked about by :func:`~cuda_core.system.get_p2p_status`."""

    READ = "read"
    WRITE = "write"
    NVLINK = "nvlink"
    ATOMICS = "atomics"
    PCI = "pci"
    PROP = "prop"
    UNKNOWN = "unknown"


class GpuP2PStatus(StrEnum):
    """The answer of :func:`~cuda_core.system.get_p2p_status`."""

    OK = "ok"
    CHIPSET_NOT_SUPPORTED = "chipset not supported"
    GPU_NOT_SUPPORTED = "GPU not supported"
    IOH_TOPOLOGY_NOT_SUPPORTED = "IOH topology not supported"
    DISABLED_BY_REGKEY = "disabled by regkey"
    NOT_SUPPORTED = "not supported"
    UNKNOWN = "unknown"


class GpuTopologyLevel(StrEnum):
    """How closely two GPUs are connected, from the same board to across the system."""

    INTERNAL = "internal"
    SINGLE = "single"
    MULTIPLE = "multiple"
    HOSTBRIDGE = "hostbridge"
    NODE = "node"
    SYSTEM = "system"


class EventType(StrEnum):
    """Device events that :meth:`cuda_core.system.Device.register_events` can wait for."""

    NONE = "none"
    SINGLE_BIT_ECC_ERROR = "single_bit_ecc_error"
    DOUBLE_BIT_ECC_ERROR = "double_bit_ecc_error"
    PSTATE = "pstate"
    XID_CRITICAL_ERROR = "xid_critical_error"
    CLOCK = "clock"
    POWER_SOURCE_CHANGE = "power_source_change"
    MIG_CONFIG_CHANGE = "mig_config_change"
    SINGLE_BIT_ECC_ERROR_STORM = "single_bit_ecc_error_storm"
    DRAM_RETIREMENT_EVENT = "dram_retirement_event"
    DRAM_RETIREMENT_FAILURE = "dram_retirement_failure"
    NON_FATAL_POISON_ERROR = "non_fatal_poison_error"
    FATAL_POISON_ERROR = "fatal_poison_error"
    GPU_UNAVAILABLE_ERROR = "gpu_unavailable_error"
    GPU_RECOVERY_ACTION = "gpu_recovery_action"


class SystemEventType(StrEnum):
    """System events that :func:`~cuda_core.system.register_events` can wait for."""

    UNBIND = "unbind"
    BIND = "bind"


class TemperatureThresholds(StrEnum):
    """Temperature thresholds of a GPU (degrees C)."""

    SHUTDOWN = "shutdown"
    SLOWDOWN = "slowdown"
    MEM_MAX = "mem_max"
    GPU_MAX = "gpu_max"
    ACOUSTIC_MIN = "acoustic_min"
    ACOUSTIC_CURR = "acoustic_curr"
    ACOUSTIC_MAX = "acoustic_max"
    GPS_CURR = "gps_curr"


class DeviceArch(IntEnum):
    """GPU architecture; ordered, so ``arch >= DeviceArch.HOPPER`` reads naturally."""

    KEPLER = 2
    MAXWELL = 3
    PASCAL = 4
    VOLTA = 5
    TURING = 6
    AMPERE = 7
    ADA = 8
    HOPPER = 9
    BLACKWELL = 10
    UNKNOWN = 0xFFFFFFFF
