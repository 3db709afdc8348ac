"""CUDA graphs: capture, replay, update, host callbacks (GPU tier), options (CPU tier)."""

from __future__ import annotations

import functools
import gc
import sys
import time

import numpy as np
import pytest

from cuda_core.graph._builder import Graph, GraphBuilder, GraphCompleteOptions
from tests.helpers import settled_kept_callbacks

KERNELS = r"""
extern "C" __global__ void add_one(int* a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1;
}
extern "C" __global__ void set_value(int* a, int n, int v)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = v;
}
extern "C" __global__ void empty_kernel() {}
"""
N = 256


# --------------------------------------------------------------------------------------------
# CPU tier


def test_direct_construction_names_the_factory():
    with pytest.raises(RuntimeError, match="create_graph_builder"):
        GraphBuilder()
    with pytest.raises(RuntimeError, match="complete"):
        Graph()


def test_complete_options_validation():
    assert GraphCompleteOptions()._flags() == 0
    assert GraphCompleteOptions(auto_free_on_launch=True, use_node_priority=True)._flags() == 1 | 8
    assert GraphCompleteOptions(device_launch=True)._flags() == 4
    with pytest.raises(ValueError, match="cannot both"):
        GraphCompleteOptions(device_launch=True, auto_free_on_launch=True)
    # Any truth value, as cuda.core takes it (normalised to bool here).
    assert GraphCompleteOptions(auto_free_on_launch=1).auto_free_on_launch is True
    assert GraphCompleteOptions(use_node_priority=None)._flags() == 0


def test_public_names():
    import cuda_core

    for name in ("Graph", "GraphBuilder", "GraphCompleteOptions", "GraphDebugPrintOptions"):
        assert getattr(cuda_core, name) is getattr(sys.modules["cuda_core.graph._builder"], name)


# --------------------------------------------------------------------------------------------
# GPU tier


@pytest.fixture(scope="module")
def env():
    from cuda_core import Device, Program, ProgramOptions

    dev = Device()
    dev.set_current()
    obj = Program(KERNELS, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )
    kernels = {k: obj.get_kernel(k) for k in ("add_one", "set_value", "empty_kernel")}
    return dev, kernels, obj


