"""GraphMemoryResource: allocations inside graphs.

CPU tier: names and signatures; cuda.core's errors for writing the attributes. GPU tier:
allocation and free nodes in a captured graph, replayed 1,000 times without growth; in every
capture mode; refusal outside capture (and of the pool resources inside one); attributes and
trim; freeing graph memory outside the graph; the device's default resource made (and
``Device.memory_resource`` first read) inside a global or thread-local capture.
"""

from __future__ import annotations

import gc
import inspect
import weakref
from typing import Any

import numpy as np
import pytest

import cuda_core
from cuda_core import GraphMemoryResource
from cuda_core._memory._graph_resource import GraphMemoryResourceAttributes


def test_names_and_signatures():
    assert issubclass(GraphMemoryResource, cuda_core.MemoryResource)
    sig = inspect.signature(GraphMemoryResource.allocate)
    assert list(sig.parameters) == ["self", "size", "stream"]
    assert sig.parameters["stream"].kind is inspect.Parameter.KEYWORD_ONLY
    for name in ("trim", "close", "deallocate"):
        assert callable(getattr(GraphMemoryResource, name))
    for name in ("attributes", "device_id", "is_device_accessible", "is_host_accessible"):
        assert isinstance(getattr(GraphMemoryResource, name), property)
    for name in ("reserved_mem_current", "reserved_mem_high", "used_mem_current", "used_mem_high"):
        assert isinstance(getattr(GraphMemoryResourceAttributes, name), property)
    assert GraphMemoryResourceAttributes.used_mem_high.fset is not None
    assert GraphMemoryResourceAttributes.used_mem_current.fset is None


def test_bad_device_argument_and_no_direct_attributes():
    with pytest.raises(TypeError, match="device_id must be"):
        GraphMemoryResource(1.5)
    with pytest.raises(RuntimeError, match=r"GraphMemoryResource\.attributes"):
        GraphMemoryResourceAttributes()


def test_attribute_writes_refused_with_cuda_cores_errors():
    # Refused before the driver is asked: cuda.core raises AttributeError with this wording for
    # the read-only counters and for a watermark set to anything but zero (its tests match it).
    attrs = GraphMemoryResourceAttributes._init(0)
    for name in ("reserved_mem_current", "used_mem_current"):
        with pytest.raises(AttributeError, match=rf"attribute '{name}' .* is not writable"):
            setattr(attrs, name, 0)
    for name in ("reserved_mem_high", "used_mem_high"):
        with pytest.raises(
            AttributeError, match=rf"Attribute '{name}' may only be set to zero \(got 1\)\."
        ):
            setattr(attrs, name, 1)
        with pytest.raises(AttributeError, match=r"\(got -2\)"):
            setattr(attrs, name, -2)
    with pytest.raises(AttributeError):
        attrs.other = 1  # no such attribute


# -- GPU tier ----------------------------------------------------------------------------------

SRC = r"""
extern "C" __global__ void fill_iota(int* tmp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) tmp[i] = i;
}
extern "C" __global__ void add_into(int* out, const int* tmp, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] += tmp[i];
}
"""
N = 1 << 16


@pytest.mark.gpu
def test_singleton_and_refused_outside_capture(dev):
    gmr = GraphMemoryResource(dev)
    assert gmr is GraphMemoryResource(dev.device_id)
    assert (
        gmr.device_id == dev.device_id and gmr.is_device_accessible and not gmr.is_host_accessible
    )
    s = dev.create_stream()
    # cuda.core's wording (its tests match it), for any size
    for size in (256, 0):
        with pytest.raises(
            RuntimeError,
            match=r"GraphMemoryResource cannot perform memory operations on a non-capturing stream\.",
        ):
            gmr.allocate(size, stream=s)
    with pytest.raises(TypeError):
        gmr.allocate(256)
    with pytest.raises(TypeError):
        gmr.deallocate(0, 256)
    gmr.close()  # no-op
    s.close()


