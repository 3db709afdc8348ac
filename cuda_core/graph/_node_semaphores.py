"""The builder methods of :class:`~cuda_core.graph.GraphNode` that add external semaphore
nodes: signal and wait of :class:`~cuda_core.ExternalSemaphore` objects
(``cuGraphAddExternalSemaphoresSignalNode`` / ``...WaitNode``), several in one node.

The graph holds the semaphores' handles (in its state and in a user object that clones and
executable graphs share), so closing an :class:`~cuda_core.ExternalSemaphore` while a graph
uses it destroys nothing until that graph goes.
"""

from __future__ import annotations

from typing import Any

from .._compat import driver
from .._handles import _external as _ext
from .._interop._external_semaphore import check_semaphores
from ._params import hold

__all__: list[str] = []  # GraphNode's methods (GraphNode binds them), public through it

_T = driver.CUgraphNodeType


def _add(node: Any, semaphores: Any, values: Any, signal: bool) -> Any:
    sems, vals, refs = check_semaphores(semaphores, values)
    handles = [driver.CUexternalSemaphore(int(r.value)) for r in refs]
    if signal:
        p: Any = driver.CUDA_EXT_SEM_SIGNAL_NODE_PARAMS()
        p.paramsArray = _ext.fence_params(vals, True)
        fn, api = (
            driver.cuGraphAddExternalSemaphoresSignalNode,
            "cuGraphAddExternalSemaphoresSignalNode",
        )
    else:
        p = driver.CUDA_EXT_SEM_WAIT_NODE_PARAMS()
        p.paramsArray = _ext.fence_params(vals, False)
        fn, api = (
            driver.cuGraphAddExternalSemaphoresWaitNode,
            "cuGraphAddExternalSemaphoresWaitNode",
        )
    p.extSemArray = handles
    p.numExtSems = len(handles)
    h = node._add_legacy(fn, api, p)
    hold(node._def._state, node._graph_handle(), tuple(refs))
    kind = (
        _T.CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL if signal else _T.CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT
    )
    return node._new(kind, h, {"semaphores": tuple(sems), "values": tuple(vals)})


def signal_external_semaphores(self: Any, semaphores: Any, values: Any = None) -> Any:
    """Add a node that signals ``semaphores`` after this node (one node for all of them).

    Parameters
    ----------
    semaphores : sequence of ExternalSemaphore
        At least one; the graph holds them.
    values : sequence, optional
        One entry per semaphore: a timeline semaphore's new value, ``None`` for a binary one;
        ``None`` when all are binary (see :func:`cuda_core.signal_external_semaphores`).

    Returns
    -------
    ExternalSemaphoresSignalNode
    """
    return _add(self, semaphores, values, True)


def wait_external_semaphores(self: Any, semaphores: Any, values: Any = None) -> Any:
    """Add a node, after this node, that waits for ``semaphores`` (one node for all of them).

    Parameters
    ----------
    semaphores : sequence of ExternalSemaphore
        At least one; the graph holds them.
    values : sequence, optional
        One entry per semaphore: the value a timeline semaphore must reach, ``None`` for a
        binary one; ``None`` when all are binary.

    Returns
    -------
    ExternalSemaphoresWaitNode
    """
    return _add(self, semaphores, values, False)
