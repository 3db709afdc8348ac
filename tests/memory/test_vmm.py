"""VirtualMemoryResource (CUDA VMM) and the cuda_core.typing module.

CPU tier: options (defaults, string values, validation), signatures, typing names.
GPU tier: allocate (granularity rounding), grow with modify_allocation, write with a kernel,
read back, free; device memory back to where it started.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import numpy as np
import pytest

import cuda_core
from cuda_core import VirtualMemoryBuffer, VirtualMemoryResource, VirtualMemoryResourceOptions
from cuda_core.typing import (
    VirtualMemoryAccessType,
    VirtualMemoryAllocationType,
    VirtualMemoryGranularityType,
    VirtualMemoryHandleType,
    VirtualMemoryLocationType,
)

# -- CPU tier ----------------------------------------------------------------------------------


def test_options_defaults_match_cuda_core_documentation():
    o = VirtualMemoryResourceOptions()
    assert o.allocation_type == "pinned" and o.allocation_type is VirtualMemoryAllocationType.PINNED
    assert o.location_type == "device"
    assert o.handle_type == "posix_fd"
    assert o.granularity == "recommended"
    assert o.gpu_direct_rdma is False
    assert o.addr_hint == 0 and o.addr_align is None
    assert tuple(o.peers) == ()
    assert o.self_access == "rw" and o.peer_access == "rw"
    assert [f.name for f in dataclasses.fields(o)] == [
        "allocation_type", "location_type", "handle_type", "granularity", "gpu_direct_rdma",
        "addr_hint", "addr_align", "peers", "self_access", "peer_access",
    ]  # fmt: skip


def test_options_accept_strings_and_enums():
    o = VirtualMemoryResourceOptions(
        location_type="host",
        handle_type=None,
        granularity=VirtualMemoryGranularityType.MINIMUM,
        peers=[1, 2],
        self_access="r",
        peer_access=None,
        addr_align=1 << 21,
    )
    assert o.location_type is VirtualMemoryLocationType.HOST
    assert o.handle_type is None
    assert o.granularity == "minimum"
    assert o.peers == (1, 2)
    assert o.self_access is VirtualMemoryAccessType.READ and o.peer_access is None
    assert (
        VirtualMemoryResourceOptions(handle_type="fabric").handle_type
        is VirtualMemoryHandleType.FABRIC
    )


@pytest.mark.parametrize(
    "field,value,exc,match",
    [
        ("location_type", "gpu", ValueError, "location_type must be one of"),
        ("handle_type", "bogus", ValueError, "handle_type must be one of"),
        ("handle_type", "win32", NotImplementedError, "win32"),
        ("granularity", "max", ValueError, "granularity must be"),
        ("allocation_type", "paged", ValueError, "allocation_type must be"),
        ("self_access", "w", ValueError, "self_access must be"),
        ("peer_access", "x", ValueError, "peer_access must be"),
        ("gpu_direct_rdma", 1, TypeError, "gpu_direct_rdma must be a bool"),
        ("addr_hint", -1, ValueError, "addr_hint"),
        ("addr_align", 0, ValueError, "addr_align"),
        ("peers", 3, TypeError, "peers must be an iterable"),
        ("peers", [-1], ValueError, "peers"),
        ("peers", ["0"], TypeError, "peers"),
    ],
)
def test_options_validation(field, value, exc, match):
    with pytest.raises(exc, match=match):
        VirtualMemoryResourceOptions(**{field: value})


def test_signatures_follow_cuda_core():
    sig = inspect.signature(VirtualMemoryResource.__init__)
    assert list(sig.parameters) == ["self", "device_id", "config"]
    assert sig.parameters["config"].default is None
    sig = inspect.signature(VirtualMemoryResource.modify_allocation)
    assert list(sig.parameters) == ["self", "buf", "new_size", "config"]
    sig = inspect.signature(VirtualMemoryResource.allocate)
    assert sig.parameters["stream"].kind is inspect.Parameter.KEYWORD_ONLY
    assert issubclass(VirtualMemoryResource, cuda_core.MemoryResource)


def test_resource_rejects_a_bad_device_argument():
    with pytest.raises(TypeError, match="device_id must be a Device or an int"):
        VirtualMemoryResource("0")


def test_typing_module_has_cuda_core_names():
    import cuda_core.typing as ours

    assert ours.__all__ == sorted(ours.__all__)
    for name in ours.__all__:
        assert hasattr(ours, name), name
    assert VirtualMemoryHandleType.POSIX_FD == "posix_fd"
    assert isinstance(ours.IsStreamType, type)
    ref = pytest.importorskip("cuda.core.typing")
    assert set(ours.__all__) == set(ref.__all__)
    for name in ref.__all__:
        r, o = getattr(ref, name), getattr(ours, name)
        if hasattr(r, "__members__"):
            assert {k: v.value for k, v in r.__members__.items()} == {
                k: v.value for k, v in o.__members__.items()
            }, name


def test_typing_is_exported_from_experimental_namespace():
    with warnings.catch_warnings():  # its DeprecationWarning is tests/test_experimental.py's
        warnings.simplefilter("ignore", DeprecationWarning)
        import cuda_core.experimental as exp

    assert exp.VirtualMemoryResource is VirtualMemoryResource
    assert exp.GraphMemoryResource is cuda_core.GraphMemoryResource
    assert exp.ManagedBuffer is cuda_core.ManagedBuffer


def test_virtual_memory_buffer_is_the_public_buffer_class_of_the_resource():
    assert issubclass(VirtualMemoryBuffer, cuda_core.Buffer)
    assert cuda_core.VirtualMemoryBuffer is VirtualMemoryBuffer
    assert "VirtualMemoryBuffer" in cuda_core.__all__
    assert cuda_core._memory.VirtualMemoryBuffer is VirtualMemoryBuffer
    assert inspect.signature(VirtualMemoryResource.allocate).return_annotation in (
        "VirtualMemoryBuffer",
        VirtualMemoryBuffer,
    )
    assert VirtualMemoryBuffer.__slots__ == ()  # the Buffer's layout, nothing added
    with pytest.raises(RuntimeError, match="cannot be instantiated directly"):
        VirtualMemoryBuffer()


# -- GPU tier ----------------------------------------------------------------------------------

FILL_SRC = r"""
extern "C" __global__ void iota3(unsigned int* out, unsigned long long n)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        out[i] = (unsigned int)(i * 3u + 1u);
    }
}
"""


def _free_bytes() -> int:
    from cuda.bindings import driver

    err, free, _total = driver.cuMemGetInfo()
    assert not err
    return int(free)


def _granularity(dev, minimum=False) -> int:
    from cuda.bindings import driver

    prop = driver.CUmemAllocationProp()
    prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = dev.device_id
    flag = driver.CUmemAllocationGranularity_flags
    err, g = driver.cuMemGetAllocationGranularity(
        prop,
        flag.CU_MEM_ALLOC_GRANULARITY_MINIMUM
        if minimum
        else flag.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
    )
    assert not err
    return int(g)


@pytest.mark.gpu
def test_vmm_allocate_grow_write_read_free(dev):
    from cuda_core import LaunchConfig, Program, ProgramOptions, launch

    if not dev.properties.virtual_memory_management_supported:
        pytest.skip("the device has no virtual memory management")
    ker = (
        Program(FILL_SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        .compile("cubin")
        .get_kernel("iota3")
    )
    s = dev.create_stream()
    mr = VirtualMemoryResource(dev, VirtualMemoryResourceOptions(handle_type=None))
    assert mr.device_id == dev.device_id and mr.is_device_accessible and not mr.is_host_accessible
    gran = _granularity(dev)
    dev.sync()
    start = _free_bytes()

    buf = mr.allocate(gran + 1, stream=s)  # not a multiple: rounded up
    assert buf.size == 2 * gran and type(buf) is VirtualMemoryBuffer
    assert buf.memory_resource is mr and buf.device_id == dev.device_id
    base = buf.handle
    n0 = buf.size // 4
    launch(s, LaunchConfig(grid=64, block=256), ker, buf, np.uint64(n0))
    s.sync()

    new_size = 64 << 20
    grown = mr.modify_allocation(buf, new_size)
    assert grown is buf and buf.size == new_size and not buf.is_closed
    host = np.empty(n0, dtype=np.uint32)
    buf_view_first = cuda_core.Buffer.from_handle(buf.handle, n0 * 4, owner=buf)
    buf_view_first.copy_to(host, stream=s)
    assert (host == np.arange(n0, dtype=np.uint32) * 3 + 1).all(), "contents lost by the growth"

    n = new_size // 4
    launch(s, LaunchConfig(grid=256, block=256), ker, buf, np.uint64(n))
    out = np.empty(n, dtype=np.uint32)
    buf.copy_to(out, stream=s)
    assert (out == (np.arange(n, dtype=np.uint64) * 3 + 1).astype(np.uint32)).all()
    assert start - _free_bytes() >= new_size, "the grown mapping holds no physical memory"
    print("grew in place" if buf.handle == base else "moved to a new range")

    buf_view_first.close()
    buf.close()
    buf.close()  # idempotent
    assert buf.is_closed
    assert abs(_free_bytes() - start) <= (2 << 20), "memory not given back after close"
    s.close()


@pytest.mark.gpu
def test_vmm_deallocate_then_close_frees_once_and_bad_use(dev):
    if not dev.properties.virtual_memory_management_supported:
        pytest.skip("the device has no virtual memory management")
    mr = VirtualMemoryResource(dev, {"handle_type": None, "granularity": "minimum"})
    gran = _granularity(dev, minimum=True)
    dev.sync()
    start = _free_bytes()
    buf = mr.allocate(3 * gran)
    assert buf.size == 3 * gran
    mr.deallocate(buf.handle, buf.size)
    buf.close()  # already freed: nothing more, no error
    assert abs(_free_bytes() - start) <= (2 << 20)

    other = VirtualMemoryResource(dev, {"handle_type": None})
    b2 = other.allocate(1)
    assert b2.size == _granularity(dev)
    with pytest.raises(ValueError, match="allocated by this VirtualMemoryResource"):
        mr.modify_allocation(b2, 2 * b2.size)
    with pytest.raises(TypeError, match="buf must be a Buffer"):
        mr.modify_allocation(object(), 10)
    same = other.modify_allocation(b2, 10)  # not larger: nothing changes
    assert same is b2 and b2.size == _granularity(dev)
    b2.close()
    with pytest.raises(RuntimeError, match="closed"):
        other.modify_allocation(b2, 4 * gran)
    assert mr.allocate(0).size == 0


@pytest.mark.gpu
def test_vmm_posix_fd_handle_or_clear_error(dev):
    if not dev.properties.virtual_memory_management_supported:
        pytest.skip("the device has no virtual memory management")
    mr = VirtualMemoryResource(dev)  # default handle_type="posix_fd"
    if dev.properties.handle_type_posix_file_descriptor_supported:
        b = mr.allocate(1)
        assert b.size >= 1
        b.close()
    else:
        with pytest.raises(cuda_core.CUDAError, match="handle_type"):
            mr.allocate(1)


@pytest.mark.gpu
def test_closing_on_a_capturing_stream_raises_and_leaves_the_buffer_open(dev):
    if not dev.properties.virtual_memory_management_supported:
        pytest.skip("the device has no virtual memory management")
    mr = VirtualMemoryResource(dev, {"handle_type": None})
    s, other = dev.create_stream(), dev.create_stream()
    recorded = mr.allocate(1, stream=s)  # s is its deallocation stream
    given = mr.allocate(1)
    assert type(recorded) is VirtualMemoryBuffer and type(mr.allocate(0)) is VirtualMemoryBuffer
    b = s.create_graph_builder().begin_building()
    message = r"^cannot close a VirtualMemoryResource buffer on a capturing stream"
    with pytest.raises(RuntimeError, match=message):
        recorded.close()  # the recorded stream is capturing
    with pytest.raises(RuntimeError, match=message):
        given.close(stream=s)  # the given one is
    with pytest.raises(RuntimeError, match=message):
        given.close(stream=b)  # a graph builder is its capturing stream
    assert not recorded.is_closed and not given.is_closed
    assert recorded.handle and given.handle
    given.close(stream=other)  # another stream is fine while s captures
    assert given.is_closed
    b.end_building()
    b.close()
    recorded.close()  # the capture is over: the stream is synchronised, then the memory unmapped
    assert recorded.is_closed and recorded.handle == 0
    s.close()
    other.close()
