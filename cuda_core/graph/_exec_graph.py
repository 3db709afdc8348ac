"""Graph: an executable CUDA graph (``CUgraphExec``) and its instantiation from a ``CUgraph``.

:meth:`Graph.launch` replays the graph on a stream; :meth:`Graph.update` takes new node
parameters from a GraphBuilder or a GraphDefinition of the same topology. The explicit-graph API
(:mod:`cuda_core.graph._definition`) sits above this module and registers what graphs and
builders hand out from it (:func:`register_explicit`).
"""

from __future__ import annotations

from typing import Any

from .. import _links
from .._compat import driver
from .._handles._owned import OwnedHandle
from .._utils import ValueRuntimeError, arg_error, handle_return
from . import _driver as _gd
from ._builder_ops import CaptureOps
from ._options import GraphCompleteOptions

__all__ = ["Graph"]

_SUCCESS = driver.CUresult.CUDA_SUCCESS

_explicit: dict[str, Any] = {}


def register_explicit(definition_cls: Any, builder_view: Any, executable_node: Any) -> None:
    """Called once by :mod:`cuda_core.graph._definition`: the classes the explicit API provides."""
    _explicit.update(definition=definition_cls, view=builder_view, node=executable_node)


def instantiate(graph: Any, opts: GraphCompleteOptions, keep: tuple[Any, ...] = ()) -> Graph:
    """``cuGraphInstantiate`` ``graph`` into a :class:`Graph` that keeps ``keep`` alive."""
    exe = handle_return(driver.cuGraphInstantiate(graph, opts._flags()), "cuGraphInstantiate")
    g = Graph._from_handle(exe)
    g._source = keep
    if opts.upload_stream is not None:
        g.upload(opts.upload_stream)
    return g


