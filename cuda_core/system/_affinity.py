"""CPU and memory affinity of a GPU (Linux): which CPUs and NUMA nodes are closest to it.

:class:`AffinityQueries` holds the :class:`cuda_core.system.Device` members of this concept;
the device class inherits them. (``Device.get_all_devices_with_cpu_affinity``, which makes
devices, is with the other device enumerations in ``_device``.)
"""

from __future__ import annotations

import os

from ._device_info import enum_arg, unpack_bitmask, unsigned_arg
from ._nvml import call, nvml
from .typing import AffinityScope

__all__ = ["AffinityQueries", "gpus_near_cpu"]

_SCOPES = {AffinityScope.NODE: 0, AffinityScope.SOCKET: 1}  # nvmlAffinityScope_t


def _mask_words() -> int:
    # 64 CPUs (or NUMA nodes, never more than CPUs) per word of the masks NVML fills.
    return max(1, -(-(os.cpu_count() or 1) // 64))


def gpus_near_cpu(cpu_index: int) -> list[int]:
    """The NVML handles of the GPUs with an affinity to CPU ``cpu_index`` (checked first)."""
    cpu = unsigned_arg("cpu_index", cpu_index)
    return [int(h) for h in call(nvml.system_get_topology_gpu_set, cpu)]


class AffinityQueries:
    """The affinity members of :class:`cuda_core.system.Device`."""

    __slots__ = ()
    _handle: int

    def get_cpu_affinity(self, scope: AffinityScope | str = AffinityScope.NODE) -> list[int]:
        """The CPUs with the ideal affinity for this GPU, within its NUMA node (``"node"``, the
        default) or its CPU socket (``"socket"``) (Kepler or newer, Linux).

        Where the scope does not fit the machine's topology, NVML answers for the nearest
        non-I/O ancestor of the GPU.

        Parameters
        ----------
        scope : AffinityScope or str, optional
            ``"node"`` (default) or ``"socket"``.

        Returns
        -------
        list of int
            The CPU numbers, ascending.

        Raises
        ------
        ValueError
            An unknown scope.
        """
        s = enum_arg("scope", scope, AffinityScope, _SCOPES, "Invalid affinity scope")
        return unpack_bitmask(
            call(nvml.device_get_cpu_affinity_within_scope, self._handle, _mask_words(), s)
        )

    def get_memory_affinity(self, scope: AffinityScope | str = AffinityScope.NODE) -> list[int]:
        """The NUMA nodes (``"node"``, the default) or CPU sockets (``"socket"``) with the ideal
        memory affinity for this GPU (Kepler or newer, Linux).

        Parameters
        ----------
        scope : AffinityScope or str, optional
            ``"node"`` (default) or ``"socket"``.

        Returns
        -------
        list of int
            The NUMA node (or socket) numbers, ascending.

        Raises
        ------
        ValueError
            An unknown scope.
        """
        s = enum_arg("scope", scope, AffinityScope, _SCOPES, "Invalid affinity scope")
        return unpack_bitmask(call(nvml.device_get_memory_affinity, self._handle, _mask_words(), s))

    def set_cpu_affinity(self) -> None:
        """Bind the calling thread to the CPUs closest to this GPU (Linux).

        Returns
        -------
        None
        """
        call(nvml.device_set_cpu_affinity, self._handle)

    def clear_cpu_affinity(self) -> None:
        """Undo :meth:`set_cpu_affinity`: the calling thread may run on any CPU again.

        Returns
        -------
        None
        """
        call(nvml.device_clear_cpu_affinity, self._handle)
