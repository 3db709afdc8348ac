"""GraphBuilder's operations on a capture in progress: conditionals, forks, child graphs.

:class:`CaptureOps` is the part of :class:`~cuda_core.GraphBuilder` that adds nodes to the graph
being captured with the driver's graph calls (``cuStreamGetCaptureInfo``, ``cuGraphAddNode``,
``cuStreamUpdateCaptureDependencies``), and that makes the builders of conditional bodies
(capturing into the body graph with ``cuStreamBeginCaptureToGraph``) and of forks.
"""

from __future__ import annotations

from typing import Any

from .._compat import driver
from .._utils import ValueRuntimeError, arg_error, check_int, handle_return
from .._utils._renamed import renamed_method
from . import _driver as _gd
from ._condition import GraphCondition, check_branch_count, check_condition

__all__: list[str] = []  # mixed into GraphBuilder

_COND = driver.CUgraphConditionalNodeType


class CaptureOps:
    """Mixin of :class:`~cuda_core.GraphBuilder` (see there); needs its attributes."""

    __slots__ = ()

    _building: bool
    _closed: bool
    _cuda_core_stream: Any
    _graph: Any
    _kind: str
    _owns_stream: bool
    _root_key: int | None
    _joined: list[Any]

    def _check_building(self, what: str, lead: str = "") -> Any:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    @property
    def handle(self) -> Any:
        raise NotImplementedError

    def create_condition(self, default_value: int | None = None) -> GraphCondition:
        """Create a condition in the graph being captured, for :meth:`if_then` and kin.

        Parameters
        ----------
        default_value : int, optional
            Value at the start of every launch; without one the condition keeps what device
            code last set.

        Returns
        -------
        GraphCondition

        Raises
        ------
        RuntimeError
            Not building.
        """
        h = self._check_building(
            "create_condition()", "Cannot create a condition when graph is not being built:"
        )
        graph = _gd.capture_info(h)[0]
        return GraphCondition._create(graph, self._root_key or int(graph), default_value)

    def _conditional(self, condition: Any, ctype: Any, size: int, what: str) -> tuple[Any, ...]:
        if not isinstance(condition, GraphCondition):  # checked first, as in cuda.core
            check_condition(condition, 0)
        h = self._check_building(what, "Cannot add conditional node when not actively capturing:")
        cond = check_condition(condition, self._root_key or 0)
        graph, deps = _gd.capture_info(h)
        params = driver.CUgraphNodeParams()
        params.type = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle = cond.handle
        params.conditional.type = ctype
        params.conditional.size = size
        params.conditional.ctx = _gd.current_context("cuGraphAddNode")
        node = _gd.add_node(graph, deps, params)
        _gd.set_capture_dependencies(h, [node])
        bodies = list(params.conditional.phGraph_out)[:size]
        dev = self._cuda_core_stream.device
        factory: Any = type(self)
        return tuple(
            factory._from_stream(
                dev.create_stream(), owns_stream=True, kind="body", parent=self, body=b
            )
            for b in bodies
        )

    def if_then(self, condition: GraphCondition) -> Any:
        """Add an *if* node to the capture; returns the builder of its body.

        The body runs when ``condition`` is non-zero. Later work on this builder runs after the
        conditional node. Build the body with ``begin_building()``/``end_building()`` on the
        returned builder (or through its :attr:`graph_definition`).

        Returns
        -------
        GraphBuilder

        Raises
        ------
        RuntimeError
            Not building.
        TypeError, ValueError
            ``condition`` is not a GraphCondition of this graph.
        """
        return self._conditional(condition, _COND.CU_GRAPH_COND_TYPE_IF, 1, "if_then()")[0]

    def if_else(self, condition: GraphCondition) -> tuple[Any, Any]:
        """Add an *if/else* node; returns the builders of the *then* and *else* bodies (CUDA 12.8+)."""
        then, else_ = self._conditional(condition, _COND.CU_GRAPH_COND_TYPE_IF, 2, "if_else()")
        return then, else_

    def switch(self, condition: GraphCondition, count: int) -> tuple[Any, ...]:
        """Add a *switch* node with ``count`` cases; returns one body builder per case (CUDA 12.8+).

        Case ``i`` runs when ``condition == i``; no case runs for other values.
        """
        n = check_branch_count(count)
        return self._conditional(condition, _COND.CU_GRAPH_COND_TYPE_SWITCH, n, "switch()")

    def while_loop(self, condition: GraphCondition) -> Any:
        """Add a *while* node; returns the builder of its body, run while ``condition`` is non-zero.

        The body must eventually set the condition to zero (``cudaGraphSetConditional``); a
        loop that never does hangs the stream (your responsibility).
        """
        return self._conditional(condition, _COND.CU_GRAPH_COND_TYPE_WHILE, 1, "while_loop()")[0]

    def split(self, count: int) -> tuple[Any, ...]:
        """Fork the capture into ``count`` builders that each depend on the work so far.

        The first is this builder; the others capture on new streams and must be
        :meth:`join`-ed back before this builder ends building.

        Returns
        -------
        tuple of GraphBuilder

        Raises
        ------
        RuntimeError
            Not building.
        ValueError
            ``count`` < 2 (``"Invalid split count: expecting >= 2, got 1"``, as in cuda.core).
        """
        n = check_int("count", count)
        if n < 2:
            raise arg_error(
                "count",
                "an integer >= 2",
                count,
                "the first builder returned is this one, so fewer is no split",
                lead=f"Invalid split count: expecting >= 2, got {n}",
            )
        h = self._check_building(
            "split()", "Graph builder must be building before it can be split."
        )
        dev = self._cuda_core_stream.device
        factory: Any = type(self)
        forks: list[Any] = [self]
        for _ in range(n - 1):
            s = dev.create_stream()
            s.wait(self._cuda_core_stream)
            b = factory._from_stream(s, owns_stream=True, kind="forked", parent=self)
            b._building = True
            forks.append(b)
        _ = h
        return tuple(forks)

    @staticmethod
    def join(*graph_builders: Any) -> Any:
        """Join builders from :meth:`split`: returns the one that continues, depending on all.

        The primary (non-forked) builder among them continues (else the first); the others
        are closed. When joining fails partway, the forks not joined yet are closed before the
        error propagates.

        Raises
        ------
        TypeError
            An argument is not a GraphBuilder.
        ValueError
            Fewer than two builders.
        """
        for b in graph_builders:
            if not isinstance(b, CaptureOps):
                raise arg_error(
                    "graph_builders",
                    "GraphBuilders",
                    b,
                    exc=TypeError,
                    lead="All arguments must be GraphBuilder instances",
                )
        if len(graph_builders) < 2:
            raise arg_error(
                "graph_builders",
                "at least two GraphBuilders",
                graph_builders,
                lead="Must join with at least two graph builders",
            )
        for b in graph_builders:
            b._check_building("join()")
        keep = next((b for b in graph_builders if b._kind != "forked"), graph_builders[0])
        try:
            for b in graph_builders:
                if b is keep:
                    continue
                keep._cuda_core_stream.wait(b._cuda_core_stream)
                b._building = False
                b._closed = True
                if b._owns_stream:
                    keep._joined.append(b._cuda_core_stream)
        except BaseException as exc:
            # The forks not joined are closed before the error propagates: a fork left
            # capturing on its own stream is never ended otherwise.
            for b in graph_builders:
                if b is not keep and b._kind == "forked" and not b._closed:
                    try:
                        b.close()  # type: ignore[attr-defined]
                    except Exception as inner:
                        exc.add_note(f"closing a fork that was not joined also failed: {inner}")
            raise
        return keep

    # The names of cuda.core before 1.0, each with a DeprecationWarning naming the current one.
    # create_conditional_handle returned the raw CUgraphConditionalHandle there; the
    # GraphCondition it returns here goes wherever that handle went (if_then and the other
    # conditionals, a kernel argument).
    add_child = renamed_method("GraphBuilder", "add_child", "embed")
    create_conditional_handle = renamed_method(
        "GraphBuilder", "create_conditional_handle", "create_condition"
    )
    if_cond = renamed_method("GraphBuilder", "if_cond", "if_then")

    def embed(self, child: Any) -> None:
        """Add the finished graph of ``child`` to the capture as a child-graph node (a clone).

        Raises
        ------
        TypeError
            ``child`` is not a GraphBuilder.
        RuntimeError
            This builder is not building, or ``child`` has not finished building (also a
            ``ValueError``, the class ``cuda.core`` raises for both).
        """
        if not isinstance(child, CaptureOps):
            raise arg_error("child", "a GraphBuilder that finished building", child, exc=TypeError)
        if child.handle is None or child._building:
            # cuda.core's ValueError; a RuntimeError as we raised before
            raise ValueRuntimeError(
                "Child graph has not finished building. embed() needs a child builder that "
                "finished building (call end_building())"
            )
        if not self._building:
            self._check_open()
            raise ValueRuntimeError(
                "Parent graph is not being built. embed() adds to the capture in progress: "
                "call begin_building() first"
            )
        h = self._check_building("embed()")
        graph, deps = _gd.capture_info(h)
        node = handle_return(
            driver.cuGraphAddChildGraphNode(graph, deps, len(deps), child.handle),
            "cuGraphAddChildGraphNode",
        )
        _gd.set_capture_dependencies(h, [node])
