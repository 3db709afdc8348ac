"""Explicit graphs (GraphDefinition, nodes, conditionals, executable-node updates), CPU tier:
names, construction guards, argument checking, condition packing, NVRTC support for
``cudaGraphSetConditional``. The same API on a GPU: test_graph_def_gpu.py.
"""

from __future__ import annotations

import ctypes
import re
import struct
import weakref

import numpy as np
import pytest

import cuda_core.graph as G
from cuda_core import CUDAError
from cuda_core import _trampolines as _table
from cuda_core._kernel_arg_handler import ParamHolder
from cuda_core.graph import _params as P
from cuda_core.graph._condition import GraphCondition, check_branch_count, check_condition

# A kernel sets a condition with cudaGraphSetConditional; NVRTC knows the handle type but not
# the function, so the source declares it (or includes <cuda_device_runtime_api.h> from a CUDA
# toolkit with ProgramOptions(include_path=...)).
KERNELS = r"""
extern "C" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int value);

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
extern "C" __global__ void set_cond(cudaGraphConditionalHandle h, unsigned int v)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) cudaGraphSetConditional(h, v);
}
// One loop iteration: count it, decrement the counter, stop the loop when it reaches zero.
extern "C" __global__ void countdown(cudaGraphConditionalHandle h, int* counter, int* iterations)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        iterations[0] += 1;
        counter[0] -= 1;
        if (counter[0] <= 0) cudaGraphSetConditional(h, 0);
    }
}
"""
N = 256

EXPECTED_NAMES = {
    "AllocNode",
    "ChildGraphNode",
    "ConditionalNode",
    "EmptyNode",
    "EventRecordNode",
    "EventWaitNode",
    "ExecutableChildGraphNode",
    "ExecutableEventRecordNode",
    "ExecutableEventWaitNode",
    "ExecutableGraphNode",
    "ExecutableHostCallbackNode",
    "ExecutableKernelNode",
    "ExternalSemaphoresSignalNode",  # an extension of cuda_core (external semaphores)
    "ExternalSemaphoresWaitNode",
    "ExecutableMemcpyNode",
    "ExecutableMemsetNode",
    "FreeNode",
    "Graph",
    "GraphBuilder",
    "GraphCompleteOptions",
    "GraphCondition",
    "GraphDebugPrintOptions",
    "GraphDefinition",
    "GraphNode",
    "HostCallbackNode",
    "IfElseNode",
    "IfNode",
    "KernelNode",
    "MemcpyNode",
    "MemsetNode",
    "SwitchNode",
    "WhileNode",
}


# --------------------------------------------------------------------------------------------
# CPU tier


def test_graph_module_names():
    assert set(G.__all__) == EXPECTED_NAMES
    assert G.__all__ == sorted(G.__all__)
    for name in G.__all__:
        assert getattr(G, name).__module__.startswith("cuda_core."), name
        assert (getattr(G, name).__doc__ or "").strip(), name
    import cuda_core

    assert G.Graph is cuda_core.Graph and G.GraphBuilder is cuda_core.GraphBuilder


def test_node_kind_hierarchy():
    for name in (
        "EmptyNode",
        "KernelNode",
        "MemcpyNode",
        "MemsetNode",
        "HostCallbackNode",
        "EventRecordNode",
        "EventWaitNode",
        "ChildGraphNode",
        "AllocNode",
        "FreeNode",
        "ConditionalNode",
    ):
        assert issubclass(getattr(G, name), G.GraphNode), name
    for name in ("IfNode", "IfElseNode", "SwitchNode", "WhileNode"):
        assert issubclass(getattr(G, name), G.ConditionalNode), name
    for name in (
        "Kernel",
        "Memcpy",
        "Memset",
        "HostCallback",
        "EventRecord",
        "EventWait",
        "ChildGraph",
    ):
        assert issubclass(getattr(G, f"Executable{name}Node"), G.ExecutableGraphNode)
    for name in ("Kernel", "Memcpy", "Memset"):
        cls = getattr(G, f"Executable{name}Node")
        assert all(hasattr(cls, a) for a in ("enable", "disable", "is_enabled", "update"))


