"""``cuda_core.system.Device``: a GPU as NVML sees it, and queries between two GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import _links
from .._utils import arg_error, check_int
from ._affinity import AffinityQueries, gpus_near_cpu
from ._board import BoardQueries
from ._board import DeviceAttributes as DeviceAttributes
from ._board import RepairStatus as RepairStatus
from ._clocks import ClockInfo as ClockInfo
from ._clocks import ClockOffsets as ClockOffsets
from ._clocks import ClockQueries
from ._clocks import GpuDynamicPstatesInfo as GpuDynamicPstatesInfo
from ._device_info import (
    BAR1MemoryInfo,
    MemoryInfo,
    NvlinkInfo,
    PciInfo,
    ProcessInfo,
    Utilization,
    enum_arg,
)
from ._events import _DEVICE_CLASS, DeviceEvents, RegisteredSystemEvents, event_types_from_mask
from ._field_values import FieldValueQueries
from ._field_values import FieldValues as FieldValues
from ._mig import MigQueries
from ._nvml import ERROR_CLASSES, call, nvml
from ._thermal import CoolerInfo as CoolerInfo
from ._thermal import FanInfo as FanInfo
from ._thermal import Temperature as Temperature
from ._thermal import ThermalQueries
from ._thermal import ThermalSensor as ThermalSensor
from ._thermal import ThermalSettings as ThermalSettings
from ._versions import get_num_devices
from .typing import DeviceArch, GpuP2PCapsIndex, GpuP2PStatus, GpuTopologyLevel

__all__ = ["Device", "get_p2p_status", "get_topology_common_ancestor", "register_events"]
# The result classes above are re-exported here (not public) because cuda.core defines them in
# its ``system/_device`` module, where code that checks ``isinstance`` against them looks.

_BRANDS = {
    0: "Unknown",
    1: "Quadro",
    2: "Tesla",
    3: "NVS",
    4: "GRID",
    5: "GeForce",
    6: "Titan",
    7: "NVIDIA vApps",
    8: "NVIDIA VPC",
    9: "NVIDIA VCS",
    10: "NVIDIA VWS",
    11: "NVIDIA Cloud Gaming",
    12: "NVIDIA vGaming",
    13: "Quadro RTX",
    14: "NVIDIA RTX",
    15: "NVIDIA",
    16: "GeForce RTX",
    17: "Titan RTX",
}


class Device(
    AffinityQueries, BoardQueries, ClockQueries, FieldValueQueries, MigQueries, ThermalQueries
):
    """A GPU as the NVIDIA Management Library (NVML) sees it: identity, memory, clocks,
    temperature and cooling, power, PCI, NVLink, MIG, InfoROM, affinity and field values.

    The members of each concept live in their own module (``_clocks``, ``_thermal``,
    ``_board``, ``_mig``, ``_affinity``, ``_field_values``) and are inherited from there.

    For running CUDA work use :class:`cuda_core.Device`; :meth:`to_cuda_device` and
    :meth:`cuda_core.Device.to_system_device` go from one to the other (matched by UUID).
    Creating one starts NVML (once per process) but never CUDA.

    Parameters
    ----------
    index : int, optional
        NVML's index of the GPU, ``0`` to ``get_device_count() - 1``. NVML enumerates every
        GPU of the machine and ignores ``CUDA_VISIBLE_DEVICES``, so this index may differ from
        the CUDA ordinal; look GPUs up by ``uuid`` or ``pci_bus_id`` where it matters.
        (cuda.core takes it as a keyword only; cuda_core also accepts it positionally.)
    uuid : str or bytes, optional
        The GPU's UUID, with or without the ``GPU-`` prefix.
    pci_bus_id : str or bytes, optional
        The GPU's PCI bus id, e.g. ``"00000000:65:00.0"``.

    Raises
    ------
    ValueError
        Not exactly one of ``index``, ``uuid`` and ``pci_bus_id`` was given.
    TypeError
        ``index`` is not an int.
    NvmlError
        NVML could not find the GPU (e.g. :class:`cuda_core.system.InvalidArgumentError` for an
        index out of range, :class:`cuda_core.system.NotFoundError` for an unknown UUID), or NVML
        is missing (:class:`cuda_core.system.LibraryNotFoundError`).

    Examples
    --------
    >>> from cuda_core import system
    >>> dev = system.Device(index=0)  # doctest: +SKIP
    >>> dev.name, dev.memory_info.total, dev.temperature.get_sensor()  # doctest: +SKIP
    ('NVIDIA H100 80GB HBM3', 85520809984, 34)
    """

    __slots__ = ("__weakref__", "_handle")

    def __init__(
        self,
        index: int | None = None,
        *,
        uuid: bytes | str | None = None,
        pci_bus_id: bytes | str | None = None,
    ) -> None:
        given = [
            n
            for n, v in (("index", index), ("uuid", uuid), ("pci_bus_id", pci_bus_id))
            if v is not None
        ]
        if len(given) != 1:
            lead = (
                "Handle requires either a device `index`, `uuid`, or `pci_bus_id`"
                if not given
                else "Handle requires only one of `index`, `uuid`, or `pci_bus_id`"
            )
            raise ValueError(
                f"{lead}: exactly one of index, uuid and pci_bus_id must be given (got "
                f"{given or 'none'})"
            )
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"index must be an int (got {index!r})")
            if index < 0:
                raise ValueError(f"index must be >= 0 (got {index!r})")
            self._handle = int(call(nvml.device_get_handle_by_index_v2, index))
        elif uuid is not None:
            text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
            if not text.upper().startswith(("GPU-", "MIG-")):
                text = "GPU-" + text
            self._handle = int(call(nvml.device_get_handle_by_uuid, text))
        else:
            assert pci_bus_id is not None
            text = pci_bus_id.decode() if isinstance(pci_bus_id, bytes) else str(pci_bus_id)
            self._handle = int(call(nvml.device_get_handle_by_pci_bus_id_v2, text))

    @classmethod
    def _from_handle(cls, handle: int) -> Device:
        dev = cls.__new__(cls)
        dev._handle = int(handle)
        return dev

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other._handle == self._handle

    def __hash__(self) -> int:
        return hash((Device, self._handle))

    def __repr__(self) -> str:
        return f"<cuda_core.system.Device handle={self._handle:#x}>"

    # -- identity -----------------------------------------------------------------------------

    @property
    def index(self) -> int:
        """NVML's index of this GPU (may differ from the CUDA ordinal)."""
        return int(call(nvml.device_get_index, self._handle))

    @property
    def uuid(self) -> str:
        """The GPU's UUID as NVML writes it, with its ``GPU-`` (or ``MIG-``) prefix."""
        return str(call(nvml.device_get_uuid, self._handle))

    @property
    def uuid_without_prefix(self) -> str:
        """The GPU's UUID without the ``GPU-``/``MIG-`` prefix, as CUDA writes it."""
        text = self.uuid
        return text[4:] if text[:4].upper() in ("GPU-", "MIG-") else text

    @property
    def pci_bus_id(self) -> str:
        """The PCI bus id, ``"domain:bus:device.function"`` (e.g. ``"00000000:65:00.0"``)."""
        return self.pci_info.bus_id

    @property
    def numa_node_id(self) -> int:
        """The NUMA node of this GPU (platforms where GPUs are NUMA nodes only)."""
        return int(call(nvml.device_get_numa_node_id, self._handle))

    @property
    def arch(self) -> DeviceArch:
        """The GPU architecture, e.g. ``DeviceArch.HOPPER`` for an H100."""
        value = int(call(nvml.device_get_architecture, self._handle))
        try:
            return DeviceArch(value)
        except ValueError:
            return DeviceArch.UNKNOWN

    @property
    def name(self) -> str:
        """The product name, e.g. ``"NVIDIA H100 80GB HBM3"``."""
        return str(call(nvml.device_get_name, self._handle))

    @property
    def brand(self) -> str:
        """The brand, e.g. ``"NVIDIA"`` or ``"Tesla"``; ``"Unknown"`` if NVML does not say."""
        return _BRANDS.get(int(call(nvml.device_get_brand, self._handle)), "Unknown")

    @property
    def serial(self) -> str:
        """The board serial number (boards with an InfoROM only)."""
        return str(call(nvml.device_get_serial, self._handle))

    @property
    def module_id(self) -> int:
        """The module id of this GPU on its baseboard (0 for non-baseboard products)."""
        return int(call(nvml.device_get_module_id, self._handle))

    @property
    def minor_number(self) -> int:
        """The minor number of ``/dev/nvidiaN`` for this GPU (Linux)."""
        return int(call(nvml.device_get_minor_number, self._handle))

    @property
    def cuda_compute_capability(self) -> tuple[int, int]:
        """The compute capability as ``(major, minor)``, e.g. ``(9, 0)`` for an H100."""
        major, minor = call(nvml.device_get_cuda_compute_capability, self._handle)
        return (int(major), int(minor))

    @property
    def is_persistence_mode_enabled(self) -> bool:
        """Whether persistence mode is on (Linux). Setting it needs root."""
        return bool(call(nvml.device_get_persistence_mode, self._handle))

    @is_persistence_mode_enabled.setter
    def is_persistence_mode_enabled(self, enabled: bool) -> None:
        call(nvml.device_set_persistence_mode, self._handle, 1 if enabled else 0)

    def to_cuda_device(self) -> Any:  # a cuda_core.Device
        """The :class:`cuda_core.Device` for this GPU, matched by UUID.

        Returns
        -------
        cuda_core.Device
            The CUDA device with the same UUID.

        Raises
        ------
        RuntimeError
            No CUDA device has this UUID (e.g. hidden by ``CUDA_VISIBLE_DEVICES``, or a
            MIG-enabled physical GPU).
        """
        # The one reference from the NVML layer up to the CUDA layer: a link, set by _device.
        cuda_device_class = _links.Device

        want = self.uuid_without_prefix.lower()
        for ordinal in range(get_num_devices()):
            dev = cuda_device_class(ordinal)
            if str(dev.uuid).lower() == want:
                return dev
        raise RuntimeError(f"no CUDA device has the UUID {self.uuid!r} of this NVML device")

    @classmethod
    def get_device_count(cls) -> int:
        """The number of GPUs NVML sees (all of the machine's, ignoring CUDA_VISIBLE_DEVICES).

        Returns
        -------
        int
            The GPU count.
        """
        return int(call(nvml.device_get_count_v2))

    @classmethod
    def get_all_devices(cls) -> Iterator[Device]:
        """Every GPU NVML sees, in NVML index order.

        Returns
        -------
        iterator of Device
            One per GPU.
        """
        for i in range(cls.get_device_count()):
            yield cls(index=i)

    @classmethod
    def get_all_devices_with_cpu_affinity(cls, cpu_index: int) -> Iterator[Device]:
        """The GPUs that have an affinity with CPU ``cpu_index`` (Linux).

        Parameters
        ----------
        cpu_index : int
            The CPU number, as the operating system counts CPUs.

        Returns
        -------
        iterator of Device
            The GPUs close to that CPU.

        Raises
        ------
        TypeError, ValueError
            ``cpu_index`` is not an int >= 0 (checked when called, before NVML is asked).
        """
        return iter([cls._from_handle(h) for h in gpus_near_cpu(cpu_index)])

    @property
    def is_display_connected(self) -> bool:
        """Whether a physical display is connected to one of this GPU's connectors."""
        return bool(call(nvml.device_get_display_mode, self._handle))

    @property
    def is_display_active(self) -> bool:
        """Whether a display is initialised on this GPU (memory set aside for a surface)."""
        return bool(call(nvml.device_get_display_active, self._handle))

    # -- memory, power, utilization, processes -------------------------------------------------

    @property
    def memory_info(self) -> MemoryInfo:
        """Device memory (total, free, used, reserved) in bytes, as a :class:`MemoryInfo`."""
        return MemoryInfo(call(nvml.device_get_memory_info_v2, self._handle))

    @property
    def bar1_memory_info(self) -> BAR1MemoryInfo:
        """The BAR1 aperture (total, free, used) in bytes, as a :class:`BAR1MemoryInfo`."""
        return BAR1MemoryInfo(call(nvml.device_get_bar1_memory_info, self._handle))

    @property
    def power_usage(self) -> int:
        """Power drawn by the GPU and its memory now, in milliwatts (a cuda_core addition)."""
        return int(call(nvml.device_get_power_usage, self._handle))

    @property
    def power_limit(self) -> int:
        """The power limit the driver enforces, in milliwatts (a cuda_core addition)."""
        return int(call(nvml.device_get_enforced_power_limit, self._handle))

    @property
    def utilization(self) -> Utilization:
        """GPU and memory :class:`Utilization` (percent) over the last sample period."""
        return Utilization(call(nvml.device_get_utilization_rates, self._handle))

    @property
    def compute_running_processes(self) -> list[ProcessInfo]:
        """Processes with a CUDA context on this GPU, as :class:`ProcessInfo` objects."""
        procs = call(nvml.device_get_compute_running_processes_v3, self._handle)
        return [ProcessInfo(self, procs[i]) for i in range(len(procs))]

    # -- PCI, NVLink, topology, events ------------------------------------------------------

    @property
    def pci_info(self) -> PciInfo:
        """The PCI attributes of this GPU, as a :class:`PciInfo`; ``RuntimeError`` for a device
        without them (a MIG device), as in cuda.core."""
        try:
            info = call(nvml.device_get_pci_info_ext, self._handle)
        except ERROR_CLASSES["InvalidArgumentError"] as exc:
            raise RuntimeError(
                f"this device has no PCI attributes (is it a MIG device?): {exc}"
            ) from None
        return PciInfo(info, self._handle)

    def get_nvlink_count(self) -> int:
        """The number of NVLink links this GPU has (NVML's ``DEV_NVLINK_LINK_COUNT`` field;
        0 where NVML says NVLink is not supported, e.g. on PCIe boards).

        Where the field says 0, the links whose state NVML reports are counted instead: on a
        four-H200 host (driver 580) the field read 0 for a GPU with 18 links up in some
        processes and 18 in others, while every link's state answered in all of them.

        Returns
        -------
        int
            The link count; the links are numbered 0 to count - 1.
        """
        try:
            count = int(self.get_field_values([_NVLINK_LINK_COUNT])[0].value)
        except ERROR_CLASSES["NotSupportedError"]:
            count = 0
        return count or self._links_with_a_state()

    def _links_with_a_state(self) -> int:
        """How many links, from link 0 on, NVML reports a state of (0 on a board without)."""
        count = 0
        for link in range(nvml.NVLINK_MAX_LINKS):
            try:
                call(nvml.device_get_nvlink_state, self._handle, link)
            except (ERROR_CLASSES["NotSupportedError"], ERROR_CLASSES["InvalidArgumentError"]):
                break
            count += 1
        return count

    def get_nvlink(self, link: int) -> NvlinkInfo:
        """The :class:`NvlinkInfo` of one NVLink link.

        Parameters
        ----------
        link : int
            The link, 0 to :meth:`get_nvlink_count` ``- 1``.

        Returns
        -------
        NvlinkInfo
            Queries of that link.

        Raises
        ------
        TypeError
            ``link`` is not an int.
        ValueError
            This GPU has no link number ``link``.
        """
        index = check_int("link", link)
        count = self.get_nvlink_count()
        if not 0 <= index < count:
            rule = (
                f"an NVLink link of this device, 0 to {count - 1}"
                if count
                else "an NVLink link, but this device has none"
            )
            raise arg_error("link", rule, link)
        return NvlinkInfo(self, index)

    def get_nvlinks(self) -> Iterator[NvlinkInfo]:
        """Every NVLink link of this GPU, as :class:`NvlinkInfo` objects.

        Returns
        -------
        iterator of NvlinkInfo
            One per link (none on a board without NVLink).
        """
        return iter([NvlinkInfo(self, link) for link in range(self.get_nvlink_count())])

    def get_topology_nearest_gpus(self, level: GpuTopologyLevel | str) -> Iterator[Device]:
        """The GPUs connected to this one at topology ``level`` (Linux).

        Returns
        -------
        iterator of Device
            The nearest GPUs.
        """
        lvl = enum_arg("level", level, GpuTopologyLevel, _TOPOLOGY, "Invalid topology level")
        for handle in call(nvml.device_get_topology_nearest_gpus, self._handle, lvl):
            yield Device._from_handle(int(handle))

    def register_events(self, events: Any) -> DeviceEvents:
        """Start recording device events (Linux); wait for them with ``wait()`` on the result.

        Parameters
        ----------
        events : EventType, str or list
            The event types to record (a member or name, or a list of them), e.g.
            ``"xid_critical_error"``. An empty list records nothing (``wait`` times out), as
            in ``cuda.core``.

        Returns
        -------
        DeviceEvents
            The registered event set (freed by its ``close()`` or when collected).

        Raises
        ------
        TypeError
            ``events`` is not an event type, a name or a list of them (``None``, an int).
        ValueError
            An unknown event type.
        NotSupportedError
            None of the requested events can be recorded on this GPU.
        """
        return DeviceEvents(self._handle, events)

    def get_supported_event_types(self) -> list[Any]:
        """The :class:`~cuda_core.system.typing.EventType` values this GPU can record.

        Returns
        -------
        list of EventType
            The supported event types.
        """
        return event_types_from_mask(int(call(nvml.device_get_supported_event_types, self._handle)))


