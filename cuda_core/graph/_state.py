"""What a graph hierarchy shares (GraphState), node wrapping, and the live edge sets.

:data:`KINDS` maps a node type to its wrapper class (filled by :mod:`cuda_core.graph._node`,
:mod:`cuda_core.graph._node_kinds` and :mod:`cuda_core.graph._definition` as they are imported), so this
module and the node base need not import the kinds built on them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, MutableSet
from typing import Any

from .. import _trampolines as _table
from .._compat import driver
from .._handles._owned import OwnedHandle
from .._utils import handle_return
from . import _driver as _gd

__all__: list[str] = []  # private module

KINDS: dict[Any, Any] = {}
"""Node type (``CUgraphNodeType`` or a conditional's kind name) -> wrapper class; also
``"definition"`` -> GraphDefinition. Filled by the modules that define them."""


class GraphState:
    """What one graph hierarchy (a root graph with its child and body graphs) shares.

    Owns the root ``CUgraph`` when ``owned`` (released by ``weakref.finalize`` off this object,
    never raising); a borrowed root (a GraphBuilder's captured graph) keeps its ``owner`` alive.
    """

    __slots__ = (
        "__weakref__",
        "box",
        "destroyed",
        "keep",
        "key",
        "libraries",
        "meta",
        "nodes",
        "owner",
        "user_objects",
    )

    def __init__(self, handle: Any, owned: bool, owner: Any = None) -> None:
        self.box = OwnedHandle("graph", handle, driver.cuGraphDestroy if owned else None)
        self.key = int(handle)
        self.keep: list[Any] = []  # operands the nodes use
        self.meta: dict[int, Any] = {}  # int(node) -> what the driver cannot tell us
        self.user_objects: list[Any] = []  # CUuserObjects of Python host callbacks
        self.libraries: set[tuple[int, int]] = set()  # (graph, module) pairs a user object keeps
        self.destroyed: set[int] = set()
        # int(node) -> its live wrapper: one Python object per node while any reference to it
        # lives, so ``node is other`` holds as in cuda.core (whose tests and users rely on it)
        self.nodes: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self.owner = owner

    def __del__(self) -> None:
        # What the nodes kept (buffers, callbacks, arguments) is handed over, and the slots let
        # go of it before the graph is destroyed: collected on another thread (a worker dropped
        # the last GraphDefinition), it is released on the main thread, as the driver's
        # releases are (cuda_core._trampolines). Left in the slots, it could be dropped here
        # after all: destroying the graph releases the GIL, and the main thread may drain the
        # hand-over meanwhile.
        kept = (self.keep, self.meta)
        self.keep, self.meta = [], {}
        _table.release_on_main_thread(kept)

    @property
    def root(self) -> Any:
        h = self.box.value
        if h is None:
            raise RuntimeError("GraphDefinition is no longer valid: it has been closed")
        return h


def wrap_node(definition: Any, handle: Any) -> Any:
    """The wrapper of node ``handle`` of ``definition``: the live one if there is one, else a new
    wrapper of the right class (registered, so later lookups return the same object)."""
    state = definition._state
    key = int(handle)
    node = state.nodes.get(key)
    if node is not None:
        return node
    meta = state.meta.get(key)
    if isinstance(meta, dict) and "kind" in meta:
        cls = KINDS[meta["kind"]]
    else:
        t = handle_return(driver.cuGraphNodeGetType(handle), "cuGraphNodeGetType")
        cls = KINDS.get(t, KINDS["node"])
    return register_node(definition, cls, handle)


def register_node(definition: Any, cls: type, handle: Any) -> Any:
    """A new wrapper of class ``cls`` for node ``handle``, registered as the node's one wrapper."""
    node: Any = object.__new__(cls)
    node._def = definition
    node._handle = handle
    definition._state.nodes[int(handle)] = node
    return node


class AdjacencySetProxy(MutableSet):  # type: ignore[type-arg]
    """A live, mutable set of a node's predecessors (or successors).

    Adding or removing a node adds or removes the edge in the graph at once.
    """

    __slots__ = ("_fwd", "_node")

    def __init__(self, node: Any, is_fwd: bool) -> None:
        self._node = node
        self._fwd = is_fwd

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)

    def _handles(self) -> list[Any]:
        h = self._node._live()
        return _gd.successors(h) if self._fwd else _gd.predecessors(h)

    def __iter__(self) -> Iterator[Any]:
        d = self._node._def
        return iter([wrap_node(d, h) for h in self._handles()])

    def __len__(self) -> int:
        return len(self._handles())

    def __contains__(self, x: object) -> bool:
        if not isinstance(x, KINDS["node"]) or x._handle is None:
            return False
        return int(x._handle) in {int(h) for h in self._handles()}

    def _edge(self, other: Any) -> tuple[list[Any], list[Any]]:
        other_h = self._node._same_graph(other, "node")
        me = self._node._live()
        return ([me], [other_h]) if self._fwd else ([other_h], [me])

    def add(self, value: Any) -> None:
        if value in self:
            return
        src, dst = self._edge(value)
        _gd.add_edges(self._node._graph_handle(), src, dst)

    def discard(self, value: Any) -> None:
        if value not in self:
            return
        src, dst = self._edge(value)
        _gd.remove_edges(self._node._graph_handle(), src, dst)

    def clear(self) -> None:
        """Remove every edge of this set in one driver call."""
        me = self._node._live()
        others = self._handles()
        if self._fwd:
            _gd.remove_edges(self._node._graph_handle(), [me] * len(others), others)
        else:
            _gd.remove_edges(self._node._graph_handle(), others, [me] * len(others))

    def update(self, *others: Iterable[Any]) -> None:
        """Add edges to every node of ``others``."""
        for it in others:
            for n in it:
                self.add(n)

    def __repr__(self) -> str:
        kind = "succ" if self._fwd else "pred"
        return f"<AdjacencySetProxy {kind} of {self._node!r}: {set(self)!r}>"
