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
``system.driver_version``, ``system.num_devices`` and ``system.devices`` also work, with the
``DeprecationWarning`` ``cuda.core`` 0.5 gave for them (0.6 removed them).

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
from .._utils._renamed import warn_renamed
from . import _versions, exceptions, typing
from ._device import Device as Device
from ._device import get_p2p_status as get_p2p_status
from ._device import get_topology_common_ancestor as get_topology_common_ancestor
from ._device import register_events as register_events
from ._device_info import NvlinkInfo as NvlinkInfo
from ._nvml import CUDA_BINDINGS_NVML_IS_COMPATIBLE as CUDA_BINDINGS_NVML_IS_COMPATIBLE
from ._versions import get_bindings_version as get_bindings_version
from ._versions import get_driver_branch as get_driver_branch
from ._versions import get_driver_version as get_driver_version
from ._versions import get_driver_version_full as get_driver_version_full
from ._versions import get_kernel_mode_driver_version as get_kernel_mode_driver_version
from ._versions import get_num_devices as get_num_devices
from ._versions import get_nvjitlink_version as get_nvjitlink_version
from ._versions import get_nvml_version as get_nvml_version
from ._versions import get_nvrtc_version as get_nvrtc_version
from ._versions import get_nvvm_version as get_nvvm_version
from ._versions import get_process_name as get_process_name
from ._versions import get_user_mode_driver_version as get_user_mode_driver_version
from .exceptions import AlreadyInitializedError as AlreadyInitializedError
from .exceptions import ArgumentVersionMismatchError as ArgumentVersionMismatchError
from .exceptions import CorruptedInforomError as CorruptedInforomError
from .exceptions import DeprecatedError as DeprecatedError
from .exceptions import DriverNotLoadedError as DriverNotLoadedError
from .exceptions import FreqNotSupportedError as FreqNotSupportedError
from .exceptions import FunctionNotFoundError as FunctionNotFoundError
from .exceptions import GpuIsLostError as GpuIsLostError
from .exceptions import GpuNotFoundError as GpuNotFoundError
from .exceptions import InsufficientPowerError as InsufficientPowerError
from .exceptions import InsufficientResourcesError as InsufficientResourcesError
from .exceptions import InsufficientSizeError as InsufficientSizeError
from .exceptions import InUseError as InUseError
from .exceptions import InvalidArgumentError as InvalidArgumentError
from .exceptions import InvalidStateError as InvalidStateError
from .exceptions import IrqIssueError as IrqIssueError
from .exceptions import LibraryNotFoundError as LibraryNotFoundError
from .exceptions import LibRmVersionMismatchError as LibRmVersionMismatchError
from .exceptions import MemoryError as MemoryError
from .exceptions import NoDataError as NoDataError
from .exceptions import NoPermissionError as NoPermissionError
from .exceptions import NotFoundError as NotFoundError
from .exceptions import NotReadyError as NotReadyError
from .exceptions import NotSupportedError as NotSupportedError
from .exceptions import NvmlError as NvmlError
from .exceptions import OperatingSystemError as OperatingSystemError
from .exceptions import ResetRequiredError as ResetRequiredError
from .exceptions import ResetTypeNotSupportedError as ResetTypeNotSupportedError
from .exceptions import TimeoutError as TimeoutError
from .exceptions import UninitializedError as UninitializedError
from .exceptions import UnknownError as UnknownError
from .exceptions import VgpuEccNotSupportedError as VgpuEccNotSupportedError

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


_OLD_SYSTEM = {  # cuda.core.experimental's ``system`` object (until 0.5): its properties
    "driver_version": "cuda_core.system.get_driver_version()",
    "num_devices": "cuda_core.system.get_num_devices()",
    "devices": "cuda_core.Device.get_all_devices()",
}


def __getattr__(name: str) -> Any:
    new = _OLD_SYSTEM.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warn_renamed(f"cuda_core.system.{name}", new)
    if name == "driver_version":
        return _versions.get_driver_version()
    if name == "num_devices":
        return _versions.get_num_devices()
    CudaDevice = _links.Device
    return tuple(CudaDevice(i) for i in range(_versions.get_num_devices()))
