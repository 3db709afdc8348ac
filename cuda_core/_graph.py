"""CUDA graphs by stream capture: GraphBuilder records work, Graph replays it.

A :class:`GraphBuilder` wraps a stream. Between :meth:`GraphBuilder.begin_building` and
:meth:`GraphBuilder.end_building`, work enqueued on the builder (it is accepted wherever a
stream is: ``launch``, copies, fills, allocations, host callbacks) is recorded instead of run.
:meth:`GraphBuilder.complete` instantiates the recording as an executable :class:`Graph`, which
:meth:`Graph.launch` replays on any stream with one driver call.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import Any

from cuda.bindings import driver

from ._holder import HandleHolder
from ._utils import arg_error, check_or_create_options, handle_return, make_error

__all__ = ["Graph", "GraphBuilder", "GraphCompleteOptions", "GraphDebugPrintOptions"]

_MODES = {
    "global": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
    "thread_local": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    "relaxed": driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED,
}
_F = driver.CUgraphInstantiate_flags
_SUCCESS = driver.CUresult.CUDA_SUCCESS

_as_stream_fn: Any = None


def _as_stream(obj: Any) -> Any:
    # Imported on first use: _stream imports this module for create_graph_builder().
    global _as_stream_fn
    if _as_stream_fn is None:
        from ._stream import as_stream

        _as_stream_fn = as_stream
    return _as_stream_fn(obj)


@dataclass
class GraphCompleteOptions:
    """Options for :meth:`GraphBuilder.complete`.

    Attributes
    ----------
    auto_free_on_launch : bool
        Free memory allocated inside the graph (and not freed there) before each relaunch.
    upload_stream : Stream, optional
        Upload the graph on this stream right after instantiation.
    device_launch : bool
        Make the graph launchable from device code; excludes ``auto_free_on_launch``.
    use_node_priority : bool
        Use each node's priority attribute instead of the launch stream's priority.
    """

    auto_free_on_launch: bool = False
    upload_stream: Any = None
    device_launch: bool = False
    use_node_priority: bool = False

    def __post_init__(self) -> None:
        for name in ("auto_free_on_launch", "device_launch", "use_node_priority"):
            setattr(self, name, bool(getattr(self, name)))  # any truth value, as in cuda.core
        if self.device_launch and self.auto_free_on_launch:
            raise ValueError("device_launch and auto_free_on_launch cannot both be True")

    def _flags(self) -> int:
        flags = 0
        if self.auto_free_on_launch:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
        if self.device_launch:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
        if self.use_node_priority:
            flags |= int(_F.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)
        return flags


@dataclass
class GraphDebugPrintOptions:
    """What :meth:`GraphBuilder.debug_dot_print` writes besides the graph's structure.

    Each field turns on the driver's ``CU_GRAPH_DEBUG_DOT_FLAGS_<FIELD NAME>`` flag (the fields
    and their order are cuda.core's).

    Attributes
    ----------
    verbose : bool
        Everything, as if every flag below were on.
    runtime_types : bool
        CUDA runtime structures instead of driver ones.
    kernel_node_params, memcpy_node_params, memset_node_params, host_node_params : bool
        Parameters of the nodes of each kind.
    event_node_params, ext_semas_signal_node_params, ext_semas_wait_node_params : bool
        Parameters of event and external-semaphore nodes.
    kernel_node_attributes : bool
        Kernel node attributes.
    handles : bool
        Node handles and kernel function handles.
    mem_alloc_node_params, mem_free_node_params, batch_mem_op_node_params : bool
        Parameters of memory allocation, free and batched memory-operation nodes.
    extra_topo_info : bool
        Edge numbering.
    conditional_node_params : bool
        Parameters of conditional nodes.
    """

    verbose: bool = False
    runtime_types: bool = False
    kernel_node_params: bool = False
    memcpy_node_params: bool = False
    memset_node_params: bool = False
    host_node_params: bool = False
    event_node_params: bool = False
    ext_semas_signal_node_params: bool = False
    ext_semas_wait_node_params: bool = False
    kernel_node_attributes: bool = False
    handles: bool = False
    mem_alloc_node_params: bool = False
    mem_free_node_params: bool = False
    batch_mem_op_node_params: bool = False
    extra_topo_info: bool = False
    conditional_node_params: bool = False

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, bool(getattr(self, f.name)))  # any truth value, as in cuda.core

    def _flags(self) -> int:
        flags = driver.CUgraphDebugDot_flags
        return sum(
            int(getattr(flags, f"CU_GRAPH_DEBUG_DOT_FLAGS_{f.name.upper()}"))
            for f in dataclasses.fields(self)
            if getattr(self, f.name)
        )


class GraphBuilder:
    """A graph under construction by stream capture.

    Create one with :meth:`Stream.create_graph_builder` (captures on that stream) or
    :meth:`Device.create_graph_builder` (on a new stream of its own). The builder is accepted
    wherever a stream is; work enqueued on it while building is recorded, not executed.
    Captured work references memory without owning it: keep the buffers alive for as long as
    the graph may run. Host callbacks (:meth:`callback`) are the exception; the graph keeps them.

    Directly constructing a GraphBuilder is not supported.
    """

    __slots__ = ("__weakref__", "_box", "_building", "_closed", "_cuda_core_stream", "_finalizer", "_owns_stream")

    _box: HandleHolder  # the captured CUgraph
    _building: bool
    _closed: bool
    _cuda_core_stream: Any
    _finalizer: weakref.finalize
    _owns_stream: bool

    def __init__(self) -> None:
        raise RuntimeError("use Stream.create_graph_builder() or Device.create_graph_builder() to make a GraphBuilder")

    @classmethod
    def _from_stream(cls, stream: Any, *, owns_stream: bool = False) -> GraphBuilder:
        self = object.__new__(cls)
        self._cuda_core_stream = stream
        self._owns_stream = owns_stream
        self._building = False
        self._closed = False
        self._box = HandleHolder(driver.cuGraphDestroy)
        self._finalizer = weakref.finalize(self, self._box.release)
        return self

    # ------------------------------------------------------------------ properties

    @property
    def stream(self) -> Any:
        """The :class:`Stream` the builder captures on (``RuntimeError`` once closed, as in cuda.core)."""
        self._check_open()
        return self._cuda_core_stream

    @property
    def handle(self) -> Any:
        """The captured ``CUgraph`` once :meth:`end_building` ran, else ``None``."""
        return self._box.handle

    @property
    def is_building(self) -> bool:
        """Whether capture is in progress (``RuntimeError`` once closed, as in cuda.core)."""
        self._check_open()
        return self._building

    @property
    def is_join_required(self) -> bool:
        """Always ``False``: this builder captures a single stream (no split branches)."""
        return False

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._closed

    def __cuda_stream__(self) -> tuple[int, int]:
        self._check_open()
        return (0, int(self._cuda_core_stream._handle))

    # ------------------------------------------------------------------ building

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this GraphBuilder is closed")

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
            Already building, or closed.
        CUDAError
            The driver refused to start capture.
        """
        self._check_open()
        cu_mode = _MODES.get(mode) if isinstance(mode, str) else None
        if cu_mode is None:
            raise arg_error("mode", 'one of "relaxed", "global", "thread_local"', mode)
        if self._building:
            raise RuntimeError("this GraphBuilder is already building; call end_building() first")
        handle_return(driver.cuStreamBeginCapture(self._cuda_core_stream._handle, cu_mode), "cuStreamBeginCapture")
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
            Capture was invalidated by an unsupported operation.
        """
        self._check_open()
        if not self._building:
            raise RuntimeError("this GraphBuilder is not building; call begin_building() first")
        self._building = False
        graph = handle_return(driver.cuStreamEndCapture(self._cuda_core_stream._handle), "cuStreamEndCapture")
        self._box.release()
        self._box.handle = graph
        return self

    def callback(self, fn: Any, *, user_data: Any = None) -> None:
        """Record a host callback: ``fn()`` (or ``fn(user_data)``) runs at this point of every replay.

        The callable is kept alive as long as the graph (and every Graph completed from it).
        It must not call CUDA; exceptions are reported via :func:`sys.unraisablehook`.

        Parameters
        ----------
        fn : callable
            The callback.
        user_data : object, optional
            Passed as the single argument when given.

        Raises
        ------
        RuntimeError
            Not building.
        """
        self._check_open()
        if not self._building:
            raise RuntimeError("callback() records into a graph: call begin_building() first")
        from ._callbacks import launch_host_func

        if user_data is None:
            launch_host_func(self._cuda_core_stream, fn)
        else:
            launch_host_func(self._cuda_core_stream, fn, user_data)

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
        graph = self._box.handle
        if self._building or graph is None:
            raise RuntimeError("complete() needs a finished graph: call begin_building() and end_building() first")
        exe = handle_return(driver.cuGraphInstantiate(graph, opts._flags()), "cuGraphInstantiate")
        g = Graph._from_handle(exe)
        if opts.upload_stream is not None:
            g.upload(opts.upload_stream)
        return g

    def debug_dot_print(self, path: str, options: GraphDebugPrintOptions | dict[str, Any] | None = None) -> None:
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
        opts = check_or_create_options(GraphDebugPrintOptions, options, "options")
        if self._box.handle is None:
            raise RuntimeError("debug_dot_print() needs a finished graph: call end_building() first")
        handle_return(
            driver.cuGraphDebugDotPrint(self._box.handle, str(path).encode(), opts._flags()), "cuGraphDebugDotPrint"
        )

    def close(self) -> None:
        """Destroy the captured graph; close the stream if the builder owns it. Idempotent.

        A capture still in progress is ended and discarded, so the stream is usable again.
        Graphs already completed stay valid.
        """
        if self._closed:
            return
        self._closed = True
        if self._building:
            self._building = False
            err, graph = driver.cuStreamEndCapture(self._cuda_core_stream._handle)
            if err == _SUCCESS and graph is not None:
                HandleHolder(driver.cuGraphDestroy, graph).release()
        self._finalizer()
        if self._owns_stream:
            self._cuda_core_stream.close()

    def __enter__(self) -> GraphBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "building" if self._building else "idle"
        return f"<GraphBuilder {state} on {self._cuda_core_stream!r}>"


class Graph:
    """An executable graph, made by :meth:`GraphBuilder.complete`.

    :meth:`launch` replays every recorded operation on a stream with one driver call. The
    graph owns its ``CUgraphExec`` (released by :meth:`close`, ``with``, or garbage
    collection); it does not own the memory its nodes reference.
    """

    __slots__ = ("__weakref__", "_box", "_finalizer", "_handle")

    _box: HandleHolder  # the CUgraphExec
    _finalizer: weakref.finalize
    _handle: Any

    def __init__(self) -> None:
        raise RuntimeError("use GraphBuilder.complete() to make a Graph")

    @classmethod
    def _from_handle(cls, exe: Any) -> Graph:
        self = object.__new__(cls)
        self._handle = exe
        self._box = HandleHolder(driver.cuGraphExecDestroy, exe)
        self._finalizer = weakref.finalize(self, self._box.release)
        return self

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
        stream : Stream or GraphBuilder or object with ``__cuda_stream__``
            Where to replay.

        Raises
        ------
        CUDAError
            The launch failed.
        """
        h = self._handle
        if h is None:
            raise RuntimeError("this Graph is closed")
        err = driver.cuGraphLaunch(h, _as_stream(stream)._handle)[0]
        if err:
            handle_return((err,), "cuGraphLaunch")

    def upload(self, stream: Any) -> None:
        """Upload the graph's device resources on ``stream`` ahead of its first launch.

        Parameters
        ----------
        stream : Stream or GraphBuilder or object with ``__cuda_stream__``
            Where to upload.

        Raises
        ------
        CUDAError
            The upload failed.
        """
        handle_return(driver.cuGraphUpload(self._live(), _as_stream(stream)._handle), "cuGraphUpload")

    def update(self, source: GraphBuilder) -> None:
        """Take new node parameters from a finished builder whose topology matches this graph.

        Kernel arguments, launch dimensions, copy and fill operands may change; node kinds,
        count and edges may not.

        Parameters
        ----------
        source : GraphBuilder
            A builder that finished building.

        Raises
        ------
        TypeError
            ``source`` is not a GraphBuilder.
        RuntimeError
            ``source`` has not finished building.
        CUDAError
            ``CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`` when the driver cannot apply the update
            (the message names the reason); the graph is unchanged.
        """
        exe = self._live()  # a closed graph is refused first, as in cuda.core
        if not isinstance(source, GraphBuilder):
            raise arg_error("source", "a GraphBuilder that finished building", source, exc=TypeError)
        graph = source._box.handle
        if graph is None or source._building:
            raise RuntimeError("update() needs a builder that finished building (call end_building())")
        err, info = driver.cuGraphExecUpdate(exe, graph)
        if err != _SUCCESS:
            reason = getattr(getattr(info, "result", None), "name", "")
            raise make_error(err, "cuGraphExecUpdate", f"the graph cannot be updated in place ({reason})")

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

