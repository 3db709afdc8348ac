"""Options of graph instantiation and of the DOT debug print (no GPU needed to build them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .._compat import driver

__all__ = ["GraphCompleteOptions", "GraphDebugPrintOptions"]

_F = driver.CUgraphInstantiate_flags


@dataclass
class GraphCompleteOptions:
    """Options for :meth:`GraphBuilder.complete`.

    Attributes
    ----------
    auto_free_on_launch : bool
        Free memory allocated inside the graph (and not freed there) before each relaunch.
    upload_stream : Stream, optional
        Upload the graph on this stream right after instantiation.
    device_launch : bool
        Make the graph launchable from device code; excludes ``auto_free_on_launch``.
    use_node_priority : bool
        Use each node's priority attribute instead of the launch stream's priority.
    """

    auto_free_on_launch: bool = False
    upload_stream: Any = None
    device_launch: bool = False
    use_node_priority: bool = False

    def __post_init__(self) -> None:
        for name in ("auto_free_on_launch", "device_launch", "use_node_priority"):
            setattr(self, name, bool(getattr(self, name)))  # any truth value, as in cuda.core
        if self.device_launch and self.auto_free_on_launch:
            raise ValueError("device_launch and auto_free_on_launch cannot both be True")

    def _flags(self) -> int:
        flags = 0
        if self.auto_free_on_launch:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        if self.device_launch:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
        if self.use_node_priority:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
        return flags


@dataclass
class GraphDebugPrintOptions:
    """What :meth:`GraphBuilder.debug_dot_print` writes besides the graph's structure.

    Each field turns on the driver's ``CU_GRAPH_DEBUG_DOT_FLAGS_<FIELD NAME>`` flag (the fields
    and their order are cuda.core's).

    Attributes
    ----------
    verbose : bool
        Everything, as if every flag below were on.
    runtime_types : bool
        CUDA runtime structures instead of driver ones.
    kernel_node_params, memcpy_node_params, memset_node_params, host_node_params : bool
        Parameters of the nodes of each kind.
    event_node_params, ext_semas_signal_node_params, ext_semas_wait_node_params : bool
        Parameters of event and external-semaphore nodes.
    kernel_node_attributes : bool
        Kernel node attributes.
    handles : bool
        Node handles and kernel function handles.
    mem_alloc_node_params, mem_free_node_params, batch_mem_op_node_params : bool
        Parameters of memory allocation, free and batched memory-operation nodes.
    extra_topo_info : bool
        Edge numbering.
    conditional_node_params : bool
        Parameters of conditional nodes.
    """

    verbose: bool = False
    runtime_types: bool = False
    kernel_node_params: bool = False
    memcpy_node_params: bool = False
    memset_node_params: bool = False
    host_node_params: bool = False
    event_node_params: bool = False
    ext_semas_signal_node_params: bool = False
    ext_semas_wait_node_params: bool = False
    kernel_node_attributes: bool = False
    handles: bool = False
    mem_alloc_node_params: bool = False
    mem_free_node_params: bool = False
    batch_mem_op_node_params: bool = False
    extra_topo_info: bool = False
    conditional_node_params: bool = False

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, bool(getattr(self, f.name)))  # any truth value, as in cuda.core

    def _flags(self) -> int:
        flags = driver.CUgraphDebugDot_flags
        return sum(
            int(getattr(flags, f"CU_GRAPH_DEBUG_DOT_FLAGS_{f.name.upper()}"))
            for f in dataclasses.fields(self)
            if getattr(self, f.name)
        )
