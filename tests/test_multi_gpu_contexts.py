"""Two GPUs, one current: another device's methods, waits across devices (``cuda.core`` 1.3).

GPU tier, two GPUs (skipped elsewhere with "needs two GPUs"): every ``Device`` method that
creates a resource or synchronises, called on device 1 while device 0 is current, makes its
object on device 1 and leaves device 0 current; memory resources of device 1 are made the
same way; ``set_current`` with a context of the other device binds it there; a stream waits
for a stream or an event of the other device, also when that device is not current and from
a thread with no context; a view of device 1's memory through the CUDA Array Interface orders
the consumer after the producer stream of device 1 while device 0 is current.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import (
    Context,
    DeviceMemoryResource,
    DeviceMemoryResourceOptions,
    EventOptions,
    LaunchConfig,
    StreamOptions,
    launch,
)
from cuda_core._utils import handle_return
from cuda_core.utils import StridedMemoryView
from tests.helpers import gpu_count
from tests.helpers.kernels import current_context_int
from tests.test_multi_gpu import (
    grid,
    host_ints,
    kernel,
    pointer_device,
    pool_access,
    two_devices,
)

gpu = pytest.mark.gpu
two_gpus = pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")

_SLEEP_NS = 200_000_000  # long enough that a copy not ordered after the kernel reads zeros


def _stream_ctx(s: Any) -> int:
    return int(handle_return(driver.cuStreamGetCtx(s.handle), "cuStreamGetCtx"))


def _sleep_then_fill(stream: Any, buf: Any, n: int, value: int) -> None:
    """Queue, on ``stream``, a kernel that sleeps, then writes ``value`` into ``buf``."""
    launch(
        stream,
        LaunchConfig(grid=4, block=256),
        kernel(stream.device, "sleep_then_fill"),
        buf,
        np.uint64(n),
        np.uint64(_SLEEP_NS),
        np.int32(value),
    )


def _zeroed(dev: Any, n: int, stream: Any) -> Any:
    buf = dev.allocate(n * 4, stream=stream)
    buf.fill(0, stream=stream)
    stream.sync()
    return buf


@gpu
@two_gpus
def test_methods_of_device_1_make_their_objects_there_and_leave_device_0_current():
    _, d1 = two_devices()
    ctx0, ctx1 = current_context_int(), int(d1.context.handle)
    assert ctx0 != ctx1
    calls = {
        "create_stream": d1.create_stream,
        "create_stream(priority)": lambda: d1.create_stream(options=StreamOptions(priority=0)),
        "create_event": lambda: d1.create_event(EventOptions(timing_enabled=True)),
        "sync": d1.sync,
        "memory_resource": lambda: d1.memory_resource,
        "allocate": lambda: d1.allocate(4096),
        "create_graph_builder": d1.create_graph_builder,
        "context": lambda: d1.context,
        "create_context": d1.create_context,
        "DeviceMemoryResource": lambda: DeviceMemoryResource(d1),
        "DeviceMemoryResource(options)": lambda: DeviceMemoryResource(
            d1, DeviceMemoryResourceOptions()
        ),
    }
    made: dict[str, Any] = {}
    for name, call in calls.items():
        made[name] = call()
        assert current_context_int() == ctx0, f"Device(1).{name} changed the current context"
    s1 = made["create_stream"]
    made["allocate(stream)"] = d1.allocate(4096, stream=s1)
    made["pool allocate"] = made["DeviceMemoryResource(options)"].allocate(4096, stream=s1)
    assert current_context_int() == ctx0

    for key in ("create_stream", "create_stream(priority)"):
        assert _stream_ctx(made[key]) == ctx1 and made[key].device is d1
    assert _stream_ctx(made["create_graph_builder"].stream) == ctx1
    assert made["create_event"].device is d1 and made["context"] == d1.context
    assert made["create_context"].device is d1 and not made["create_context"].is_green
    for key in ("allocate", "allocate(stream)"):
        assert made[key].device_id == 1 and pointer_device(made[key]) == 1, key
    owned = made["DeviceMemoryResource(options)"]
    pool_of = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
    ptr = made["pool allocate"].handle
    assert int(
        handle_return(driver.cuPointerGetAttribute(pool_of, ptr), "cuPointerGetAttribute")
    ) == int(owned.handle)
    rw = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    assert owned.device_id == 1 and pool_access(owned, 1) == rw  # a pool of device 1
    assert made["memory_resource"].device_id == 1
    assert made["DeviceMemoryResource"].device_id == 1

    # The objects work on device 1, device 0 staying current.
    n = 1024
    buf = made["allocate(stream)"]
    gb = made["create_graph_builder"]
    gb.begin_building()
    launch(gb, grid(n), kernel(d1, "fill_index"), buf, np.uint64(n), np.int32(40))
    gb.end_building()
    graph = gb.complete()
    graph.launch(s1)
    ev = made["create_event"]
    s1.record(ev)
    ev.sync()
    np.testing.assert_array_equal(host_ints(buf, s1), 40 + np.arange(n, dtype=np.int32))
    d1.sync()
    assert current_context_int() == ctx0
    for key in ("pool allocate", "allocate(stream)", "allocate"):
        made[key].close()
    s1.sync()
    for obj in (graph, gb, ev, s1, made["create_stream(priority)"]):
        obj.close()
    made["DeviceMemoryResource(options)"].close()
    made["create_context"].close()
    assert current_context_int() == ctx0


@gpu
@two_gpus
def test_set_current_with_a_context_of_the_other_device_binds_it_there():
    d0, d1 = two_devices()
    ctx0 = current_context_int()
    plain1 = d1.create_context()
    try:
        prev = d0.set_current(plain1)  # handed to device 1's set_current
        assert isinstance(prev, Context) and int(prev.handle) == ctx0 and prev.device is d0
        assert current_context_int() == int(plain1.handle)
        assert d1.context == plain1
        assert int(d0.context.handle) == ctx0  # device 0 keeps its primary context
        s = d1.create_stream()
        assert s.context == plain1 and _stream_ctx(s) == int(plain1.handle)
        back = d1.set_current(prev)  # device 0's context, through device 1: device 0 binds it
        assert back == plain1 and current_context_int() == ctx0
        assert d0.context == prev and d1.context == plain1
    finally:
        d1.set_current()
        d0.set_current()
        plain1.close()
    assert s.is_closed


@gpu
@two_gpus
def test_streams_wait_for_streams_and_events_of_a_device_that_is_not_current():
    d0, d1 = two_devices()  # device 0 current throughout
    n = 1024
    s0, s1 = d0.create_stream(), d1.create_stream()
    b0, b1 = _zeroed(d0, n, s0), _zeroed(d1, n, s1)
    value = 0

    def case(target: Any, src: Any, waiter: Any, dst: Any, how: str) -> None:
        nonlocal value
        value += 1
        _sleep_then_fill(target, src, n, value)
        waiter.wait(target if how == "stream" else target.record())
        dst.copy_from(src, stream=waiter)
        np.testing.assert_array_equal(host_ints(dst, waiter), np.full(n, value, np.int32))
        target.sync()

    case(s1, b1, s0, b0, "stream")  # the stream waited for is of device 1, not current
    case(s1, b1, s0, b0, "event")  # an event of device 1
    case(s0, b0, s1, b1, "event")  # device 1's stream waits for an event of device 0
    assert current_context_int() == int(d0.context.handle)

    # From a thread where no context is current.
    value += 1
    _sleep_then_fill(s0, b0, n, value)
    errors: list[BaseException] = []

    def wait_there() -> None:
        try:
            assert current_context_int() == 0
            s1.wait(s0)
            assert current_context_int() == 0
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=wait_there)
    t.start()
    t.join()
    assert not errors, errors
    b1.copy_from(b0, stream=s1)
    np.testing.assert_array_equal(host_ints(b1, s1), np.full(n, value, np.int32))
    s0.sync()
    for obj in (b0, b1, s0, s1):
        obj.close()


@gpu
@two_gpus
def test_array_interface_view_orders_after_a_producer_stream_of_device_1():
    d0, d1 = two_devices()
    n = 4096
    producer, consumer = d1.create_stream(), d1.create_stream()
    buf = _zeroed(d1, n, producer)
    _sleep_then_fill(producer, buf, n, 77)

    iface = {
        "shape": (n,),
        "typestr": "<i4",
        "data": (int(buf.handle), False),
        "version": 3,
        "stream": int(producer.handle),
    }
    producer_obj = SimpleNamespace(__cuda_array_interface__=iface)

    # Device 0 current: the ordering event is made in the producer's context (device 1's).
    view = StridedMemoryView.from_cuda_array_interface(producer_obj, int(consumer.handle))
    assert view.ptr == int(buf.handle)
    np.testing.assert_array_equal(host_ints(buf, consumer), np.full(n, 77, np.int32))
    assert current_context_int() == int(d0.context.handle)
    producer.sync()
    buf.close()
    producer.close()
    consumer.close()
