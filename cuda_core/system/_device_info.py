"""Value objects of :class:`cuda_core.system.Device` (memory, PCI, utilization, processes,
NVLink) and the helpers that decode NVML's answers.

Each value object is a snapshot of the NVML structure read when the property was asked for
(``device.memory_info.free`` reads NVML once per ``memory_info`` access), except
:class:`NvlinkInfo` and the PCI link queries of :class:`PciInfo`, which ask NVML each time.
As in ``cuda.core``, their constructors take the ``cuda.bindings.nvml`` structure; code gets
them from ``Device`` properties rather than building them.
"""

from __future__ import annotations

import ctypes
import warnings
from typing import Any, ClassVar

from .._utils import ValueOverflowError, arg_error, check_int
from ._nvml import call, make_error, nvml, text

__all__ = [
    "BAR1MemoryInfo",
    "MemoryInfo",
    "NvlinkInfo",
    "PciInfo",
    "ProcessInfo",
    "Utilization",
]


def scalar(value: Any) -> int:
    """An ``int`` from an NVML field that may come back as a one-element array."""
    item = getattr(value, "item", None)
    return int(item() if item is not None else value)


def unpack_bitmask(words: Any) -> list[int]:
    """The indices of the set bits of a bitmask given as 64-bit words, lowest word first."""
    out = []
    for i, word in enumerate(words):
        w = int(word) & 0xFFFFFFFFFFFFFFFF
        bit = 0
        while w:
            if w & 1:
                out.append(64 * i + bit)
            w >>= 1
            bit += 1
    return out


def members_from_mask(mask: int, by_bit: dict[int, Any], what: str) -> list[Any]:
    """The enum members whose NVML bit is set in ``mask``, lowest bit first.

    Raises ``ValueError`` for a set bit no member stands for (as ``cuda.core`` does).
    """
    out = []
    for bit in unpack_bitmask([mask]):
        try:
            out.append(by_bit[1 << bit])
        except KeyError:
            raise ValueError(f"NVML reported an unknown {what} bit: {1 << bit:#x}") from None
    return out


class StructView:
    """Base of the objects that read one element of an array of anonymous structs inside an
    NVML structure (which ``cuda.bindings.nvml`` does not wrap element by element).

    Subclasses set ``_layout`` to the element's ``ctypes.Structure``.

    Parameters
    ----------
    ptr : int
        Address of the element inside ``owner``'s memory.
    owner : object
        The NVML structure that holds the element; kept alive by this object.
    """

    __slots__ = ("_owner", "_raw")
    _layout: ClassVar[type[ctypes.Structure]]

    def __init__(self, ptr: int, owner: object) -> None:
        self._owner = owner
        self._raw: Any = self._layout.from_address(int(ptr))

    @classmethod
    def element(cls, array: Any, idx: Any, length: int, owner: object, what: str) -> Any:
        """The view of element ``idx`` of the NVML array ``array`` (which has ``.ptr``)."""
        i = sequence_index(idx, length, what)
        return cls(int(array.ptr) + i * ctypes.sizeof(cls._layout), owner)


def sequence_index(idx: Any, length: int, what: str) -> int:
    """``idx`` of a sequence of ``length`` items (negative counts from the end), or IndexError."""
    i = check_int("idx", idx)
    if i < 0:
        i += length
    if not 0 <= i < length:
        raise IndexError(f"{what} index out of range: {idx} (there are {length})")
    return i


