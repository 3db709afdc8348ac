"""The builder methods of :class:`~cuda_core.graph.GraphNode` that add control flow: *if*,
*if/else*, *while* and *switch* nodes, each on a :class:`~cuda_core.graph.GraphCondition` of
the same graph. Their bodies are child graphs the driver makes with the node.
"""

from __future__ import annotations

from typing import Any

from .._compat import driver
from . import _driver as _gd
from ._condition import check_branch_count, check_condition
from ._driver import current_context

__all__: list[str] = []  # GraphNode's methods (GraphNode binds them), public through it

_COND = driver.CUgraphConditionalNodeType


def _conditional(node: Any, condition: Any, ctype: Any, size: int, kind: str) -> Any:
    cond = check_condition(condition, node._def._state.key)
    params = driver.CUgraphNodeParams()
    params.type = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    params.conditional.handle = cond.handle
    params.conditional.type = ctype
    params.conditional.size = size
    params.conditional.ctx = current_context("cuGraphAddNode")
    h = _gd.add_node(node._graph_handle(), node._deps(), params)
    bodies = list(params.conditional.phGraph_out)[:size]
    return node._new(kind, h, {"kind": kind, "condition": cond, "bodies": bodies})


def if_then(self: Any, condition: Any) -> Any:
    """Add an *if* node after this node: its ``then`` body runs when ``condition`` is non-zero.

    Returns
    -------
    IfNode
        Fill the body through :attr:`IfNode.then` (a GraphDefinition).

    Raises
    ------
    TypeError
        ``condition`` is not a GraphCondition.
    CUDAError
        ``condition`` was created in another graph (``CUDA_ERROR_INVALID_VALUE``, as the
        driver answers; also a ``ValueError``).
    """
    return _conditional(self, condition, _COND.CU_GRAPH_COND_TYPE_IF, 1, "if")


def if_else(self: Any, condition: Any) -> Any:
    """Add an *if/else* node: ``then`` runs when ``condition`` is non-zero, ``else_`` otherwise.

    Needs CUDA 12.8 or newer.

    Returns
    -------
    IfElseNode
    """
    return _conditional(self, condition, _COND.CU_GRAPH_COND_TYPE_IF, 2, "if_else")


def while_loop(self: Any, condition: Any) -> Any:
    """Add a *while* node: its ``body`` runs again and again while ``condition`` is non-zero.

    The condition is tested before the first iteration (give it a non-zero
    ``default_value`` or set it upstream). Something in the body must eventually set it to
    zero with ``cudaGraphSetConditional``: a loop that never does never ends, and the
    stream hangs (that is the caller's responsibility; destroying the graph is still safe).

    Returns
    -------
    WhileNode
    """
    return _conditional(self, condition, _COND.CU_GRAPH_COND_TYPE_WHILE, 1, "while")


def switch(self: Any, condition: Any, count: int) -> Any:
    """Add a *switch* node with ``count`` branches; branch ``i`` runs when ``condition == i``.

    No branch runs for an out-of-range value. Needs CUDA 12.8 or newer.

    Returns
    -------
    SwitchNode

    Raises
    ------
    CUDAError
        ``count`` is below 1 (``CUDA_ERROR_INVALID_VALUE``, as the driver answers; also a
        ``ValueError``).
    """
    n = check_branch_count(count)
    return _conditional(self, condition, _COND.CU_GRAPH_COND_TYPE_SWITCH, n, "switch")
