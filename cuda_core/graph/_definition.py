"""GraphDefinition: build a CUDA graph node by node, then instantiate it as a Graph.

A :class:`GraphDefinition` owns its ``CUgraph`` through a :class:`~cuda_core.graph._state.GraphState`
(released by ``weakref.finalize`` when the last definition, view or node of the hierarchy is
gone, or by :meth:`GraphDefinition.close`). Views of graphs it does not own (a conditional's
branch, the clone inside a child-graph node, a GraphBuilder's captured graph) share the
state of the graph that owns them and keep it alive.
"""

from __future__ import annotations

from typing import Any

from .._compat import driver
from .._handles._driver import ensure_driver
from .._utils import check_or_create_options, handle_return
from .._utils._renamed import renamed_method
from . import _builder as _graph_mod
from . import _driver as _gd
from . import _node_kinds as _graph_nodes  # noqa: F401  (registers the node kinds)
from ._builder import Graph, GraphCompleteOptions, GraphDebugPrintOptions
from ._condition import GraphCondition
from ._exec_nodes import executable_node
from ._node import GraphNode
from ._state import KINDS, GraphState, wrap_node

__all__: list[str] = []  # public through cuda_core.graph


class GraphDefinition:
    """A CUDA graph built explicitly, node by node.

    Add entry nodes (no dependencies) with this object's builder methods and chain more from
    the nodes they return; wire extra edges with :meth:`join` or a node's ``pred``/``succ``
    sets. :meth:`instantiate` makes an executable :class:`~cuda_core.graph.Graph`. Unlike
    stream capture, the definition retains what its nodes use (buffers, kernel arguments,
    events, callbacks) for as long as it, or a graph instantiated from it, may run.

    The definition owns its ``CUgraph``; :meth:`close` (or ``with``, or garbage collection)
    releases it. Definitions returned by :attr:`IfNode.then`, :attr:`ChildGraphNode.child_graph`
    and :attr:`GraphBuilder.graph_definition` are views of graphs owned elsewhere; closing a
    view only invalidates the view. Mutations of one hierarchy are not thread-safe.

    Examples
    --------
    >>> g = GraphDefinition()
    >>> n = g.memset(buf, 0, buf.size).launch(cfg, kernel, buf, np.int32(n))
    >>> graph = g.instantiate()
    >>> graph.launch(stream)
    """

    __slots__ = ("__weakref__", "_closed", "_handle", "_owner", "_state")

    _state: GraphState
    _handle: Any  # this definition's CUgraph (the root's, or a branch/child's)
    _owner: bool
    _closed: bool

    def __init__(self) -> None:
        ensure_driver()
        h = handle_return(driver.cuGraphCreate(0), "cuGraphCreate")
        self._state = GraphState(h, owned=True)
        self._handle = h
        self._owner = True
        self._closed = False

    @classmethod
    def _view(cls, state: GraphState, handle: Any) -> GraphDefinition:
        self = object.__new__(cls)
        self._state = state
        self._handle = handle
        self._owner = False
        self._closed = False
        return self

    # ------------------------------------------------------------------ identity and lifetime

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphDefinition):
            return NotImplemented
        return (
            self._handle is not None
            and other._handle is not None
            and int(self._handle) == int(other._handle)
        )

    def __hash__(self) -> int:
        return hash((GraphDefinition, int(self._handle)))

    def __repr__(self) -> str:
        if not self.is_valid:
            return "<GraphDefinition closed>"
        kind = "" if self._owner else " view"
        return f"<GraphDefinition handle={int(self._handle):#x}{kind}>"  # cuda.core's format

    @property
    def is_valid(self) -> bool:
        """Whether the definition can still be used (not closed, its graph alive)."""
        return not self._closed and self._state.box.value is not None

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` ran on this definition (or on the definition owning its graph)."""
        return not self.is_valid

    def close(self) -> None:
        """Destroy the graph if this definition owns it, else just invalidate this view. Idempotent.

        Graphs already instantiated stay valid; nodes and views of a destroyed graph become
        invalid (using them raises ``RuntimeError``).
        """
        if self._closed:
            return
        self._closed = True
        if self._owner:
            self._state.box.release()

    def __enter__(self) -> GraphDefinition:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _live(self) -> Any:
        if not self.is_valid:
            raise RuntimeError("GraphDefinition is no longer valid: it has been closed")
        return self._handle

    @property
    def handle(self) -> Any:
        """The ``CUgraph`` (owned by this definition, or by the graph this view belongs to)."""
        return self._live()

    @property
    def _entry(self) -> GraphNode:
        node: GraphNode = object.__new__(GraphNode)
        node._def = self
        node._handle = None
        return node

    # ------------------------------------------------------------------ entry-point builders

    def allocate(
        self,
        size: int,
        *,
        device: Any = None,
        memory_type: Any = "device",
        peer_access: list[Any] | None = None,
    ) -> Any:
        """Add an allocation node with no dependencies; see :meth:`GraphNode.allocate`."""
        return self._entry.allocate(
            size, device=device, memory_type=memory_type, peer_access=peer_access
        )

    def deallocate(self, dptr: int) -> Any:
        """Add a free node with no dependencies; see :meth:`GraphNode.deallocate`."""
        return self._entry.deallocate(dptr)

    def memset(
        self,
        dst: Any,
        value: Any,
        width: int,
        height: int = 1,
        pitch: int = 0,
        *,
        dst_owner: Any = None,
    ) -> Any:
        """Add a memset node with no dependencies; see :meth:`GraphNode.memset`."""
        return self._entry.memset(dst, value, width, height, pitch, dst_owner=dst_owner)

    def launch(self, config: Any, kernel: Any, *args: Any) -> Any:
        """Add a kernel node with no dependencies; see :meth:`GraphNode.launch`."""
        return self._entry.launch(config, kernel, *args)

    def empty(self) -> Any:
        """Add an empty node with no dependencies.

        Returns
        -------
        EmptyNode
        """
        return self._entry.join()

    def join(self, *nodes: GraphNode) -> Any:
        """Add an empty node that depends on every node of ``nodes``.

        Returns
        -------
        EmptyNode
        """
        return self._entry.join(*nodes)

    def memcpy(
        self, dst: Any, src: Any, size: int, *, dst_owner: Any = None, src_owner: Any = None
    ) -> Any:
        """Add a memcpy node with no dependencies; see :meth:`GraphNode.memcpy`."""
        return self._entry.memcpy(dst, src, size, dst_owner=dst_owner, src_owner=src_owner)

    def embed(self, child: GraphDefinition) -> Any:
        """Add a child-graph node (a clone of ``child``) with no dependencies; see :meth:`GraphNode.embed`."""
        return self._entry.embed(child)

    def record(self, event: Any) -> Any:
        """Add an event record node with no dependencies; see :meth:`GraphNode.record`."""
        return self._entry.record(event)

    def wait(self, event: Any) -> Any:
        """Add an event wait node with no dependencies; see :meth:`GraphNode.wait`."""
        return self._entry.wait(event)

    def callback(self, fn: Any, *, user_data: Any = None) -> Any:
        """Add a host callback node with no dependencies; see :meth:`GraphNode.callback`."""
        return self._entry.callback(fn, user_data=user_data)

    def signal_external_semaphores(self, semaphores: Any, values: Any = None) -> Any:
        """Add an external semaphore signal node with no dependencies; see
        :meth:`GraphNode.signal_external_semaphores`."""
        return self._entry.signal_external_semaphores(semaphores, values)

    def wait_external_semaphores(self, semaphores: Any, values: Any = None) -> Any:
        """Add an external semaphore wait node with no dependencies; see
        :meth:`GraphNode.wait_external_semaphores`."""
        return self._entry.wait_external_semaphores(semaphores, values)

    def create_condition(self, default_value: int | None = None) -> GraphCondition:
        """Create a condition for this graph's conditional nodes.

        Parameters
        ----------
        default_value : int, optional
            The value the condition takes at the start of every launch; without one it keeps
            whatever device code last set (zero-initialised). Needs a current context.

        Returns
        -------
        GraphCondition
        """
        return GraphCondition._create(self._live(), self._state.key, default_value)

    def if_then(self, condition: GraphCondition) -> Any:
        """Add an *if* node with no dependencies; see :meth:`GraphNode.if_then`."""
        return self._entry.if_then(condition)

    # The names of cuda.core before 1.0, each with a DeprecationWarning naming the current one.
    alloc = renamed_method("GraphDefinition", "alloc", "allocate")
    free = renamed_method("GraphDefinition", "free", "deallocate")
    record_event = renamed_method("GraphDefinition", "record_event", "record")
    wait_event = renamed_method("GraphDefinition", "wait_event", "wait")
    if_cond = renamed_method("GraphDefinition", "if_cond", "if_then")

    def if_else(self, condition: GraphCondition) -> Any:
        """Add an *if/else* node with no dependencies; see :meth:`GraphNode.if_else`."""
        return self._entry.if_else(condition)

    def while_loop(self, condition: GraphCondition) -> Any:
        """Add a *while* node with no dependencies; see :meth:`GraphNode.while_loop`."""
        return self._entry.while_loop(condition)

    def switch(self, condition: GraphCondition, count: int) -> Any:
        """Add a *switch* node with no dependencies; see :meth:`GraphNode.switch`."""
        return self._entry.switch(condition, count)

    # ------------------------------------------------------------------ whole graph

    def instantiate(self, options: GraphCompleteOptions | dict[str, Any] | None = None) -> Graph:
        """Make an executable :class:`~cuda_core.graph.Graph` from this definition.

        The graph keeps the definition's operands and host callbacks alive; later changes to
        the definition do not reach it (use ``graph[node].update(...)`` or ``graph.update``).

        Parameters
        ----------
        options : GraphCompleteOptions or dict, optional
            Instantiation flags and an optional upload stream.

        Returns
        -------
        Graph

        Raises
        ------
        CUDAError
            Instantiation failed (for example a conditional body that is empty is fine, but
            a graph with an allocation that is never freed needs ``auto_free_on_launch``).
        """
        opts = check_or_create_options(GraphCompleteOptions, options, "options")
        return _graph_mod.instantiate(self._live(), opts, keep=(self._state,))

    def debug_dot_print(
        self, path: str, options: GraphDebugPrintOptions | dict[str, Any] | None = None
    ) -> None:
        """Write the graph as a Graphviz DOT file.

        Parameters
        ----------
        path : str
            Output file.
        options : GraphDebugPrintOptions or dict, optional
            Extra detail to include.
        """
        _graph_mod.dot_print(self._live(), path, options)

    def nodes(self) -> set[GraphNode]:
        """Every node of this graph (not those inside its child or branch graphs).

        Returns
        -------
        set of GraphNode
        """
        return {wrap_node(self, h) for h in _gd.nodes(self._live())}

    def edges(self) -> set[tuple[GraphNode, GraphNode]]:
        """Every edge as a ``(from_node, to_node)`` pair.

        Returns
        -------
        set of tuple
        """
        return {(wrap_node(self, a), wrap_node(self, b)) for a, b in _gd.edges(self._live())}


def _builder_view(handle: Any, owner: Any) -> GraphDefinition:
    """A view of a GraphBuilder's captured graph that keeps ``owner`` (its holder) alive."""
    return GraphDefinition._view(GraphState(handle, owned=False, owner=owner), handle)


KINDS["definition"] = GraphDefinition
_graph_mod.register_explicit(GraphDefinition, _builder_view, executable_node)
