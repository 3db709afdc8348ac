"""Graph.update: what an executable graph keeps alive before and after an update (GPU tier)."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest

import cuda_core.graph as G
from cuda_core import CUDAError
from tests.graph.test_graph_def_gpu import _wait


def _collected(ref, timeout=10.0):
    t0 = time.monotonic()
    while ref() is not None and time.monotonic() - t0 < timeout:
        gc.collect()
        time.sleep(0.01)
    return ref() is None


@pytest.mark.gpu
def test_graph_update_releases_what_the_old_source_kept(dev):
    s = dev.create_stream()
    called = []

    def old_cb():
        called.append("old")

    def new_cb():
        called.append("new")

    old_ref, new_ref = weakref.ref(old_cb), weakref.ref(new_cb)
    old_def = G.GraphDefinition()
    old_def.callback(old_cb)
    graph = old_def.instantiate()
    new_def = G.GraphDefinition()
    new_def.callback(new_cb)
    del old_cb, new_cb
    graph.update(new_def)
    del old_def, new_def
    assert _collected(old_ref)  # the graph no longer keeps the old definition's callback
    assert new_ref() is not None  # it keeps the new one
    graph.launch(s)
    _wait(s)
    assert called == ["new"]
    # a refused update adopts nothing and keeps what the graph had
    refused = G.GraphDefinition()
    refused.callback(lambda: called.append("refused"))
    refused.empty()
    with pytest.raises(CUDAError, match=r"Graph update failed: .+ \(CU_GRAPH_EXEC_UPDATE_ERROR"):
        graph.update(refused)
    del refused
    gc.collect()
    assert new_ref() is not None
    graph.launch(s)
    _wait(s)
    assert called == ["new", "new"]
    graph.close()
    s.close()


@pytest.mark.gpu
def test_update_keeps_the_old_source_while_a_launch_may_still_use_it(dev):
    s = dev.create_stream()
    release = threading.Event()

    def old_cb():  # holds the launch in flight until the test lets it go
        release.wait(20)

    old_ref = weakref.ref(old_cb)
    old_def = G.GraphDefinition()
    old_def.callback(old_cb)
    graph = old_def.instantiate()
    graph.launch(s)
    new_def = G.GraphDefinition()
    new_def.callback(lambda: None)
    del old_cb, old_def
    graph.update(new_def)  # the launch above is still running the old callback
    gc.collect()
    assert old_ref() is not None
    release.set()
    _wait(s)
    assert old_ref() is not None  # kept while the graph lives
    graph.close()
    del graph
    assert _collected(old_ref)
    # with every launch finished, an update lets go of the old source at once
    marker = []

    def first_cb():
        marker.append(1)

    first_ref = weakref.ref(first_cb)
    first = G.GraphDefinition()
    first.callback(first_cb)
    graph = first.instantiate()
    del first_cb, first
    graph.launch(s)
    _wait(s)
    graph.update(new_def)
    assert _collected(first_ref) and marker == [1]
    graph.close()
    s.close()
