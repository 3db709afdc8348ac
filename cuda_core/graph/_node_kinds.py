"""The node kinds of an explicit graph: EmptyNode, KernelNode, MemsetNode, ... SwitchNode.

Each kind adds read-only properties (read back from the driver, or from what the graph
recorded when the driver cannot tell) and, where CUDA allows it, ``update()`` to change the
node's parameters in the definition (graphs instantiated earlier keep the old ones; use
``graph[node].update(...)`` for those).
"""

from __future__ import annotations

from typing import Any

from .._compat import MANAGED_ALLOCATION, driver
from .._kernel import Kernel
from .._launch_config import LaunchConfig
from .._utils import arg_error, handle_return
from .._utils._renamed import renamed_property
from ._node import GraphNode
from ._params import check_event, hold, kernel_params, memcpy_params, memset_params
from ._state import KINDS

__all__: list[str] = []  # public through cuda_core.graph

_T = driver.CUgraphNodeType


def _meta(node: GraphNode) -> dict[str, Any]:
    m = node._def._state.meta.get(int(node._live()))
    return m if isinstance(m, dict) else {}


def _set_meta(node: GraphNode, **values: Any) -> None:
    m = node._def._state.meta.setdefault(int(node._handle), {})
    m.update(values)


def _where(ptr: int) -> str:
    """``"D"`` for device (or managed) memory, ``"H"`` for host memory (pinned, or unknown to
    the driver: pageable), as cuda.core's memcpy node repr marks its operands."""
    attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
    err, kind = driver.cuPointerGetAttribute(attr, ptr)
    host = driver.CUmemorytype.CU_MEMORYTYPE_HOST
    return "D" if err == driver.CUresult.CUDA_SUCCESS and int(kind) != int(host) else "H"


class EmptyNode(GraphNode):
    """An empty node: orders its predecessors before its successors, does no work."""

    __slots__ = ()


class KernelNode(GraphNode):
    """A kernel launch node (from :meth:`GraphNode.launch`)."""

    __slots__ = ()

    def _params(self) -> Any:
        return handle_return(
            driver.cuGraphKernelNodeGetParams(self._live()), "cuGraphKernelNodeGetParams"
        )

    @property
    def grid(self) -> tuple[int, int, int]:
        """Grid dimensions ``(x, y, z)``."""
        p = self._params()
        return (p.gridDimX, p.gridDimY, p.gridDimZ)

    @property
    def block(self) -> tuple[int, int, int]:
        """Block dimensions ``(x, y, z)``."""
        p = self._params()
        return (p.blockDimX, p.blockDimY, p.blockDimZ)

    @property
    def shmem_size(self) -> int:
        """Dynamic shared memory in bytes."""
        return int(self._params().sharedMemBytes)

    @property
    def kernel(self) -> Any:
        """The :class:`~cuda_core.Kernel` this node launches."""
        k = _meta(self).get("kernel")
        if k is None:
            p = self._params()
            k = Kernel.from_handle(int(p.kern) or int(p.func))
        return k

    @property
    def config(self) -> Any:
        """A :class:`~cuda_core.LaunchConfig` with this node's grid, block and shared memory."""

        p = self._params()
        return LaunchConfig(
            grid=(p.gridDimX, p.gridDimY, p.gridDimZ),
            block=(p.blockDimX, p.blockDimY, p.blockDimZ),
            shmem_size=int(p.sharedMemBytes),
        )

    def update(self, *, config: Any = None, kernel: Any = None, args: Any = None) -> None:
        """Change the launch parameters in the definition; omitted ones stay as they are.

        Changing ``kernel`` requires ``args`` (``args=()`` for a kernel without parameters).
        Arguments that are not given keep the values recorded when the node was made.

        Raises
        ------
        ValueError
            ``kernel`` without ``args``, or the old arguments are unknown (a captured node).
        """
        m = _meta(self)
        if kernel is not None and args is None:
            raise ValueError(
                "args must be given when kernel changes (args=() for a kernel without parameters)"
            )
        if args is None:
            if "args" not in m:
                raise ValueError(
                    "args must be given: this node's arguments were not recorded by cuda_core"
                )
            args = m["args"]
        p, holder = kernel_params(
            config if config is not None else self.config,
            kernel if kernel is not None else self.kernel,
            args,
        )
        handle_return(
            driver.cuGraphKernelNodeSetParams(self._handle, p), "cuGraphKernelNodeSetParams"
        )
        hold(self._def._state, self._graph_handle(), holder.args)
        _set_meta(self, kernel=kernel if kernel is not None else self.kernel, args=holder.args)

    def _repr_detail(self) -> str:
        p = self._params()
        return f" kernel={int(p.kern) or int(p.func):#x}"