def _cfg():
    from cuda_core import LaunchConfig

    return LaunchConfig(grid=(N + 127) // 128, block=128)


def _read(buf, stream):
    host = np.empty(buf.size // 4, dtype=np.int32)
    buf.copy_to(host, stream=stream)
    stream.sync()
    return host


def _zeros(dev, stream):
    """A device buffer of N int32 zeros (allocated and filled on ``stream``)."""
    buf = dev.allocate(N * 4, stream=stream)
    buf.fill(0, stream=stream)
    return buf


def _record(stream, kernel, *args, times=1):
    """A new builder on ``stream`` that captured ``times`` launches of ``kernel(*args)``, finished."""
    from cuda_core import launch

    b = stream.create_graph_builder().begin_building()
    for _ in range(times):
        launch(b, _cfg(), kernel, *args)
    return b.end_building()


def _wait(stream, timeout=20.0):
    """Wait for the stream by polling (host callbacks need the GIL while we wait)."""
    from cuda.bindings import driver

    t0 = time.monotonic()
    while True:
        err = driver.cuStreamQuery(stream.handle)[0]
        if err == driver.CUresult.CUDA_SUCCESS:
            return
        assert err == driver.CUresult.CUDA_ERROR_NOT_READY, err
        assert time.monotonic() - t0 < timeout, "stream did not finish"
        time.sleep(0.001)


@pytest.mark.gpu
def test_capture_does_not_run_and_replay_reproduces(env):
    from cuda_core import launch

    dev, k, _ = env
    s = dev.create_stream()
    buf = _zeros(dev, s)
    s.sync()
    b = s.create_graph_builder()
    assert b.stream is s and not b.is_building
    b.begin_building()
    assert b.is_building
    for _ in range(3):
        launch(b, _cfg(), k["add_one"], buf, np.int32(N))
    b.end_building()
    assert (_read(buf, s) == 0).all()  # captured, not executed
    g = b.complete()
    g.launch(s)
    assert (_read(buf, s) == 3).all()
    g.launch(s)
    g.launch(s)
    assert (_read(buf, s) == 9).all()
    # direct launches give the same result as the replay
    for _ in range(3):
        launch(s, _cfg(), k["add_one"], buf, np.int32(N))
    assert (_read(buf, s) == 12).all()
    g.close()
    g.close()
    assert g.is_closed
    with pytest.raises(RuntimeError, match="closed"):
        g.launch(s)
    b.close()
    assert b.is_closed
    buf.close(s)
    s.close()


@pytest.mark.gpu
def test_builder_is_a_stream_for_fill_copy_and_upload(env):
    dev, _, _ = env
    s = dev.create_stream()
    src = dev.allocate(N * 4, stream=s)
    dst = _zeros(dev, s)
    with dev.create_graph_builder() as b:
        b.begin_building(mode="thread_local")
        src.fill(np.int32(7).tobytes(), stream=b)
        src.copy_to(dst, stream=b)
        b.end_building()
        g = b.complete(GraphCompleteOptions(upload_stream=s))
    assert (_read(dst, s) == 0).all()
    with g:
        g.upload(s)
        g.launch(s)
        assert (_read(dst, s) == 7).all()
    assert g.is_closed
    src.close(s)
    dst.close(s)
    s.close()


@pytest.mark.gpu
def test_update_in_place_and_refused_on_topology_change(env):
    from cuda_core import CUDAError

    dev, k, _ = env
    s = dev.create_stream()
    a = dev.allocate(N * 4, stream=s)
    other = dev.allocate(N * 4, stream=s)
    b1 = _record(s, k["set_value"], a, np.int32(N), np.int32(1))
    g = b1.complete()
    g.launch(s)
    assert (_read(a, s) == 1).all()
    b2 = _record(s, k["set_value"], other, np.int32(N), np.int32(2))
    g.update(b2)
    g.launch(s)
    assert (_read(other, s) == 2).all()
    assert (_read(a, s) == 1).all()
    b3 = _record(s, k["set_value"], a, np.int32(N), np.int32(3), times=2)
    # cuda.core's wording names the reason
    topology = r"^cuGraphExecUpdate: .*Graph update failed: .+ \(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED\)"
    with pytest.raises(CUDAError, match=topology):
        g.update(b3)
    g.launch(s)  # unchanged by the refused update
    s.sync()
    with pytest.raises(TypeError, match="expected GraphBuilder or GraphDefinition, got object"):
        g.update(object())
    unfinished = s.create_graph_builder()
    with pytest.raises(RuntimeError, match="finished"):
        g.update(unfinished)
    with pytest.raises(ValueError, match="Graph has not finished building"):  # cuda.core's class
        g.update(unfinished)
    unfinished.begin_building()
    with pytest.raises(ValueError, match="Graph has not finished building"):
        g.update(unfinished)
    unfinished.end_building()
    for x in (b1, b2, b3, unfinished, g):
        x.close()
    a.close(s)
    other.close(s)
    s.close()


@pytest.mark.gpu
def test_thousand_kernel_graph(env):
    dev, k, _ = env
    s = dev.create_stream()
    buf = _zeros(dev, s)
    b = _record(s, k["add_one"], buf, np.int32(N), times=1000)
    g = b.complete()
    g.launch(s)
    assert (_read(buf, s) == 1000).all()
    g.launch(s)
    assert (_read(buf, s) == 2000).all()
    g.close()
    b.close()
    buf.close(s)
    s.close()


@pytest.mark.gpu
def test_misuse_and_error_inside_capture_leaves_stream_usable(env):
    from cuda_core import CUDAError, launch

    dev, k, _ = env
    s = dev.create_stream()
    b = s.create_graph_builder()
    with pytest.raises(ValueError, match="mode must be"):
        b.begin_building(mode="loose")
    with pytest.raises(RuntimeError, match="begin_building"):
        b.end_building()
    with pytest.raises(RuntimeError, match="finished"):
        b.complete()
    b.begin_building()
    with pytest.raises(RuntimeError, match="already building"):
        b.begin_building()
    with pytest.raises(CUDAError):
        s.sync()  # synchronising a capturing stream is illegal and invalidates the capture
    with pytest.raises(CUDAError):
        b.end_building()
    assert not b.is_building
    buf = _zeros(dev, s)
    launch(s, _cfg(), k["add_one"], buf, np.int32(N))
    assert (_read(buf, s) == 1).all()
    # closing a builder mid-capture ends the capture
    b2 = s.create_graph_builder().begin_building()
    launch(b2, _cfg(), k["add_one"], buf, np.int32(N))
    b2.close()
    launch(s, _cfg(), k["add_one"], buf, np.int32(N))
    assert (_read(buf, s) == 2).all()
    b.close()
    buf.close(s)
    s.close()


@pytest.mark.gpu
def test_graph_host_callback_runs_each_replay_and_is_released(env, monkeypatch):
    from cuda_core import _host_callbacks as _callbacks

    dev, _, _ = env
    s = dev.create_stream()
    calls = []
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))

    def boom():
        raise KeyError("inside a graph")

    kept_before = settled_kept_callbacks()
    b = s.create_graph_builder().begin_building()
    b.callback(lambda: calls.append("plain"))
    b.callback(boom)
    b.callback(functools.partial(calls.append, "data"))  # cuda.core: bind state, no user_data
    g = b.end_building().complete()
    assert calls == []
    # every replay runs every recorded callback (a callback is not one-shot inside a graph)
    for _ in range(5):
        g.launch(s)
    _wait(s)
    assert calls == ["plain", "data"] * 5
    assert len(reported) == 5 and all(isinstance(e, KeyError) for e in reported)
    assert _callbacks.pending_callbacks()[1] == kept_before + 3
    g.launch(s)
    _wait(s)
    assert calls == ["plain", "data"] * 6
    g.close()
    b.close()
    del g, b
    gc.collect()
    t0 = time.monotonic()
    while _callbacks.pending_callbacks()[1] > kept_before and time.monotonic() - t0 < 10:
        time.sleep(0.01)
    assert _callbacks.pending_callbacks()[1] == kept_before
    with pytest.raises(RuntimeError, match="begin_building"):
        s.create_graph_builder().callback(print)
    s.close()


