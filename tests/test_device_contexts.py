"""Which context a Device's methods act on, and what they leave current (``cuda.core`` 1.3).

A ``Device`` method that creates a resource or synchronises runs in the context the device is
bound to (its primary context, or the one ``set_current(ctx)`` was given) and leaves the
calling thread's current context as it was: none, another device's, another context of the
same device. ``set_current(ctx)`` switches with one driver call, returns the context it
replaced (``None`` when none was current) and hands a context of another device to that
device. GPU tier; two-GPU cases are in ``tests/test_multi_gpu_contexts.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import Context, Device, EventOptions, StreamOptions
from cuda_core._utils import handle_return
from tests.helpers import in_thread
from tests.helpers.kernels import current_context_int

gpu = pytest.mark.gpu


def _stream_ctx(s: Any) -> int:
    """The context the driver says the stream belongs to."""
    return int(handle_return(driver.cuStreamGetCtx(s.handle), "cuStreamGetCtx"))


def _make_current(address: int) -> None:
    """Make the context at ``address`` current (0: none) behind cuda_core's back."""
    handle_return(driver.cuCtxSetCurrent(driver.CUcontext(address)), "cuCtxSetCurrent")


def _host_bytes(buf: Any, stream: Any) -> np.ndarray:
    out = np.empty(buf.size, np.uint8)
    buf.copy_to(out, stream=stream)  # complete when it returns
    return out


@pytest.fixture
def dev() -> Device:
    d = Device(0)
    d.set_current()
    return d


@gpu
def test_device_methods_work_with_no_context_current_and_leave_none_current():
    def work() -> None:
        d = Device(0)
        d.set_current()
        primary = current_context_int()
        _make_current(0)  # set up once, then nothing current on this thread
        assert current_context_int() == 0

        made: dict[str, Any] = {}
        calls: dict[str, Callable[[], Any]] = {
            "create_stream": d.create_stream,
            "create_stream(priority)": lambda: d.create_stream(options=StreamOptions(priority=0)),
            "create_event": lambda: d.create_event(EventOptions(timing_enabled=True)),
            "sync": d.sync,
            "memory_resource": lambda: d.memory_resource,  # first read on this thread
            "allocate": lambda: d.allocate(4096),  # on the device's default stream
            "create_graph_builder": d.create_graph_builder,
            "context": lambda: d.context,
        }
        for name, call in calls.items():
            made[name] = call()
            assert current_context_int() == 0, f"Device.{name} left a context current"
        s = made["create_stream"]
        made["allocate(stream)"] = d.allocate(4096, stream=s)
        assert current_context_int() == 0

        # Made where they belong: device 0's primary context.
        assert int(made["context"].handle) == primary
        for key in ("create_stream", "create_stream(priority)"):
            assert _stream_ctx(made[key]) == primary and made[key].device is d
        assert made["create_stream(priority)"].priority == 0
        assert _stream_ctx(made["create_graph_builder"].stream) == primary
        assert made["create_event"].device is d and made["create_event"].is_timing_enabled
        assert made["memory_resource"].device_id == 0 and made["allocate"].device_id == 0

        # And they work (with the context current again).
        d.set_current()
        ev, b, b2, gb = (
            made[k]
            for k in ("create_event", "allocate", "allocate(stream)", "create_graph_builder")
        )
        b2.fill(3, stream=s)
        s.record(ev)
        ev.sync()
        assert (_host_bytes(b2, s) == 3).all()
        gb.begin_building()
        b.fill(9, stream=gb)
        gb.end_building()
        graph = gb.complete()
        graph.launch(s)
        s.sync()
        assert (_host_bytes(b, s) == 9).all()
        for obj in (graph, gb, b, b2, ev, s, made["create_stream(priority)"]):
            obj.close()

    in_thread(work)


@gpu
def test_set_current_with_a_context_binds_it_and_returns_the_context_it_replaced(dev):
    primary = current_context_int()
    plain = dev.create_context()
    try:
        prev = dev.set_current(plain)
        assert isinstance(prev, Context) and int(prev.handle) == primary
        assert prev.device is dev  # the device of the context it replaced
        assert current_context_int() == int(plain.handle)
        assert dev.context == plain

        # The device's methods act on the bound context, also while another one is current.
        _make_current(primary)
        s = dev.create_stream()
        ev = dev.create_event()
        dev.sync()
        assert current_context_int() == primary, "a Device method changed the current context"
        assert _stream_ctx(s) == int(plain.handle) and s.context == plain
        assert ev.context == plain
        s.record(ev)
        ev.sync()

        # The context set_current returned binds the primary context again.
        _make_current(int(plain.handle))
        again = dev.set_current(prev)
        assert again == plain
        assert current_context_int() == primary and dev.context == prev
        s2 = dev.create_stream()
        assert _stream_ctx(s2) == primary and s2.context != plain
        s2.close()
    finally:
        dev.set_current()
        plain.close()
    assert s.is_closed and ev.is_closed  # they were the plain context's


@gpu
def test_set_current_with_a_context_and_none_current_returns_none(dev):
    plain = dev.create_context()
    try:

        def work() -> tuple[Any, int, int, bool]:
            d = Device(0)
            prev = d.set_current(plain)  # this thread had no context
            s = d.create_stream()
            out = (prev, current_context_int(), _stream_ctx(s), d.context == plain)
            d.allocate(64).close()  # memory works too (from the device's pool)
            s.close()
            d.set_current()
            return out

        prev, current, stream_ctx, bound = in_thread(work)
        assert prev is None
        assert current == int(plain.handle) == stream_ctx and bound
    finally:
        plain.close()


@gpu
def test_set_current_refuses_what_is_not_an_open_context(dev):
    with pytest.raises(TypeError, match="ctx must be a Context"):
        dev.set_current(object())  # type: ignore[arg-type]
    plain = dev.create_context()
    plain.close()
    before = current_context_int()
    with pytest.raises(RuntimeError, match="closed"):
        dev.set_current(plain)
    assert current_context_int() == before  # nothing changed


@gpu
def test_methods_of_a_device_bound_to_a_closed_context_say_so(dev):
    primary = current_context_int()
    plain = dev.create_context()
    dev.set_current(plain)
    _make_current(primary)  # the primary context current behind the device's back
    plain.close()  # allowed: it is not current
    try:
        for call in (dev.create_stream, dev.create_event, dev.sync):
            with pytest.raises(RuntimeError, match=r"set_current\(\)"):
                call()
    finally:
        dev.set_current()
    dev.create_stream().close()  # bound to the primary context again


@gpu
def test_a_device_bound_to_a_green_context_makes_its_streams_there(dev):
    from cuda_core import ContextOptions, SMResourceOptions
    from tests.test_green_context import _green_supported

    _green_supported(dev)
    sm = dev.resources.sm
    groups, _ = sm.split(SMResourceOptions(count=max(8, sm.min_partition_size)))
    green = dev.create_context(ContextOptions(resources=[groups[0]]))
    primary = current_context_int()
    try:
        dev.set_current(green)
        _make_current(primary)
        s = dev.create_stream()
        assert s.context == green and s.context.is_green
        assert s.resources.sm.sm_count == groups[0].sm_count
        dev.sync()  # the green context's work, not the primary one's
        assert current_context_int() == primary
    finally:
        dev.set_current()
        green.close()
    assert s.is_closed