class AllocNode(GraphNode):
    """A graph memory allocation node (from :meth:`GraphNode.allocate`)."""

    __slots__ = ()

    def _params(self) -> Any:
        return handle_return(
            driver.cuGraphMemAllocNodeGetParams(self._live()), "cuGraphMemAllocNodeGetParams"
        )

    @property
    def dptr(self) -> int:
        """The address of the allocation (fixed when the node was made)."""
        return int(self._params().dptr)

    @property
    def bytesize(self) -> int:
        """Bytes allocated."""
        return int(self._params().bytesize)

    @property
    def device_id(self) -> int:
        """The device the memory is on (the recorded device for host memory)."""
        m = _meta(self)
        return (
            int(m["device_id"]) if "device_id" in m else int(self._params().poolProps.location.id)
        )

    @property
    def memory_type(self) -> str:
        """``"device"``, ``"host"`` or ``"managed"``."""
        m = _meta(self)
        if "memory_type" in m:
            return str(m["memory_type"])
        props = self._params().poolProps
        if MANAGED_ALLOCATION is not None and props.allocType == MANAGED_ALLOCATION:
            return "managed"
        return (
            "host"
            if props.location.type == driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST
            else "device"
        )

    @property
    def peer_access(self) -> tuple[int, ...]:
        """Devices given read-write access."""
        m = _meta(self)
        return tuple(m.get("peer_access", ()))

    def _repr_detail(self) -> str:
        return f" dptr={self.dptr:#x} size={self.bytesize}"


class FreeNode(GraphNode):
    """A graph memory free node (from :meth:`GraphNode.deallocate`)."""

    __slots__ = ()

    @property
    def dptr(self) -> int:
        """The address freed."""
        return int(
            handle_return(
                driver.cuGraphMemFreeNodeGetParams(self._live()), "cuGraphMemFreeNodeGetParams"
            )
        )

    def _repr_detail(self) -> str:
        return f" dptr={self.dptr:#x}"


class MemsetNode(GraphNode):
    """A memset node (from :meth:`GraphNode.memset`)."""

    __slots__ = ()

    def _params(self) -> Any:
        return handle_return(
            driver.cuGraphMemsetNodeGetParams(self._live()), "cuGraphMemsetNodeGetParams"
        )

    @property
    def dptr(self) -> int:
        """Destination address."""
        return int(self._params().dst)

    @property
    def value(self) -> int:
        """Fill value (of ``element_size`` bytes)."""
        return int(self._params().value)

    @property
    def element_size(self) -> int:
        """int: Bytes per element (1, 2 or 4)."""
        return int(self._params().elementSize)

    @property
    def width(self) -> int:
        """Elements per row."""
        return int(self._params().width)

    @property
    def height(self) -> int:
        """Rows."""
        return int(self._params().height)

    @property
    def pitch(self) -> int:
        """Bytes between rows."""
        return int(self._params().pitch)

    def _repr_detail(self) -> str:
        p = self._params()
        return f" dptr={int(p.dst):#x} value={int(p.value)}"

    def update(
        self,
        *,
        dst: Any = None,
        value: Any = None,
        width: Any = None,
        height: Any = None,
        pitch: Any = None,
        dst_owner: Any = None,
    ) -> None:
        """Change the memset in the definition; omitted parameters keep their values.

        ``dst_owner`` may only come with a raw-address ``dst``. Needs the node's context current.
        """
        if dst_owner is not None and dst is None:
            raise ValueError("dst_owner must come with dst")
        old = self._params()
        if value is None:
            value = (
                int(old.value).to_bytes(int(old.elementSize), "little")
                if old.elementSize > 1
                else int(old.value)
            )
        p, keep = memset_params(
            int(old.dst) if dst is None else dst,
            value,
            old.width if width is None else width,
            old.height if height is None else height,
            old.pitch if pitch is None else pitch,
            dst_owner,
        )
        handle_return(
            driver.cuGraphMemsetNodeSetParams(self._handle, p), "cuGraphMemsetNodeSetParams"
        )
        hold(self._def._state, self._graph_handle(), keep)