def test_direct_construction_names_the_factory():
    with pytest.raises(RuntimeError, match="builder methods"):
        G.GraphNode()
    with pytest.raises(RuntimeError, match="create_condition"):
        GraphCondition()
    with pytest.raises(RuntimeError, match=r"graph\[node\]"):
        G.ExecutableGraphNode()
    with pytest.raises(RuntimeError, match="instantiate"):
        G.Graph()


def _fake_condition(value: int, key: int = 1) -> GraphCondition:
    from cuda.bindings import driver

    c = object.__new__(GraphCondition)
    c._handle = driver.CUgraphConditionalHandle(value)
    c._graph_key = key
    c._default = None
    return c


def test_condition_packs_as_its_8_byte_handle():
    cond = _fake_condition(0x1122334455667788)
    holder = ParamHolder((cond, np.int32(7)))
    assert holder.sizes == (8, 4)
    assert holder.data[:8] == struct.pack("<Q", 0x1122334455667788)
    assert holder.data[8:12] == struct.pack("<i", 7)
    # the raw handle packs the same way
    assert ParamHolder((cond.handle,)).data == holder.data[:8]
    assert int(cond) == 0x1122334455667788
    assert cond == _fake_condition(0x1122334455667788) and hash(cond) == hash(
        _fake_condition(0x1122334455667788)
    )
    assert "0x1122334455667788" in repr(cond)


def test_condition_checks():
    cond = _fake_condition(5, key=10)
    assert check_condition(cond, 10) is cond
    with pytest.raises(TypeError, match="condition must be a GraphCondition"):
        check_condition(5, 10)
    with pytest.raises(ValueError, match="created in this graph") as info:
        check_condition(cond, 11)
    # the driver's refusal, as cuda.core raises it, caught first and explained
    assert isinstance(info.value, CUDAError) and info.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert info.value.api == "cuGraphAddNode"
    # usable in weak containers, as cuda.core's conditions are
    ref = weakref.ref(cond)
    assert ref() is cond and cond in weakref.WeakSet([cond])


def test_switch_branch_count_checks():
    assert check_branch_count(3) == 3
    assert check_branch_count(np.int64(1)) == 1
    for bad in (0, -2):
        with pytest.raises(CUDAError, match=r"count must be an integer >= 1") as info:
            check_branch_count(bad)
        assert isinstance(info.value, ValueError) and info.value.name == "CUDA_ERROR_INVALID_VALUE"
    with pytest.raises(TypeError, match="count must be an integer"):
        check_branch_count("2")


def test_refused_update_says_why_in_cuda_cores_words():
    from cuda.bindings import driver

    from cuda_core.graph._driver import UPDATE_REASONS, update_failure_text

    r = driver.CUgraphExecUpdateResult
    text = update_failure_text(int(r.CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED))
    assert re.fullmatch(
        r"Graph update failed: .+ \(CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED\)", text
    )
    # every failure the bindings know has its own explanation
    for member in r:
        if member != r.CU_GRAPH_EXEC_UPDATE_SUCCESS:
            assert member.name in UPDATE_REASONS
            assert (
                update_failure_text(int(member))
                == f"Graph update failed: {UPDATE_REASONS[member.name]} ({member.name})"
            )
    assert update_failure_text(None).endswith("(CU_GRAPH_EXEC_UPDATE_ERROR)")
    assert "CUgraphExecUpdateResult 999" in update_failure_text(999)


def test_edge_to_a_non_node_is_a_type_error_in_cuda_cores_words():
    node = object.__new__(G.EmptyNode)  # the type check comes before any use of the node
    for bad in ("not a node", 42):
        with pytest.raises(
            TypeError, match=r"^expected GraphNode, got .*: node must be a GraphNode"
        ):
            node._same_graph(bad, "node")


def test_memset_value_forms():
    assert P.memset_value(7) == (1, 7)
    assert P.memset_value(np.uint16(0x1234)) == (2, 0x1234)
    assert P.memset_value(np.float32(1.0)) == (4, 0x3F800000)
    assert P.memset_value(b"\x01\x02") == (2, 0x0201)
    with pytest.raises(ValueError, match=r"value must be an int in \[0, 256\)"):
        P.memset_value(256)
    with pytest.raises(ValueError, match="value must be"):
        P.memset_value(np.float64(1.0))
    with pytest.raises(TypeError, match="value must be"):
        P.memset_value("x")


