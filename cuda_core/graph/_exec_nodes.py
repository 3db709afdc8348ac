"""Executable*Node: views that update one node of an instantiated Graph in place.

``graph[node]`` pairs an executable :class:`~cuda_core.graph.Graph` with a node of the
definition it was instantiated from. ``update()`` changes that node's parameters for future
launches of this graph only (the definition and other graphs are untouched); kernel, memset and
memcpy nodes can also be disabled and enabled. The view keeps the node (and so its definition)
alive; the driver checks that the node belongs to the graph.
"""

from __future__ import annotations

from typing import Any

from .. import _trampolines as _table
from .._compat import driver
from .._handles._owned import OwnedHandle
from .._utils import arg_error, handle_return
from ._driver import current_context
from ._node import GraphNode
from ._params import check_event, kernel_params, memcpy_params, memset_params
from ._state import KINDS

__all__: list[str] = []  # public through cuda_core.graph

_T = driver.CUgraphNodeType


class ExecutableGraphNode:
    """A view of one node of an executable graph (from ``graph[node]``)."""

    __slots__ = ("_graph", "_node")

    _graph: Any  # the Graph
    _node: GraphNode

    def __init__(self) -> None:
        raise RuntimeError("ExecutableGraphNode cannot be instantiated directly. Use graph[node]")

    @property
    def node(self) -> GraphNode:
        """The definition node this view updates."""
        return self._node

    def _exe(self) -> Any:
        return self._graph._live()

    def _keep(self, obj: Any) -> None:
        if obj is not None:
            self._graph._keep.append(obj)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._node!r} of {self._graph!r}>"


class _Toggle(ExecutableGraphNode):
    __slots__ = ()

    @property
    def is_enabled(self) -> bool:
        """Whether the node runs in future launches of this graph."""
        v = handle_return(
            driver.cuGraphNodeGetEnabled(self._exe(), self._node._live()), "cuGraphNodeGetEnabled"
        )
        return bool(v)

    def enable(self) -> None:
        """Run the node in future launches."""
        handle_return(
            driver.cuGraphNodeSetEnabled(self._exe(), self._node._live(), 1),
            "cuGraphNodeSetEnabled",
        )

    def disable(self) -> None:
        """Skip the node in future launches (as if it were an empty node)."""
        handle_return(
            driver.cuGraphNodeSetEnabled(self._exe(), self._node._live(), 0),
            "cuGraphNodeSetEnabled",
        )


class ExecutableKernelNode(_Toggle):
    """A kernel node of an executable graph."""

    __slots__ = ()

    def update(self, *, config: Any, kernel: Any, args: Any) -> None:
        """Use this config, kernel and complete argument tuple in future launches.

        Raises
        ------
        TypeError, ValueError
            As for :meth:`GraphNode.launch`.
        """
        p, holder = kernel_params(config, kernel, args)
        handle_return(
            driver.cuGraphExecKernelNodeSetParams(self._exe(), self._node._live(), p),
            "cuGraphExecKernelNodeSetParams",
        )
        self._keep(holder.args)


class ExecutableMemsetNode(_Toggle):
    """A memset node of an executable graph."""

    __slots__ = ()

    def update(self, *, dst: Any, value: Any, width: int, height: int = 1, pitch: int = 0) -> None:
        """Use these memset parameters in future launches (the node's context must be current)."""
        p, keep = memset_params(dst, value, width, height, pitch)
        ctx = current_context("cuGraphExecMemsetNodeSetParams")
        handle_return(
            driver.cuGraphExecMemsetNodeSetParams(self._exe(), self._node._live(), p, ctx),
            "cuGraphExecMemsetNodeSetParams",
        )
        self._keep(keep)


class ExecutableMemcpyNode(_Toggle):
    """A memcpy node of an executable graph."""

    __slots__ = ()

    def update(self, *, dst: Any, src: Any, size: int) -> None:
        """Use these 1-D copy parameters in future launches (the node's context must be current)."""
        p, keep = memcpy_params(dst, src, size)
        ctx = current_context("cuGraphExecMemcpyNodeSetParams")
        handle_return(
            driver.cuGraphExecMemcpyNodeSetParams(self._exe(), self._node._live(), p, ctx),
            "cuGraphExecMemcpyNodeSetParams",
        )
        self._keep(keep)


