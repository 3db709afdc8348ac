"""GraphMemoryResource: allocations inside graphs.

CPU tier: names and signatures. GPU tier: allocation and free nodes in a captured graph,
replayed 1,000 times without growth; refusal outside capture; attributes and trim.
"""

from __future__ import annotations

import inspect

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
    assert gmr.device_id == dev.device_id and gmr.is_device_accessible and not gmr.is_host_accessible
    s = dev.create_stream()
    with pytest.raises(RuntimeError, match="not capturing"):
        gmr.allocate(256, stream=s)
    with pytest.raises(TypeError):
        gmr.allocate(256)
    with pytest.raises(RuntimeError, match="not capturing"):
        gmr.deallocate(0, 256, stream=s)
    gmr.close()  # no-op
    s.close()


@pytest.mark.gpu
def test_graph_alloc_free_replayed_1000_times_without_growth(dev):
    from cuda_core import LaunchConfig, Program, ProgramOptions, launch

    obj = Program(SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin")
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
    with pytest.raises(ValueError, match="used_mem_high must be 0"):
        attrs.used_mem_high = 5
    graph.close()
    gmr.trim()
    assert gmr.attributes.reserved_mem_current <= reserved
    out.close()
    s.close()
