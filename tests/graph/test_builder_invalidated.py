"""Graph builders whose capture was invalidated, and forks ended the wrong way (``cuda.core`` 1.3).

CPU tier: a fork refuses ``end_building`` and its ``close`` leaves the capture to its origin,
neither asking the driver anything. GPU tier: ending or closing a builder whose capture was invalidated raises the driver's error
(a ``CUDAError`` naming ``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED``), leaves the builder with no
graph and destroys nothing twice (no warning, also when collected); ``end_building`` on a fork
is refused and the capture survives; a ``join`` that fails partway closes the forks it did not
join.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
from typing import Any

import numpy as np
import pytest

from cuda_core import LEGACY_DEFAULT_STREAM, CUDAError, Device
from cuda_core.graph import GraphBuilder

gpu = pytest.mark.gpu
INVALIDATED = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"


@pytest.fixture
def dev() -> Device:
    d = Device(0)
    d.set_current()
    return d


def _invalidate(builder: Any) -> None:
    """Break the builder's capture: synchronising a capturing stream is refused, and the
    refusal invalidates the capture."""
    with pytest.raises(CUDAError):
        builder.stream.sync()


def _host(buf: Any, stream: Any) -> np.ndarray:
    out = np.empty(buf.size, np.uint8)
    buf.copy_to(out, stream=stream)  # complete when it returns
    return out


def _fork() -> Any:
    """A forked builder as split() makes one, on a stream that needs no driver here."""
    fork = GraphBuilder._from_stream(LEGACY_DEFAULT_STREAM, kind="forked")
    fork._building = True
    return fork


def test_a_fork_refuses_end_building_without_asking_the_driver():
    fork = _fork()
    with pytest.raises(RuntimeError, match=r"forked GraphBuilder: join\(\) it"):
        fork.end_building()
    assert fork.is_building and fork.is_join_required  # nothing changed


def test_closing_a_fork_leaves_the_capture_to_its_origin():
    fork = _fork()
    fork.close()  # no cuStreamEndCapture (there is no driver here to answer one)
    assert fork.is_closed and not fork.is_join_required
    fork.close()


@gpu
@pytest.mark.parametrize("made_by", ["Device", "Stream"])
def test_end_building_an_invalidated_capture_raises_and_keeps_no_graph(dev, made_by):
    s = dev.create_stream()
    buf = dev.allocate(1024, stream=s)
    s.sync()
    b = dev.create_graph_builder() if made_by == "Device" else s.create_graph_builder()
    b.begin_building()
    buf.fill(2, stream=b)
    _invalidate(b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a destroy of the discarded graph would warn
        with pytest.raises(CUDAError) as info:
            b.end_building()
        assert info.value.name == INVALIDATED and info.value.api == "cuStreamEndCapture"
        assert INVALIDATED in str(info.value)
        assert b.handle is None and not b.is_building
        with pytest.raises(RuntimeError, match=r"^Graph has not finished building.*finished graph"):
            b.complete()
        with pytest.raises(RuntimeError, match=r"^Cannot resume building after building has ended"):
            b.begin_building()  # as in cuda.core: a builder captures once
        stream = b.stream  # out of capture mode: usable again
        buf.fill(3, stream=stream)
        assert (_host(buf, stream) == 3).all()
        b.close()
        b.close()
        del b
        gc.collect()
    buf.close(s)
    s.close()


@gpu
def test_close_of_an_invalidated_capture_raises_the_drivers_error_once(dev):
    s = dev.create_stream()
    buf = dev.allocate(1024, stream=s)
    s.sync()
    b = dev.create_graph_builder().begin_building("global")
    own = b.stream
    buf.fill(1, stream=b)
    _invalidate(b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CUDAError) as info:
            b.close()
        assert info.value.name == INVALIDATED
        assert b.is_closed and b.handle is None and own.is_closed  # closed all the same
        b.close()  # idempotent: no second error
        del b
        gc.collect()

    # A builder on the caller's stream: the stream left capture mode and stays open.
    b2 = s.create_graph_builder().begin_building()
    buf.fill(2, stream=b2)
    _invalidate(b2)
    with pytest.raises(CUDAError, match=INVALIDATED):
        b2.close()
    assert b2.is_closed and not s.is_closed
    buf.fill(7, stream=s)
    assert (_host(buf, s) == 7).all()

    # Closing a valid capture in progress discards it without an error.
    b3 = s.create_graph_builder().begin_building()
    buf.fill(9, stream=b3)
    b3.close()
    assert (_host(buf, s) == 7).all()
    buf.close(s)
    s.close()


@gpu
def test_end_building_a_fork_is_refused_and_the_capture_survives(dev):
    s = dev.create_stream()
    a, c = dev.allocate(512, stream=s), dev.allocate(512, stream=s)
    s.sync()
    b = s.create_graph_builder().begin_building()
    left, right = b.split(2)
    with pytest.raises(RuntimeError, match=r"join\(\)"):
        right.end_building()
    assert right.is_building and right.is_join_required
    a.fill(1, stream=left)
    c.fill(2, stream=right)
    assert GraphBuilder.join(left, right) is b and right.is_closed
    graph = b.end_building().complete()
    graph.launch(s)
    assert (_host(a, s) == 1).all() and (_host(c, s) == 2).all()
    for obj in (graph, b):
        obj.close()
    a.close(s)
    c.close(s)
    s.close()


@gpu
def test_a_join_that_fails_partway_closes_the_forks_it_did_not_join(dev):
    s, s2 = dev.create_stream(), dev.create_stream()
    b = s.create_graph_builder().begin_building()
    other = s2.create_graph_builder().begin_building()
    _, f1, f2 = b.split(3)
    _, g1 = other.split(2)
    # g1 forks another capture: waiting for it from b's capture is refused by the driver.
    with pytest.raises(CUDAError):
        GraphBuilder.join(b, f1, g1, f2)
    assert f1.is_closed  # joined before the failure
    assert g1.is_closed and f2.is_closed  # not joined: closed before the error propagated
    for builder in (b, other):
        with contextlib.suppress(CUDAError):  # their captures may be invalidated now
            builder.close()
    gc.collect()
    s.sync()  # both streams left capture mode
    s2.sync()
    s.close()
    s2.close()