@pytest.mark.gpu
def test_graph_alloc_free_replayed_1000_times_without_growth(dev):
    from cuda_core import LaunchConfig, Program, ProgramOptions, launch

    obj = Program(SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )
    fill, add = obj.get_kernel("fill_iota"), obj.get_kernel("add_into")
    cfg = LaunchConfig(grid=(N + 255) // 256, block=256)
    s = dev.create_stream()
    out = dev.allocate(N * 4, stream=s)
    out.fill(0, stream=s)
    s.sync()
    gmr = GraphMemoryResource(dev)
    gmr.trim()

    gb = s.create_graph_builder().begin_building()
    tmp = gmr.allocate(N * 4, stream=gb)
    assert tmp.size == N * 4 and tmp.memory_resource is gmr
    launch(gb, cfg, fill, tmp, np.int32(N))
    launch(gb, cfg, add, out, tmp, np.int32(N))
    tmp.close()  # the free node
    graph = gb.end_building().complete()

    graph.launch(s)
    s.sync()
    attrs = gmr.attributes
    used, reserved = attrs.used_mem_current, attrs.reserved_mem_current
    # The driver keeps the physical memory associated with the graph between launches (used
    # counts it until the graph is destroyed or the memory trimmed): what matters is that it
    # does not grow with the launches.
    assert N * 4 <= used <= reserved
    attrs.used_mem_high = 0
    attrs.reserved_mem_high = 0
    for _ in range(999):
        graph.launch(s)
    s.sync()
    assert attrs.used_mem_current == used
    assert attrs.reserved_mem_current == reserved, "graph memory grew over the replays"
    assert attrs.used_mem_high <= reserved
    host = np.empty(N, dtype=np.int32)
    out.copy_to(host, stream=s)
    assert (host == np.arange(N, dtype=np.int32) * 1000).all()
    with pytest.raises(AttributeError, match=r"may only be set to zero \(got 5\)"):
        attrs.used_mem_high = 5
    graph.close()
    gmr.trim()
    assert gmr.attributes.reserved_mem_current <= reserved
    out.close()
    s.close()


MODES = ("global", "thread_local", "relaxed")


def _compile(dev):
    from cuda_core import Program, ProgramOptions

    return Program(SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_pool_resources_refuse_a_capturing_stream_and_the_capture_survives(dev, mode):
    from cuda_core import DeviceMemoryResource

    mr = DeviceMemoryResource(dev)
    s = dev.create_stream()
    mr.allocate(64, stream=s).close()  # not capturing: fine
    gb = dev.create_graph_builder().begin_building(mode)
    refused = r"DeviceMemoryResource cannot perform memory operations on a capturing stream \(consider using GraphMemoryResource\)\."
    for size in (64, 0):
        with pytest.raises(RuntimeError, match=refused):
            mr.allocate(size, stream=gb)
        with pytest.raises(RuntimeError, match=refused):
            dev.allocate(size, stream=gb)
    # Refusing asked the driver nothing a capture forbids: the capture is intact.
    graph = gb.end_building().complete()
    graph.launch(s)
    s.sync()
    mr.allocate(64, stream=gb.stream).close()  # capture over: the same stream allocates again
    graph.close()
    gb.close()
    s.close()


@pytest.mark.gpu
def test_dropped_code_is_unloaded_at_once_not_by_the_collector(dev):
    # A Kernel keeps its ObjectCode alive, and the ObjectCode finds its kernels again by name:
    # that must not be a reference cycle, or the library would be unloaded whenever the
    # garbage collector runs, which may be during a graph capture (where cuLibraryUnload fails
    # and invalidates the capture).
    gc.disable()
    try:
        obj = _compile(dev)
        k = obj.get_kernel("fill_iota")
        assert obj.get_kernel("fill_iota") is k
        assert k.occupancy.max_active_blocks_per_multiprocessor(256, 0) > 0
        ref = weakref.ref(obj)
        del obj
        assert ref() is not None  # the kernel keeps its code loaded
        del k
        assert ref() is None, "the ObjectCode waits for the garbage collector"
    finally:
        gc.enable()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_graph_alloc_in_every_capture_mode(dev, mode):
    from cuda_core import DeviceMemoryResource, LaunchConfig, launch

    # Code compiled, used and dropped before the capture, then a collection during it: nothing
    # may be unloaded mid-capture (see the test above).
    old = _compile(dev)
    old.get_kernel("add_into").occupancy  # noqa: B018
    del old
    obj = _compile(dev)
    fill, add = (
        obj.get_kernel("fill_iota"),
        obj.get_kernel("add_into"),
    )  # first launched in the capture
    cfg = LaunchConfig(grid=(N + 255) // 256, block=256)
    s = dev.create_stream()
    dmr = DeviceMemoryResource(dev)
    out = dmr.allocate(N * 4, stream=s)
    out.fill(0, stream=s)
    gmr = GraphMemoryResource(dev)

    gb = dev.create_graph_builder().begin_building(mode)
    gc.collect()
    tmp = gmr.allocate(N * 4, stream=gb)
    tmp.fill(0, stream=gb)
    launch(gb, cfg, fill, tmp, np.int32(N))
    launch(gb, cfg, add, out, tmp, np.int32(N))
    copy = gmr.allocate(N * 4, stream=gb)
    copy.copy_from(out, stream=gb)
    launch(gb, cfg, add, out, copy, np.int32(N))  # out += out
    copy.close()
    tmp.close()
    graph = gb.end_building().complete()

    for _ in range(2):
        graph.upload(s)
        graph.launch(s)
    host = np.empty(N, dtype=np.int32)
    out.copy_to(host, stream=s)
    assert (host == np.arange(N, dtype=np.int32) * 6).all()  # ((0 + i) * 2 + i) * 2
    graph.close()
    gb.close()
    out.close()
    s.close()


@pytest.mark.gpu
def test_deallocate_frees_graph_memory_outside_the_graph(dev):
    # As in cuda.core, deallocate() is not limited to captures: memory a launched graph left
    # allocated is freed in stream order, which the graph's next launch needs.
    import cuda_core.graph as G
    from cuda_core import CUDAError

    gmr = GraphMemoryResource(dev)
    s = dev.create_stream()
    g = G.GraphDefinition()
    node = g.allocate(4096)
    graph = g.instantiate()
    graph.launch(s)
    s.sync()
    with pytest.raises(CUDAError):
        graph.launch(s)  # its allocation is still live
    gmr.deallocate(node.dptr, 4096, stream=s)
    graph.launch(s)
    gmr.deallocate(node.dptr, 4096, stream=s)
    s.sync()
    graph.close()
    s.close()


def _thread_capture_mode() -> object:
    """This thread's stream-capture interaction mode (swapped out and back in)."""
    from cuda.bindings import driver

    from cuda_core._utils import handle_return

    relaxed = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
    api = "cuThreadExchangeStreamCaptureMode"
    mode = handle_return(driver.cuThreadExchangeStreamCaptureMode(relaxed), api)
    handle_return(driver.cuThreadExchangeStreamCaptureMode(mode), api)
    return mode


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_default_resource_made_and_first_read_inside_a_capture(dev, mode):
    import threading

    from cuda_core import Device, DeviceMemoryResource

    # The driver's default threshold (0), so that making the resource sets it again.
    dev.memory_resource.attributes.release_threshold = 0
    box: dict[str, Any] = {}

    def work() -> None:  # a new thread: its Device object has not read memory_resource yet
        d = Device(0)
        d.set_current()
        s = d.create_stream()
        buf = d.allocate(4096, stream=s)
        s.sync()
        gb = d.create_graph_builder().begin_building(mode)
        before = _thread_capture_mode()
        mr = d.memory_resource  # the first read, inside the capture
        other = DeviceMemoryResource(d)
        box["modes"] = (before, _thread_capture_mode())
        buf.fill(5, stream=gb)
        graph = gb.end_building().complete()  # an invalidated capture raises here
        graph.launch(s)
        out = np.empty(4096, np.uint8)
        buf.copy_to(out, stream=s)
        box["filled"] = bool((out == 5).all())
        box["thresholds"] = (mr.attributes.release_threshold, other.attributes.release_threshold)
        box["pools"] = (int(mr.handle), int(other.handle), int(dev.memory_resource.handle))
        for obj in (graph, gb, buf, s):
            obj.close()

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    try:
        t = threading.Thread(target=run)
        t.start()
        t.join(120)
        if "error" in box:
            raise box["error"]
    finally:
        dev.memory_resource.attributes.release_threshold = (1 << 64) - 1
    before, after = box["modes"]
    assert before == after, "the thread's capture mode was not restored"
    assert box["filled"] is True
    assert box["thresholds"] == ((1 << 64) - 1, (1 << 64) - 1)
    pools = box["pools"]
    assert pools[0] == pools[1] == pools[2]