class MemcpyNode(GraphNode):
    """A 1-D memcpy node (from :meth:`GraphNode.memcpy`)."""

    __slots__ = ()

    def _params(self) -> Any:
        return handle_return(
            driver.cuGraphMemcpyNodeGetParams(self._live()), "cuGraphMemcpyNodeGetParams"
        )

    @property
    def dst(self) -> int:
        """Destination address."""
        p = self._params()
        return int(p.dstDevice) or int(p.dstHost or 0)

    @property
    def src(self) -> int:
        """Source address."""
        p = self._params()
        return int(p.srcDevice) or int(p.srcHost or 0)

    @property
    def size(self) -> int:
        """Bytes copied."""
        return int(self._params().WidthInBytes)

    def _repr_detail(self) -> str:
        p = self._params()
        dst = int(p.dstDevice) or int(p.dstHost or 0)
        src = int(p.srcDevice) or int(p.srcHost or 0)
        return (
            f" dst={dst:#x}({_where(dst)}) src={src:#x}({_where(src)}) size={int(p.WidthInBytes)}"
        )

    def update(
        self,
        *,
        dst: Any = None,
        src: Any = None,
        size: Any = None,
        dst_owner: Any = None,
        src_owner: Any = None,
    ) -> None:
        """Change the copy in the definition; omitted parameters keep their values.

        Owners may only come with their raw-address operand. Needs the node's context current.
        """
        if (dst_owner is not None and dst is None) or (src_owner is not None and src is None):
            raise ValueError("dst_owner/src_owner must come with dst/src")
        p, keep = memcpy_params(
            self.dst if dst is None else dst,
            self.src if src is None else src,
            self.size if size is None else size,
            dst_owner,
            src_owner,
        )
        handle_return(
            driver.cuGraphMemcpyNodeSetParams(self._handle, p), "cuGraphMemcpyNodeSetParams"
        )
        hold(self._def._state, self._graph_handle(), keep)


class ChildGraphNode(GraphNode):
    """A node that runs a child graph (from :meth:`GraphNode.embed`)."""

    __slots__ = ()

    @property
    def child_graph(self) -> Any:
        """A view (not owning) of the embedded clone, as a GraphDefinition."""
        h = handle_return(
            driver.cuGraphChildGraphNodeGetGraph(self._live()), "cuGraphChildGraphNodeGetGraph"
        )
        return KINDS["definition"]._view(self._def._state, h)

    def _repr_detail(self) -> str:
        h = handle_return(
            driver.cuGraphChildGraphNodeGetGraph(self._live()), "cuGraphChildGraphNodeGetGraph"
        )
        return f" child={int(h):#x}"

    def update(self, child: Any) -> None:
        """Replace the embedded graph with a clone of ``child`` (same topology as before).

        Raises
        ------
        TypeError
            ``child`` is not a GraphDefinition.
        """
        if not isinstance(child, KINDS["definition"]):
            raise arg_error("child", "a GraphDefinition", child, exc=TypeError)
        params = driver.CUgraphNodeParams()
        params.type = _T.CU_GRAPH_NODE_TYPE_GRAPH
        params.graph.graph = child._live()
        handle_return(driver.cuGraphNodeSetParams(self._live(), params), "cuGraphNodeSetParams")
        hold(self._def._state, self._graph_handle(), child._state.keep)


class _EventNode(GraphNode):
    __slots__ = ()
    _get: Any = None
    _set: Any = None

    @property
    def event(self) -> Any:
        """The :class:`~cuda_core.Event` (as given to the builder or the last ``update``)."""
        return _meta(self).get("event")

    def _repr_detail(self) -> str:
        ev = self.event
        return "" if ev is None else f" event={int(ev.handle):#x}"

    def update(self, event: Any) -> None:
        """Use ``event`` in the definition from now on (the event is retained)."""
        ev = check_event(event)
        fn = self._set
        handle_return(fn(self._live(), ev.handle), fn.__name__)
        hold(self._def._state, self._graph_handle(), ev)
        _set_meta(self, event=ev)


class EventRecordNode(_EventNode):
    """A node that records an event (from :meth:`GraphNode.record`)."""

    __slots__ = ()
    _set = driver.cuGraphEventRecordNodeSetEvent


class EventWaitNode(_EventNode):
    """A node that waits for an event (from :meth:`GraphNode.wait`)."""

    __slots__ = ()
    _set = driver.cuGraphEventWaitNodeSetEvent


class HostCallbackNode(GraphNode):
    """A host callback node (from :meth:`GraphNode.callback`)."""

    __slots__ = ()

    callback_fn = renamed_property("HostCallbackNode", "callback_fn", "callback")  # before 1.0

    @property
    def callback(self) -> Any:
        """The Python callable, or ``None`` for a ctypes function pointer."""
        return _meta(self).get("callback")

    def _repr_detail(self) -> str:
        fn = self.callback
        name = "ctypes" if fn is None else getattr(fn, "__name__", None) or type(fn).__name__
        return f" callback={name}"

    def update(self, fn: Any, *, user_data: Any = None) -> None:
        """Replace the callback in the definition (same forms as :meth:`GraphNode.callback`)."""
        p, py_fn, keep = self._host_params(fn, user_data)
        handle_return(driver.cuGraphHostNodeSetParams(self._live(), p), "cuGraphHostNodeSetParams")
        if keep is not None:
            hold(self._def._state, self._graph_handle(), keep)
        _set_meta(self, callback=py_fn)


