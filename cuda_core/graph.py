"""CUDA graphs under the module name NVIDIA's ``cuda.core.graph`` uses.

Stream capture (:class:`GraphBuilder`) and explicit construction (:class:`GraphDefinition`
and its node kinds) both produce an executable :class:`Graph`. ``Graph``, ``GraphBuilder`` and
the options are also exported from :mod:`cuda_core` itself.
"""

from __future__ import annotations

from ._graph import Graph, GraphBuilder
from ._graph_cond import GraphCondition
from ._graph_def import GraphDefinition
from ._graph_exec_nodes import (
    ExecutableChildGraphNode,
    ExecutableEventRecordNode,
    ExecutableEventWaitNode,
    ExecutableGraphNode,
    ExecutableHostCallbackNode,
    ExecutableKernelNode,
    ExecutableMemcpyNode,
    ExecutableMemsetNode,
)
from ._graph_node import GraphNode
from ._graph_nodes import (
    AllocNode,
    ChildGraphNode,
    ConditionalNode,
    EmptyNode,
    EventRecordNode,
    EventWaitNode,
    FreeNode,
    HostCallbackNode,
    IfElseNode,
    IfNode,
    KernelNode,
    MemcpyNode,
    MemsetNode,
    SwitchNode,
    WhileNode,
)
from ._graph_options import GraphCompleteOptions, GraphDebugPrintOptions

__all__ = [
    "AllocNode",
    "ChildGraphNode",
    "ConditionalNode",
    "EmptyNode",
    "EventRecordNode",
    "EventWaitNode",
    "ExecutableChildGraphNode",
    "ExecutableEventRecordNode",
    "ExecutableEventWaitNode",
    "ExecutableGraphNode",
    "ExecutableHostCallbackNode",
    "ExecutableKernelNode",
    "ExecutableMemcpyNode",
    "ExecutableMemsetNode",
    "FreeNode",
    "Graph",
    "GraphBuilder",
    "GraphCompleteOptions",
    "GraphCondition",
    "GraphDebugPrintOptions",
    "GraphDefinition",
    "GraphNode",
    "HostCallbackNode",
    "IfElseNode",
    "IfNode",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "SwitchNode",
    "WhileNode",
]
