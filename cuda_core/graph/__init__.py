"""CUDA graphs under the module name NVIDIA's ``cuda.core.graph`` uses.

Stream capture (:class:`GraphBuilder`) and explicit construction (:class:`GraphDefinition`
and its node kinds) both produce an executable :class:`Graph`. ``Graph``, ``GraphBuilder`` and
the options are also exported from :mod:`cuda_core` itself.
"""

from __future__ import annotations

from typing import Any

from .._utils._renamed import warn_renamed
from ._builder import Graph as Graph
from ._builder import GraphBuilder as GraphBuilder
from ._condition import GraphCondition as GraphCondition
from ._definition import GraphDefinition as GraphDefinition
from ._exec_nodes import ExecutableChildGraphNode as ExecutableChildGraphNode
from ._exec_nodes import ExecutableEventRecordNode as ExecutableEventRecordNode
from ._exec_nodes import ExecutableEventWaitNode as ExecutableEventWaitNode
from ._exec_nodes import ExecutableGraphNode as ExecutableGraphNode
from ._exec_nodes import ExecutableHostCallbackNode as ExecutableHostCallbackNode
from ._exec_nodes import ExecutableKernelNode as ExecutableKernelNode
from ._exec_nodes import ExecutableMemcpyNode as ExecutableMemcpyNode
from ._exec_nodes import ExecutableMemsetNode as ExecutableMemsetNode
from ._node import GraphNode as GraphNode
from ._node_kinds import AllocNode as AllocNode
from ._node_kinds import ChildGraphNode as ChildGraphNode
from ._node_kinds import ConditionalNode as ConditionalNode
from ._node_kinds import EmptyNode as EmptyNode
from ._node_kinds import EventRecordNode as EventRecordNode
from ._node_kinds import EventWaitNode as EventWaitNode
from ._node_kinds import ExternalSemaphoresSignalNode as ExternalSemaphoresSignalNode
from ._node_kinds import ExternalSemaphoresWaitNode as ExternalSemaphoresWaitNode
from ._node_kinds import FreeNode as FreeNode
from ._node_kinds import HostCallbackNode as HostCallbackNode
from ._node_kinds import IfElseNode as IfElseNode
from ._node_kinds import IfNode as IfNode
from ._node_kinds import KernelNode as KernelNode
from ._node_kinds import MemcpyNode as MemcpyNode
from ._node_kinds import MemsetNode as MemsetNode
from ._node_kinds import SwitchNode as SwitchNode
from ._node_kinds import WhileNode as WhileNode
from ._options import GraphCompleteOptions as GraphCompleteOptions
from ._options import GraphDebugPrintOptions as GraphDebugPrintOptions

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
    "ExternalSemaphoresSignalNode",
    "ExternalSemaphoresWaitNode",
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

# Names of cuda.core 0.7 (before 1.0 renamed them), each with a DeprecationWarning naming the
# current one; not in __all__.
_RENAMED = {"GraphDef": "GraphDefinition", "Condition": "GraphCondition"}


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warn_renamed(f"cuda_core.graph.{name}", f"cuda_core.graph.{new}")
    return globals()[new]
