"""CUDA graphs by stream capture: GraphBuilder records work, Graph replays it.

A :class:`GraphBuilder` wraps a stream. Between :meth:`GraphBuilder.begin_building` and
:meth:`GraphBuilder.end_building`, work enqueued on the builder (it is accepted wherever a
stream is: ``launch``, copies, fills, allocations, host callbacks) is recorded instead of run.
:meth:`GraphBuilder.complete` instantiates the recording as an executable :class:`Graph`, which
:meth:`Graph.launch` replays on any stream with one driver call. Conditional bodies
(:meth:`GraphBuilder.if_then` and kin), forks (:meth:`GraphBuilder.split`) and child graphs
(:meth:`GraphBuilder.embed`) are added to the capture in progress.

The explicit-graph API (:mod:`cuda_core.graph._definition`) sits above this module: it registers the
few things builders and graphs hand out from it (:func:`register_explicit`).
"""

from __future__ import annotations

import weakref
from typing import Any

from .. import _links
from .._compat import driver
from .._handles._holder import HandleHolder
from .._host_callbacks import enqueue_host_callback
from .._utils import ValueRuntimeError, arg_error, check_or_create_options, handle_return
from . import _driver as _gd
from ._builder_ops import CaptureOps
from ._options import GraphCompleteOptions, GraphDebugPrintOptions

__all__ = ["Graph", "GraphBuilder"]

_MODES = {
    "global": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
    "thread_local": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    "relaxed": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED,
}
_SUCCESS = driver.CUresult.CUDA_SUCCESS

_explicit: dict[str, Any] = {}


def register_explicit(definition_cls: Any, builder_view: Any, executable_node: Any) -> None:
    """Called once by :mod:`cuda_core.graph._definition`: the classes the explicit API provides."""
    _explicit.update(definition=definition_cls, view=builder_view, node=executable_node)


def _no_destroy(handle: Any) -> None:
    """Destroy function of a graph owned elsewhere (a conditional body)."""


class _CapturedGraph:
    """Owns a builder's ``CUgraph`` (or borrows a body graph); shared with the builder's
    ``graph_definition`` views, so the graph lives until the builder and every view are gone."""

    __slots__ = ("__weakref__", "box")

    def __init__(self, handle: Any, owned: bool = True) -> None:
        self.box = HandleHolder(driver.cuGraphDestroy if owned else _no_destroy, handle)
        if owned:
            weakref.finalize(self, self.box.release)


def instantiate(graph: Any, opts: GraphCompleteOptions, keep: tuple[Any, ...] = ()) -> Graph:
    """``cuGraphInstantiate`` ``graph`` into a :class:`Graph` that keeps ``keep`` alive."""
    exe = handle_return(driver.cuGraphInstantiate(graph, opts._flags()), "cuGraphInstantiate")
    g = Graph._from_handle(exe)
    g._source = keep
    if opts.upload_stream is not None:
        g.upload(opts.upload_stream)
    return g


def dot_print(
    graph: Any, path: str, options: GraphDebugPrintOptions | dict[str, Any] | None
) -> None:
    """``cuGraphDebugDotPrint`` ``graph`` to ``path`` with ``options``' detail flags."""
    opts = check_or_create_options(GraphDebugPrintOptions, options, "options")
    handle_return(
        driver.cuGraphDebugDotPrint(graph, str(path).encode(), opts._flags()),
        "cuGraphDebugDotPrint",
    )


