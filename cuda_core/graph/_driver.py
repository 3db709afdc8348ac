"""The graph driver calls every graph module shares: add nodes and edges, walk the graph, and
read or set a capture's dependencies.

The calls are written in their ``cuda-bindings`` 13.x form (an edge-data argument, an edge-data
item in the results); :mod:`cuda_core._compat` gives them that form on 12.x too. All results go
through :func:`~cuda_core._utils.handle_return`, except :func:`exec_update`'s, whose failure
needs the reason the bindings do not return.
"""

from __future__ import annotations

import ctypes
from typing import Any

from .._compat import driver
from .._handles import _backend
from .._handles._driver import ensure_driver
from .._utils import handle_return, make_error

__all__: list[str] = []  # private module

_SET_DEPS = driver.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
_NO_CONTEXT = driver.CUresult.CUDA_ERROR_INVALID_CONTEXT


def add_node(graph: Any, deps: list[Any], params: Any) -> Any:
    """``cuGraphAddNode``: add a node described by a ``CUgraphNodeParams`` after ``deps``."""
    return handle_return(
        driver.cuGraphAddNode(graph, deps, None, len(deps), params), "cuGraphAddNode"
    )


def add_edges(graph: Any, src: list[Any], dst: list[Any]) -> None:
    """``cuGraphAddDependencies``: ``dst[i]`` depends on ``src[i]``."""
    if not src:
        return
    handle_return(
        driver.cuGraphAddDependencies(graph, src, dst, None, len(src)), "cuGraphAddDependencies"
    )


def remove_edges(graph: Any, src: list[Any], dst: list[Any]) -> None:
    """``cuGraphRemoveDependencies``: drop the edges ``src[i] -> dst[i]``."""
    if not src:
        return
    handle_return(
        driver.cuGraphRemoveDependencies(graph, src, dst, None, len(src)),
        "cuGraphRemoveDependencies",
    )


def edges(graph: Any) -> list[tuple[Any, Any]]:
    """Every edge of ``graph`` as ``(from, to)`` node handles."""
    n = handle_return(driver.cuGraphGetEdges(graph, 0), "cuGraphGetEdges")[-1]
    if not n:
        return []
    out = handle_return(driver.cuGraphGetEdges(graph, n), "cuGraphGetEdges")
    return list(zip(out[0][: out[-1]], out[1][: out[-1]]))


def nodes(graph: Any) -> list[Any]:
    """Every node handle of ``graph`` (not those inside child or body graphs)."""
    n = handle_return(driver.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")[-1]
    if not n:
        return []
    got, m = handle_return(driver.cuGraphGetNodes(graph, n), "cuGraphGetNodes")
    return list(got[:m])


def _adjacent(fn: Any, api: str, node: Any) -> list[Any]:
    n = handle_return(fn(node, 0), api)[-1]
    if not n:
        return []
    out = handle_return(fn(node, n), api)
    return list(out[0][: out[-1]])


def predecessors(node: Any) -> list[Any]:
    """The nodes ``node`` depends on."""
    return _adjacent(driver.cuGraphNodeGetDependencies, "cuGraphNodeGetDependencies", node)


def successors(node: Any) -> list[Any]:
    """The nodes that depend on ``node``."""
    return _adjacent(driver.cuGraphNodeGetDependentNodes, "cuGraphNodeGetDependentNodes", node)


def capture_info(stream: Any) -> tuple[Any, list[Any]]:
    """``(graph, dependencies)`` of a stream being captured (``cuStreamGetCaptureInfo``)."""
    out = handle_return(driver.cuStreamGetCaptureInfo(stream), "cuStreamGetCaptureInfo")
    n = out[-1]  # (status, id, graph, deps, edge data, n)
    return out[2], list(out[3][:n]) if n else []


def set_capture_dependencies(stream: Any, deps: list[Any]) -> None:
    """Make the next captured work on ``stream`` depend on exactly ``deps``."""
    r = driver.cuStreamUpdateCaptureDependencies(stream, deps, None, len(deps), _SET_DEPS)
    handle_return(r, "cuStreamUpdateCaptureDependencies")


def current_context(api: str) -> Any:
    """The current ``CUcontext``; a :class:`CUDAError` with the ``set_current()`` hint when none."""
    ctx = handle_return(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or not int(ctx):
        raise make_error(_NO_CONTEXT, api)
    return ctx


# ---------------------------------------------------------------------------------------------
# Whole-graph update. cuda.bindings returns no CUgraphExecUpdateResultInfo when the update fails,
# which is when its reason matters, so the driver entry point is called directly (CUDA 12.0 ABI:
# CUresult cuGraphExecUpdate(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*)).


class _UpdateResultInfo(ctypes.Structure):
    _fields_ = [
        ("result", ctypes.c_int),
        ("errorNode", ctypes.c_void_p),
        ("errorFromNode", ctypes.c_void_p),
    ]


_EXEC_UPDATE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(_UpdateResultInfo)
)
_exec_update_fn: list[Any] = []
_UPDATE_FAILURE = int(driver.CUresult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)

# Why the driver refused an update, by CUgraphExecUpdateResult name.
UPDATE_REASONS = {
    "CU_GRAPH_EXEC_UPDATE_ERROR": "the driver refused the update for a reason it does not name",
    "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED": "the source graph's nodes or edges differ from this graph's",
    "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED": "a node of the source graph is of another kind than this graph's",
    "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED": "a kernel node runs another function (drivers before 11.2)",
    "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED": "a node's parameters changed in a way an update cannot apply",
    "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED": "a node of the graph cannot be updated",
    "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE": "a kernel node's function changed in a way an update cannot apply",
    "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED": "a node's attributes changed in a way an update cannot apply",
}


def update_failure_text(result: int | None) -> str:
    """cuda.core's wording for a refused update: ``"Graph update failed: <why> (<result name>)"``."""
    try:
        name = driver.CUgraphExecUpdateResult(result).name
    except (TypeError, ValueError):
        name = (
            "CU_GRAPH_EXEC_UPDATE_ERROR" if result is None else f"CUgraphExecUpdateResult {result}"
        )
    why = UPDATE_REASONS.get(name, "the driver refused the update")
    return f"Graph update failed: {why} ({name})"


def exec_update(exe: Any, graph: Any) -> None:
    """``cuGraphExecUpdate``: give ``exe`` the node parameters of ``graph`` (same topology).

    A refusal raises ``CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`` as a :class:`CUDAError` whose
    message says why (:func:`update_failure_text`); ``exe`` is then unchanged.
    """
    if not _exec_update_fn:
        ensure_driver()
        addr = _backend.entry_point("cuGraphExecUpdate")
        _exec_update_fn.append(_EXEC_UPDATE(addr) if addr else None)
    fn = _exec_update_fn[0]
    result: int | None
    if fn is not None:
        info = _UpdateResultInfo()
        err = int(fn(int(exe), int(graph), ctypes.byref(info)))
        result = int(info.result)
    else:  # no entry point (never seen): the bindings' call, the reason unknown when it fails
        err_enum, out = driver.cuGraphExecUpdate(exe, graph)
        err = int(err_enum)
        result = None if out is None else int(out.result)
    if not err:
        return
    raise make_error(
        err, "cuGraphExecUpdate", update_failure_text(result) if err == _UPDATE_FAILURE else ""
    )
