"""The graph driver calls every graph module shares: add nodes and edges, walk the graph, and
read or set a capture's dependencies.

The calls are written in their ``cuda-bindings`` 13.x form (an edge-data argument, an edge-data
item in the results); :mod:`cuda_core._compat` gives them that form on 12.x too. All results go
through :func:`~cuda_core._utils.handle_return`.
"""

from __future__ import annotations

from typing import Any

from ._compat import driver
from ._utils import handle_return, make_error

__all__: list[str] = []  # private module

_SET_DEPS = driver.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
_NO_CONTEXT = driver.CUresult.CUDA_ERROR_INVALID_CONTEXT


def add_node(graph: Any, deps: list[Any], params: Any) -> Any:
    """``cuGraphAddNode``: add a node described by a ``CUgraphNodeParams`` after ``deps``."""
    return handle_return(driver.cuGraphAddNode(graph, deps, None, len(deps), params), "cuGraphAddNode")


def add_edges(graph: Any, src: list[Any], dst: list[Any]) -> None:
    """``cuGraphAddDependencies``: ``dst[i]`` depends on ``src[i]``."""
    if not src:
        return
    handle_return(driver.cuGraphAddDependencies(graph, src, dst, None, len(src)), "cuGraphAddDependencies")


def remove_edges(graph: Any, src: list[Any], dst: list[Any]) -> None:
    """``cuGraphRemoveDependencies``: drop the edges ``src[i] -> dst[i]``."""
    if not src:
        return
    handle_return(driver.cuGraphRemoveDependencies(graph, src, dst, None, len(src)), "cuGraphRemoveDependencies")


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
