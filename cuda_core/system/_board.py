"""Facts about a GPU's board and chip: the InfoROM (:class:`InforomInfo`), the TPC/channel
repair status (:class:`RepairStatus`), engine counts (:class:`DeviceAttributes`), the
addressing mode and chip-to-chip (C2C) mode.

:class:`BoardQueries` holds the :class:`cuda_core.system.Device` members of this concept; the
device class inherits them.
"""

from __future__ import annotations

from typing import Any

from ._device_info import enum_arg, scalar
from ._nvml import call, nvml, text
from .typing import AddressingMode, InforomObject

__all__ = ["BoardQueries", "DeviceAttributes", "InforomInfo", "RepairStatus"]

# nvmlInforomObject_t and nvmlDeviceAddressingModeType_t values.
_INFOROM_OBJECTS = {
    InforomObject.OEM: 0,
    InforomObject.ECC: 1,
    InforomObject.POWER: 2,
    InforomObject.DEN: 3,
}
_ADDRESSING_MODES = {1: AddressingMode.HMM, 2: AddressingMode.ATS}


class InforomInfo:
    """The InfoROM of a GPU (non-volatile on-board memory holding e.g. ECC counts and the power
    configuration); each member asks NVML anew. Boards without one answer
    :class:`~cuda_core.system.NotSupportedError`.

    Get one from :attr:`cuda_core.system.Device.inforom`.
    """

    __slots__ = ("_device",)

    def __init__(self, device: Any) -> None:
        self._device = device

    def get_version(self, inforom: InforomObject | str) -> str:
        """The version of one InfoROM object (``"oem"``, ``"ecc"``, ``"power"``, ``"den"``).

        Parameters
        ----------
        inforom : InforomObject or str
            The object.

        Returns
        -------
        str
            Its version, e.g. ``"7.16"``.

        Raises
        ------
        ValueError
            An unknown InfoROM object.
        """
        obj = enum_arg("inforom", inforom, InforomObject, _INFOROM_OBJECTS)
        return text(call(nvml.device_get_inforom_version, self._device._handle, obj))

    @property
    def image_version(self) -> str:
        """The version of the whole InfoROM image flashed on the board, e.g. ``"G520.0200.00.05"``."""
        return text(call(nvml.device_get_inforom_image_version, self._device._handle))

    @property
    def configuration_checksum(self) -> int:
        """The checksum of the configuration in the InfoROM (power and ECC objects); equal
        checksums mean equally configured boards under one driver."""
        return int(call(nvml.device_get_inforom_configuration_checksum, self._device._handle))

    def validate(self) -> None:
        """Read the InfoROM from flash and verify its checksums.

        Returns
        -------
        None

        Raises
        ------
        CorruptedInforomError
            The InfoROM is corrupted (:class:`~cuda_core.system.CorruptedInforomError`).
        """
        call(nvml.device_validate_inforom, self._device._handle)

    @property
    def bbx_flush_time(self) -> tuple[int, int]:
        """``(timestamp, duration_us)`` of the last flush of the black-box (BBX) InfoROM object
        during this run of the driver."""
        stamp, duration = call(nvml.device_get_last_bbx_flush_time, self._device._handle)
        return (int(stamp), int(duration))

    @property
    def board_part_number(self) -> str:
        """The board part number programmed into the InfoROM."""
        return text(call(nvml.device_get_board_part_number, self._device._handle))


class RepairStatus:
    """Whether a TPC or memory-channel repair is pending on a GPU (read once, when made;
    Ampere or newer).

    Parameters
    ----------
    handle : int
        The NVML device handle.
    """

    __slots__ = ("_channel", "_tpc")

    def __init__(self, handle: int) -> None:
        raw = call(nvml.device_get_repair_status, handle)
        self._channel = bool(scalar(raw.b_channel_repair_pending))
        self._tpc = bool(scalar(raw.b_tpc_repair_pending))

    @property
    def channel_repair_pending(self) -> bool:
        """``True`` when a memory-channel repair is pending (takes effect at the next reset)."""
        return self._channel

    @property
    def tpc_repair_pending(self) -> bool:
        """``True`` when a TPC (texture processing cluster) repair is pending."""
        return self._tpc

    def __repr__(self) -> str:
        return (
            f"RepairStatus(channel_repair_pending={self._channel}, tpc_repair_pending={self._tpc})"
        )


