"""Compatibility namespace for code written against ``cuda.core.experimental``.

NVIDIA's ``cuda.core`` kept its API under ``cuda.core.experimental`` before 1.0, and many
examples still import from there. Everything here is the same object as in :mod:`cuda_core`,
so such code runs after changing ``cuda.core.experimental`` to ``cuda_core.experimental``::

    from cuda_core.experimental import Device, LaunchConfig, Program, launch, system
    from cuda_core.experimental.utils import StridedMemoryView
"""

from __future__ import annotations

from cuda_core import LEGACY_DEFAULT_STREAM as LEGACY_DEFAULT_STREAM
from cuda_core import PER_THREAD_DEFAULT_STREAM as PER_THREAD_DEFAULT_STREAM
from cuda_core import Buffer as Buffer
from cuda_core import CompileError as CompileError
from cuda_core import CompilerLibraryNotFoundError as CompilerLibraryNotFoundError
from cuda_core import ComputeCapability as ComputeCapability
from cuda_core import Context as Context
from cuda_core import ContextOptions as ContextOptions
from cuda_core import CUDADriverNotFoundError as CUDADriverNotFoundError
from cuda_core import CUDAError as CUDAError
from cuda_core import Device as Device
from cuda_core import DeviceMemoryResource as DeviceMemoryResource
from cuda_core import DeviceMemoryResourceOptions as DeviceMemoryResourceOptions
from cuda_core import DeviceProperties as DeviceProperties
from cuda_core import DeviceResources as DeviceResources
from cuda_core import Event as Event
from cuda_core import EventOptions as EventOptions
from cuda_core import Graph as Graph
from cuda_core import GraphBuilder as GraphBuilder
from cuda_core import GraphCompleteOptions as GraphCompleteOptions
from cuda_core import GraphDebugPrintOptions as GraphDebugPrintOptions
from cuda_core import GraphicsResource as GraphicsResource
from cuda_core import GraphMemoryResource as GraphMemoryResource
from cuda_core import Host as Host
from cuda_core import IPCAllocationHandle as IPCAllocationHandle
from cuda_core import IPCBufferDescriptor as IPCBufferDescriptor
from cuda_core import IPCEventDescriptor as IPCEventDescriptor
from cuda_core import Kernel as Kernel
from cuda_core import KernelAttributes as KernelAttributes
from cuda_core import KernelOccupancy as KernelOccupancy
from cuda_core import LaunchConfig as LaunchConfig
from cuda_core import LegacyPinnedMemoryResource as LegacyPinnedMemoryResource
from cuda_core import Linker as Linker
from cuda_core import LinkerError as LinkerError
from cuda_core import LinkerOptions as LinkerOptions
from cuda_core import ManagedBuffer as ManagedBuffer
from cuda_core import ManagedMemoryResource as ManagedMemoryResource
from cuda_core import ManagedMemoryResourceOptions as ManagedMemoryResourceOptions
from cuda_core import MemoryPoolAttributes as MemoryPoolAttributes
from cuda_core import MemoryResource as MemoryResource
from cuda_core import NVRTCError as NVRTCError
from cuda_core import NVVMError as NVVMError
from cuda_core import ObjectCode as ObjectCode
from cuda_core import PinnedMemoryResource as PinnedMemoryResource
from cuda_core import PinnedMemoryResourceOptions as PinnedMemoryResourceOptions
from cuda_core import PreparedLaunch as PreparedLaunch
from cuda_core import Program as Program
from cuda_core import ProgramOptions as ProgramOptions
from cuda_core import SMResource as SMResource
from cuda_core import SMResourceOptions as SMResourceOptions
from cuda_core import Stream as Stream
from cuda_core import StreamOptions as StreamOptions
from cuda_core import StridedMemoryView as StridedMemoryView
from cuda_core import SynchronousMemoryResource as SynchronousMemoryResource
from cuda_core import TensorMapDescriptor as TensorMapDescriptor
from cuda_core import TensorMapDescriptorOptions as TensorMapDescriptorOptions
from cuda_core import VirtualMemoryResource as VirtualMemoryResource
from cuda_core import VirtualMemoryResourceOptions as VirtualMemoryResourceOptions
from cuda_core import WorkqueueResource as WorkqueueResource
from cuda_core import WorkqueueResourceOptions as WorkqueueResourceOptions
from cuda_core import __version__ as __version__
from cuda_core import host_launch as host_launch
from cuda_core import launch as launch
from cuda_core import show_config as show_config
from cuda_core import system as system

from . import utils as utils

# cuda_core's __all__ and the two submodules (tests/test_experimental.py keeps them equal).
__all__ = [
    "Buffer",
    "CUDADriverNotFoundError",
    "CUDAError",
    "CompileError",
    "CompilerLibraryNotFoundError",
    "ComputeCapability",
    "Context",
    "ContextOptions",
    "Device",
    "DeviceMemoryResource",
    "DeviceMemoryResourceOptions",
    "DeviceProperties",
    "DeviceResources",
    "Event",
    "EventOptions",
    "Graph",
    "GraphBuilder",
    "GraphCompleteOptions",
    "GraphDebugPrintOptions",
    "GraphMemoryResource",
    "GraphicsResource",
    "Host",
    "IPCAllocationHandle",
    "IPCBufferDescriptor",
    "IPCEventDescriptor",
    "Kernel",
    "KernelAttributes",
    "KernelOccupancy",
    "LEGACY_DEFAULT_STREAM",
    "LaunchConfig",
    "LegacyPinnedMemoryResource",
    "Linker",
    "LinkerError",
    "LinkerOptions",
    "ManagedBuffer",
    "ManagedMemoryResource",
    "ManagedMemoryResourceOptions",
    "MemoryPoolAttributes",
    "MemoryResource",
    "NVRTCError",
    "NVVMError",
    "ObjectCode",
    "PER_THREAD_DEFAULT_STREAM",
    "PinnedMemoryResource",
    "PinnedMemoryResourceOptions",
    "PreparedLaunch",
    "Program",
    "ProgramOptions",
    "SMResource",
    "SMResourceOptions",
    "Stream",
    "StreamOptions",
    "StridedMemoryView",
    "SynchronousMemoryResource",
    "TensorMapDescriptor",
    "TensorMapDescriptorOptions",
    "VirtualMemoryResource",
    "VirtualMemoryResourceOptions",
    "WorkqueueResource",
    "WorkqueueResourceOptions",
    "host_launch",
    "launch",
    "show_config",
    "system",
    "utils",
]
