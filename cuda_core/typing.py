"""Public type aliases, protocols and enumerations used in cuda_core's signatures.

The same names as ``cuda.core.typing`` (1.2). The enumerations are ``str`` enums: each member
equals its string value, so ``"posix_fd"`` and ``VirtualMemoryHandleType.POSIX_FD`` are
interchangeable wherever an option takes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ._compat import driver

__all__ = [
    "AddressModeType",
    "ArrayFormatType",
    "CompilerBackendType",
    "DevicePointerType",
    "DeviceResourcesType",
    "FilterModeType",
    "GraphConditionalType",
    "GraphMemoryType",
    "IsStreamType",
    "ManagedMemoryLocationType",
    "ObjectCodeFormatType",
    "PCHStatusType",
    "ProcessStateType",
    "ReadModeType",
    "SourceCodeType",
    "VirtualMemoryAccessType",
    "VirtualMemoryAllocationType",
    "VirtualMemoryGranularityType",
    "VirtualMemoryHandleType",
    "VirtualMemoryLocationType",
    "WorkqueueSharingScopeType",
]

DevicePointerType: TypeAlias = driver.CUdeviceptr | int | None
"""What a device address may be given as (a ``CUdeviceptr``, an ``int``, or ``None`` for 0)."""

DeviceResourcesType: TypeAlias = Sequence[Any]
"""A sequence of device resources (SM or work-queue resources) for a context."""

ProcessStateType: TypeAlias = Literal["running", "locked", "checkpointed", "failed"]
"""The checkpoint state of a process."""


@runtime_checkable
class IsStreamType(Protocol):
    """Any object usable as a stream: it has ``__cuda_stream__() -> (version, address)``.

    ``version`` is the protocol version (``0``) and ``address`` the ``CUstream`` as an ``int``.
    """

    def __cuda_stream__(self) -> tuple[int, int]: ...


class SourceCodeType(StrEnum):
    """Source language of a :class:`~cuda_core.Program`: C++, PTX or NVVM IR."""

    CXX = "c++"
    PTX = "ptx"
    NVVM = "nvvm"


class ObjectCodeFormatType(StrEnum):
    """Output format of :meth:`Program.compile <cuda_core.Program.compile>` and
    :meth:`Linker.link <cuda_core.Linker.link>`."""

    PTX = "ptx"
    CUBIN = "cubin"
    LTOIR = "ltoir"
    FATBIN = "fatbin"
    OBJECT = "object"
    LIBRARY = "library"


class CompilerBackendType(StrEnum):
    """The compiler or linker behind a :class:`~cuda_core.Program` or :class:`~cuda_core.Linker`.

    Members compare equal to their values: ``"NVRTC"``, ``"NVVM"``, ``"nvJitLink"``, ``"driver"``.
    """

    NVRTC = "NVRTC"
    NVVM = "NVVM"
    NVJITLINK = "nvJitLink"
    DRIVER = "driver"


class PCHStatusType(StrEnum):
    """What happened to a requested precompiled header."""

    CREATED = "created"
    NOT_ATTEMPTED = "not_attempted"
    FAILED = "failed"


class GraphConditionalType(StrEnum):
    """Kind of a conditional graph node."""

    IF = "if"
    WHILE = "while"
    SWITCH = "switch"


class GraphMemoryType(StrEnum):
    """Memory space of a graph allocation or free node."""

    DEVICE = "device"
    HOST = "host"
    MANAGED = "managed"


class ManagedMemoryLocationType(StrEnum):
    """Target kind of a managed-memory prefetch or advice."""

    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"


class VirtualMemoryHandleType(StrEnum):
    """OS handle type a virtual memory allocation can be exported as (``None``: not exportable)."""

    POSIX_FD = "posix_fd"
    WIN32_KMT = "win32_kmt"
    FABRIC = "fabric"


class VirtualMemoryLocationType(StrEnum):
    """Where the physical memory of a virtual memory allocation lives."""

    DEVICE = "device"
    HOST = "host"
    HOST_NUMA = "host_numa"
    HOST_NUMA_CURRENT = "host_numa_current"


class VirtualMemoryGranularityType(StrEnum):
    """Which allocation granularity sizes are rounded to: the minimum or the recommended one."""

    MINIMUM = "minimum"
    RECOMMENDED = "recommended"


class VirtualMemoryAccessType(StrEnum):
    """Access rights of a virtual memory mapping: read-write or read-only."""

    READ_WRITE = "rw"
    READ = "r"


class VirtualMemoryAllocationType(StrEnum):
    """Physical memory type of a virtual memory allocation (``MANAGED``: CUDA 13+)."""

    PINNED = "pinned"
    MANAGED = "managed"


class ArrayFormatType(StrEnum):
    """Element format of a CUDA array."""

    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    FLOAT16 = "float16"
    FLOAT32 = "float32"


class AddressModeType(StrEnum):
    """How texture coordinates outside the range are treated."""

    WRAP = "wrap"
    CLAMP = "clamp"
    MIRROR = "mirror"
    BORDER = "border"


class FilterModeType(StrEnum):
    """Texture sampling: nearest texel or linear interpolation."""

    POINT = "point"
    LINEAR = "linear"


class ReadModeType(StrEnum):
    """How sampled texture values are returned."""

    ELEMENT_TYPE = "element_type"
    NORMALIZED_FLOAT = "normalized_float"


class WorkqueueSharingScopeType(StrEnum):
    """Sharing scope of a work-queue resource."""

    DEVICE_CTX = "device_ctx"
    GREEN_CTX_BALANCED = "green_ctx_balanced"