_SYNC_SCRIPT = r"""
import threading, time
from cuda_core import Device

dev = Device()
dev.set_current()
s = dev.create_stream()
seen = []

def slow(tag):
    time.sleep(0.2)
    seen.append((tag, threading.get_ident()))

s.launch_host_func(slow, "once")
s.sync()
assert [t for t, _ in seen] == ["once"], seen
assert seen[0][1] != threading.get_ident()  # ran on a driver thread while sync() waited
b = s.create_graph_builder().begin_building()
b.callback(lambda: slow("graph"))
g = b.end_building().complete()
for _ in range(3):
    g.launch(s)
s.sync()
assert [t for t, _ in seen] == ["once"] + ["graph"] * 3, seen
g.close()
b.close()
s.close()
print("SYNC-OK")
"""


@pytest.mark.gpu
def test_sync_releases_the_gil_for_pending_python_callbacks(env):
    # A Python host callback needs the GIL; Stream.sync() must wait with the GIL released or
    # it deadlocks. Run in a child process so that a deadlock fails the test instead of hanging.
    import os
    import subprocess
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    envvars = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", _SYNC_SCRIPT],
            capture_output=True,
            text=True,
            timeout=60,
            env=envvars,
            cwd=root,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(
            "Stream.sync() deadlocked with a Python host callback pending (GIL held during sync)"
        )
    assert proc.returncode == 0 and "SYNC-OK" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.gpu
