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

from . import exceptions, typing
from ._device import Device, get_p2p_status, get_topology_common_ancestor, register_events
from ._device_info import NvlinkInfo
from ._nvml import CUDA_BINDINGS_NVML_IS_COMPATIBLE
from ._versions import (
    get_bindings_version,
    get_driver_branch,
    get_driver_version,
    get_driver_version_full,
    get_kernel_mode_driver_version,
    get_num_devices,
    get_nvjitlink_version,
    get_nvml_version,
    get_nvrtc_version,
    get_nvvm_version,
    get_process_name,
    get_user_mode_driver_version,
)
from .exceptions import (
    AlreadyInitializedError,
    ArgumentVersionMismatchError,
    CorruptedInforomError,
    DeprecatedError,
    DriverNotLoadedError,
    FreqNotSupportedError,
    FunctionNotFoundError,
    GpuIsLostError,
    GpuNotFoundError,
    InsufficientPowerError,
    InsufficientResourcesError,
    InsufficientSizeError,
    InUseError,
    InvalidArgumentError,
    InvalidStateError,
    IrqIssueError,
    LibraryNotFoundError,
    LibRmVersionMismatchError,
    MemoryError,
    NoDataError,
    NoPermissionError,
    NotFoundError,
    NotReadyError,
    NotSupportedError,
    NvmlError,
    OperatingSystemError,
    ResetRequiredError,
    ResetTypeNotSupportedError,
    TimeoutError,
    UninitializedError,
    UnknownError,
    VgpuEccNotSupportedError,
)

__all__ = [
    "AlreadyInitializedError",
    "ArgumentVersionMismatchError",
    "CUDA_BINDINGS_NVML_IS_COMPATIBLE",
    "CorruptedInforomError",
    "DeprecatedError",
    "Device",
    "DriverNotLoadedError",
    "FreqNotSupportedError",
    "FunctionNotFoundError",
    "GpuIsLostError",
    "GpuNotFoundError",
    "InUseError",
    "InsufficientPowerError",
    "InsufficientResourcesError",
    "InsufficientSizeError",
    "InvalidArgumentError",
    "InvalidStateError",
    "IrqIssueError",
    "LibRmVersionMismatchError",
    "LibraryNotFoundError",
    "MemoryError",
    "NoDataError",
    "NoPermissionError",
    "NotFoundError",
    "NotReadyError",
    "NotSupportedError",
    "NvlinkInfo",
    "NvmlError",
    "OperatingSystemError",
    "ResetRequiredError",
    "ResetTypeNotSupportedError",
    "TimeoutError",
    "UninitializedError",
    "UnknownError",
    "VgpuEccNotSupportedError",
    "get_bindings_version",
    "get_driver_branch",
    "get_driver_version",
    "get_driver_version_full",
    "get_kernel_mode_driver_version",
    "get_num_devices",
    "get_nvjitlink_version",
    "get_nvml_version",
    "get_nvrtc_version",
    "get_nvvm_version",
    "get_p2p_status",
    "get_process_name",
    "get_topology_common_ancestor",
    "get_user_mode_driver_version",
    "register_events",
]

_ = (exceptions, typing)  # public submodules, as in cuda.core.system


def __getattr__(name: str) -> Any:
    # cuda.core.experimental's ``system`` was an object with these properties.
    if name == "driver_version":
        return get_driver_version()
    if name == "num_devices":
        return get_num_devices()
    if name == "devices":
        from .._device import Device as CudaDevice

        return tuple(CudaDevice(i) for i in range(get_num_devices()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
