"""The classes ``tests/test_api_parity.py`` compares with NVIDIA's ``cuda.core`` (the audited
list): for each, a label, its candidate paths in ``cuda.core`` and in ``cuda_core``."""

from __future__ import annotations

# (label, candidate paths in cuda.core, candidate paths in cuda_core)
CLASSES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("Device", ("cuda.core.Device",), ("cuda_core.Device",)),
    ("DeviceProperties", ("cuda.core._device.DeviceProperties",), ("cuda_core.DeviceProperties",)),
    ("Context", ("cuda.core.Context",), ("cuda_core.Context",)),
    ("ContextOptions", ("cuda.core.ContextOptions",), ("cuda_core.ContextOptions",)),
    ("DeviceResources", ("cuda.core.DeviceResources",), ("cuda_core.DeviceResources",)),
    ("SMResource", ("cuda.core.SMResource",), ("cuda_core.SMResource",)),
    ("SMResourceOptions", ("cuda.core.SMResourceOptions",), ("cuda_core.SMResourceOptions",)),
    ("WorkqueueResource", ("cuda.core.WorkqueueResource",), ("cuda_core.WorkqueueResource",)),
    (
        "WorkqueueResourceOptions",
        ("cuda.core.WorkqueueResourceOptions",),
        ("cuda_core.WorkqueueResourceOptions",),
    ),
    ("GraphicsResource", ("cuda.core.GraphicsResource",), ("cuda_core.GraphicsResource",)),
    ("Stream", ("cuda.core.Stream",), ("cuda_core.Stream",)),
    ("StreamOptions", ("cuda.core.StreamOptions",), ("cuda_core.StreamOptions",)),
    ("Event", ("cuda.core.Event",), ("cuda_core.Event",)),
    ("EventOptions", ("cuda.core.EventOptions",), ("cuda_core.EventOptions",)),
    ("Buffer", ("cuda.core.Buffer",), ("cuda_core.Buffer",)),
    ("MemoryResource", ("cuda.core.MemoryResource",), ("cuda_core.MemoryResource",)),
    (
        "DeviceMemoryResource",
        ("cuda.core.DeviceMemoryResource",),
        ("cuda_core.DeviceMemoryResource",),
    ),
    (
        "DeviceMemoryResourceOptions",
        ("cuda.core.DeviceMemoryResourceOptions",),
        ("cuda_core.DeviceMemoryResourceOptions",),
    ),
    (
        "PinnedMemoryResource",
        ("cuda.core.PinnedMemoryResource",),
        ("cuda_core.PinnedMemoryResource",),
    ),
    (
        "PinnedMemoryResourceOptions",
        ("cuda.core.PinnedMemoryResourceOptions",),
        ("cuda_core.PinnedMemoryResourceOptions",),
    ),
    (
        "ManagedMemoryResource",
        ("cuda.core.ManagedMemoryResource",),
        ("cuda_core.ManagedMemoryResource",),
    ),
    (
        "ManagedMemoryResourceOptions",
        ("cuda.core.ManagedMemoryResourceOptions",),
        ("cuda_core.ManagedMemoryResourceOptions",),
    ),
    (
        "ManagedBuffer",
        ("cuda.core.ManagedBuffer",),
        ("cuda_core.ManagedBuffer",),
    ),
    (
        "VirtualMemoryResource",
        ("cuda.core.VirtualMemoryResource",),
        ("cuda_core.VirtualMemoryResource",),
    ),
    (
        "VirtualMemoryResourceOptions",
        ("cuda.core.VirtualMemoryResourceOptions",),
        ("cuda_core.VirtualMemoryResourceOptions",),
    ),
    (
        "GraphMemoryResource",
        ("cuda.core.GraphMemoryResource",),
        ("cuda_core.GraphMemoryResource",),
    ),
    (
        "GraphMemoryResourceAttributes",
        ("cuda.core._memory._graph_memory_resource.GraphMemoryResourceAttributes",),
        ("cuda_core._memory._graph_resource.GraphMemoryResourceAttributes",),
    ),
    (
        "LegacyPinnedMemoryResource",
        ("cuda.core.LegacyPinnedMemoryResource",),
        ("cuda_core.LegacyPinnedMemoryResource",),
    ),
    (
        "MemoryPoolAttributes",
        ("cuda.core._memory._memory_pool._MemPoolAttributes",),
        ("cuda_core.MemoryPoolAttributes",),
    ),
    (
        "IPCBufferDescriptor",
        ("cuda.core._memory._ipc.IPCBufferDescriptor",),
        ("cuda_core.IPCBufferDescriptor",),
    ),
    (
        "IPCAllocationHandle",
        ("cuda.core._memory._ipc.IPCAllocationHandle",),
        ("cuda_core.IPCAllocationHandle",),
    ),
    ("Program", ("cuda.core.Program",), ("cuda_core.Program",)),
    ("ProgramOptions", ("cuda.core.ProgramOptions",), ("cuda_core.ProgramOptions",)),
    ("Linker", ("cuda.core.Linker",), ("cuda_core.Linker",)),
    ("LinkerOptions", ("cuda.core.LinkerOptions",), ("cuda_core.LinkerOptions",)),
    ("ObjectCode", ("cuda.core.ObjectCode",), ("cuda_core.ObjectCode",)),
    ("Kernel", ("cuda.core.Kernel",), ("cuda_core.Kernel",)),
    ("KernelAttributes", ("cuda.core._module.KernelAttributes",), ("cuda_core.KernelAttributes",)),
    ("KernelOccupancy", ("cuda.core._module.KernelOccupancy",), ("cuda_core.KernelOccupancy",)),
    ("LaunchConfig", ("cuda.core.LaunchConfig",), ("cuda_core.LaunchConfig",)),
    ("Graph", ("cuda.core.graph.Graph", "cuda.core.Graph"), ("cuda_core.Graph",)),
    (
        "GraphBuilder",
        ("cuda.core.graph.GraphBuilder", "cuda.core.GraphBuilder"),
        ("cuda_core.GraphBuilder",),
    ),
    (
        "GraphCompleteOptions",
        ("cuda.core.graph.GraphCompleteOptions", "cuda.core.GraphCompleteOptions"),
        ("cuda_core.GraphCompleteOptions",),
    ),
    (
        "GraphDebugPrintOptions",
        ("cuda.core.graph.GraphDebugPrintOptions", "cuda.core.GraphDebugPrintOptions"),
        ("cuda_core.GraphDebugPrintOptions",),
    ),
    ("GraphDefinition", ("cuda.core.graph.GraphDefinition",), ("cuda_core.graph.GraphDefinition",)),
    ("GraphNode", ("cuda.core.graph.GraphNode",), ("cuda_core.graph.GraphNode",)),
    ("GraphCondition", ("cuda.core.graph.GraphCondition",), ("cuda_core.graph.GraphCondition",)),
    ("EmptyNode", ("cuda.core.graph.EmptyNode",), ("cuda_core.graph.EmptyNode",)),
    ("KernelNode", ("cuda.core.graph.KernelNode",), ("cuda_core.graph.KernelNode",)),
    ("MemcpyNode", ("cuda.core.graph.MemcpyNode",), ("cuda_core.graph.MemcpyNode",)),
    ("MemsetNode", ("cuda.core.graph.MemsetNode",), ("cuda_core.graph.MemsetNode",)),
    (
        "HostCallbackNode",
        ("cuda.core.graph.HostCallbackNode",),
        ("cuda_core.graph.HostCallbackNode",),
    ),
    ("EventRecordNode", ("cuda.core.graph.EventRecordNode",), ("cuda_core.graph.EventRecordNode",)),
    ("EventWaitNode", ("cuda.core.graph.EventWaitNode",), ("cuda_core.graph.EventWaitNode",)),
    ("ChildGraphNode", ("cuda.core.graph.ChildGraphNode",), ("cuda_core.graph.ChildGraphNode",)),
    ("AllocNode", ("cuda.core.graph.AllocNode",), ("cuda_core.graph.AllocNode",)),
    ("FreeNode", ("cuda.core.graph.FreeNode",), ("cuda_core.graph.FreeNode",)),
    ("ConditionalNode", ("cuda.core.graph.ConditionalNode",), ("cuda_core.graph.ConditionalNode",)),
    ("IfNode", ("cuda.core.graph.IfNode",), ("cuda_core.graph.IfNode",)),
    ("IfElseNode", ("cuda.core.graph.IfElseNode",), ("cuda_core.graph.IfElseNode",)),
    ("SwitchNode", ("cuda.core.graph.SwitchNode",), ("cuda_core.graph.SwitchNode",)),
    ("WhileNode", ("cuda.core.graph.WhileNode",), ("cuda_core.graph.WhileNode",)),
    (
        "ExecutableGraphNode",
        ("cuda.core.graph.ExecutableGraphNode",),
        ("cuda_core.graph.ExecutableGraphNode",),
    ),
    (
        "ExecutableKernelNode",
        ("cuda.core.graph.ExecutableKernelNode",),
        ("cuda_core.graph.ExecutableKernelNode",),
    ),
    (
        "ExecutableMemcpyNode",
        ("cuda.core.graph.ExecutableMemcpyNode",),
        ("cuda_core.graph.ExecutableMemcpyNode",),
    ),
    (
        "ExecutableMemsetNode",
        ("cuda.core.graph.ExecutableMemsetNode",),
        ("cuda_core.graph.ExecutableMemsetNode",),
    ),
    (
        "ExecutableHostCallbackNode",
        ("cuda.core.graph.ExecutableHostCallbackNode",),
        ("cuda_core.graph.ExecutableHostCallbackNode",),
    ),
    (
        "ExecutableEventRecordNode",
        ("cuda.core.graph.ExecutableEventRecordNode",),
        ("cuda_core.graph.ExecutableEventRecordNode",),
    ),
    (
        "ExecutableEventWaitNode",
        ("cuda.core.graph.ExecutableEventWaitNode",),
        ("cuda_core.graph.ExecutableEventWaitNode",),
    ),
    (
        "ExecutableChildGraphNode",
        ("cuda.core.graph.ExecutableChildGraphNode",),
        ("cuda_core.graph.ExecutableChildGraphNode",),
    ),
    (
        "StridedMemoryView",
        ("cuda.core.utils.StridedMemoryView",),
        ("cuda_core.utils.StridedMemoryView",),
    ),
    ("TensorMapDescriptor", ("cuda.core.TensorMapDescriptor",), ("cuda_core.TensorMapDescriptor",)),
    (
        "TensorMapDescriptorOptions",
        ("cuda.core.TensorMapDescriptorOptions",),
        ("cuda_core.TensorMapDescriptorOptions",),
    ),
    *[
        (name, (f"cuda.core.texture.{name}",), (f"cuda_core.texture.{name}",))
        for name in (
            "MipmappedArray",
            "MipmappedArrayOptions",
            "OpaqueArray",
            "OpaqueArrayOptions",
            "ResourceDescriptor",
            "SurfaceObject",
            "TextureObject",
            "TextureObjectOptions",
        )
    ],
    (
        "ProgramCacheResource",
        ("cuda.core.utils.ProgramCacheResource",),
        ("cuda_core.utils.ProgramCacheResource",),
    ),
    (
        "InMemoryProgramCache",
        ("cuda.core.utils.InMemoryProgramCache",),
        ("cuda_core.utils.InMemoryProgramCache",),
    ),
    (
        "FileStreamProgramCache",
        ("cuda.core.utils.FileStreamProgramCache",),
        ("cuda_core.utils.FileStreamProgramCache",),
    ),
    ("system.Device", ("cuda.core.system.Device",), ("cuda_core.system.Device",)),
    ("system.NvlinkInfo", ("cuda.core.system.NvlinkInfo",), ("cuda_core.system.NvlinkInfo",)),
    # The objects system.Device's queries return (cuda.core keeps them in system._device and
    # system._system_events; ours live in the module of their concept).
    *[
        (
            f"system.{name}",
            (f"cuda.core.system._device.{name}",),
            (f"cuda_core.system.{mod}.{name}",),
        )
        for mod, names in (
            (
                "_device_info",
                ("BAR1MemoryInfo", "MemoryInfo", "PciInfo", "ProcessInfo", "Utilization"),
            ),
            (
                "_clocks",
                (
                    "ClockInfo",
                    "ClockOffsets",
                    "GpuDynamicPstatesInfo",
                    "GpuDynamicPstatesUtilization",
                ),
            ),
            (
                "_thermal",
                ("CoolerInfo", "FanInfo", "Temperature", "ThermalSensor", "ThermalSettings"),
            ),
            ("_board", ("DeviceAttributes", "InforomInfo", "RepairStatus")),
            ("_mig", ("MigInfo",)),
            ("_field_values", ("FieldValue", "FieldValues")),
            ("_events", ("DeviceEvents", "EventData")),
        )
        for name in names
    ],
    *[
        (
            f"system.{name}",
            (f"cuda.core.system._system_events.{name}",),
            (f"cuda_core.system._events.{name}",),
        )
        for name in ("RegisteredSystemEvents", "SystemEvent", "SystemEvents")
    ],
    # The enumerations of cuda.core.system.typing: every member must exist here too.
    *[
        (
            f"system.typing.{name}",
            (f"cuda.core.system.typing.{name}",),
            (f"cuda_core.system.typing.{name}",),
        )
        for name in (
            "AddressingMode",
            "AffinityScope",
            "ClockId",
            "ClockType",
            "ClocksEventReasons",
            "CoolerControl",
            "CoolerTarget",
            "DeviceArch",
            "EventType",
            "FanControlPolicy",
            "GpuP2PCapsIndex",
            "GpuP2PStatus",
            "GpuTopologyLevel",
            "InforomObject",
            "SystemEventType",
            "TemperatureThresholds",
            "ThermalController",
            "ThermalTarget",
        )
    ],
    ("checkpoint.Process", ("cuda.core.checkpoint.Process",), ("cuda_core.checkpoint.Process",)),
]