class DeviceAttributes:
    """Engine counts and sizes of a GPU or MIG device (a snapshot)."""

    __slots__ = ("_values",)

    _FIELDS = (
        "multiprocessor_count", "shared_copy_engine_count", "shared_decoder_count",
        "shared_encoder_count", "shared_jpeg_count", "shared_ofa_count",
        "gpu_instance_slice_count", "compute_instance_slice_count", "memory_size_mb",
    )  # fmt: skip

    def __init__(self, attributes: Any) -> None:  # an nvml.DeviceAttributes
        self._values = {name: scalar(getattr(attributes, name)) for name in self._FIELDS}

    @property
    def multiprocessor_count(self) -> int:
        """The number of streaming multiprocessors (SMs)."""
        return self._values["multiprocessor_count"]

    @property
    def shared_copy_engine_count(self) -> int:
        """The number of shared copy engines."""
        return self._values["shared_copy_engine_count"]

    @property
    def shared_decoder_count(self) -> int:
        """The number of shared video decoders."""
        return self._values["shared_decoder_count"]

    @property
    def shared_encoder_count(self) -> int:
        """The number of shared video encoders."""
        return self._values["shared_encoder_count"]

    @property
    def shared_jpeg_count(self) -> int:
        """The number of shared JPEG engines."""
        return self._values["shared_jpeg_count"]

    @property
    def shared_ofa_count(self) -> int:
        """The number of shared optical flow accelerators (OFA)."""
        return self._values["shared_ofa_count"]

    @property
    def gpu_instance_slice_count(self) -> int:
        """The number of GPU instance slices (MIG)."""
        return self._values["gpu_instance_slice_count"]

    @property
    def compute_instance_slice_count(self) -> int:
        """The number of compute instance slices (MIG)."""
        return self._values["compute_instance_slice_count"]

    @property
    def memory_size_mb(self) -> int:
        """The device memory, in MiB."""
        return self._values["memory_size_mb"]

    def __repr__(self) -> str:
        return f"DeviceAttributes({self._values})"


class BoardQueries:
    """The board and chip members of :class:`cuda_core.system.Device`."""

    __slots__ = ()
    _handle: int

    @property
    def inforom(self) -> InforomInfo:
        """An :class:`InforomInfo` for this GPU's InfoROM."""
        return InforomInfo(self)

    @property
    def repair_status(self) -> RepairStatus:
        """The TPC/channel :class:`RepairStatus` of this GPU (Ampere or newer)."""
        return RepairStatus(self._handle)

    @property
    def attributes(self) -> DeviceAttributes:
        """Engine counts and sizes, a :class:`DeviceAttributes` (Ampere or newer, Linux; NVML
        answers this for MIG devices, and may answer
        :class:`~cuda_core.system.NotSupportedError` for a whole GPU)."""
        return DeviceAttributes(call(nvml.device_get_attributes_v2, self._handle))

    @property
    def addressing_mode(self) -> AddressingMode | None:
        """The way this GPU reaches the host's system-allocated memory.

        ``AddressingMode.HMM`` (driver-mirrored page tables), ``AddressingMode.ATS`` (shared
        page tables), or ``None`` when it cannot (Turing or newer, Linux).
        """
        raw = call(nvml.device_get_addressing_mode, self._handle)
        return _ADDRESSING_MODES.get(scalar(raw.value))

    @property
    def is_c2c_enabled(self) -> bool:
        """Whether the chip-to-chip (C2C) link to the CPU is on (Grace Hopper and kin)."""
        return bool(scalar(call(nvml.device_get_c2c_mode_info_v, self._handle).is_c2c_enabled))
