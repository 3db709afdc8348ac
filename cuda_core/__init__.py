"""cuda_core: a Pythonic CUDA toolkit on NVIDIA's cuda-bindings.

Compile CUDA C++ at run time, allocate memory and launch kernels on streams, without raw
driver handles::

    from cuda_core import Device, LaunchConfig, Program, ProgramOptions, launch

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    prog = Program(code, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    ker = prog.compile("cubin", name_expressions=("add<float>",)).get_kernel("add<float>")
    launch(s, LaunchConfig(grid=4, block=256), ker, a.data.ptr, b.data.ptr, n)

Each public name lives in one private module (``_device``, ``_stream``, ...) and is
re-exported here; ``__all__`` is the public surface.
"""

from __future__ import annotations

import sys as _sys

# Every public name is re-exported explicitly (``from ._x import Name as Name``) so that type
# checkers see it. The ``from ._pkg import _mod as _old`` lines bind moved modules under the names
# they had before the wings became subpackages (``from cuda_core import _program`` still works;
# the pickle aliases at the end use three of them).
from . import _host_callbacks as _callbacks  # noqa: F401
from . import _mp_reduction as _mp_reduction  # registers the multiprocessing reducers (IPC)
from . import checkpoint as checkpoint  # cuda.core.checkpoint is an attribute of the package too
from . import graph as graph  # registers the explicit-graph API with GraphBuilder and Graph
from . import profiler as profiler  # NVTX ranges, capture; loads nothing until used
from . import system as system
from . import texture as texture
from . import utils as utils
from ._compile import _linker as _linker
from ._compile import _object_code as _module
from ._compile import _options as _program_options
from ._compile import _program as _program
from ._compile._linker import Linker as Linker
from ._compile._linker import LinkerOptions as LinkerOptions
from ._compile._object_code import ObjectCode as ObjectCode
from ._compile._options import ProgramOptions as ProgramOptions
from ._compile._program import Program as Program
from ._context import Context as Context
from ._context import ContextOptions as ContextOptions
from ._device import ComputeCapability as ComputeCapability
from ._device import Device as Device
from ._device import DeviceProperties as DeviceProperties
from ._device_resources import DeviceResources as DeviceResources
from ._device_resources import SMResource as SMResource
from ._device_resources import SMResourceOptions as SMResourceOptions
from ._device_resources import WorkqueueResource as WorkqueueResource
from ._device_resources import WorkqueueResourceOptions as WorkqueueResourceOptions
from ._errors import CompileError as CompileError
from ._errors import CompilerLibraryNotFoundError as CompilerLibraryNotFoundError
from ._errors import CUDADriverNotFoundError as CUDADriverNotFoundError
from ._errors import CUDAError as CUDAError
from ._errors import CUDAWarning as CUDAWarning
from ._errors import LinkerError as LinkerError
from ._errors import NVRTCError as NVRTCError
from ._errors import NVVMError as NVVMError
from ._event import Event as Event
from ._event import EventOptions as EventOptions
from ._event import IPCEventDescriptor as IPCEventDescriptor
from ._handles._method_entries import install as _install_method_entries
from ._host_callbacks import HOST_COPY_FN as HOST_COPY_FN
from ._host_callbacks import host_launch as host_launch
from ._host_callbacks import pack_host_copy_args as pack_host_copy_args
from ._interop import _graphics as _graphics
from ._interop import _memoryview as _memoryview
from ._interop._external_memory import ExternalMemory as ExternalMemory
from ._interop._external_semaphore import ExternalSemaphore as ExternalSemaphore
from ._interop._external_semaphore import signal_external_semaphores as signal_external_semaphores
from ._interop._external_semaphore import wait_external_semaphores as wait_external_semaphores
from ._interop._graphics import GraphicsResource as GraphicsResource
from ._interop._memoryview import StridedMemoryView as StridedMemoryView
from ._kernel import Kernel as Kernel
from ._kernel import KernelAttributes as KernelAttributes
from ._kernel import KernelOccupancy as KernelOccupancy
from ._launch_config import LaunchConfig as LaunchConfig
from ._launcher import PreparedLaunch as PreparedLaunch
from ._launcher import launch as launch
from ._memory import Buffer as Buffer
from ._memory import DeviceMemoryResource as DeviceMemoryResource
from ._memory import DeviceMemoryResourceOptions as DeviceMemoryResourceOptions
from ._memory import GraphMemoryResource as GraphMemoryResource
from ._memory import Host as Host
from ._memory import IPCAllocationHandle as IPCAllocationHandle
from ._memory import IPCBufferDescriptor as IPCBufferDescriptor
from ._memory import LegacyPinnedMemoryResource as LegacyPinnedMemoryResource
from ._memory import ManagedBuffer as ManagedBuffer
from ._memory import ManagedMemoryResource as ManagedMemoryResource
from ._memory import ManagedMemoryResourceOptions as ManagedMemoryResourceOptions
from ._memory import MemoryPoolAttributes as MemoryPoolAttributes
from ._memory import MemoryResource as MemoryResource
from ._memory import PinnedMemoryResource as PinnedMemoryResource
from ._memory import PinnedMemoryResourceOptions as PinnedMemoryResourceOptions
from ._memory import SynchronousMemoryResource as SynchronousMemoryResource
from ._memory import VirtualMemoryBuffer as VirtualMemoryBuffer
from ._memory import VirtualMemoryResource as VirtualMemoryResource
from ._memory import VirtualMemoryResourceOptions as VirtualMemoryResourceOptions
from ._report import _environment as _config  # noqa: F401
from ._report._environment import is_available as is_available
from ._report._environment import show_config as show_config
from ._stream import LEGACY_DEFAULT_STREAM as LEGACY_DEFAULT_STREAM
from ._stream import PER_THREAD_DEFAULT_STREAM as PER_THREAD_DEFAULT_STREAM
from ._stream import Stream as Stream
from ._stream import StreamOptions as StreamOptions
from ._tensor_map import TensorMapDescriptor as TensorMapDescriptor
from ._tensor_map import TensorMapDescriptorOptions as TensorMapDescriptorOptions
from ._version import __version__ as __version__
from .graph import _builder as _graph  # noqa: F401
from .graph import _options as _graph_options  # noqa: F401
from .graph._builder import Graph as Graph
from .graph._builder import GraphBuilder as GraphBuilder
from .graph._options import GraphCompleteOptions as GraphCompleteOptions
from .graph._options import GraphDebugPrintOptions as GraphDebugPrintOptions

