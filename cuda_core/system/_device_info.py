"""Small value objects returned by :class:`cuda_core.system.Device` queries.

Each is a snapshot taken when the property was read (``device.memory_info.free`` reads NVML
once per ``memory_info`` access), except :class:`ClockInfo`, :class:`Temperature` and
:class:`NvlinkInfo`, whose methods and properties query NVML each time.
"""

from __future__ import annotations

from typing import Any

from ._nvml import call, nvml
from .typing import ClockId, ClockType, TemperatureThresholds

__all__ = [
    "BAR1MemoryInfo",
    "ClockInfo",
    "MemoryInfo",
    "NvlinkInfo",
    "PciInfo",
    "ProcessInfo",
    "Temperature",
    "Utilization",
]


def scalar(value: Any) -> int:
    """An ``int`` from an NVML field that may come back as a one-element array."""
    item = getattr(value, "item", None)
    return int(item() if item is not None else value)


def enum_arg(name: str, value: Any, enum_type: type, mapping: dict[Any, Any]) -> Any:
    """Map a cuda_core enum member (or its string value) to the NVML value, or raise."""
    try:
        member = enum_type(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in enum_type)  # type: ignore[attr-defined]
        raise ValueError(f"{name} must be one of {choices} (got {value!r})") from None
    try:
        return mapping[member]
    except KeyError:
        raise ValueError(f"{name} {value!r} is not supported by NVML") from None


class MemoryInfo:
    """Device memory of a GPU, in bytes, as NVML counts it (a snapshot)."""

    __slots__ = ("_free", "_reserved", "_total", "_used")

    def __init__(self, free: int, total: int, used: int, reserved: int = 0) -> None:
        self._free, self._total, self._used, self._reserved = free, total, used, reserved

    @property
    def free(self) -> int:
        """Unallocated device memory, in bytes."""
        return self._free

    @property
    def total(self) -> int:
        """Total physical device memory, in bytes (less ECC overhead where ECC is on)."""
        return self._total

    @property
    def used(self) -> int:
        """Allocated device memory, in bytes (includes :attr:`reserved`)."""
        return self._used

    @property
    def reserved(self) -> int:
        """Device memory reserved by the driver and firmware, in bytes."""
        return self._reserved

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(total={self._total}, free={self._free}, used={self._used})"
        )


class BAR1MemoryInfo(MemoryInfo):
    """BAR1 aperture of a GPU (device memory mapped for the CPU and peers), in bytes."""

    __slots__ = ()


class PciInfo:
    """PCI attributes of a GPU (a snapshot)."""

    __slots__ = ("_handle", "_info")

    def __init__(self, info: Any, handle: int) -> None:
        self._info = info
        self._handle = handle

    @property
    def bus_id(self) -> str:
        """The ``domain:bus:device.function`` identifier, e.g. ``"00000000:65:00.0"``."""
        return str(self._info.bus_id)

    @property
    def domain(self) -> int:
        """The PCI domain (0 to 0xffffffff)."""
        return int(self._info.domain)

    @property
    def bus(self) -> int:
        """The PCI bus (0 to 255)."""
        return int(self._info.bus)

    @property
    def device(self) -> int:
        """The device number on the bus (0 to 31)."""
        return int(self._info.device_)

    @property
    def vendor_id(self) -> int:
        """The PCI vendor id (``0x10de`` for NVIDIA)."""
        return int(self._info.pci_device_id) & 0xFFFF

    @property
    def device_id(self) -> int:
        """The PCI device id."""
        return (int(self._info.pci_device_id) >> 16) & 0xFFFF

    @property
    def subsystem_id(self) -> int:
        """The PCI subsystem id."""
        return int(self._info.pci_sub_system_id)

    @property
    def base_class(self) -> int:
        """The 8-bit PCI base class code."""
        return int(self._info.base_class)

    @property
    def sub_class(self) -> int:
        """The 8-bit PCI sub-class code."""
        return int(self._info.sub_class)

    @property
    def max_link_generation(self) -> int:
        """The highest PCIe generation the GPU and system together support."""
        return int(call(nvml.device_get_max_pcie_link_generation, self._handle))

    @property
    def max_link_width(self) -> int:
        """The widest PCIe link (lanes) the GPU and system together support."""
        return int(call(nvml.device_get_max_pcie_link_width, self._handle))

    @property
    def current_link_generation(self) -> int:
        """The PCIe generation in use now."""
        return int(call(nvml.device_get_curr_pcie_link_generation, self._handle))

    @property
    def current_link_width(self) -> int:
        """The PCIe link width (lanes) in use now."""
        return int(call(nvml.device_get_curr_pcie_link_width, self._handle))

    def __repr__(self) -> str:
        return f"PciInfo(bus_id={self.bus_id!r})"


_CLOCK_TYPES = {
    ClockType.GRAPHICS: 0,  # NVML_CLOCK_GRAPHICS
    ClockType.SM: 1,
    ClockType.MEMORY: 2,
    ClockType.VIDEO: 3,
}
_CLOCK_IDS = {ClockId.CURRENT: 0, ClockId.CUSTOMER_BOOST_MAX: 3}