class ExecutableChildGraphNode(ExecutableGraphNode):
    """A child-graph node of an executable graph."""

    __slots__ = ()

    def update(self, child: Any) -> None:
        """Take the child graph's node parameters from ``child`` (same topology)."""
        if not isinstance(child, KINDS["definition"]):
            raise arg_error("child", "a GraphDefinition", child, exc=TypeError)
        handle_return(
            driver.cuGraphExecChildGraphNodeSetParams(
                self._exe(), self._node._live(), child._live()
            ),
            "cuGraphExecChildGraphNodeSetParams",
        )
        self._keep(child._state)


class ExecutableEventRecordNode(ExecutableGraphNode):
    """An event record node of an executable graph."""

    __slots__ = ()

    def update(self, event: Any) -> None:
        """Record ``event`` in future launches."""
        ev = check_event(event)
        handle_return(
            driver.cuGraphExecEventRecordNodeSetEvent(self._exe(), self._node._live(), ev.handle),
            "cuGraphExecEventRecordNodeSetEvent",
        )
        self._keep(ev)


class ExecutableEventWaitNode(ExecutableGraphNode):
    """An event wait node of an executable graph."""

    __slots__ = ()

    def update(self, event: Any) -> None:
        """Wait for ``event`` in future launches."""
        ev = check_event(event)
        handle_return(
            driver.cuGraphExecEventWaitNodeSetEvent(self._exe(), self._node._live(), ev.handle),
            "cuGraphExecEventWaitNodeSetEvent",
        )
        self._keep(ev)


def _release_user_object(obj: Any) -> Any:
    return driver.cuUserObjectRelease(obj, 1)  # its status: checked by the OwnedHandle


class ExecutableHostCallbackNode(ExecutableGraphNode):
    """A host callback node of an executable graph."""

    __slots__ = ()

    def update(self, fn: Any, *, user_data: Any = None) -> None:
        """Call ``fn`` in future launches (same forms as :meth:`GraphNode.callback`).

        A Python callable is kept alive as long as this executable graph.
        """
        py_fn, addr, ud, keep = _table.host_callback(fn, user_data)
        if py_fn is not None:
            key, obj = _table.new_user_object(py_fn, ())
            # Our reference dies with the Graph object (its _keep list).
            self._keep(_UserObjectRef(obj))
            addr, ud = _table.RUN_KEPT, key
        p = driver.CUDA_HOST_NODE_PARAMS()
        p.fn = driver.CUhostFn(addr)
        p.userData = ud
        handle_return(
            driver.cuGraphExecHostNodeSetParams(self._exe(), self._node._live(), p),
            "cuGraphExecHostNodeSetParams",
        )
        self._keep(keep)


class _UserObjectRef:
    """Owns one reference to a CUuserObject, released when collected (never raising)."""

    __slots__ = ("__weakref__", "_box")

    def __init__(self, obj: Any) -> None:
        self._box = OwnedHandle("user object", obj, _release_user_object)


_CLASSES = {
    _T.CU_GRAPH_NODE_TYPE_KERNEL: ExecutableKernelNode,
    _T.CU_GRAPH_NODE_TYPE_MEMSET: ExecutableMemsetNode,
    _T.CU_GRAPH_NODE_TYPE_MEMCPY: ExecutableMemcpyNode,
    _T.CU_GRAPH_NODE_TYPE_GRAPH: ExecutableChildGraphNode,
    _T.CU_GRAPH_NODE_TYPE_EVENT_RECORD: ExecutableEventRecordNode,
    _T.CU_GRAPH_NODE_TYPE_WAIT_EVENT: ExecutableEventWaitNode,
    _T.CU_GRAPH_NODE_TYPE_HOST: ExecutableHostCallbackNode,
}


def executable_node(graph: Any, node: Any) -> ExecutableGraphNode:
    """``graph[node]``: the view class that fits ``node``'s kind."""
    if not isinstance(node, GraphNode):
        raise arg_error(
            "node",
            "a GraphNode of the definition this graph was instantiated from",
            node,
            exc=TypeError,
        )
    t = handle_return(driver.cuGraphNodeGetType(node._live()), "cuGraphNodeGetType")
    view: ExecutableGraphNode = object.__new__(_CLASSES.get(t, ExecutableGraphNode))
    view._graph = graph
    view._node = node
    return view
