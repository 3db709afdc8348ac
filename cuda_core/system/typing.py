"""Enumerations taken and returned by :mod:`cuda_core.system` (as ``cuda.core.system.typing``).

String enumerations compare equal to their values, so ``device.get_clock("sm")`` and
``device.get_clock(ClockType.SM)`` are the same call. ``FieldId`` (the NVML field ids that
:meth:`cuda_core.system.Device.get_field_values` takes) is ``cuda.bindings.nvml.FieldId`` itself,
present where the installed ``cuda-bindings`` has NVML. Importing this module loads no library.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

from ._nvml import _nvml_mod

__all__ = [
    "AddressingMode",
    "AffinityScope",
    "ClockId",
    "ClockType",
    "ClocksEventReasons",
    "CoolerControl",
    "CoolerTarget",
    "DeviceArch",
    "EventType",
    "FanControlPolicy",
    "FieldId",
    "GpuP2PCapsIndex",
    "GpuP2PStatus",
    "GpuTopologyLevel",
    "InforomObject",
    "SystemEventType",
    "TemperatureThresholds",
    "ThermalController",
    "ThermalTarget",
]


class ClocksEventReasons(StrEnum):
    """Why the clocks of a GPU are held below their maximum (see
    :attr:`cuda_core.system.Device.current_clock_event_reasons`)."""

    NONE = "none"
    GPU_IDLE = "gpu_idle"
    APPLICATIONS_CLOCKS_SETTING = "applications_clocks_setting"
    SW_POWER_CAP = "sw_power_cap"
    HW_SLOWDOWN = "hw_slowdown"
    SYNC_BOOST = "sync_boost"
    SW_THERMAL_SLOWDOWN = "sw_thermal_slowdown"
    HW_THERMAL_SLOWDOWN = "hw_thermal_slowdown"
    HW_POWER_BRAKE_SLOWDOWN = "hw_power_brake_slowdown"
    DISPLAY_CLOCK_SETTING = "display_clock_setting"
    BOARD_LIMIT = "board_limit"
    RELIABILITY = "reliability"


class ClockType(StrEnum):
    """A clock domain of a GPU (speeds are in MHz)."""

    GRAPHICS = "graphics"
    SM = "sm"
    MEMORY = "memory"
    VIDEO = "video"


class AddressingMode(StrEnum):
    """How a GPU reaches system-allocated memory (``malloc``, ``mmap``) of the host."""

    HMM = "hmm"  # the driver mirrors the CPU's page tables on the GPU (software)
    ATS = "ats"  # Address Translation Services: CPU and GPU share one set of page tables


class AffinityScope(StrEnum):
    """The scope of a CPU or memory affinity query: the NUMA node (default) or the socket."""

    NODE = "node"
    SOCKET = "socket"


class ClockId(StrEnum):
    """Which reading of a clock domain: the current clock or the OEM boost maximum."""

    CURRENT = "current"
    CUSTOMER_BOOST_MAX = "customer_boost_max"


class CoolerControl(StrEnum):
    """How a cooler is driven: only on or off (``TOGGLE``), or to a level (``VARIABLE``)."""

    TOGGLE = "toggle"
    VARIABLE = "variable"


class CoolerTarget(StrEnum):
    """What a cooler cools."""

    NONE = "none"
    GPU = "gpu"
    MEMORY = "memory"
    POWER_SUPPLY = "power_supply"


class FanControlPolicy(StrEnum):
    """Who sets a fan's speed: the driver from the temperature, or the user (``MANUAL``)."""

    TEMPERATURE_CONTROLLED = "temperature_controlled"
    MANUAL = "manual"


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


class InforomObject(StrEnum):
    """An object of a GPU's InfoROM (its non-volatile on-board memory)."""

    OEM = "oem"  # defined by the board maker
    ECC = "ecc"  # the ECC object: the level of ECC support
    POWER = "power"  # the power management object
    DEN = "den"  # the DRAM encryption object


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


class ThermalController(StrEnum):
    """The chip that reads a thermal sensor of a GPU's board."""

    GPU_INTERNAL = "gpu_internal"
    ADM1032 = "adm1032"
    ADT7461 = "adt7461"
    MAX6649 = "max6649"
    MAX1617 = "max1617"
    LM99 = "lm99"
    LM89 = "lm89"
    LM64 = "lm64"
    G781 = "g781"
    ADT7473 = "adt7473"
    SBMAX6649 = "sbmax6649"
    VBIOSEVT = "vbiosevt"
    OS = "os"
    NVSYSCON_CANOAS = "nvsyscon_canoas"
    NVSYSCON_E551 = "nvsyscon_e551"
    MAX6649R = "max6649r"
    ADT7473S = "adt7473s"
    UNKNOWN = "unknown"


class ThermalTarget(StrEnum):
    """What a thermal sensor measures (the ``VCD_*`` targets belong to visual computing devices)."""

    NONE = "none"
    GPU = "gpu"
    MEMORY = "memory"
    POWER_SUPPLY = "power_supply"
    BOARD = "board"
    VCD_BOARD = "vcd_board"
    VCD_INLET = "vcd_inlet"
    VCD_OUTLET = "vcd_outlet"
    ALL = "all"


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


if _nvml_mod is not None:
    # NVML's field ids are many and versioned with the bindings: use the bindings' own enum.
    FieldId = _nvml_mod.FieldId
else:
    __all__.remove("FieldId")  # these bindings have no NVML, so no FieldId
