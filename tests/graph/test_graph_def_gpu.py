"""Explicit graphs on a GPU: every node kind built, instantiated, launched and its effect read
back; in-place updates; each conditional kind on device data; GraphBuilder's conditionals and
graph views (the CPU tier's checks of the same API: test_graph_def.py)."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest

import cuda_core.graph as G
from cuda_core import CUDAError
from tests.graph.test_graph_def import KERNELS, N
from tests.helpers import settled_kept_callbacks


@pytest.fixture(scope="module")
def env(dev):
    from cuda_core import Program, ProgramOptions

    obj = Program(KERNELS, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )
    kernels = {k: obj.get_kernel(k) for k in ("add_one", "set_value", "set_cond", "countdown")}
    return dev, kernels, obj


def _cfg(n=N):
    from cuda_core import LaunchConfig

    return LaunchConfig(grid=(n + 127) // 128, block=128)


def _one():
    from cuda_core import LaunchConfig

    return LaunchConfig(grid=1, block=1)


def _read(buf, stream, dtype=np.int32):
    host = np.empty(buf.size // np.dtype(dtype).itemsize, dtype=dtype)
    buf.copy_to(host, stream=stream)
    stream.sync()
    return host


def _ints(dev, stream, value=0, n=N):
    buf = dev.allocate(n * 4, stream=stream)
    buf.fill(np.int32(value).tobytes(), stream=stream)
    stream.sync()
    return buf


def _wait(stream, timeout=20.0):
    from cuda.bindings import driver

    t0 = time.monotonic()
    while True:
        err = driver.cuStreamQuery(stream.handle)[0]
        if err == driver.CUresult.CUDA_SUCCESS:
            return
        assert err == driver.CUresult.CUDA_ERROR_NOT_READY, err
        assert time.monotonic() - t0 < 20, "stream did not finish"
        time.sleep(0.001)


@pytest.mark.gpu
def test_memset_kernel_memcpy_chain_and_structure(env):
    dev, k, _ = env
    s = dev.create_stream()
    buf, out = _ints(dev, s, 9), _ints(dev, s, -1)
    with G.GraphDefinition() as g:
        n1 = g.memset(buf, 0, N * 4)
        n2 = n1.launch(_cfg(), k["add_one"], buf, np.int32(N))
        n3 = n2.memcpy(out, buf, N * 4)
        assert (
            isinstance(n1, G.MemsetNode)
            and isinstance(n2, G.KernelNode)
            and isinstance(n3, G.MemcpyNode)
        )
        assert g.nodes() == {n1, n2, n3}
        assert g.edges() == {(n1, n2), (n2, n3)}
        assert set(n2.pred) == {n1} and set(n2.succ) == {n3} and n1 in n2.pred
        assert (
            n2.graph is g
            and n2.kernel is k["add_one"]
            and n2.grid == (2, 1, 1)
            and n2.block == (128, 1, 1)
        )
        assert (n1.dptr, n1.value, n1.element_size, n1.width) == (buf.handle, 0, 1, N * 4)
        assert (n3.dst, n3.src, n3.size) == (out.handle, buf.handle, N * 4)
        graph = g.instantiate()
    for _ in range(3):  # the memset resets each replay: the result does not accumulate
        graph.launch(s)
        assert (_read(out, s) == 1).all()
    graph.close()
    s.close()


@pytest.mark.gpu
def test_empty_join_and_edge_editing(env):
    dev, k, _ = env
    s = dev.create_stream()
    a, b = _ints(dev, s), _ints(dev, s)
    g = G.GraphDefinition()
    ka = g.launch(_cfg(), k["set_value"], a, np.int32(N), np.int32(3))
    kb = g.launch(_cfg(), k["set_value"], b, np.int32(N), np.int32(4))
    j = g.join(ka, kb)
    assert isinstance(j, G.EmptyNode) and set(j.pred) == {ka, kb}
    tail = j.launch(_cfg(), k["add_one"], a, np.int32(N))
    e = g.empty()
    assert isinstance(e, G.EmptyNode) and len(e.pred) == 0
    e.succ.add(ka)
    assert e in ka.pred and (e, ka) in g.edges()
    ka.pred.discard(e)
    assert e not in ka.pred
    tail.pred = [j, e]
    assert set(tail.pred) == {j, e}
    e.destroy()
    e.destroy()  # idempotent
    assert not e.is_valid and e not in g.nodes()
    assert set(tail.pred) == {j}
    graph = g.instantiate()
    graph.launch(s)
    assert (_read(a, s) == 4).all() and (_read(b, s) == 4).all()
    s.close()


@pytest.mark.gpu
def test_host_callback_node_runs_every_launch_and_is_released(env, monkeypatch):
    from cuda_core import _trampolines as _callback_table

    dev, _, _ = env
    s = dev.create_stream()
    calls = []
    before = settled_kept_callbacks()
    g = G.GraphDefinition()
    n = g.callback(lambda: calls.append("a"))
    assert isinstance(n, G.HostCallbackNode) and n.callback is not None
    n.callback  # noqa: B018
    graph = g.instantiate()
    del g, n  # the executable graph alone keeps the callback callable
    gc.collect()
    for _ in range(3):
        graph.launch(s)
    _wait(s)
    assert calls == ["a"] * 3
    graph.close()
    del graph
    gc.collect()
    t0 = time.monotonic()
    while _callback_table.pending_callbacks()[1] > before and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    assert _callback_table.pending_callbacks()[1] == before
    s.close()


@pytest.mark.gpu
def test_event_record_and_wait_nodes(env):
    dev, k, _ = env
    s, other = dev.create_stream(), dev.create_stream()
    buf = _ints(dev, s)
    ev_in, ev_out = dev.create_event(), dev.create_event()
    # another stream sets the buffer, then records ev_in; the graph waits for it
    from cuda_core import launch

    g = G.GraphDefinition()
    w = g.wait(ev_in)
    r = w.launch(_cfg(), k["add_one"], buf, np.int32(N)).record(ev_out)
    assert isinstance(w, G.EventWaitNode) and isinstance(r, G.EventRecordNode)
    assert w.event is ev_in and r.event is ev_out
    graph = g.instantiate()
    launch(other, _cfg(), k["set_value"], buf, np.int32(N), np.int32(10))
    other.record(ev_in)
    graph.launch(s)
    ev_out.sync()
    assert (_read(buf, s) == 11).all()
    s.close()
    other.close()


@pytest.mark.gpu
def test_child_graph_node(env):
    dev, k, _ = env
    s = dev.create_stream()
    buf = _ints(dev, s)
    child = G.GraphDefinition()
    child.launch(_cfg(), k["add_one"], buf, np.int32(N))
    parent = G.GraphDefinition()
    c1 = parent.embed(child)
    c2 = c1.embed(child)
    assert isinstance(c1, G.ChildGraphNode) and len(c1.child_graph.nodes()) == 1
    child.launch(_cfg(), k["add_one"], buf, np.int32(N))  # not seen by the clones
    graph = parent.instantiate()
    graph.launch(s)
    assert (_read(buf, s) == 2).all()
    with pytest.raises(TypeError, match="child must be a GraphDefinition"):
        parent.embed(graph)
    _ = c2
    s.close()


@pytest.mark.gpu
def test_alloc_and_free_nodes_inside_a_replayed_graph(env):
    dev, k, _ = env
    s = dev.create_stream()
    out = _ints(dev, s, -1)
    g = G.GraphDefinition()
    a = g.allocate(N * 4)
    assert isinstance(a, G.AllocNode) and a.bytesize == N * 4 and a.dptr != 0
    assert a.device_id == dev.device_id and a.memory_type == "device" and a.peer_access == ()
    m = a.launch(_cfg(), k["set_value"], a.dptr, np.int32(N), np.int32(42))
    c = m.memcpy(out, a.dptr, N * 4)
    f = c.deallocate(a.dptr)
    assert isinstance(f, G.FreeNode) and f.dptr == a.dptr
    graph = g.instantiate()
    for _ in range(3):  # allocated and freed inside every replay
        graph.launch(s)
        assert (_read(out, s) == 42).all()
    graph.close()
    s.close()


@pytest.mark.gpu
def test_executable_node_updates(env):
    dev, k, _ = env
    s = dev.create_stream()
    a, b = _ints(dev, s), _ints(dev, s)
    g = G.GraphDefinition()
    kn = g.launch(_cfg(), k["set_value"], a, np.int32(N), np.int32(1))
    ms = kn.memset(b, 5, N * 4)
    graph = g.instantiate()
    graph.launch(s)
    assert (_read(a, s) == 1).all() and (_read(b, s, np.uint8) == 5).all()
    ek, em = graph[kn], graph[ms]
    assert isinstance(ek, G.ExecutableKernelNode) and isinstance(em, G.ExecutableMemsetNode)
    ek.update(config=_cfg(), kernel=k["set_value"], args=(a, np.int32(N), np.int32(2)))
    em.update(dst=b, value=np.uint32(7), width=N)
    graph.launch(s)
    assert (_read(a, s) == 2).all() and (_read(b, s) == 7).all()
    assert ek.is_enabled
    ek.disable()
    assert not ek.is_enabled
    a.fill(np.int32(0).tobytes(), stream=s)
    graph.launch(s)
    assert (_read(a, s) == 0).all()
    ek.enable()
    graph.launch(s)
    assert (_read(a, s) == 2).all()
    # the definition still holds the original parameters
    graph2 = g.instantiate()
    graph2.launch(s)
    assert (_read(a, s) == 1).all()
    # definition-side update, then a fresh instantiation sees it
    kn.update(args=(a, np.int32(N), np.int32(9)))
    ms.update(value=3)
    assert ms.value == 3
    g.instantiate().launch(s)
    assert (_read(a, s) == 9).all() and (_read(b, s, np.uint8) == 3).all()
    with pytest.raises(TypeError, match="node must be a GraphNode"):
        graph["x"]
    s.close()


@pytest.mark.gpu
def test_graph_update_from_a_definition(env):
    dev, k, _ = env
    s = dev.create_stream()
    a = _ints(dev, s)

    def make(v):
        g = G.GraphDefinition()
        g.launch(_cfg(), k["set_value"], a, np.int32(N), np.int32(v))
        return g

    graph = make(1).instantiate()
    graph.update(make(6))
    graph.launch(s)
    assert (_read(a, s) == 6).all()
    s.close()


@pytest.mark.gpu
@pytest.mark.parametrize("value,expected", [(1, 7), (0, 0)])
def test_if_then_runs_its_body_only_when_true(env, value, expected):
    dev, k, _ = env
    s = dev.create_stream()
    out = _ints(dev, s)
    g = G.GraphDefinition()
    cond = g.create_condition(default_value=0)
    setter = g.launch(
        _one(), k["set_cond"], cond, np.uint32(value)
    )  # device code sets the condition
    node = setter.if_then(cond)
    assert isinstance(node, G.IfNode) and node.condition == cond and node.cond_type == "if"
    node.then.launch(_cfg(), k["set_value"], out, np.int32(N), np.int32(7))
    g.instantiate().launch(s)
    assert (_read(out, s) == expected).all()
    s.close()


@pytest.mark.gpu
@pytest.mark.parametrize("value,expected", [(1, 1), (0, 2)])
def test_if_else_picks_the_right_branch(env, value, expected):
    dev, k, _ = env
    s = dev.create_stream()
    out = _ints(dev, s)
    g = G.GraphDefinition()
    cond = g.create_condition(default_value=value)
    node = g.if_else(cond)
    assert isinstance(node, G.IfElseNode) and len(node.branches) == 2
    node.then.launch(_cfg(), k["set_value"], out, np.int32(N), np.int32(1))
    node.else_.launch(_cfg(), k["set_value"], out, np.int32(N), np.int32(2))
    g.instantiate().launch(s)
    assert (_read(out, s) == expected).all()
    s.close()


@pytest.mark.gpu
@pytest.mark.parametrize("value,expected", [(0, 10), (2, 12), (5, -1)])
def test_switch_runs_the_selected_case(env, value, expected):
    dev, k, _ = env
    s = dev.create_stream()
    out = _ints(dev, s, -1)
    g = G.GraphDefinition()
    cond = g.create_condition()
    node = g.launch(_one(), k["set_cond"], cond, np.uint32(value)).switch(cond, 3)
    assert isinstance(node, G.SwitchNode) and len(node.branches) == 3 and node.cond_type == "switch"
    for i, branch in enumerate(node.branches):
        branch.launch(_cfg(), k["set_value"], out, np.int32(N), np.int32(10 + i))
    g.instantiate().launch(s)
    assert (_read(out, s) == expected).all()
    s.close()


@pytest.mark.gpu
@pytest.mark.parametrize("count", [1, 5, 37])
def test_while_loop_counts_down_on_the_device(env, count):
    dev, k, _ = env
    s = dev.create_stream()
    counter, iters = _ints(dev, s, count, n=1), _ints(dev, s, 0, n=1)
    g = G.GraphDefinition()
    cond = g.create_condition(default_value=1)
    loop = g.while_loop(cond)
    assert isinstance(loop, G.WhileNode) and loop.cond_type == "while"
    loop.body.launch(_one(), k["countdown"], cond, counter, iters)
    graph = g.instantiate()
    graph.launch(s)
    assert _read(iters, s)[0] == count and _read(counter, s)[0] == 0
    s.close()


@pytest.mark.gpu
def test_misuse_errors(env):
    dev, k, _ = env
    g1, g2 = G.GraphDefinition(), G.GraphDefinition()
    n1, n2 = g1.empty(), g2.empty()
    with pytest.raises(ValueError, match="nodes must be a node of the same graph"):
        n1.join(n2)
    with pytest.raises(ValueError, match="same graph"):
        n1.succ.add(n2)
    with pytest.raises(TypeError, match="nodes must be a GraphNode"):
        g1.join("n")
    foreign = g2.create_condition(1)
    with pytest.raises(
        ValueError, match="condition must be a GraphCondition created in this graph"
    ):
        g1.if_then(foreign)
    # what cuda.core raises for both (the driver's CUDA_ERROR_INVALID_VALUE)
    with pytest.raises(CUDAError, match="created in this graph"):
        g1.if_then(foreign)
    with pytest.raises(CUDAError, match="count must be an integer >= 1"):
        g2.switch(foreign, 0)
    with pytest.raises(TypeError, match="expected GraphNode, got str"):
        n1.succ.add("not a node")
    with pytest.raises(TypeError, match="condition must be a GraphCondition"):
        g1.while_loop(1)
    with pytest.raises(TypeError, match="kernel must be a Kernel"):
        g1.launch(_cfg(), "add_one")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        g1.launch(_cfg(), k["add_one"], 0)
    with pytest.raises(ValueError, match="dst_owner must be None when dst is a Buffer"):
        buf = dev.allocate(16)
        g1.memset(buf, 0, 16, dst_owner=object())
    with pytest.raises(ValueError, match="memory_type must be one of"):
        g1.allocate(16, memory_type="texture")
    g1.close()
    assert not g1.is_valid and not n1.is_valid
    with pytest.raises(RuntimeError, match="closed"):
        g1.empty()


@pytest.mark.gpu
def test_a_node_has_one_wrapper_while_it_is_referenced(env):
    dev, k, _ = env
    s = dev.create_stream()
    a, b = _ints(dev, s), _ints(dev, s)
    g = G.GraphDefinition()
    first = g.launch(_cfg(), k["set_value"], a, np.int32(N), np.int32(1))
    second = first.launch(_cfg(), k["set_value"], b, np.int32(N), np.int32(2))
    last = g.launch(_cfg(), k["add_one"], a, np.int32(N))  # an entry node, wired below
    # every lookup returns the wrappers the builders returned
    assert sum(n is last for n in g.nodes()) == 1
    assert next(iter(first.succ)) is second and next(iter(second.pred)) is first
    assert [(x is first, y is second) for x, y in g.edges()] == [(True, True)]
    # the fan-in rewiring cuda.core's tests do: skipping the target by identity (a self edge
    # would be CUDA_ERROR_INVALID_VALUE)
    for n in g.nodes():
        if n is not last:
            n.succ.add(last)
    assert len(g.edges()) == 3 and set(last.pred) == {first, second}
    g.instantiate().launch(s)
    assert (_read(a, s) == 2).all() and (_read(b, s) == 2).all()
    # a wrapper nobody references is made again, equal to the old one
    key = int(second.handle)
    del second
    gc.collect()
    again = next(iter(first.succ - {last}))
    assert int(again.handle) == key and isinstance(again, G.KernelNode)
    again.destroy()
    assert again not in g.nodes() and len(g.edges()) == 1  # first -> last
    s.close()


@pytest.mark.gpu
def test_never_ending_while_graph_is_destroyed_safely(env):
    # Launching it would hang (the user's responsibility); building and destroying it is safe.
    g = G.GraphDefinition()
    cond = g.create_condition(default_value=1)
    g.while_loop(cond).body.empty()
    graph = g.instantiate()
    graph.close()
    g.close()
    del graph, g
    gc.collect()


@pytest.mark.gpu
def test_builder_while_loop_with_device_countdown(env):
    from cuda_core import launch

    dev, k, _ = env
    s = dev.create_stream()
    counter, iters = _ints(dev, s, 4, n=1), _ints(dev, s, 0, n=1)
    b = s.create_graph_builder().begin_building()
    cond = b.create_condition(default_value=1)
    body = b.while_loop(cond)
    body.begin_building()
    launch(body, _one(), k["countdown"], cond, counter, iters)
    body.end_building()
    b.end_building()
    graph = b.complete()
    graph.launch(s)
    assert _read(iters, s)[0] == 4 and _read(counter, s)[0] == 0
    body.close()
    b.close()
    s.close()


@pytest.mark.gpu
def test_builder_if_else_switch_split_join_embed(env):
    from cuda_core import launch

    dev, k, _ = env
    s = dev.create_stream()
    a, b2, c, d = _ints(dev, s), _ints(dev, s), _ints(dev, s), _ints(dev, s)
    child = s.create_graph_builder().begin_building()
    launch(
        child, _cfg(), k["add_one"], d, np.int32(N)
    )  # not c: the split's branches run concurrently
    child.end_building()
    b = s.create_graph_builder().begin_building()
    cond = b.create_condition(default_value=0)
    then, else_ = b.if_else(cond)
    then.graph_definition.launch(
        _cfg(), k["set_value"], a, np.int32(N), np.int32(1)
    )  # explicit API body
    else_.begin_building()
    launch(else_, _cfg(), k["set_value"], a, np.int32(N), np.int32(2))
    else_.end_building()
    sw = b.create_condition(default_value=1)
    cases = b.switch(sw, 2)
    for i, case in enumerate(cases):
        case.graph_definition.launch(_cfg(), k["set_value"], b2, np.int32(N), np.int32(20 + i))
    left, right = b.split(2)
    assert left is b and right.is_join_required
    launch(right, _cfg(), k["add_one"], c, np.int32(N))
    b.embed(child)
    assert G.GraphBuilder.join(left, right) is b and right.is_closed
    b.end_building()
    graph = b.complete()
    graph.launch(s)
    assert (_read(a, s) == 2).all() and (_read(b2, s) == 21).all()
    assert (_read(c, s) == 1).all() and (_read(d, s) == 1).all()
    s.close()


@pytest.mark.gpu
def test_builder_graph_definition_view(env):
    from cuda_core import launch

    dev, k, _ = env
    s = dev.create_stream()
    a = _ints(dev, s)
    b = s.create_graph_builder()
    with pytest.raises(RuntimeError, match="end_building"):
        b.graph_definition  # noqa: B018
    b.begin_building()
    launch(b, _cfg(), k["set_value"], a, np.int32(N), np.int32(5))
    b.end_building()
    view = b.graph_definition
    (captured,) = view.nodes()
    assert isinstance(captured, G.KernelNode)
    captured.launch(_cfg(), k["add_one"], a, np.int32(N))
    b.close()  # the view keeps the graph alive
    graph = view.instantiate()
    graph.launch(s)
    assert (_read(a, s) == 6).all()
    s.close()


@pytest.mark.gpu
def test_debug_dot_print(env, tmp_path):
    _, k, _ = env
    g = G.GraphDefinition()
    cond = g.create_condition(1)
    g.launch(_one(), k["set_cond"], cond, np.uint32(0)).if_then(cond).then.empty()
    path = tmp_path / "g.dot"
    g.debug_dot_print(str(path), G.GraphDebugPrintOptions(conditional_node_params=True))
    assert "digraph" in path.read_text()
