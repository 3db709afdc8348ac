"""CUDA graphs by stream capture: GraphBuilder records work, Graph replays it.

A :class:`GraphBuilder` wraps a stream. Between :meth:`GraphBuilder.begin_building` and
:meth:`GraphBuilder.end_building`, work enqueued on the builder (it is accepted wherever a
stream is: ``launch``, copies, fills, allocations, host callbacks) is recorded instead of run.
:meth:`GraphBuilder.complete` instantiates the recording as an executable :class:`Graph`, which
:meth:`Graph.launch` replays on any stream with one driver call. Conditional bodies
(:meth:`GraphBuilder.if_then` and kin), forks (:meth:`GraphBuilder.split`) and child graphs
(:meth:`GraphBuilder.embed`) are added to the capture in progress.

:class:`Graph` is in :mod:`cuda_core.graph._exec_graph`, re-exported here. The explicit-graph
API (:mod:`cuda_core.graph._definition`) sits above this module: it registers the few things
builders and graphs hand out from it (:func:`register_explicit`).
"""

from __future__ import annotations

from typing import Any

from .. import _links
from .._compat import driver
from .._handles._owned import OwnedHandle
from .._host_callbacks import enqueue_host_callback
from .._utils import arg_error, check_or_create_options, handle_return, raise_status
from . import _driver as _gd
from ._builder_ops import CaptureOps
from ._exec_graph import Graph as Graph
from ._exec_graph import _explicit
from ._exec_graph import instantiate as instantiate
from ._exec_graph import register_explicit as register_explicit
from ._options import GraphCompleteOptions, GraphDebugPrintOptions

__all__ = ["Graph", "GraphBuilder"]

_MODES = {
    "global": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
    "thread_local": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    "relaxed": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED,
}
_SUCCESS = driver.CUresult.CUDA_SUCCESS


