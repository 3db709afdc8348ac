"""Copies with transfer hints: Host, CopyOptions, copy_batch and Buffer copies with options."""

from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import LEGACY_DEFAULT_STREAM, Buffer, Device, Host
from cuda_core._compat import has
from cuda_core.utils import CopyOptions, MemcpyOverlapMode, MemcpySrcAccessOrder, copy_batch
from tests.helpers import cuda13_bindings
from tests.memory.test_memory import HostIntResource

_LOC = driver.CUmemLocationType

# -- CPU tier -------------------------------------------------------------------------------------


def test_host_is_a_singleton_per_arguments():
    assert Host() is Host()
    assert Host(numa_id=1) is Host(numa_id=1) and Host(numa_id=1) is not Host()
    assert Host.numa_current() is Host(is_numa_current=True) and Host.numa_current() is not Host()
    assert (Host(numa_id=2).numa_id, Host().numa_id, Host.numa_current().is_numa_current) == (
        2,
        None,
        True,
    )
    assert (
        repr(Host(numa_id=3)) == "Host(numa_id=3)"
        and repr(Host.numa_current()) == "Host.numa_current()"
    )
    with pytest.raises(ValueError, match="mutually exclusive"):
        Host(numa_id=0, is_numa_current=True)
    for bad in (-1, 1.0, True):
        with pytest.raises(TypeError, match="numa_id"):
            Host(numa_id=bad)


def test_copy_options_normalise_and_check():
    o = CopyOptions()
    assert (
        o.src_access_order is MemcpySrcAccessOrder.STREAM
        and o.overlap_mode is MemcpyOverlapMode.DEFAULT
    )
    o = CopyOptions(src_access_order="during_api_call", overlap_mode="prefer_overlap_with_compute")
    assert o.src_access_order is MemcpySrcAccessOrder.DURING_API_CALL
    assert o.overlap_mode is MemcpyOverlapMode.PREFER_OVERLAP_WITH_COMPUTE
    with pytest.raises(ValueError, match="src_access_order"):
        CopyOptions(src_access_order="sometimes")
    with pytest.raises(ValueError, match="overlap_mode"):
        CopyOptions(overlap_mode="maybe")
    with pytest.raises(TypeError, match="dst_location_hint"):
        CopyOptions(dst_location_hint=0)


def test_copy_options_become_driver_attributes():
    order = driver.CUmemcpySrcAccessOrder
    a = CopyOptions()._attributes()
    assert a.srcAccessOrder == order.CU_MEMCPY_SRC_ACCESS_ORDER_STREAM and int(a.flags) == 0
    a = CopyOptions("any", src_location_hint=Host(numa_id=1), dst_location_hint=Host(),
                    overlap_mode="prefer_overlap_with_compute")._attributes()  # fmt: skip
    assert a.srcAccessOrder == order.CU_MEMCPY_SRC_ACCESS_ORDER_ANY
    assert (a.srcLocHint.type, a.srcLocHint.id) == (_LOC.CU_MEM_LOCATION_TYPE_HOST_NUMA, 1)
    assert a.dstLocHint.type == _LOC.CU_MEM_LOCATION_TYPE_HOST
    assert int(a.flags) == int(driver.CUmemcpyFlags.CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)
    assert CopyOptions(src_location_hint=Host.numa_current())._attributes().srcLocHint.type == (
        _LOC.CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT
    )


def test_copy_batch_checks_its_arguments_first():
    mr = HostIntResource()
    a, b, c = mr.allocate(8), mr.allocate(8), mr.allocate(16)
    with pytest.raises(TypeError, match="sequence of Buffers"):
        copy_batch(LEGACY_DEFAULT_STREAM, a, [b])
    with pytest.raises(TypeError, match=r"dsts\[1\]"):
        copy_batch(LEGACY_DEFAULT_STREAM, [a, b], [b, 3])
    with pytest.raises(ValueError, match="same length"):
        copy_batch(LEGACY_DEFAULT_STREAM, [a, b], [c])
    with pytest.raises(ValueError, match="one CopyOptions per copy"):
        copy_batch(LEGACY_DEFAULT_STREAM, [a], [b], options=[CopyOptions(), CopyOptions()])
    with pytest.raises(TypeError, match="options"):
        copy_batch(LEGACY_DEFAULT_STREAM, [a], [b], options="stream")
    with pytest.raises(TypeError, match="legacy default stream"):
        copy_batch(LEGACY_DEFAULT_STREAM, [a], [b])


# -- GPU tier -------------------------------------------------------------------------------------


@pytest.fixture
def gpu():
    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    yield dev, s
    s.sync()
    s.close()


def _filled(dev, s, data):
    buf = dev.allocate(data.nbytes, stream=s)
    buf.copy_from(data, stream=s)
    return buf


