"""GPU tier: errors begin as ``cuda.core``'s, and values are those it gives (issue 21, item 4).

The situations NVIDIA's test suite checks that need a device: graph builders and definitions,
events, streams, memory (peer access, managed memory, batched copies), views of host arrays
(their ``device_id``), graph node reprs and hashes. Each check uses ``cuda.core``'s class and
pattern; ``tests/test_dropin_messages.py`` holds those reached without a GPU.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

_EMPTY = 'extern "C" __global__ void empty_kernel() {}'


@pytest.fixture(scope="module")
def kernel(dev):
    from cuda_core import Program, ProgramOptions

    obj = Program(_EMPTY, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin", cache=False
    )
    return obj.get_kernel("empty_kernel")


def _one():
    from cuda_core import LaunchConfig

    return LaunchConfig(grid=1, block=1)


def _graph(dev, kernel):
    from cuda_core import launch

    gb = dev.create_graph_builder().begin_building()
    launch(gb, _one(), kernel)
    return gb.end_building()


# ------------------------------------------------------------------------------------------------
# graph builders


def test_builder_lifecycle_messages(dev, kernel):
    from cuda_core import launch
    from cuda_core.graph import GraphBuilder

    gb = dev.create_graph_builder()
    with pytest.raises(RuntimeError, match=r"^Graph has not finished building\."):
        gb.complete()
    with pytest.raises(RuntimeError, match="before begin_building"):
        gb.graph_definition  # noqa: B018
    with pytest.raises(
        RuntimeError, match=r"^Graph builder must be building before it can be split\."
    ):
        gb.split(2)
    gb.begin_building()
    with pytest.raises(RuntimeError, match=r"^Graph builder is already building\."):
        gb.begin_building()
    with pytest.raises(RuntimeError, match="capture is in"):
        gb.graph_definition  # noqa: B018
    launch(gb, _one(), kernel)
    with pytest.raises(ValueError, match=r"^Invalid split count: expecting >= 2, got 1"):
        gb.split(1)
    left, right = gb.split(2)
    with pytest.raises(RuntimeError, match="forked"):
        right.graph_definition  # noqa: B018
    launch(right, _one(), kernel)
    with pytest.raises(ValueError, match=r"^Must join with at least two graph builders"):
        GraphBuilder.join(left)
    GraphBuilder.join(left, right)
    with pytest.raises(RuntimeError, match=r"^Graph builder has been closed\."):
        right.complete()
    graph = gb.end_building().complete()
    with pytest.raises(RuntimeError, match=r"^Cannot resume building after building has ended\."):
        gb.begin_building()
    gb.close()
    with pytest.raises(RuntimeError, match="closed"):
        gb.graph_definition  # noqa: B018
    graph.close()


def test_graph_update_sources(dev, kernel):
    from cuda_core import launch

    graph = _graph(dev, kernel).complete()
    unfinished = dev.create_graph_builder().begin_building()
    launch(unfinished, _one(), kernel)
    with pytest.raises(ValueError, match="Graph has not finished building"):
        graph.update(unfinished)
    unfinished.end_building()
    source = _graph(dev, kernel)
    source.close()
    with pytest.raises(ValueError, match=r"^Source graph builder has been closed\."):
        graph.update(source)
    with pytest.raises(TypeError, match="expected GraphBuilder or GraphDefinition"):
        graph.update("not a graph")
    graph.close()
    with pytest.raises(RuntimeError, match=r"^Graph has been closed"):
        graph.launch(dev.default_stream)


def test_builder_callbacks_and_embed(dev, kernel):
    gb = dev.create_graph_builder().begin_building()
    with pytest.raises(ValueError, match="user_data is only supported"):
        gb.callback(print, user_data=b"hello")
    child = dev.create_graph_builder()
    with pytest.raises(ValueError, match=r"^Child graph has not finished building\."):
        gb.embed(child)
    with pytest.raises(TypeError):
        gb.embed(object())
    gb.end_building()
    gb.close()
    child.close()


# ------------------------------------------------------------------------------------------------
# graph definitions and nodes


def test_definition_argument_checks(dev):
    from cuda_core import DeviceMemoryResource
    from cuda_core.graph import GraphDefinition

    g = GraphDefinition()
    for method, args in (("if_then", (42,)), ("if_else", ("x",)), ("while_loop", (None,))):
        with pytest.raises(TypeError, match="GraphCondition"):
            getattr(g, method)(*args)
    with pytest.raises(TypeError, match="GraphCondition"):
        g.switch([1, 2, 3], 4)
    if not dev.properties.memory_pools_supported:
        pytest.skip("the device has no memory pools")
    mr = DeviceMemoryResource(dev)
    buf = mr.allocate(4, stream=dev.default_stream)
    dev.default_stream.sync()
    with pytest.raises(ValueError, match="dst_owner cannot be used when dst is a Buffer"):
        g.memcpy(buf, buf, 4, dst_owner=object())
    with pytest.raises(ValueError, match="src_owner cannot be used when src is a Buffer"):
        g.memcpy(buf, buf, 4, src_owner=object())
    dptr = int(buf.handle)
    buf.close()
    with pytest.raises(ValueError, match="dst Buffer has no active allocation"):
        g.memset(buf, 0xAB, 4)
    with pytest.raises(ValueError, match="dst_owner Buffer has no active allocation"):
        g.memset(dptr, 0xAB, 4, dst_owner=buf)
    with pytest.raises(ValueError, match="src_owner Buffer has no active allocation"):
        g.memcpy(dptr, dptr, 4, src_owner=buf)
    g.close()
    mr.close()


def test_entry_nodes_of_two_graphs_hash_apart(dev):
    from cuda_core.graph import GraphDefinition

    a, b = GraphDefinition(), GraphDefinition()
    assert a._entry != b._entry
    assert hash(a._entry) != hash(b._entry)
    assert a._entry == a._entry and hash(a._entry) == hash(a._entry)
    assert len({a._entry, b._entry, a._entry}) == 2
    assert hash(a._entry) != hash(a)
    a.close()
    b.close()


def test_node_reprs_are_cuda_cores(dev, kernel):
    from cuda_core.graph import GraphDefinition

    g = GraphDefinition()
    stream = dev.create_stream()
    event = stream.record()
    reprs = {
        r"<GraphNode entry>": g._entry,
        r"<EmptyNode handle=0x[0-9a-f]+>": g.join(),
        r"<KernelNode handle=0x[0-9a-f]+ kernel=0x[0-9a-f]+>": g.launch(_one(), kernel),
        r"<EventRecordNode handle=0x[0-9a-f]+ event=0x[0-9a-f]+>": g.record(event),
        r"<EventWaitNode handle=0x[0-9a-f]+ event=0x[0-9a-f]+>": g.wait(event),
        r"<HostCallbackNode handle=0x[0-9a-f]+ callback=\w+>": g.callback(_noop),
        r"<ChildGraphNode handle=0x[0-9a-f]+ child=0x[0-9a-f]+>": g.embed(_child()),
    }
    if dev.properties.memory_pools_supported:
        host = dev.allocate(64, stream=stream)
        alloc = g.allocate(64)
        memset = alloc.memset(alloc.dptr, 7, 64)
        memcpy = memset.memcpy(alloc.dptr, host, 64)
        reprs[r"<AllocNode handle=0x[0-9a-f]+ dptr=0x[0-9a-f]+ size=64>"] = alloc
        reprs[r"<MemsetNode handle=0x[0-9a-f]+ dptr=0x[0-9a-f]+ value=7>"] = memset
        pattern = (
            r"<MemcpyNode handle=0x[0-9a-f]+ dst=0x[0-9a-f]+\([DH]\) src=0x[0-9a-f]+\(D\) size=64>"
        )
        reprs[pattern] = memcpy
        reprs[r"<FreeNode handle=0x[0-9a-f]+ dptr=0x[0-9a-f]+>"] = memcpy.deallocate(alloc.dptr)
    for pattern, node in reprs.items():
        assert re.fullmatch(pattern, repr(node)), (pattern, repr(node))
    stream.sync()
    g.close()
    stream.close()


def _noop():
    pass


def _child():
    from cuda_core.graph import GraphDefinition

    c = GraphDefinition()
    c.join()
    return c


# ------------------------------------------------------------------------------------------------
# events and streams


def test_event_subtraction(dev):
    from cuda_core import EventOptions

    timed = EventOptions(timing_enabled=True)
    s = dev.create_stream()
    e1, e2 = s.record(options=timed), s.record()
    s.sync()
    with pytest.raises(RuntimeError, match=r"^Both Events must be created with timing enabled"):
        e2 - e1
    never = dev.create_event(options=timed)
    with pytest.raises(RuntimeError, match=r"^Both Events must be recorded"):
        never - e1
    with pytest.raises(RuntimeError, match=r"^Both Events must be recorded"):
        e1 - never
    e1.close()
    with pytest.raises(RuntimeError, match=r"^Event has been closed"):
        e1.sync()
    s.close()


def test_closed_streams_and_what_cannot_be_waited(dev):
    s = dev.create_stream()
    with pytest.raises(ValueError, match=r"^only an Event, Stream, or object supporting"):
        s.wait(3)
    with pytest.raises(TypeError, match=r"^Event expected, got int"):
        s.record(3)
    s.close()
    assert int(s.handle) == 0
    for use in (s.sync, s.record, s.__cuda_stream__):
        with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
            use()


def test_launch_arguments_of_the_wrong_type(dev, kernel):
    from cuda_core import launch

    s = dev.create_stream()
    with pytest.raises(TypeError, match=r"^Argument 'kernel' has incorrect type"):
        launch(s, _one(), None)
    with pytest.raises(TypeError, match=r"^Argument 'config' has incorrect type"):
        launch(s, 3, kernel)
    s.close()


def test_device_ordinals(dev):
    from cuda_core import Device

    with pytest.raises(ValueError, match=r"^device_id must be >= 0, got -1"):
        Device(-1)
    n = len(Device.get_all_devices())
    with pytest.raises(ValueError, match=rf"^device_id must be within \[0, {n}\), got {n}"):
        Device(n)


# ------------------------------------------------------------------------------------------------
# memory


def test_peer_access_ordinals(dev):
    from cuda_core import Device, DeviceMemoryResource, DeviceMemoryResourceOptions

    if not dev.properties.memory_pools_supported:
        pytest.skip("the device has no memory pools")
    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions())
    with pytest.raises(ValueError, match=r"device_id must be \>\= 0"):
        mr.peer_accessible_by = [-1]
    n = len(Device.get_all_devices())
    with pytest.raises(ValueError, match=r"device_id must be within \[0, \d+\)"):
        mr.peer_accessible_by = [n]
    mr.close()


def test_managed_operations_on_memory_that_is_not_managed(dev):
    from cuda_core import Host, ManagedBuffer

    plain = dev.allocate(4096, stream=dev.default_stream)
    dev.default_stream.sync()
    buf = ManagedBuffer.from_handle(plain.handle, plain.size, owner=plain)
    s = dev.create_stream()
    with pytest.raises(ValueError, match="managed-memory allocation"):
        buf.read_mostly = True
    with pytest.raises(ValueError, match="managed-memory allocation"):
        buf.prefetch(dev, stream=s)
    with pytest.raises(ValueError, match="location is required"):
        buf.prefetch(None, stream=s)
    with pytest.raises(TypeError, match="Device, Host, or None"):
        buf.prefetch("device", stream=s)
    # CUDA 13: the kind is refused; CUDA 12: NUMA hosts are refused first (as cuda.core)
    with pytest.raises(
        (ValueError, TypeError), match=r"does not support location_type='host_numa'|13\.0"
    ):
        buf.accessed_by.add(Host(numa_id=0))
    s.close()
    plain.close()


def test_batched_and_single_copies(dev):
    from cuda_core import LegacyPinnedMemoryResource
    from cuda_core.utils import copy_batch

    s = dev.create_stream()
    pinned = LegacyPinnedMemoryResource()
    src, dst = pinned.allocate(1024), dev.allocate(2048, stream=s)
    with pytest.raises(ValueError, match="size mismatch at index 0"):
        copy_batch(s, [src], [dst])
    gb = dev.create_graph_builder().begin_building()
    with pytest.raises(TypeError, match="Argument 'stream' has incorrect type"):
        copy_batch(gb, [src], [dst])
    gb.end_building()
    gb.close()
    with pytest.raises(TypeError, match="options must be CopyOptions"):
        src.copy_to(dst, stream=s, options=42)
    dst.close(s)
    src.close()
    s.close()


# ------------------------------------------------------------------------------------------------
# views of host arrays


@pytest.mark.parametrize(
    "x",
    [
        np.array([1, 2, 3], dtype=np.int32),
        np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float64, order="F"),
        np.arange(20, dtype=np.int32).reshape(4, 5)[::2, ::2],
        np.array(3.14),
    ],
    ids=["1d", "fortran", "strided", "scalar"],
)
def test_a_view_through_the_array_interface_is_on_the_current_device(dev, x):
    from cuda_core.utils import StridedMemoryView

    view = StridedMemoryView.from_array_interface(x)
    assert view.device_id == dev.device_id  # cuda.core's value (the current context's device)
    assert view.is_device_accessible is False
    assert view.ptr == x.ctypes.data
    assert view.__dlpack_device__() == (1, 0)  # still host memory to DLPack
