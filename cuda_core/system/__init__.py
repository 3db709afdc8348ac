"""Facts about the machine's NVIDIA driver and GPUs, through CUDA and NVML.

The names follow NVIDIA's ``cuda.core.system``:

* versions: :func:`get_user_mode_driver_version`, :func:`get_kernel_mode_driver_version`,
  :func:`get_nvml_version`, :func:`get_driver_branch`, :func:`get_driver_version`,
  :func:`get_driver_version_full`, and the libraries cuda_core compiles with
  (:func:`get_nvrtc_version`, :func:`get_nvjitlink_version`, :func:`get_nvvm_version`,
  :func:`get_bindings_version`);
* GPUs as the NVIDIA Management Library (NVML) sees them: :class:`Device` (identity, memory,
  clocks, power, temperature, utilization, PCI, NVLink), :class:`NvlinkInfo`,
  :func:`get_p2p_status`, :func:`get_topology_common_ancestor`, :func:`get_num_devices`;
* events: :meth:`Device.register_events` and :func:`register_events`;
* :func:`get_process_name`, and the NVML error classes (:class:`NvmlError` and its
  subclasses, which are ``cuda.bindings.nvml``'s own).

Importing this module loads neither libcuda nor NVML. NVML is started on first use, once per
process and thread-safely. Where NVML is missing, NVML queries raise
:class:`LibraryNotFoundError` (also a :class:`RuntimeError` and a
:class:`~cuda_core.CUDADriverNotFoundError`); where libcuda is missing, the CUDA driver facts
raise :class:`~cuda_core.CUDADriverNotFoundError`.

For code written against ``cuda.core.experimental``'s ``system`` object, the attributes
``system.driver_version``, ``system.num_devices`` and ``system.devices`` also work.

Examples
--------
>>> from cuda_core import system
>>> system.get_nvrtc_version()  # doctest: +SKIP
(13, 0)
>>> system.Device(index=0).name  # doctest: +SKIP
'NVIDIA H100 80GB HBM3'
"""

from __future__ import annotations

from typing import Any

from .. import _links
from . import _versions, exceptions, typing
from ._device import Device, get_p2p_status, get_topology_common_ancestor, register_events
from ._device_info import NvlinkInfo
from ._nvml import CUDA_BINDINGS_NVML_IS_COMPATIBLE
from ._versions import *
from .exceptions import *

# The version functions and the error classes are listed once, in their own modules.
__all__ = [
    "CUDA_BINDINGS_NVML_IS_COMPATIBLE",
    "Device",
    "NvlinkInfo",
    "get_p2p_status",
    "get_topology_common_ancestor",
    "register_events",
]
__all__ += _versions.__all__
__all__ += exceptions.__all__
__all__.sort()

_ = (exceptions, typing)  # public submodules, as in cuda.core.system


def __getattr__(name: str) -> Any:
    # cuda.core.experimental's ``system`` was an object with these properties.
    if name == "driver_version":
        return _versions.get_driver_version()
    if name == "num_devices":
        return _versions.get_num_devices()
    if name == "devices":
        CudaDevice = _links.Device

        return tuple(CudaDevice(i) for i in range(_versions.get_num_devices()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
