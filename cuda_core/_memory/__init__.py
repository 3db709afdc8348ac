"""Device memory: Buffer and the memory resources (one file per resource).

``default_memory_resource(device)`` (not public) gives a :class:`Device` its starting resource.
"""

from __future__ import annotations

from ._buffer import Buffer as Buffer
from ._copy import Host as Host
from ._device_resource import DeviceMemoryResource as DeviceMemoryResource
from ._device_resource import DeviceMemoryResourceOptions as DeviceMemoryResourceOptions
from ._device_resource import default_memory_resource
from ._graph_resource import GraphMemoryResource as GraphMemoryResource
from ._ipc import IPCAllocationHandle as IPCAllocationHandle
from ._ipc import IPCBufferDescriptor as IPCBufferDescriptor
from ._legacy import LegacyPinnedMemoryResource as LegacyPinnedMemoryResource
from ._managed import ManagedMemoryResource as ManagedMemoryResource
from ._managed import ManagedMemoryResourceOptions as ManagedMemoryResourceOptions
from ._managed_buffer import ManagedBuffer as ManagedBuffer
from ._pinned import PinnedMemoryResource as PinnedMemoryResource
from ._pinned import PinnedMemoryResourceOptions as PinnedMemoryResourceOptions
from ._pool import MemoryPoolAttributes as MemoryPoolAttributes
from ._resource import MemoryResource as MemoryResource
from ._sync import SynchronousMemoryResource as SynchronousMemoryResource
from ._vmm import VirtualMemoryBuffer as VirtualMemoryBuffer
from ._vmm import VirtualMemoryResource as VirtualMemoryResource
from ._vmm import VirtualMemoryResourceOptions as VirtualMemoryResourceOptions

__all__ = [
    "Buffer",
    "DeviceMemoryResource",
    "DeviceMemoryResourceOptions",
    "GraphMemoryResource",
    "Host",
    "IPCAllocationHandle",
    "IPCBufferDescriptor",
    "LegacyPinnedMemoryResource",
    "ManagedBuffer",
    "ManagedMemoryResource",
    "ManagedMemoryResourceOptions",
    "MemoryPoolAttributes",
    "MemoryResource",
    "PinnedMemoryResource",
    "PinnedMemoryResourceOptions",
    "SynchronousMemoryResource",
    "VirtualMemoryBuffer",
    "VirtualMemoryResource",
    "VirtualMemoryResourceOptions",
]

_ = default_memory_resource