class GraphBuilder(CaptureOps):
    """A graph under construction by stream capture.

    Create one with :meth:`Stream.create_graph_builder` (captures on that stream) or
    :meth:`Device.create_graph_builder` (on a new stream of its own). The builder is accepted
    wherever a stream is; work enqueued on it while building is recorded, not executed.
    Captured work references memory without owning it: keep the buffers alive for as long as
    the graph may run. Host callbacks (:meth:`callback`) are the exception; the graph keeps them.
    Builders returned by :meth:`split` and by the conditional methods (:meth:`if_then`, ...)
    own a stream of their own, closed with the builder.

    Directly constructing a GraphBuilder is not supported.
    """

    __slots__ = (
        "__weakref__",
        "_building",
        "_closed",
        "_cuda_core_stream",
        "_graph",
        "_joined",
        "_kind",
        "_owns_stream",
        "_parent",
        "_root_key",
        "_view",
    )

    _graph: _CapturedGraph | None  # the finished graph (primary) or the body graph (body)
    _building: bool
    _closed: bool
    _cuda_core_stream: Any
    _owns_stream: bool
    _kind: str  # "primary", "forked" or "body"
    _parent: Any  # the builder a forked or body builder came from (kept alive)
    _root_key: int | None  # int() of the root captured graph, for condition checks
    _view: Any
    _joined: list[Any]  # streams of joined forks, closed with this builder

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # NotImplementedError (a RuntimeError) is what cuda.core raises here
        raise NotImplementedError(
            "GraphBuilder objects cannot be instantiated directly. Use Stream.create_graph_builder() "
            "or Device.create_graph_builder()"
        )

    @classmethod
    def _from_stream(
        cls,
        stream: Any,
        *,
        owns_stream: bool = False,
        kind: str = "primary",
        parent: Any = None,
        body: Any = None,
    ) -> GraphBuilder:
        self = object.__new__(cls)
        self._cuda_core_stream = stream
        self._owns_stream = owns_stream
        self._building = False
        self._closed = False
        self._kind = kind
        self._parent = parent
        self._root_key = None if parent is None else parent._root_key
        self._graph = None if body is None else _CapturedGraph(body, owned=False)
        self._view = None
        self._joined = []
        return self

    # ------------------------------------------------------------------ properties

    @property
    def stream(self) -> Any:
        """The :class:`Stream` the builder captures on (``RuntimeError`` once closed, as in cuda.core)."""
        self._check_open()
        return self._cuda_core_stream

    @property
    def handle(self) -> Any:
        """The captured ``CUgraph`` once :meth:`end_building` ran (a body builder: its body graph), else ``None``."""
        return None if self._graph is None else self._graph.box.handle

    @property
    def is_building(self) -> bool:
        """Whether capture is in progress (``RuntimeError`` once closed, as in cuda.core)."""
        self._check_open()
        return self._building

    @property
    def is_join_required(self) -> bool:
        """Whether this is a forked builder (from :meth:`split`) that must be joined (:meth:`join`)
        into its origin before the origin ends building."""
        return self._kind == "forked" and not self._closed

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    @property
    def graph_definition(self) -> Any:
        """The captured graph as a :class:`~cuda_core.graph.GraphDefinition` view.

        Nodes added through the view appear in later :meth:`complete` and
        :meth:`debug_dot_print` calls; the view keeps the graph alive after :meth:`close`.
        Available on a primary builder after :meth:`end_building`, on a conditional-body builder
        whenever it is not building, never on a forked builder.

        Raises
        ------
        RuntimeError
            Closed, forked, building, or (primary) not built yet.
        """
        self._check_open()
        if self._kind == "forked":
            raise RuntimeError(
                "a forked GraphBuilder has no graph of its own; use the builder it was split from"
            )
        if self._building or self._graph is None:
            raise RuntimeError("graph_definition needs a finished graph: call end_building() first")
        if self._view is None:
            self._view = _explicit["view"](self._graph.box.handle, self._graph)
        return self._view

    def __cuda_stream__(self) -> tuple[int, int]:
        self._check_open()
        return (0, int(self._cuda_core_stream._handle))

    # ------------------------------------------------------------------ building

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this GraphBuilder is closed")

    def _check_building(self, what: str) -> Any:
        self._check_open()
        if not self._building:
            raise RuntimeError(
                f"{what} adds to the capture in progress: call begin_building() first"
            )
        return self._cuda_core_stream._handle

    def begin_building(self, mode: str = "relaxed") -> GraphBuilder:
        """Start capturing the builder's stream.

        Parameters
        ----------
        mode : {"relaxed", "global", "thread_local"}
            Which potentially unsafe CUDA calls other code may make during capture:
            ``"global"`` forbids them in every thread, ``"thread_local"`` in this thread,
            ``"relaxed"`` (default) forbids nothing.

        Returns
        -------
        GraphBuilder
            ``self``.

        Raises
        ------
        ValueError
            Unknown ``mode``.
        RuntimeError
            Already building, closed, or a forked builder (it builds from :meth:`split` on).
        CUDAError
            The driver refused to start capture.
        """
        self._check_open()
        cu_mode = _MODES.get(mode) if isinstance(mode, str) else None
        if cu_mode is None:
            raise arg_error("mode", 'one of "relaxed", "global", "thread_local"', mode)
        if self._building:
            raise RuntimeError("this GraphBuilder is already building; call end_building() first")
        if self._kind == "forked":
            raise RuntimeError(
                "a forked GraphBuilder is building from split() on; join() it instead"
            )
        h = self._cuda_core_stream._handle
        if self._kind == "body":
            box = self._graph.box  # type: ignore[union-attr]
            r = driver.cuStreamBeginCaptureToGraph(h, box.handle, None, None, 0, cu_mode)
            handle_return(r, "cuStreamBeginCaptureToGraph")
        else:
            handle_return(driver.cuStreamBeginCapture(h, cu_mode), "cuStreamBeginCapture")
            self._root_key = int(_gd.capture_info(h)[0])
        self._building = True
        return self

    def end_building(self) -> GraphBuilder:
        """Stop capturing; the recorded work becomes this builder's graph.

        The stream leaves capture mode even when capture failed (then a :class:`CUDAError`
        such as ``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`` is raised and the stream is usable).

        Returns
        -------
        GraphBuilder
            ``self``.

        Raises
        ------
        RuntimeError
            Not building.
        CUDAError
            Capture was invalidated by an unsupported operation, or forks were not joined.
        """
        self._check_open()
        if not self._building:
            raise RuntimeError("this GraphBuilder is not building; call begin_building() first")
        self._building = False
        graph = handle_return(
            driver.cuStreamEndCapture(self._cuda_core_stream._handle), "cuStreamEndCapture"
        )
        if self._kind == "primary":
            self._graph = _CapturedGraph(graph)
            self._view = None
        self._close_joined()
        return self

    def callback(self, fn: Any, *, user_data: Any = None) -> None:
        """Record a host callback that runs at this point of every replay of the graph.

        As in ``cuda.core`` 1.2, ``fn`` is either a Python callable taking no arguments (bind
        state with a closure or ``functools.partial``; it runs with the GIL, and an exception
        it raises is reported through :func:`sys.unraisablehook`), or a ctypes function
        pointer declared ``ctypes.CFUNCTYPE(None, ctypes.c_void_p)``, which the driver calls
        with ``user_data`` as its ``void*``. Whichever it is (and bytes-like ``user_data``,
        copied) is kept alive as long as the graph and every Graph completed from it. A
        callback must not call CUDA.

        Parameters
        ----------
        fn : callable or ctypes function pointer
            The callback.
        user_data : int or bytes-like object, optional
            Only for a ctypes function pointer: an ``int`` is passed as the pointer (keep what
            it points to valid while the graph can run); bytes-like data is copied.

        Raises
        ------
        RuntimeError
            Not building.
        TypeError
            ``fn`` is neither callable nor a ctypes function pointer declared as ``CUhostFn``,
            or ``user_data`` is neither an int nor bytes-like.
        ValueError
            ``user_data`` is given with a Python callable.
        """
        self._check_building("callback()")
        enqueue_host_callback(self._cuda_core_stream, fn, user_data)

    # ------------------------------------------------------------------ results

    def complete(self, options: GraphCompleteOptions | dict[str, Any] | None = None) -> Graph:
        """Instantiate the captured graph as an executable :class:`Graph`.

        Parameters
        ----------
        options : GraphCompleteOptions or dict, optional
            Instantiation flags and an optional upload stream.

        Returns
        -------
        Graph

        Raises
        ------
        RuntimeError
            Building has not finished.
        CUDAError
            Instantiation failed.
        """
        self._check_open()
        opts = check_or_create_options(GraphCompleteOptions, options, "options")
        graph = self.handle
        if self._building or graph is None:
            raise RuntimeError(
                "complete() needs a finished graph: call begin_building() and end_building() first"
            )
        return instantiate(graph, opts, (self._graph, self._view))

    def debug_dot_print(
        self, path: str, options: GraphDebugPrintOptions | dict[str, Any] | None = None
    ) -> None:
        """Write the captured graph as a Graphviz DOT file.

        Parameters
        ----------
        path : str
            Output file.
        options : GraphDebugPrintOptions or dict, optional
            Extra detail to include.

        Raises
        ------
        RuntimeError
            Building has not finished.
        """
        self._check_open()
        opts = check_or_create_options(
            GraphDebugPrintOptions, options, "options"
        )  # before the state check, as ever
        if self.handle is None:
            raise RuntimeError(
                "debug_dot_print() needs a finished graph: call end_building() first"
            )
        dot_print(self.handle, path, opts)

    def _close_joined(self) -> None:
        streams, self._joined = self._joined, []
        for s in streams:
            s.close()

    def close(self) -> None:
        """Release the captured graph (kept while a :attr:`graph_definition` view lives); close
        the stream if the builder owns it. Idempotent.

        A capture still in progress is ended and discarded, so the stream is usable again.
        Graphs already completed stay valid.
        """
        if self._closed:
            return
        self._closed = True
        if self._building:
            self._building = False
            err, graph = driver.cuStreamEndCapture(self._cuda_core_stream._handle)
            if err == _SUCCESS and graph is not None and self._kind == "primary":
                HandleHolder(driver.cuGraphDestroy, graph).release()
        self._graph = None
        self._view = None
        self._parent = None
        self._close_joined()
        if self._owns_stream:
            self._cuda_core_stream.close()

    def __enter__(self) -> GraphBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "building" if self._building else "idle"
        kind = "" if self._kind == "primary" else f" {self._kind}"
        return f"<GraphBuilder{kind} {state} on {self._cuda_core_stream!r}>"


