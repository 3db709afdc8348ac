"""The NVML error classes of :mod:`cuda_core.system` (as ``cuda.core.system.exceptions``).

They are the classes ``cuda.bindings.nvml`` raises, so code catching either module's names
catches both. Each carries ``.status`` (the NVML status code), ``.name`` and ``.api`` when
raised by cuda_core. Every class is a subclass of :class:`NvmlError`.
"""

from __future__ import annotations

from ._nvml import ERROR_CLASSES, NvmlError

__all__ = [
    "AlreadyInitializedError",
    "ArgumentVersionMismatchError",
    "CorruptedInforomError",
    "DeprecatedError",
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
    "NvmlError",
    "OperatingSystemError",
    "ResetRequiredError",
    "ResetTypeNotSupportedError",
    "TimeoutError",
    "UninitializedError",
    "UnknownError",
    "VgpuEccNotSupportedError",
]

UninitializedError = ERROR_CLASSES["UninitializedError"]
InvalidArgumentError = ERROR_CLASSES["InvalidArgumentError"]
NotSupportedError = ERROR_CLASSES["NotSupportedError"]
NoPermissionError = ERROR_CLASSES["NoPermissionError"]
AlreadyInitializedError = ERROR_CLASSES["AlreadyInitializedError"]
NotFoundError = ERROR_CLASSES["NotFoundError"]
InsufficientSizeError = ERROR_CLASSES["InsufficientSizeError"]
InsufficientPowerError = ERROR_CLASSES["InsufficientPowerError"]
DriverNotLoadedError = ERROR_CLASSES["DriverNotLoadedError"]
TimeoutError = ERROR_CLASSES["TimeoutError"]  # NVML's name, as in cuda.core
IrqIssueError = ERROR_CLASSES["IrqIssueError"]
LibraryNotFoundError = ERROR_CLASSES["LibraryNotFoundError"]
FunctionNotFoundError = ERROR_CLASSES["FunctionNotFoundError"]
CorruptedInforomError = ERROR_CLASSES["CorruptedInforomError"]
GpuIsLostError = ERROR_CLASSES["GpuIsLostError"]
ResetRequiredError = ERROR_CLASSES["ResetRequiredError"]
OperatingSystemError = ERROR_CLASSES["OperatingSystemError"]
LibRmVersionMismatchError = ERROR_CLASSES["LibRmVersionMismatchError"]
InUseError = ERROR_CLASSES["InUseError"]
MemoryError = ERROR_CLASSES["MemoryError"]  # NVML's name, as in cuda.core
NoDataError = ERROR_CLASSES["NoDataError"]
VgpuEccNotSupportedError = ERROR_CLASSES["VgpuEccNotSupportedError"]
InsufficientResourcesError = ERROR_CLASSES["InsufficientResourcesError"]
FreqNotSupportedError = ERROR_CLASSES["FreqNotSupportedError"]
ArgumentVersionMismatchError = ERROR_CLASSES["ArgumentVersionMismatchError"]
DeprecatedError = ERROR_CLASSES["DeprecatedError"]
NotReadyError = ERROR_CLASSES["NotReadyError"]
GpuNotFoundError = ERROR_CLASSES["GpuNotFoundError"]
InvalidStateError = ERROR_CLASSES["InvalidStateError"]
ResetTypeNotSupportedError = ERROR_CLASSES["ResetTypeNotSupportedError"]
UnknownError = ERROR_CLASSES["UnknownError"]