_NVLINK_LINK_COUNT = 91  # NVML_FI_DEV_NVLINK_LINK_COUNT
_TOPOLOGY = {
    GpuTopologyLevel.INTERNAL: 0,
    GpuTopologyLevel.SINGLE: 10,
    GpuTopologyLevel.MULTIPLE: 20,
    GpuTopologyLevel.HOSTBRIDGE: 30,
    GpuTopologyLevel.NODE: 40,
    GpuTopologyLevel.SYSTEM: 50,
}
_TOPOLOGY_BACK = {v: k for k, v in _TOPOLOGY.items()}
# GpuP2PCapsIndex: NVML's PROP is the same value as PCI (4).
_P2P_INDEX = {
    GpuP2PCapsIndex.READ: 0,
    GpuP2PCapsIndex.WRITE: 1,
    GpuP2PCapsIndex.NVLINK: 2,
    GpuP2PCapsIndex.ATOMICS: 3,
    GpuP2PCapsIndex.PCI: 4,
    GpuP2PCapsIndex.PROP: 4,
    GpuP2PCapsIndex.UNKNOWN: 5,
}
_P2P_STATUS = dict(enumerate(GpuP2PStatus))


def _check_device(name: str, value: Any) -> Device:
    if not isinstance(value, Device):
        raise TypeError(f"{name} must be a cuda_core.system.Device (got {value!r})")
    return value


