"""Multi-Instance GPU (MIG): :class:`MigInfo`, reached through
:attr:`cuda_core.system.Device.mig` (:class:`MigQueries` holds that member).

A MIG device is an NVML handle for one compute instance of a GPU split with MIG; it is a
:class:`cuda_core.system.Device` too, and most queries work on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._device_info import unsigned_arg
from ._nvml import ERROR_CLASSES, call, nvml, raise_for_status

__all__ = ["MigInfo", "MigQueries"]


class MigInfo:
    """MIG facts of one GPU (or MIG device); each member asks NVML anew (Ampere or newer).

    Parameters
    ----------
    device : cuda_core.system.Device
        The GPU or MIG device.
    """

    __slots__ = ("_device",)

    def __init__(self, device: Any) -> None:
        self._device = device

    def _make(self, handle: Any) -> Any:
        # Devices this one leads to are of the same class (cuda_core.system.Device).
        return type(self._device)._from_handle(int(handle))

    @property
    def is_mig_device(self) -> bool:
        """Whether this handle is a MIG device (one compute instance), not a whole GPU."""
        return bool(call(nvml.device_is_mig_device_handle, self._device._handle))

    @property
    def mode(self) -> bool:
        """Whether MIG mode is on now. Setting it (root only) may need the GPU idle, and a
        reset or reboot to take effect: until then the new mode is :attr:`pending_mode`; a
        refused activation raises its NVML error (e.g. ``InUseError``, ``ResetRequiredError``)."""
        current, _ = call(nvml.device_get_mig_mode, self._device._handle)
        return int(current) == 1  # NVML_DEVICE_MIG_ENABLE

    @mode.setter
    def mode(self, mode: bool) -> None:
        status = call(nvml.device_set_mig_mode, self._device._handle, 1 if mode else 0)
        raise_for_status(status, "nvmlDeviceSetMigMode")

    @property
    def pending_mode(self) -> bool:
        """The MIG mode the GPU will have after the next activation (reset or reboot)."""
        _, pending = call(nvml.device_get_mig_mode, self._device._handle)
        return int(pending) == 1

    @property
    def device_count(self) -> int:
        """The most MIG devices that can exist under this GPU (0 where MIG is unsupported)."""
        return int(call(nvml.device_get_max_mig_device_count, self._device._handle))

    @property
    def parent(self) -> Any:
        """The whole GPU this MIG device belongs to (a :class:`cuda_core.system.Device`);
        NVML answers an error for a device that is not a MIG device."""
        return self._make(
            call(nvml.device_get_device_handle_from_mig_device_handle, self._device._handle)
        )

    def get_device_by_index(self, index: int) -> Any:
        """The MIG device ``index`` of this GPU.

        The handle stays valid until its compute instance (or GPU instance, or the GPU) is
        destroyed, reset or unbound; ask again after such a change.

        Parameters
        ----------
        index : int
            ``0`` to :attr:`device_count` ``- 1``.

        Returns
        -------
        cuda_core.system.Device
            The MIG device.

        Raises
        ------
        TypeError, ValueError
            ``index`` is not an int >= 0.
        NotFoundError
            No MIG device exists at ``index`` (:class:`~cuda_core.system.NotFoundError`).
        """
        i = unsigned_arg("index", index)
        return self._make(call(nvml.device_get_mig_device_handle_by_index, self._device._handle, i))

    def get_all_devices(self) -> Iterator[Any]:
        """Every MIG device of this GPU, skipping the indices where none exists.

        Returns
        -------
        iterator of cuda_core.system.Device
            The MIG devices (none where MIG is off).
        """
        not_found = ERROR_CLASSES["NotFoundError"]
        found = []
        for i in range(self.device_count):
            try:
                found.append(self.get_device_by_index(i))
            except not_found:
                continue
        return iter(found)


class MigQueries:
    """The MIG member of :class:`cuda_core.system.Device`."""

    __slots__ = ()

    @property
    def mig(self) -> MigInfo:
        """A :class:`MigInfo` for this GPU's Multi-Instance GPU facts (Ampere or newer)."""
        return MigInfo(self)
