"""CUDA graphs under the module name NVIDIA's ``cuda.core.graph`` uses.

Stream capture (:class:`GraphBuilder`) and explicit construction (:class:`GraphDefinition`
and its node kinds) both produce an executable :class:`Graph`. ``Graph``, ``GraphBuilder`` and
the options are also exported from :mod:`cuda_core` itself.
"""

from __future__ import annotations

from ._builder import Graph, GraphBuilder
from ._condition import GraphCondition
from ._definition import GraphDefinition
from ._exec_nodes import (
    ExecutableChildGraphNode,
    ExecutableEventRecordNode,
    ExecutableEventWaitNode,
    ExecutableGraphNode,
    ExecutableHostCallbackNode,
    ExecutableKernelNode,
    ExecutableMemcpyNode,
    ExecutableMemsetNode,
)
from ._node import GraphNode
from ._node_kinds import (
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
from ._options import GraphCompleteOptions, GraphDebugPrintOptions

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