def get_topology_common_ancestor(device1: Device, device2: Device) -> GpuTopologyLevel:
    """The closest point in the system's topology that two GPUs share (Linux).

    Parameters
    ----------
    device1, device2 : cuda_core.system.Device
        The GPUs.

    Returns
    -------
    GpuTopologyLevel
        E.g. ``GpuTopologyLevel.INTERNAL`` for the same GPU, ``SYSTEM`` across CPU sockets.
    """
    a, b = _check_device("device1", device1), _check_device("device2", device2)
    level = int(call(nvml.device_get_topology_common_ancestor, a._handle, b._handle))
    return _TOPOLOGY_BACK.get(level, GpuTopologyLevel.SYSTEM)


def get_p2p_status(device1: Device, device2: Device, index: GpuP2PCapsIndex | str) -> GpuP2PStatus:
    """Whether two GPUs can use one peer-to-peer capability with each other.

    Parameters
    ----------
    device1, device2 : cuda_core.system.Device
        The GPUs.
    index : GpuP2PCapsIndex or str
        The capability: ``"read"``, ``"write"``, ``"nvlink"``, ``"atomics"``, ``"pci"``, ...

    Returns
    -------
    GpuP2PStatus
        ``GpuP2PStatus.OK`` when supported, else the reason it is not.
    """
    a, b = _check_device("device1", device1), _check_device("device2", device2)
    idx = enum_arg("index", index, GpuP2PCapsIndex, _P2P_INDEX, "Invalid P2P caps index")
    status = int(call(nvml.device_get_p2p_status, a._handle, b._handle, idx))
    return _P2P_STATUS.get(status, GpuP2PStatus.UNKNOWN)


def register_events(events: Any) -> RegisteredSystemEvents:
    """Start recording system events (GPUs bound to or unbound from the driver; Linux).

    Events before this call are not recorded. Wait with ``wait()`` on the result.

    Parameters
    ----------
    events : SystemEventType, str or list
        ``"bind"``, ``"unbind"``, or a list of both.

    Returns
    -------
    RegisteredSystemEvents
        The registered event set (freed by its ``close()`` or when collected).

    Raises
    ------
    TypeError
        ``events`` is not an event type, a name or a list of them (``None``, an int).
    ValueError
        An unknown event type, or none.
    NotSupportedError
        None of the requested events can be recorded.

    Examples
    --------
    >>> from cuda_core import system
    >>> events = system.register_events(["bind", "unbind"])  # doctest: +SKIP
    >>> batch = events.wait(timeout_ms=10_000)  # doctest: +SKIP
    """
    return RegisteredSystemEvents(events)


_DEVICE_CLASS.append(Device)  # events of a GPU report this class


_links.system_device = lambda uuid: Device(uuid=uuid)  # Device.to_system_device