def test_address_and_shape_checks():
    assert P.address(0x1000, "dst") == (0x1000, None)
    owner = object()
    assert P.address(0x1000, "dst", owner) == (0x1000, owner)
    with pytest.raises(TypeError, match="dst must be a Buffer or an int address"):
        P.address(1.5, "dst")
    with pytest.raises(TypeError, match="src must be a Buffer or an int address"):
        P.address(True, "src")
    with pytest.raises(ValueError, match="dst must be a non-negative address"):
        P.address(-1, "dst")
    p, keep = P.memset_params(0x2000, np.uint16(3), 10, 2, 64, dst_owner=owner)
    assert (int(p.dst), p.elementSize, p.value, p.width, p.height, p.pitch) == (
        0x2000,
        2,
        3,
        10,
        2,
        64,
    )
    assert keep is owner
    with pytest.raises(ValueError, match="pitch must be at least"):
        P.memset_params(0x2000, 0, 100, 2, 10)
    with pytest.raises(ValueError, match="width must be an integer >= 1"):
        P.memset_params(0x2000, 0, 0)
    c, _ = P.memcpy_params(0x3000, 0x4000, 128)
    assert (int(c.dstDevice), int(c.srcDevice), c.WidthInBytes, c.Height, c.Depth) == (
        0x3000,
        0x4000,
        128,
        1,
        1,
    )
    with pytest.raises(ValueError, match="size must be an integer >= 1"):
        P.memcpy_params(0x3000, 0x4000, 0)


def test_config_kernel_event_checks():
    from cuda_core import LaunchConfig

    with pytest.raises(TypeError, match="config must be a LaunchConfig"):
        P.check_config((1, 1))
    with pytest.raises(ValueError, match="without cluster or cooperative"):
        P.check_config(LaunchConfig(grid=1, block=1, cluster=1))
    with pytest.raises(ValueError, match="without cluster or cooperative"):
        P.check_config(LaunchConfig(grid=1, block=1, is_cooperative=True))
    with pytest.raises(TypeError, match="kernel must be a Kernel"):
        P.check_kernel("add_one")
    with pytest.raises(TypeError, match="event must be an Event"):
        P.check_event(None)
    with pytest.raises(TypeError, match="device must be a Device"):
        P.device_id("cuda:0")
    assert P.device_id(3) == 3


def test_host_callback_forms():
    fn = lambda: None  # noqa: E731
    assert _table.host_callback(fn, None) == (fn, 0, 0, None)
    with pytest.raises(ValueError, match="user_data must be None for a Python callable"):
        _table.host_callback(fn, b"x")
    with pytest.raises(TypeError, match="fn must be a callable"):
        _table.host_callback(42, None)
    good = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda p: None)
    py_fn, addr, ud, keep = _table.host_callback(good, 1234)
    assert py_fn is None and addr == ctypes.cast(good, ctypes.c_void_p).value and ud == 1234
    _, _, ud, keep = _table.host_callback(good, b"abc")
    assert ctypes.string_at(ud, 3) == b"abc" and keep[0] is good  # copied and kept by the graph
    bad = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda p: 0)
    with pytest.raises(TypeError, match="CUhostFn"):
        _table.host_callback(bad, None)


def test_set_conditional_compiles_with_nvrtc():
    # The declaration in KERNELS is enough: ptxas resolves cudaGraphSetConditional itself.
    from cuda_core import Program, ProgramOptions

    obj = Program(KERNELS, code_type="c++", options=ProgramOptions(arch="sm_90")).compile("cubin")
    assert len(obj.code) > 0
    ptx = (
        Program(KERNELS, code_type="c++", options=ProgramOptions(arch="sm_90")).compile("ptx").code
    )
    text = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert "cudaGraphSetConditional" in text


def test_adjacency_proxy_is_a_mutable_set():
    from collections.abc import MutableSet

    from cuda_core.graph._node import AdjacencySetProxy

    assert issubclass(AdjacencySetProxy, MutableSet)
