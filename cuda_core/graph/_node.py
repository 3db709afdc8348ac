"""GraphNode: a node of an explicit graph, and the builder methods that add its successors.

Every node wrapper holds the :class:`~cuda_core.graph.GraphDefinition` it belongs to and its
``CUgraphNode``; the driver owns the node (it dies with its graph). What the graph must keep
alive (kernel arguments, buffers, events, callbacks) and what the driver cannot tell us back
(the ``Kernel`` of a kernel node, the branches of a conditional) live in the root graph's
:class:`GraphState`, shared by every view of that graph hierarchy.

The node kinds (:mod:`cuda_core.graph._node_kinds`) and :class:`GraphDefinition`
(:mod:`cuda_core.graph._definition`) register themselves in :data:`KINDS` when imported, so this module
needs neither (the import graph stays acyclic). GraphState and the edge sets live in
:mod:`cuda_core.graph._state`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import _trampolines as _table
from .._compat import MANAGED_ALLOCATION, driver, require_cuda13
from .._utils import arg_error, check_int, handle_return
from .._utils._renamed import renamed_method
from . import _node_control as _control
from . import _node_semaphores as _semaphores
from ._driver import current_context
from ._params import (
    check_event,
    device_id,
    hold,
    kernel_params,
    memcpy_params,
    memset_params,
    retain_library,
)
from ._state import KINDS, AdjacencySetProxy, register_node

__all__: list[str] = []  # public through cuda_core.graph

_MEM_TYPES = ("device", "host", "managed")


class GraphNode:
    """A node of a :class:`~cuda_core.graph.GraphDefinition`.

    Nodes come from the builder methods of a GraphDefinition (entry nodes, no dependencies) or
    of another node (the new node depends on it). Each builder returns the new node, so work is
    chained: ``g.memset(...).launch(cfg, k, buf).memcpy(...)``. The driver owns the node; the
    wrapper is a light view. While a wrapper is referenced, every lookup of its node
    (``nodes()``, ``edges()``, ``pred``, ``succ``) returns that same object, so ``is`` works
    as in ``cuda.core``; wrappers of one node made through different views compare equal.
    """

    __slots__ = ("__weakref__", "_def", "_handle")

    _def: Any  # the GraphDefinition
    _handle: Any  # CUgraphNode, or None for a definition's entry point

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "GraphNode cannot be instantiated directly. Use the builder methods of GraphDefinition"
        )

    # ------------------------------------------------------------------ identity

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GraphNode):
            return NotImplemented
        if self._handle is None or other._handle is None:
            return self._handle is other._handle and self._def == other._def
        return int(self._handle) == int(other._handle)

    def __hash__(self) -> int:
        if self._handle is None:  # an entry point: as its definition (equal entries, equal hash)
            g = getattr(self._def, "_handle", None)
            return hash((GraphNode, "entry", None if g is None else int(g)))
        return hash((GraphNode, int(self._handle)))

    def __repr__(self) -> str:
        # cuda.core's form: "<GraphNode entry>", "<AllocNode handle=0x... dptr=0x... size=64>"
        if self._handle is None:
            return f"<{type(self).__name__} entry>"
        head = f"<{type(self).__name__} handle={int(self._handle):#x}"
        if not self.is_valid:
            return head + " destroyed>"
        try:
            detail = self._repr_detail()
        except Exception:  # a query the driver refuses: the handle says enough
            detail = ""
        return head + detail + ">"

    def _repr_detail(self) -> str:
        """What the repr of this kind of node shows after its handle (``" dptr=0x..."``)."""
        return ""

    # ------------------------------------------------------------------ properties

    @property
    def type(self) -> Any:
        """The node's ``CUgraphNodeType``, or ``None`` for a definition's entry point."""
        if self._handle is None:
            return None
        return handle_return(driver.cuGraphNodeGetType(self._live()), "cuGraphNodeGetType")

    @property
    def graph(self) -> Any:
        """The :class:`GraphDefinition` this node belongs to."""
        return self._def

    @property
    def handle(self) -> Any:
        """The ``CUgraphNode`` (``None`` for a definition's entry point); owned by the graph."""
        return self._handle

    @property
    def is_valid(self) -> bool:
        """Whether the node and its graph are alive (``False`` after :meth:`destroy`)."""
        if not self._def.is_valid:
            return False
        return self._handle is None or int(self._handle) not in self._def._state.destroyed

    def destroy(self) -> None:
        """Remove the node and its edges from the graph. Idempotent.

        Raises
        ------
        RuntimeError
            Called on a definition's entry point.
        """
        if self._handle is None:
            raise RuntimeError("the entry point of a GraphDefinition cannot be destroyed")
        if not self.is_valid:
            return
        handle_return(driver.cuGraphDestroyNode(self._handle), "cuGraphDestroyNode")
        state = self._def._state
        state.destroyed.add(int(self._handle))
        state.meta.pop(int(self._handle), None)
        state.nodes.pop(int(self._handle), None)

    @property
    def pred(self) -> AdjacencySetProxy:
        """A live mutable set of the nodes this node depends on."""
        self._live()
        return AdjacencySetProxy(self, False)

    @pred.setter
    def pred(self, value: Iterable[GraphNode]) -> None:
        new = list(value)
        proxy = self.pred
        proxy.clear()
        proxy.update(new)

    @property
    def succ(self) -> AdjacencySetProxy:
        """A live mutable set of the nodes that depend on this node."""
        self._live()
        return AdjacencySetProxy(self, True)

    @succ.setter
    def succ(self, value: Iterable[GraphNode]) -> None:
        new = list(value)
        proxy = self.succ
        proxy.clear()
        proxy.update(new)

    # ------------------------------------------------------------------ internals

    def _graph_handle(self) -> Any:
        return self._def._live()

    def _live(self) -> Any:
        """The node handle, after checking that node and graph are alive."""
        self._def._live()
        h = self._handle
        if h is None:
            raise RuntimeError("the entry point of a GraphDefinition has no node handle or edges")
        if int(h) in self._def._state.destroyed:
            raise RuntimeError(f"{self!r} was destroyed")
        return h

    def _deps(self) -> list[Any]:
        self._def._live()
        return [] if self._handle is None else [self._live()]

    def _same_graph(self, other: Any, name: str) -> Any:
        if not isinstance(other, GraphNode):
            # cuda.core's wording first (code written for it may match on it), then ours
            err = arg_error(name, "a GraphNode", other, exc=TypeError)
            raise TypeError(f"expected GraphNode, got {type(other).__name__}: {err}")
        if other._handle is None:
            raise arg_error(name, "a node (not the entry point of a GraphDefinition)", other)
        if other._def._live() is None or int(other._def._handle) != int(self._def._handle):
            raise arg_error(
                name,
                "a node of the same graph",
                other,
                "nodes of different graphs (or of a branch and its parent) cannot be connected",
            )
        return other._live()

    def _new(self, kind: Any, handle: Any, meta: dict[str, Any] | None = None) -> Any:
        if meta is not None:
            self._def._state.meta[int(handle)] = meta
        return register_node(self._def, KINDS[kind], handle)

    def _add_legacy(self, fn: Any, api: str, *params: Any) -> Any:
        deps = self._deps()
        return handle_return(fn(self._graph_handle(), deps, len(deps), *params), api)

    # ------------------------------------------------------------------ builders

    def launch(self, config: Any, kernel: Any, *args: Any) -> Any:
        """Add a kernel launch node that depends on this node.

        Arguments pack as for :func:`~cuda_core.launch` (a :class:`GraphCondition` packs as its
        handle) and are retained for the graph's lifetime. Clustered and cooperative configs
        are not supported for kernel nodes. Needs a current context.

        Parameters
        ----------
        config : LaunchConfig
            Grid, block and dynamic shared memory.
        kernel : Kernel
            The kernel.
        *args
            Kernel arguments.

        Returns
        -------
        KernelNode

        Raises
        ------
        TypeError
            ``config``/``kernel`` of the wrong type, or arguments that do not pack.
        ValueError
            A clustered or cooperative config.
        """
        p, holder = kernel_params(config, kernel, args)
        h = self._add_legacy(driver.cuGraphAddKernelNode, "cuGraphAddKernelNode", p)
        hold(self._def._state, self._graph_handle(), holder.args)
        retain_library(self._graph_handle(), self._def._state, kernel)
        return self._new(
            driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL,
            h,
            {"kernel": kernel, "args": holder.args},
        )

    def join(self, *nodes: GraphNode) -> Any:
        """Add an empty node that depends on this node and on every node of ``nodes``.

        Returns
        -------
        EmptyNode

        Raises
        ------
        TypeError, ValueError
            A node that is not a node of this graph.
        """
        deps = self._deps() + [self._same_graph(n, "nodes") for n in nodes]
        h = handle_return(
            driver.cuGraphAddEmptyNode(self._graph_handle(), deps, len(deps)), "cuGraphAddEmptyNode"
        )
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EMPTY, h)

    def allocate(
        self,
        size: int,
        *,
        device: Any = None,
        memory_type: Any = "device",
        peer_access: list[Any] | None = None,
    ) -> Any:
        """Add a graph memory allocation node that depends on this node.

        The memory belongs to the graph: it is allocated when the node runs and stays valid
        until a free node (:meth:`deallocate`) in this or a later launch, or until the graph
        is relaunched with ``GraphCompleteOptions(auto_free_on_launch=True)``. The address is
        fixed at construction (:attr:`AllocNode.dptr`). Not shareable by IPC.

        Parameters
        ----------
        size : int
            Bytes to allocate (> 0).
        device : ~cuda_core.Device or int, optional
            Where to allocate; the current context's device by default.
        memory_type : {"device", "host", "managed"}
            Device memory (default), pinned host memory or managed memory (driver permitting).
        peer_access : list of ~cuda_core.Device or int, optional
            Devices that get read-write access.

        Returns
        -------
        AllocNode

        Raises
        ------
        ValueError
            A bad ``size`` or ``memory_type``.
        NotImplementedError
            ``memory_type="managed"`` without CUDA 13 (``cuda-bindings`` and driver).
        """
        n = check_int("size", size, 1)
        mtype = str(getattr(memory_type, "value", memory_type))
        if mtype not in _MEM_TYPES:
            raise arg_error("memory_type", 'one of "device", "host", "managed"', memory_type)
        dev = device_id(device)
        p = driver.CUDA_MEM_ALLOC_NODE_PARAMS()
        props = p.poolProps
        loc_t = driver.CUmemLocationType
        if mtype == "managed":
            require_cuda13('a graph allocation of memory_type="managed"')
            props.allocType = MANAGED_ALLOCATION
        else:
            props.allocType = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        if mtype == "host":
            props.location.type = loc_t.CU_MEM_LOCATION_TYPE_HOST
            props.location.id = 0
        else:
            props.location.type = loc_t.CU_MEM_LOCATION_TYPE_DEVICE
            props.location.id = dev
        peers = [device_id(d) for d in (peer_access or [])]
        if peers:
            descs = []
            for peer in peers:
                desc = driver.CUmemAccessDesc()
                desc.location.type = loc_t.CU_MEM_LOCATION_TYPE_DEVICE
                desc.location.id = peer
                desc.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                descs.append(desc)
            p.accessDescs = descs
            p.accessDescCount = len(descs)
        p.bytesize = n
        h = self._add_legacy(driver.cuGraphAddMemAllocNode, "cuGraphAddMemAllocNode", p)
        meta = {
            "dptr": int(p.dptr),
            "bytesize": n,
            "device_id": dev,
            "memory_type": mtype,
            "peer_access": tuple(peers),
        }
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC, h, meta)

    def deallocate(self, dptr: int) -> Any:
        """Add a node that frees graph memory (an :attr:`AllocNode.dptr`) after this node.

        Returns
        -------
        FreeNode
        """
        if isinstance(dptr, bool) or not isinstance(dptr, (int, driver.CUdeviceptr)):
            raise arg_error("dptr", "an int address from AllocNode.dptr", dptr, exc=TypeError)
        h = self._add_legacy(driver.cuGraphAddMemFreeNode, "cuGraphAddMemFreeNode", int(dptr))
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_FREE, h)

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
        """Add a memset node that depends on this node.

        Parameters
        ----------
        dst : Buffer or int
            Destination. A Buffer is retained for the graph's lifetime; for a raw address keep
            the memory alive yourself or pass ``dst_owner``.
        value : int or buffer-protocol object
            An int in [0, 256) fills bytes; a 1-, 2- or 4-byte object (``np.uint16(7)``,
            ``np.float32(1)``) fills elements of that size with its bytes.
        width : int
            Elements per row.
        height : int, optional
            Rows (default 1).
        pitch : int, optional
            Bytes between rows (used when ``height > 1``).
        dst_owner : object, optional
            Retained for the graph's lifetime with a raw ``dst``; not allowed with a Buffer.

        Returns
        -------
        MemsetNode

        Raises
        ------
        TypeError, ValueError
            Bad ``dst``, ``value`` or shape; ``dst_owner`` given with a Buffer.
        """
        p, keep = memset_params(dst, value, width, height, pitch, dst_owner)
        ctx = current_context("cuGraphAddMemsetNode")
        h = self._add_legacy(driver.cuGraphAddMemsetNode, "cuGraphAddMemsetNode", p, ctx)
        hold(self._def._state, self._graph_handle(), keep)
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMSET, h)

    def memcpy(
        self, dst: Any, src: Any, size: int, *, dst_owner: Any = None, src_owner: Any = None
    ) -> Any:
        """Add a node copying ``size`` bytes from ``src`` to ``dst`` after this node.

        Device, managed and pinned host memory are all accepted (unified addressing).
        Buffers are retained for the graph's lifetime; raw addresses are not (pass
        ``dst_owner``/``src_owner`` to have the graph retain an owner).

        Returns
        -------
        MemcpyNode

        Raises
        ------
        TypeError, ValueError
            Bad operands or size; an owner given with a Buffer.
        """
        p, keep = memcpy_params(dst, src, size, dst_owner, src_owner)
        ctx = current_context("cuGraphAddMemcpyNode")
        h = self._add_legacy(driver.cuGraphAddMemcpyNode, "cuGraphAddMemcpyNode", p, ctx)
        hold(self._def._state, self._graph_handle(), keep)
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEMCPY, h)

    def embed(self, child: Any) -> Any:
        """Add a child-graph node holding a clone of ``child`` after this node.

        Later changes to ``child`` do not reach the clone; :attr:`ChildGraphNode.child_graph`
        is a view of the clone. Operands and host callbacks of ``child`` are retained by this
        graph too. The child must not contain allocation, free or conditional nodes.

        Returns
        -------
        ChildGraphNode

        Raises
        ------
        TypeError
            ``child`` is not a GraphDefinition.
        """
        if not isinstance(child, KINDS["definition"]):
            raise arg_error("child", "a GraphDefinition", child, exc=TypeError)
        child_h = child._live()
        if int(child_h) == int(self._graph_handle()):
            raise arg_error("child", "another GraphDefinition than this node's graph", child)
        h = self._add_legacy(driver.cuGraphAddChildGraphNode, "cuGraphAddChildGraphNode", child_h)
        state, cstate = self._def._state, child._state
        if cstate is not state:
            state.keep.append(cstate.keep)
            for obj in cstate.user_objects:
                _table.retain_in_graph(state.root, obj)
                state.user_objects.append(obj)
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_GRAPH, h)

    def record(self, event: Any) -> Any:
        """Add a node recording ``event`` after this node (the event is retained).

        Returns
        -------
        EventRecordNode
        """
        ev = check_event(event)
        h = self._add_legacy(
            driver.cuGraphAddEventRecordNode, "cuGraphAddEventRecordNode", ev.handle
        )
        hold(self._def._state, self._graph_handle(), ev)
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EVENT_RECORD, h, {"event": ev})

    def wait(self, event: Any) -> Any:
        """Add a node waiting for ``event`` after this node (the event is retained).

        Returns
        -------
        EventWaitNode
        """
        ev = check_event(event)
        h = self._add_legacy(driver.cuGraphAddEventWaitNode, "cuGraphAddEventWaitNode", ev.handle)
        hold(self._def._state, self._graph_handle(), ev)
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_WAIT_EVENT, h, {"event": ev})

    def callback(self, fn: Any, *, user_data: Any = None) -> Any:
        """Add a host callback node that runs ``fn`` on a driver thread after this node.

        A Python callable takes no arguments (bind state with a closure or
        ``functools.partial``); it is kept alive as long as any graph made from this one
        (clones, embedding graphs, executable graphs) can call it, and an exception it raises
        is reported through :func:`sys.unraisablehook`. A ctypes function pointer must be
        declared ``ctypes.CFUNCTYPE(None, ctypes.c_void_p)`` and receives ``user_data`` (an
        int address, or bytes-like data copied and kept by the graph); you keep the ctypes
        object alive. Callbacks must not call CUDA.

        Returns
        -------
        HostCallbackNode

        Raises
        ------
        TypeError
            ``fn`` is neither callable nor a matching ctypes function pointer.
        ValueError
            ``user_data`` given with a Python callable.
        """
        p, py_fn, keep = self._host_params(fn, user_data)
        h = self._add_legacy(driver.cuGraphAddHostNode, "cuGraphAddHostNode", p)
        if keep is not None:
            hold(self._def._state, self._graph_handle(), keep)
        return self._new(driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_HOST, h, {"callback": py_fn})

    def _host_params(self, fn: Any, user_data: Any, graph: Any = None) -> tuple[Any, Any, Any]:
        py_fn, addr, ud, keep = _table.host_callback(fn, user_data)
        if py_fn is not None:
            state = self._def._state
            key, obj = _table.keep_in_graph(state.root if graph is None else graph, py_fn, ())
            state.user_objects.append(obj)
            addr, ud = _table.RUN_KEPT, key
        p = driver.CUDA_HOST_NODE_PARAMS()
        p.fn = driver.CUhostFn(addr)
        p.userData = ud
        return p, py_fn, keep

    # The names of cuda.core before 1.0, each with a DeprecationWarning naming the current one.
    alloc = renamed_method("GraphNode", "alloc", "allocate")
    free = renamed_method("GraphNode", "free", "deallocate")
    record_event = renamed_method("GraphNode", "record_event", "record")
    wait_event = renamed_method("GraphNode", "wait_event", "wait")
    if_cond = renamed_method("GraphNode", "if_cond", "if_then")

    # Control flow (cuda_core.graph._node_control): conditional nodes with child-graph bodies.
    if_then = _control.if_then
    if_else = _control.if_else
    while_loop = _control.while_loop
    switch = _control.switch

    # External semaphores (cuda_core.graph._node_semaphores): signal and wait nodes.
    signal_external_semaphores = _semaphores.signal_external_semaphores
    wait_external_semaphores = _semaphores.wait_external_semaphores


KINDS["node"] = GraphNode