class Graph:
    """An executable graph, made by :meth:`GraphBuilder.complete` or :meth:`GraphDefinition.instantiate`.

    :meth:`launch` replays every recorded operation on a stream with one driver call. The
    graph owns its ``CUgraphExec`` (released by :meth:`close`, ``with``, or garbage
    collection). It keeps alive what a GraphDefinition retained for it (operands, callbacks);
    captured work references memory it does not own. ``graph[node]`` updates one node in place.
    """

    __slots__ = ("__weakref__", "_box", "_handle", "_keep", "_launched", "_source")

    _box: OwnedHandle  # owns the CUgraphExec
    _handle: Any
    _keep: list[Any]  # operands given to single nodes (graph[node].update)
    _source: tuple[Any, ...]  # what the source graph's nodes use (its state); replaced by update()
    _launched: dict[int, Any]  # the streams launched on since the last update (handle -> Stream)

    def __init__(self) -> None:
        raise RuntimeError(
            "directly constructing a Graph instance is not supported; use "
            "GraphBuilder.complete() or GraphDefinition.instantiate() to make a Graph"
        )

    @classmethod
    def _from_handle(cls, exe: Any) -> Graph:
        self = object.__new__(cls)
        self._handle = exe
        self._box = OwnedHandle("graph exec", exe, driver.cuGraphExecDestroy)
        self._keep = []
        self._source = ()
        self._launched = {}
        return self

    def __getitem__(self, node: Any) -> Any:
        """A view of ``node`` (a node of the definition this graph came from) for updating it.

        ``graph[node].update(...)`` changes the node's parameters for future launches of this
        graph; kernel, memset and memcpy views can also ``disable()``/``enable()`` the node.

        Returns
        -------
        ExecutableGraphNode
            The subclass that fits the node's kind.

        Raises
        ------
        TypeError
            ``node`` is not a GraphNode.
        """
        self._live()
        return _explicit["node"](self, node)

    @property
    def handle(self) -> Any:
        """The ``CUgraphExec`` (``int(graph.handle)`` is its address); ``CUgraphExec(0)`` once
        closed, as in ``cuda.core``."""
        h = self._handle
        return driver.CUgraphExec(0) if h is None else h

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._handle is None

    def _live(self) -> Any:
        h = self._handle
        if h is None:
            raise RuntimeError("Graph has been closed")
        return h

    def launch(self, stream: Any) -> None:
        """Replay the graph on ``stream`` (asynchronously, ordered after the stream's work).

        Parameters
        ----------
        stream : Stream or GraphBuilder or IsStreamType
            Where to replay.

        Raises
        ------
        CUDAError
            The launch failed.
        """
        h = self._handle
        if h is None:
            raise RuntimeError("Graph has been closed")
        s = _links.as_stream(stream)
        err = driver.cuGraphLaunch(h, s.handle)[0]
        if err:
            handle_return((err,), "cuGraphLaunch")
        self._launched[s._h.address] = s  # update() asks these whether earlier launches are done

    def upload(self, stream: Any) -> None:
        """Upload the graph's device resources on ``stream`` ahead of its first launch.

        Parameters
        ----------
        stream : Stream or GraphBuilder or IsStreamType
            Where to upload.

        Raises
        ------
        CUDAError
            The upload failed.
        """
        handle_return(
            driver.cuGraphUpload(self._live(), _links.as_stream(stream).handle), "cuGraphUpload"
        )

    def update(self, source: Any) -> None:
        """Take new node parameters from a graph whose topology matches this one.

        Kernel arguments, launch dimensions, copy and fill operands may change; node kinds,
        count and edges may not. After a successful update this graph keeps what ``source``
        retains (a definition's operands and host callbacks). What the graph it came from
        retained is let go at once when every stream this graph was launched on since the
        last update is idle; otherwise it is kept as long as this graph object lives, so a launch
        still running never loses its operands.

        Parameters
        ----------
        source : GraphBuilder or GraphDefinition
            A builder that finished building, or a definition.

        Raises
        ------
        TypeError
            ``source`` is neither.
        ValueError
            ``source`` is a builder that has not finished building or has been closed (also a
            ``RuntimeError``).
        CUDAError
            ``CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`` when the driver cannot apply the update;
            the message says why, as ``cuda.core``'s does (``"Graph update failed: ...
            (CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)"``). The graph is unchanged.
        """
        exe = self._live()  # a closed graph is refused first, as in cuda.core
        definition = _explicit.get("definition")
        if definition is not None and isinstance(source, definition):
            graph = source._live()
            keep: Any = source._state
        elif isinstance(source, CaptureOps):  # a GraphBuilder (CaptureOps is its mixin)
            if source._closed:
                raise ValueRuntimeError(
                    "Source graph builder has been closed. update() needs a builder that "
                    "finished building and is still open"
                )
            graph = source.handle
            keep = source._graph
            if graph is None or source._building:
                # cuda.core's wording and class (ValueError); a RuntimeError as we raised before
                raise ValueRuntimeError(
                    "Graph has not finished building: update() needs a builder that finished "
                    "building (call end_building())"
                )
        else:
            err = arg_error(
                "source",
                "a GraphBuilder that finished building or a GraphDefinition",
                source,
                exc=TypeError,
            )
            raise TypeError(
                f"expected GraphBuilder or GraphDefinition, got {type(source).__name__}: {err}"
            )
        _gd.exec_update(exe, graph)
        old, self._source = self._source, (keep,)
        launched, self._launched = self._launched, {}
        if not all(int(driver.cuStreamQuery(st.handle)[0]) == _SUCCESS for st in launched.values()):
            # A launch made before the update may still be running with the old source's
            # operands: they stay alive as long as this object (as every source used to).
            self._keep.append(old)

    def close(self) -> None:
        """Destroy the executable graph. Idempotent; work already launched completes."""
        if self._handle is None:
            return
        self._handle = None
        self._box.release()

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<Graph closed>" if self._handle is None else f"<Graph {int(self._handle):#x}>"