class ClockInfo:
    """One clock domain of a GPU; each method asks NVML anew. Speeds are in MHz.

    Get one from :meth:`cuda_core.system.Device.get_clock`.
    """

    __slots__ = ("_handle", "_type")

    def __init__(self, handle: int, clock_type: ClockType | str) -> None:
        self._handle = handle
        self._type = enum_arg("clock_type", clock_type, ClockType, _CLOCK_TYPES)

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
            ``(minimum, maximum)`` clock in MHz.
        """
        if isinstance(pstate, bool) or not isinstance(pstate, int) or not 0 <= pstate <= 15:
            raise ValueError(f"pstate must be an int from 0 to 15 (got {pstate!r})")
        lo, hi = call(nvml.device_get_min_max_clock_of_p_state, self._handle, self._type, pstate)
        return (int(lo), int(hi))


_THRESHOLDS = {member: i for i, member in enumerate(TemperatureThresholds)}


class Temperature:
    """Temperature readings of a GPU in degrees Celsius; each call asks NVML anew."""

    __slots__ = ("_handle",)

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def get_sensor(self) -> int:
        """The GPU core temperature, in degrees Celsius.

        Returns
        -------
        int
            The temperature in degrees Celsius.
        """
        return int(call(nvml.device_get_temperature_v, self._handle, 0))  # NVML_TEMPERATURE_GPU

    def get_threshold(self, threshold_type: TemperatureThresholds | str) -> int:
        """A temperature threshold of this GPU (``"slowdown"``, ``"shutdown"``, ...), in degrees C.

        Parameters
        ----------
        threshold_type : TemperatureThresholds or str
            Which threshold.

        Returns
        -------
        int
            The threshold in degrees Celsius.
        """
        t = enum_arg("threshold_type", threshold_type, TemperatureThresholds, _THRESHOLDS)
        return int(call(nvml.device_get_temperature_threshold, self._handle, t))

    @property
    def margin(self) -> int:
        """Degrees Celsius left before the nearest slowdown threshold."""
        return int(call(nvml.device_get_margin_temperature, self._handle))


class Utilization:
    """How busy a GPU was over the last sample period, in percent (a snapshot)."""

    __slots__ = ("_gpu", "_memory")

    def __init__(self, gpu: int, memory: int) -> None:
        self._gpu, self._memory = gpu, memory

    @property
    def gpu(self) -> int:
        """Percent of time one or more kernels ran on the GPU."""
        return self._gpu

    @property
    def memory(self) -> int:
        """Percent of time device memory was being read or written."""
        return self._memory

    def __repr__(self) -> str:
        return f"Utilization(gpu={self._gpu}, memory={self._memory})"


class ProcessInfo:
    """A process with a compute context on a GPU (a snapshot)."""

    __slots__ = ("_ci", "_gi", "_pid", "_used")

    def __init__(self, pid: int, used_gpu_memory: int, gpu_instance_id: int, compute_instance_id: int) -> None:
        self._pid, self._used = pid, used_gpu_memory
        self._gi, self._ci = gpu_instance_id, compute_instance_id

    @property
    def pid(self) -> int:
        """The process id."""
        return self._pid

    @property
    def used_gpu_memory(self) -> int:
        """Device memory the process uses, in bytes."""
        return self._used

    @property
    def gpu_instance_id(self) -> int:
        """The GPU instance (MIG only)."""
        return self._gi

    @property
    def compute_instance_id(self) -> int:
        """The compute instance (MIG only)."""
        return self._ci

    def __repr__(self) -> str:
        return f"ProcessInfo(pid={self._pid}, used_gpu_memory={self._used})"


# NVML's nvmlNvlinkVersion_t values (1 = 1.0 ... 8 = 6.0) as (major, minor).
_NVLINK_VERSIONS = {1: (1, 0), 2: (2, 0), 3: (2, 2), 4: (3, 0), 5: (3, 1), 6: (4, 0), 7: (5, 0), 8: (6, 0)}


class _NvlinkInfoMeta(type):
    @property
    def max_links(cls) -> int:
        """NVML's static maximum number of NVLink links (``NVML_NVLINK_MAX_LINKS``).

        Deprecated in cuda.core 1.1: use :meth:`cuda_core.system.Device.get_nvlink_count`.
        """
        return int(getattr(nvml, "NVLINK_MAX_LINKS", 18))


class NvlinkInfo(metaclass=_NvlinkInfoMeta):
    """One NVLink link of a GPU; properties ask NVML anew.

    Get one from :meth:`cuda_core.system.Device.get_nvlink` or
    :meth:`~cuda_core.system.Device.get_nvlinks`.

    Parameters
    ----------
    device : cuda_core.system.Device
        The GPU.
    link : int
        The link number.
    """

    __slots__ = ("_device", "_link")

    def __init__(self, device: Any, link: int) -> None:
        self._device = device
        self._link = link

    @property
    def link(self) -> int:
        """The link number (a cuda_core addition)."""
        return self._link

    @property
    def version(self) -> tuple[int, int]:
        """The NVLink version of this link as ``(major, minor)``, e.g. ``(4, 0)`` on H100."""
        v = int(call(nvml.device_get_nvlink_version, self._device._handle, self._link))
        try:
            return _NVLINK_VERSIONS[v]
        except KeyError:
            raise RuntimeError(f"NVML reported an unknown NVLink version {v}") from None

    @property
    def state(self) -> bool:
        """``True`` when this link is active."""
        return bool(call(nvml.device_get_nvlink_state, self._device._handle, self._link))

    def __repr__(self) -> str:
        return f"NvlinkInfo(device={self._device.index}, link={self._link})"