def unsigned_arg(name: str, value: Any) -> int:
    """An argument NVML takes as an unsigned int: ``TypeError`` for a non-integer, and for a
    negative one an error that is a ``ValueError`` and the ``OverflowError`` cuda.core lets
    through from the conversion."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise arg_error(name, "an int >= 0", value, exc=TypeError)
    if value.__index__() < 0:
        raise arg_error(name, "an int >= 0", value, exc=ValueOverflowError)
    return int(value.__index__())


def enum_arg(
    name: str, value: Any, enum_type: type, mapping: dict[Any, Any], lead: str = ""
) -> Any:
    """Map a cuda_core enum member (or its string value) to the NVML value, or raise.

    ``lead`` is cuda.core's wording (``"Invalid affinity scope"``), put first with the value.
    """
    try:
        member = enum_type(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in enum_type)  # type: ignore[attr-defined]
        ours = f"{name} must be one of {choices} (got {value!r})"
        raise ValueError(f"{lead}: {value}: {ours}" if lead else ours) from None
    try:
        return mapping[member]
    except KeyError:
        raise ValueError(f"{name} {value!r} is not supported by NVML") from None


class MemoryInfo:
    """Device memory of a GPU, in bytes, as NVML counts it (a snapshot)."""

    __slots__ = ("_free", "_reserved", "_total", "_used")

    def __init__(self, memory_info: Any) -> None:  # an nvml.Memory_v2
        self._free, self._total = scalar(memory_info.free), scalar(memory_info.total)
        self._used, self._reserved = scalar(memory_info.used), scalar(memory_info.reserved)

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
        return f"{type(self).__name__}(total={self._total}, free={self._free}, used={self._used})"


class BAR1MemoryInfo(MemoryInfo):
    """BAR1 aperture of a GPU (device memory mapped for the CPU and peers), in bytes.

    ``reserved`` is always 0.
    """

    __slots__ = ()

    def __init__(self, memory_info: Any) -> None:  # an nvml.BAR1Memory
        self._free, self._total = scalar(memory_info.bar1_free), scalar(memory_info.bar1_total)
        self._used, self._reserved = scalar(memory_info.bar1_used), 0


class PciInfo:
    """PCI attributes of a GPU (a snapshot)."""

    __slots__ = ("_handle", "_info")

    def __init__(self, pci_info_ext: Any, handle: int) -> None:  # an nvml.PciInfoExt_v1
        self._info = pci_info_ext
        self._handle = handle

    @property
    def bus_id(self) -> str:
        """The ``domain:bus:device.function`` identifier, e.g. ``"00000000:65:00.0"``."""
        return text(self._info.bus_id)

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
    def link_generation(self) -> int:
        """The highest PCIe generation this GPU and system together allow (a generation 4 GPU
        in a generation 3 slot reports 3)."""
        return int(call(nvml.device_get_max_pcie_link_generation, self._handle))

    @property
    def max_link_generation(self) -> int:
        """The highest PCIe generation the GPU itself supports."""
        return int(call(nvml.device_get_gpu_max_pcie_link_generation, self._handle))

    @property
    def max_link_width(self) -> int:
        """The widest PCIe link (lanes) the GPU and system together allow."""
        return int(call(nvml.device_get_max_pcie_link_width, self._handle))

    @property
    def current_link_generation(self) -> int:
        """The PCIe generation in use now."""
        return int(call(nvml.device_get_curr_pcie_link_generation, self._handle))

    @property
    def current_link_width(self) -> int:
        """The PCIe link width (lanes) in use now."""
        return int(call(nvml.device_get_curr_pcie_link_width, self._handle))

    @property
    def rx_throughput(self) -> int:
        """PCIe receive throughput in KB/s, counted over a 20 ms interval (Maxwell or newer)."""
        return int(
            call(nvml.device_get_pcie_throughput, self._handle, 1)
        )  # NVML_PCIE_UTIL_RX_BYTES

    @property
    def tx_throughput(self) -> int:
        """PCIe transmit throughput in KB/s, counted over a 20 ms interval (Maxwell or newer)."""
        return int(
            call(nvml.device_get_pcie_throughput, self._handle, 0)
        )  # NVML_PCIE_UTIL_TX_BYTES

    @property
    def replay_counter(self) -> int:
        """The PCIe replay counter (link-level retransmissions)."""
        return int(call(nvml.device_get_pcie_replay_counter, self._handle))

    def __repr__(self) -> str:
        return f"PciInfo(bus_id={self.bus_id!r})"


class Utilization:
    """How busy a GPU was over the last sample period, in percent (a snapshot)."""

    __slots__ = ("_gpu", "_memory")

    def __init__(self, utilization: Any) -> None:  # an nvml.Utilization
        self._gpu, self._memory = scalar(utilization.gpu), scalar(utilization.memory)

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

    __slots__ = ("_ci", "_device", "_gi", "_pid", "_used")

    def __init__(self, device: Any, process_info: Any) -> None:  # one nvml.ProcessInfo
        self._device = device
        self._pid, self._used = scalar(process_info.pid), scalar(process_info.used_gpu_memory)
        self._gi = scalar(process_info.gpu_instance_id)
        self._ci = scalar(process_info.compute_instance_id)

    @property
    def pid(self) -> int:
        """The process id."""
        return self._pid

    @property
    def used_gpu_memory(self) -> int:
        """Device memory the process uses, in bytes."""
        return self._used

    def _mig_only(self, what: str) -> None:
        # NVML fills the instance ids with a "not available" value off MIG; cuda.core raises
        # NotSupportedError there (asked anew, as cuda.core does).
        if not self._device.mig.is_mig_device:
            raise make_error(3, "", f"{what} is only defined for processes on a MIG device")

    @property
    def gpu_instance_id(self) -> int:
        """The GPU instance (MIG devices only).

        Raises
        ------
        NotSupportedError
            The device is not a MIG device.
        """
        self._mig_only("gpu_instance_id")
        return self._gi

    @property
    def compute_instance_id(self) -> int:
        """The compute instance (MIG devices only).

        Raises
        ------
        NotSupportedError
            The device is not a MIG device.
        """
        self._mig_only("compute_instance_id")
        return self._ci

    def __repr__(self) -> str:
        return f"ProcessInfo(pid={self._pid}, used_gpu_memory={self._used})"


# NVML's nvmlNvlinkVersion_t values (1 = 1.0 ... 8 = 6.0) as (major, minor).
_NVLINK_VERSIONS = {
    1: (1, 0),
    2: (2, 0),
    3: (2, 2),
    4: (3, 0),
    5: (3, 1),
    6: (4, 0),
    7: (5, 0),
    8: (6, 0),
}


class _NvlinkInfoMeta(type):
    @property
    def max_links(cls) -> int:
        """NVML's static maximum number of NVLink links (``NVML_NVLINK_MAX_LINKS``).

        Deprecated since cuda.core 1.1 (reading it warns with :class:`DeprecationWarning`, as
        there): use :meth:`cuda_core.system.Device.get_nvlink_count`.
        """
        warnings.warn(
            "NvlinkInfo.max_links is deprecated and will be removed; use Device.get_nvlink_count()",
            DeprecationWarning,
            stacklevel=2,
        )
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