class ConditionalNode(GraphNode):
    """A conditional node; the builders return its subclasses (IfNode, IfElseNode, WhileNode,
    SwitchNode). A conditional node not made by cuda_core is shown as this class, with no
    condition or branches known."""

    __slots__ = ()

    @property
    def condition(self) -> Any:
        """The :class:`GraphCondition` that controls the node (``None`` when unknown)."""
        return _meta(self).get("condition")

    def _repr_detail(self) -> str:
        cond = self.condition
        return "" if cond is None else f" condition={int(cond.handle):#x}"

    @property
    def cond_type(self) -> str | None:
        """``"if"``, ``"while"`` or ``"switch"`` (``None`` when unknown)."""
        kind = _meta(self).get("kind")
        return {"if": "if", "if_else": "if", "while": "while", "switch": "switch"}.get(kind or "")

    @property
    def branches(self) -> tuple[Any, ...]:
        """The body graphs, as GraphDefinition views (owned by this node)."""
        view = KINDS["definition"]._view
        return tuple(view(self._def._state, h) for h in _meta(self).get("bodies", ()))


class IfNode(ConditionalNode):
    """An *if* node (from :meth:`GraphNode.if_then`)."""

    __slots__ = ()

    @property
    def then(self) -> Any:
        """The body run when the condition is non-zero."""
        return self.branches[0]


class IfElseNode(ConditionalNode):
    """An *if/else* node (from :meth:`GraphNode.if_else`)."""

    __slots__ = ()

    @property
    def then(self) -> Any:
        """The body run when the condition is non-zero."""
        return self.branches[0]

    @property
    def else_(self) -> Any:
        """The body run when the condition is zero."""
        return self.branches[1]


class WhileNode(ConditionalNode):
    """A *while* node (from :meth:`GraphNode.while_loop`)."""

    __slots__ = ()

    @property
    def body(self) -> Any:
        """The loop body."""
        return self.branches[0]


class SwitchNode(ConditionalNode):
    """A *switch* node (from :meth:`GraphNode.switch`); ``branches[i]`` runs for value ``i``."""

    __slots__ = ()


class _SemaphoresNode(GraphNode):
    __slots__ = ()

    @property
    def semaphores(self) -> tuple[Any, ...]:
        """The :class:`~cuda_core.ExternalSemaphore` objects, as given to the builder."""
        return _meta(self).get("semaphores", ())  # type: ignore[no-any-return]

    @property
    def values(self) -> tuple[int, ...]:
        """The fence value of each semaphore (``0`` for a binary one)."""
        return _meta(self).get("values", ())  # type: ignore[no-any-return]


class ExternalSemaphoresSignalNode(_SemaphoresNode):
    """A node that signals external semaphores (:meth:`GraphNode.signal_external_semaphores`)."""

    __slots__ = ()


class ExternalSemaphoresWaitNode(_SemaphoresNode):
    """A node that waits for external semaphores (:meth:`GraphNode.wait_external_semaphores`)."""

    __slots__ = ()


KINDS.update(
    {
        _T.CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL: ExternalSemaphoresSignalNode,
        _T.CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: ExternalSemaphoresWaitNode,
        _T.CU_GRAPH_NODE_TYPE_EMPTY: EmptyNode,
        _T.CU_GRAPH_NODE_TYPE_KERNEL: KernelNode,
        _T.CU_GRAPH_NODE_TYPE_MEM_ALLOC: AllocNode,
        _T.CU_GRAPH_NODE_TYPE_MEM_FREE: FreeNode,
        _T.CU_GRAPH_NODE_TYPE_MEMSET: MemsetNode,
        _T.CU_GRAPH_NODE_TYPE_MEMCPY: MemcpyNode,
        _T.CU_GRAPH_NODE_TYPE_GRAPH: ChildGraphNode,
        _T.CU_GRAPH_NODE_TYPE_EVENT_RECORD: EventRecordNode,
        _T.CU_GRAPH_NODE_TYPE_WAIT_EVENT: EventWaitNode,
        _T.CU_GRAPH_NODE_TYPE_HOST: HostCallbackNode,
        _T.CU_GRAPH_NODE_TYPE_CONDITIONAL: ConditionalNode,
        "if": IfNode,
        "if_else": IfElseNode,
        "while": WhileNode,
        "switch": SwitchNode,
    }
)