__all__ = [
    "Buffer",
    "CUDADriverNotFoundError",
    "CUDAError",
    "CUDAWarning",
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
    "ExternalMemory",
    "ExternalSemaphore",
    "Graph",
    "GraphBuilder",
    "GraphCompleteOptions",
    "GraphDebugPrintOptions",
    "GraphMemoryResource",
    "GraphicsResource",
    "HOST_COPY_FN",
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
    "VirtualMemoryBuffer",
    "VirtualMemoryResource",
    "VirtualMemoryResourceOptions",
    "WorkqueueResource",
    "WorkqueueResourceOptions",
    "host_launch",
    "is_available",
    "launch",
    "pack_host_copy_args",
    "show_config",
    "signal_external_semaphores",
    "wait_external_semaphores",
]

# The native backend's C entries of Stream.record/sync, Buffer.copy_from/copy_to/close and
# DeviceMemoryResource.allocate, now that every class they read is defined (a no-op on pure).
_install_method_entries(
    Stream=Stream, Event=Event, Buffer=Buffer, DeviceMemoryResource=DeviceMemoryResource
)
del _install_method_entries

# Pickles made before the wings became subpackages name these module paths (options dataclasses,
# ObjectCode's rebuild function): they keep loading.
for _old_path, _moved in (
    ("cuda_core._graph_options", graph._options),
    ("cuda_core._linker", _linker),
    ("cuda_core._module", _module),
    ("cuda_core._program_options", _program_options),
):
    _sys.modules.setdefault(_old_path, _moved)
del _old_path, _moved
