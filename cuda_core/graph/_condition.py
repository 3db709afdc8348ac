"""GraphCondition: the value a conditional graph node tests, set by device code.

A condition is a ``CUgraphConditionalHandle`` created in one graph. Kernels in that graph set
it with ``cudaGraphSetConditional(handle, value)``; the conditional nodes built from it
(``if_then``, ``if_else``, ``while_loop``, ``switch``) read it. A :class:`GraphCondition` passes
to :func:`~cuda_core.launch` and to kernel nodes as its 8-byte handle.
"""

from __future__ import annotations

from typing import Any

from .._compat import driver
from .._errors import invalid_value
from .._kernel_arg_handler import register_handle_argument
from .._utils import arg_error, check_int, handle_return
from ._driver import current_context

__all__: list[str] = []  # public through cuda_core.graph

_ASSIGN_DEFAULT = int(driver.CU_GRAPH_COND_ASSIGN_DEFAULT)


class GraphCondition:
    """A condition variable for conditional graph nodes.

    Made by :meth:`GraphDefinition.create_condition` or :meth:`GraphBuilder.create_condition`
    and passed to the conditional builders (``if_then``, ``if_else``, ``while_loop``,
    ``switch``) of the same graph. Device code sets its value at run time with
    ``cudaGraphSetConditional(handle, value)``; pass the condition itself as the kernel
    argument (it packs as its ``cudaGraphConditionalHandle``, 8 bytes). The handle belongs to
    its graph: it lives as long as the graph and needs no closing.
    """

    __slots__ = ("__weakref__", "_default", "_graph_key", "_handle")

    _handle: Any  # driver.CUgraphConditionalHandle
    _graph_key: int  # int() of the root CUgraph the handle was created in
    _default: int | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "GraphCondition cannot be constructed directly; use GraphDefinition.create_condition() "
            "or GraphBuilder.create_condition()"
        )

    @classmethod
    def _create(cls, graph: Any, graph_key: int, default_value: Any) -> GraphCondition:
        if default_value is not None:
            default_value = check_int("default_value", default_value, 0, 2**32 - 1)
        ctx = current_context("cuGraphConditionalHandleCreate")
        flags = 0 if default_value is None else _ASSIGN_DEFAULT
        h = handle_return(
            driver.cuGraphConditionalHandleCreate(graph, ctx, default_value or 0, flags),
            "cuGraphConditionalHandleCreate",
        )
        self = object.__new__(cls)
        self._handle = h
        self._graph_key = graph_key
        self._default = default_value
        return self

    @property
    def handle(self) -> Any:
        """The ``CUgraphConditionalHandle`` (``int(cond.handle)`` is its value)."""
        return self._handle

    def __int__(self) -> int:
        return int(self._handle)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GraphCondition) and int(self._handle) == int(other._handle)

    def __hash__(self) -> int:
        return hash((GraphCondition, int(self._handle)))

    def __repr__(self) -> str:
        return f"<GraphCondition handle={int(self._handle):#x}>"  # cuda.core's format


def check_condition(condition: Any, graph_key: int) -> GraphCondition:
    """``condition`` if it is a GraphCondition of the graph ``graph_key``, else a clear error."""
    if not isinstance(condition, GraphCondition):
        raise arg_error(
            "condition", "a GraphCondition from create_condition()", condition, exc=TypeError
        )
    if condition._graph_key != graph_key:
        # the driver refuses it (CUDA_ERROR_INVALID_VALUE, what cuda.core raises); said clearly
        err = arg_error(
            "condition",
            "a GraphCondition created in this graph",
            condition,
            "a condition belongs to the graph whose create_condition() made it",
        )
        raise invalid_value("cuGraphAddNode", str(err))
    return condition


def check_branch_count(count: Any) -> int:
    """``count`` of a switch node: an int >= 1 (0 is the driver's ``CUDA_ERROR_INVALID_VALUE``,
    which cuda.core raises, so ours is an :class:`~cuda_core.CUDAError` and a ``ValueError``)."""
    try:
        return check_int("count", count, 1)
    except ValueError as err:  # a non-integer stays a TypeError
        raise invalid_value("cuGraphAddNode", str(err)) from None


register_handle_argument(GraphCondition, "int({a}._handle)", "cudaGraphConditionalHandle")