def test_stream_host_callback_order_and_exception_reported(env, monkeypatch):
    from cuda_core import _host_callbacks as _callbacks
    from cuda_core import launch

    dev, k, _ = env
    s = dev.create_stream()
    seen = []
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    buf = _zeros(dev, s)
    launch(s, _cfg(), k["add_one"], buf, np.int32(N))
    host = np.zeros(N, dtype=np.int32)
    buf.copy_to(host, stream=s)
    # runs after the copy: it sees the copied data
    s.launch_host_func(lambda arr: seen.append(int(arr.sum())), host)

    def boom():
        raise ValueError("callback failed")

    s.launch_host_func(boom)
    s.launch_host_func(seen.append, "after")
    _wait(s)
    assert seen == [N, "after"]
    assert len(reported) == 1 and isinstance(reported[0], ValueError)
    assert "host callback" in "".join(getattr(reported[0], "__notes__", []))
    assert _callbacks.pending_callbacks()[0] == 0
    launch(s, _cfg(), k["add_one"], buf, np.int32(N))  # the stream is still healthy
    assert (_read(buf, s) == 2).all()
    with pytest.raises(TypeError, match="fn must be callable"):
        s.launch_host_func(42)
    buf.close(s)
    s.close()


@pytest.mark.gpu
def test_debug_dot_print(env, tmp_path):
    dev, k, _ = env
    s = dev.create_stream()
    b = _record(s, k["empty_kernel"])
    path = tmp_path / "g.dot"
    b.debug_dot_print(str(path), {"verbose": True})
    assert "digraph" in path.read_text()
    # Every flag cuda.core exposes is one this driver accepts.
    every = {
        f: True
        for f in (
            "runtime_types",
            "kernel_node_params",
            "event_node_params",
            "kernel_node_attributes",
            "handles",
            "mem_alloc_node_params",
            "mem_free_node_params",
            "batch_mem_op_node_params",
            "extra_topo_info",
            "conditional_node_params",
        )
    }
    path2 = tmp_path / "g2.dot"
    b.debug_dot_print(str(path2), every)
    assert "digraph" in path2.read_text()
    b.close()
    s.close()


def test_trampolines_run_graph_entries_every_time_and_one_shot_entries_once(monkeypatch):
    # The driver calls these C function pointers; calling them here exercises the same path
    # (the table lookup, the GIL, the error report) without a GPU.
    import ctypes

    from cuda_core import _host_callbacks as cb

    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    run_once, run_kept = proto(cb._RUN_ONCE), proto(cb._RUN_KEPT)
    drop = proto(int(cb._DROP_KEPT))
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    calls = []
    key = next(cb._keys)
    cb._kept[key] = (calls.append, ("kept",))
    for _ in range(3):
        run_kept(key)
    assert calls == ["kept"] * 3
    drop(key)
    assert key not in cb._kept
    run_kept(key)  # a replay after release finds nothing and does nothing
    assert calls == ["kept"] * 3
    key = next(cb._keys)
    cb._once[key] = (calls.append, ("once",))
    run_once(key)
    run_once(key)
    assert calls == ["kept"] * 3 + ["once"]

    def boom():
        raise ValueError("reported")

    key = next(cb._keys)
    cb._once[key] = (boom, ())
    run_once(key)
    assert len(reported) == 1 and isinstance(reported[0], ValueError)
    assert "host callback" in "".join(reported[0].__notes__)


def test_debug_print_options_map_each_field_to_its_driver_flag():
    import dataclasses

    from cuda.bindings import driver

    from cuda_core import GraphDebugPrintOptions

    flags = driver.CUgraphDebugDot_flags
    assert GraphDebugPrintOptions()._flags() == 0
    names = [f.name for f in dataclasses.fields(GraphDebugPrintOptions)]
    assert len(names) == 16
    for name in names:
        expected = int(getattr(flags, f"CU_GRAPH_DEBUG_DOT_FLAGS_{name.upper()}"))
        assert GraphDebugPrintOptions(**{name: True})._flags() == expected
    everything = GraphDebugPrintOptions(**dict.fromkeys(names, True))._flags()
    assert everything == sum(
        int(getattr(flags, f"CU_GRAPH_DEBUG_DOT_FLAGS_{n.upper()}")) for n in names
    )
    assert (
        GraphDebugPrintOptions(handles=1)._flags() == GraphDebugPrintOptions(handles=True)._flags()
    )
    assert GraphDebugPrintOptions(handles=0).handles is False