def _read(buf, s, dtype=np.uint8):
    out = np.empty(buf.size // np.dtype(dtype).itemsize, dtype)
    buf.copy_to(out, stream=s)
    return out


@pytest.mark.gpu
def test_copy_batch_copies_every_pair(gpu):
    dev, s = gpu
    datas = [np.arange(n, dtype=np.uint8) * (i + 1) for i, n in enumerate((256, 4096, 1 << 20))]
    srcs = [_filled(dev, s, d) for d in datas]
    for options in (None, CopyOptions(overlap_mode="prefer_overlap_with_compute"),
                    [CopyOptions(), CopyOptions("any"), CopyOptions("during_api_call")]):  # fmt: skip
        dsts = [dev.allocate(d.nbytes, stream=s) for d in datas]
        copy_batch(s, srcs, dsts, options=options)
        for d, dst in zip(datas, dsts):
            np.testing.assert_array_equal(_read(dst, s), d)
            dst.close()
    with pytest.raises(ValueError, match="empty batch"):  # refused, as in cuda.core
        copy_batch(s, [], [])
    with pytest.raises(ValueError, match=r"^copy_batch: buffer size mismatch at index 0"):
        copy_batch(s, [srcs[0]], [srcs[1]])
    closed = dev.allocate(256, stream=s)
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        copy_batch(s, [srcs[0]], [closed])
    for b in srcs:
        b.close()


@pytest.mark.gpu
def test_location_hints_on_managed_memory(gpu):
    from cuda_core import ManagedMemoryResource

    dev, s = gpu
    if not dev.properties.concurrent_managed_access:
        pytest.skip("the device has no concurrent managed access")
    try:
        mr = ManagedMemoryResource()
    except Exception as exc:  # a driver without managed pools
        pytest.skip(f"no managed memory pool: {exc}")
    data = np.arange(1 << 16, dtype=np.uint8)
    src = _filled(dev, s, data)
    dst = mr.allocate(data.nbytes, stream=s)
    back = dev.allocate(data.nbytes, stream=s)
    dst.copy_from(src, stream=s, options=CopyOptions(dst_location_hint=dev))
    back.copy_from(
        dst, stream=s, options=CopyOptions(src_location_hint=Host(), dst_location_hint=dev)
    )
    np.testing.assert_array_equal(_read(back, s), data)
    for b in (src, dst, back):
        b.close(s)


@pytest.mark.gpu
def test_buffer_copies_with_options(gpu):
    dev, s = gpu
    data = np.arange(4096, dtype=np.uint8)
    src = _filled(dev, s, data)
    dst = dev.allocate(data.nbytes, stream=s)
    assert dst.copy_from(src, stream=s, options=CopyOptions("any")) is None
    np.testing.assert_array_equal(_read(dst, s), data)
    made = src.copy_to(stream=s, options=CopyOptions())
    assert isinstance(made, Buffer) and made.size == src.size
    np.testing.assert_array_equal(_read(made, s), data)
    with pytest.raises(TypeError, match="between Buffers"):
        src.copy_to(np.empty(4096, np.uint8), stream=s, options=CopyOptions())
    with pytest.raises(TypeError, match="options"):
        src.copy_to(dst, stream=s, options={"src_access_order": "any"})
    with pytest.raises(TypeError, match="legacy default stream"):
        dst.copy_from(src, stream=dev.default_stream, options=CopyOptions())
    dst.copy_from(src, stream=dev.default_stream)  # without options the legacy stream is fine
    b = s.create_graph_builder()
    b.begin_building()
    with pytest.raises(TypeError, match="graph"):
        dst.copy_from(src, stream=b, options=CopyOptions())
    # cuda.core's wording (its copy_batch takes only a Stream), then ours
    with pytest.raises(
        TypeError, match=r"^Argument 'stream' has incorrect type .*copy_batch: a graph builder"
    ):
        copy_batch(b, [src], [dst])
    with pytest.raises(TypeError, match="capturing"):
        copy_batch(s, [src], [dst])  # the stream under capture
    b.end_building()
    b.close()
    for x in (src, dst, made):
        x.close(s)


def test_batch_memory_operations_check_their_arguments_first():
    from cuda_core.utils import discard_batch, discard_prefetch_batch, prefetch_batch

    mr = HostIntResource()
    a, b = mr.allocate(8), mr.allocate(8)
    with pytest.raises(TypeError, match="sequence of Buffers"):
        prefetch_batch(LEGACY_DEFAULT_STREAM, a, Host())
    with pytest.raises(TypeError, match=r"buffers\[1\]"):
        discard_batch(LEGACY_DEFAULT_STREAM, [a, "b"])
    with pytest.raises(ValueError, match="one Device or Host per buffer"):
        discard_prefetch_batch(LEGACY_DEFAULT_STREAM, [a, b], [Host()])
    with pytest.raises(TypeError, match=r"locations\[0\]"):
        prefetch_batch(LEGACY_DEFAULT_STREAM, [a], [0])
    with pytest.raises(TypeError, match="legacy default stream"):
        prefetch_batch(LEGACY_DEFAULT_STREAM, [a, b], Host())
    b.close()
    with pytest.raises(RuntimeError, match="closed"):
        discard_batch(LEGACY_DEFAULT_STREAM, [a, b])


def _last_prefetch(buf) -> int:
    """``CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION`` of a managed buffer (-1: the host)."""
    attr = driver.CUmem_range_attribute.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION
    err, value = driver.cuMemRangeGetAttribute(4, attr, buf.handle, buf.size)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(value)


@pytest.mark.gpu
def test_prefetch_of_allocated_managed_memory_under_either_major(gpu):
    """cuMemAllocManaged memory: ManagedBuffer.prefetch and prefetch_batch move it, through the
    13.x call or, under cuda-bindings 12.x, the 12.x one (prefetch_batch: one per buffer)."""
    from cuda_core import ManagedBuffer
    from cuda_core.utils import prefetch_batch

    dev, s = gpu
    if not dev.properties.concurrent_managed_access:
        pytest.skip("the device has no concurrent managed access")
    raws, bufs = [], []
    for n in (4096, 1 << 20):
        err, raw = driver.cuMemAllocManaged(n, int(driver.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL))
        assert err == driver.CUresult.CUDA_SUCCESS
        raws.append(raw)
        bufs.append(ManagedBuffer.from_handle(int(raw), n, owner=raw))
    datas = [np.arange(b.size, dtype=np.uint8) for b in bufs]
    for d, b in zip(datas, bufs):
        b.copy_from(d, stream=s)
    bufs[0].prefetch(dev, stream=s)
    s.sync()
    assert _last_prefetch(bufs[0]) == dev.device_id
    bufs[0].prefetch(Host(), stream=s)
    s.sync()
    assert _last_prefetch(bufs[0]) == -1
    one_by_one = not has("cuMemPrefetchBatchAsync")  # 12.x: cuMemPrefetchAsync per buffer
    prefetch_batch(s, bufs, dev)
    s.sync()
    if one_by_one:
        assert [_last_prefetch(b) for b in bufs] == [dev.device_id] * 2
    prefetch_batch(s, bufs, [Host(), dev])
    s.sync()
    if one_by_one:
        assert [_last_prefetch(b) for b in bufs] == [-1, dev.device_id]
    for d, b in zip(datas, bufs):  # prefetching moves pages, never contents
        np.testing.assert_array_equal(_read(b, s), d)
    for b, raw in zip(bufs, raws):
        b.close()
        assert driver.cuMemFree(raw)[0] == driver.CUresult.CUDA_SUCCESS


@pytest.mark.gpu
@cuda13_bindings
def test_prefetch_and_discard_batches_on_managed_memory(gpu):
    from cuda_core import ManagedMemoryResource, ManagedMemoryResourceOptions
    from cuda_core.utils import discard_batch, discard_prefetch_batch, prefetch_batch

    dev, s = gpu
    if not dev.properties.concurrent_managed_access:
        pytest.skip("the device has no concurrent managed access")
    mr = ManagedMemoryResource(ManagedMemoryResourceOptions(preferred_location=dev.device_id))
    datas = [np.arange(n, dtype=np.uint8) for n in (4096, 1 << 20)]
    bufs = [mr.allocate(d.nbytes, stream=s) for d in datas]
    for d, b in zip(datas, bufs):
        b.copy_from(d, stream=s)
    prefetch_batch(s, bufs, dev)  # to the device, one location for all
    prefetch_batch(s, bufs, [Host(), dev])  # one per buffer
    prefetch_batch(s, bufs, Host())
    s.sync()
    for d, b in zip(datas, bufs):  # prefetching moves pages, never contents
        np.testing.assert_array_equal(_read(b, s), d)
    discard_prefetch_batch(s, bufs, dev)
    discard_batch(s, bufs)
    for d, b in zip(datas, bufs):  # discarded pages hold anything until written: write, read back
        b.copy_from(d[::-1].copy(), stream=s)
        np.testing.assert_array_equal(_read(b, s), d[::-1])
    for empty in (
        lambda: prefetch_batch(s, [], dev),
        lambda: discard_batch(s, ()),
        lambda: discard_prefetch_batch(s, [], dev),
    ):  # refused, as in cuda.core
        with pytest.raises(ValueError, match="empty batch"):
            empty()
    with pytest.raises(TypeError, match="legacy default stream"):
        discard_batch(dev.default_stream, bufs)
    for x in bufs:
        x.close(s)