class Graph:
    """An executable graph, made by :meth:`GraphBuilder.complete` or :meth:`GraphDefinition.instantiate`.

    :meth:`launch` replays every recorded operation on a stream with one driver call. The
    graph owns its ``CUgraphExec`` (released by :meth:`close`, ``with``, or garbage
    collection). It keeps alive what a GraphDefinition retained for it (operands, callbacks);
    captured work references memory it does not own. ``graph[node]`` updates one node in place.
    """

    __slots__ = ("__weakref__", "_box", "_finalizer", "_handle", "_keep", "_launched", "_source")

    _box: HandleHolder  # the CUgraphExec
    _finalizer: weakref.finalize
    _handle: Any
    _keep: list[Any]  # operands given to single nodes (graph[node].update)
    _source: tuple[Any, ...]  # what the source graph's nodes use (its state); replaced by update()
    _launched: dict[int, Any]  # the streams launched on since the last update (handle -> Stream)

    def __init__(self) -> None:
        raise RuntimeError(
            "use GraphBuilder.complete() or GraphDefinition.instantiate() to make a Graph"
        )

    @classmethod
    def _from_handle(cls, exe: Any) -> Graph:
        self = object.__new__(cls)
        self._handle = exe
        self._box = HandleHolder(driver.cuGraphExecDestroy, exe)
        self._finalizer = weakref.finalize(self, self._box.release)
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
            raise RuntimeError("this Graph is closed")
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
            raise RuntimeError("this Graph is closed")
        s = _links.as_stream(stream)
        err = driver.cuGraphLaunch(h, s._handle)[0]
        if err:
            handle_return((err,), "cuGraphLaunch")
        self._launched[s._int] = s  # update() asks these whether earlier launches are done

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
            driver.cuGraphUpload(self._live(), _links.as_stream(stream)._handle), "cuGraphUpload"
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
            ``source`` is a builder that has not finished building (also a ``RuntimeError``).
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
        elif isinstance(source, GraphBuilder):
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
        if not all(
            int(driver.cuStreamQuery(st._handle)[0]) == _SUCCESS for st in launched.values()
        ):
            # A launch made before the update may still be running with the old source's
            # operands: they stay alive as long as this object (as every source used to).
            self._keep.append(old)

    def close(self) -> None:
        """Destroy the executable graph. Idempotent; work already launched completes."""
        if self._handle is None:
            return
        self._handle = None
        self._finalizer()

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<Graph closed>" if self._handle is None else f"<Graph {int(self._handle):#x}>"


_links.GraphBuilder = GraphBuilder  # batched copies refuse a builder as their stream
_links.graph_builder = lambda stream, owns: GraphBuilder._from_stream(stream, owns_stream=owns)
# (Device and Stream.create_graph_builder make one)