class _CapturedGraph:
    """Owns a builder's ``CUgraph`` (or borrows a body graph); shared with the builder's
    ``graph_definition`` views, so the graph lives until the builder and every view are gone."""

    __slots__ = ("__weakref__", "box")

    def __init__(self, handle: Any, owned: bool = True) -> None:
        self.box = OwnedHandle("graph", handle, driver.cuGraphDestroy if owned else None)


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
        "_ended",
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
    _ended: bool  # end_building() ran (a capture is never resumed, as in cuda.core)
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
            "directly creating a GraphBuilder object can be ambiguous. Please either call "
            "Device.create_graph_builder() or stream.create_graph_builder()"
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
        self._ended = False
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
        return None if self._graph is None else self._graph.box.value

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
        if self._building:
            raise RuntimeError(
                "graph_definition is not available while a capture is in progress: "
                "call end_building() first"
            )
        if self._graph is None:
            raise RuntimeError(
                "GraphBuilder has no graph before begin_building() and end_building(): "
                "graph_definition needs a finished graph"
                if not self._ended
                else "GraphBuilder has no graph: its capture failed at end_building()"
            )
        if self._view is None:
            self._view = _explicit["view"](self._graph.box.value, self._graph)
        return self._view

    def __cuda_stream__(self) -> tuple[int, int]:
        self._check_open()
        return (0, int(self._cuda_core_stream.handle))

    # ------------------------------------------------------------------ building

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Graph builder has been closed. Make a new one to build again")

    def _check_building(self, what: str, lead: str = "") -> Any:
        self._check_open()
        if not self._building:
            msg = f"{what} adds to the capture in progress: call begin_building() first"
            raise RuntimeError(f"{lead} {msg}" if lead else msg)
        return self._cuda_core_stream.handle

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
            raise RuntimeError("Graph builder is already building. Call end_building() first")
        if self._ended:
            raise RuntimeError(
                "Cannot resume building after building has ended. Capture again with a new "
                "GraphBuilder (Stream.create_graph_builder())"
            )
        if self._kind == "forked":
            raise RuntimeError(
                "a forked GraphBuilder is building from split() on; join() it instead"
            )
        h = self._cuda_core_stream.handle
        if self._kind == "body":
            box = self._graph.box  # type: ignore[union-attr]
            r = driver.cuStreamBeginCaptureToGraph(h, box.value, None, None, 0, cu_mode)
            handle_return(r, "cuStreamBeginCaptureToGraph")
        else:
            handle_return(driver.cuStreamBeginCapture(h, cu_mode), "cuStreamBeginCapture")
            self._root_key = int(_gd.capture_info(h)[0])
        self._building = True
        return self

    def end_building(self) -> GraphBuilder:
        """Stop capturing; the recorded work becomes this builder's graph.

        The stream leaves capture mode even when capture failed: then the driver's error (a
        :class:`CUDAError` such as ``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED``) is raised, the
        builder holds no graph (the driver discarded it) and the stream is usable again.

        Returns
        -------
        GraphBuilder
            ``self``.

        Raises
        ------
        RuntimeError
            Not building, or a forked builder (from :meth:`split`): forks end when they are
            :meth:`join`-ed (ending one here would invalidate the whole capture).
        CUDAError
            Capture was invalidated by an unsupported operation, or forks were not joined.
        """
        self._check_open()
        if self._kind == "forked":
            raise RuntimeError(
                "end_building() cannot end a forked GraphBuilder: join() it into the builder it "
                "was split from, which ends the capture"
            )
        if not self._building:
            raise RuntimeError("Graph builder is not building. Call begin_building() first")
        self._building = False
        self._ended = True
        try:
            graph = handle_return(
                driver.cuStreamEndCapture(self._cuda_core_stream.handle), "cuStreamEndCapture"
            )
        except BaseException:
            if self._kind == "primary":
                self._graph = None  # none to destroy: the driver discarded the capture's graph
                self._view = None
            raise
        finally:
            self._close_joined()
        if self._kind == "primary":
            self._graph = _CapturedGraph(graph)
            self._view = None
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
        self._check_building("callback()", "Cannot add callback when graph is not being built:")
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
                "Graph has not finished building. complete() needs a finished graph: call "
                "begin_building() and end_building() first"
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
        if self._building or self.handle is None:
            raise RuntimeError(
                "Graph has not finished building. debug_dot_print() needs a finished graph: "
                "call end_building() first"
            )
        dot_print(self.handle, path, opts)

    def _close_joined(self) -> None:
        streams, self._joined = self._joined, []
        for s in streams:
            s.close()

    def close(self) -> None:
        """Release the captured graph (kept while a :attr:`graph_definition` view lives); close
        the stream if the builder owns it. Idempotent.

        A capture still in progress is ended and discarded, so the stream is usable again
        (a forked builder's capture is its origin's: it is left to that one). Graphs already
        completed stay valid.

        Raises
        ------
        CUDAError
            The capture in progress had been invalidated (``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED``
            and kin, as ``cuStreamEndCapture`` reports): raised once the builder is closed.
        """
        if self._closed:
            return
        self._closed = True
        failed = None
        if self._building:
            self._building = False
            if self._kind != "forked":
                err, graph = driver.cuStreamEndCapture(self._cuda_core_stream.handle)
                if err != _SUCCESS:
                    failed = err  # the driver discarded the graph: nothing to destroy
                elif graph is not None and self._kind == "primary":
                    OwnedHandle("graph", graph, driver.cuGraphDestroy).release()
        self._graph = None
        self._view = None
        self._parent = None
        try:
            self._close_joined()
            if self._owns_stream:
                self._cuda_core_stream.close()
        finally:
            if failed is not None:
                raise_status(failed, "cuStreamEndCapture")

    def __enter__(self) -> GraphBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "building" if self._building else "idle"
        kind = "" if self._kind == "primary" else f" {self._kind}"
        return f"<GraphBuilder{kind} {state} on {self._cuda_core_stream!r}>"


_links.GraphBuilder = GraphBuilder  # batched copies refuse a builder as their stream
_links.graph_builder = lambda stream, owns: GraphBuilder._from_stream(stream, owns_stream=owns)
# (Device and Stream.create_graph_builder make one)
