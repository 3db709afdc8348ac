"""``ManagedBuffer.last_prefetch_location`` (cuda.core 1.3): where the last explicit prefetch of
the buffer's pages asked them to go, read back from the driver."""

from __future__ import annotations

import pytest
from cuda.bindings import driver

from cuda_core import Device, Host, ManagedBuffer

MIB2 = 2 << 20  # the largest page size managed memory migrates in


def test_last_prefetch_location_is_a_read_only_property():
    prop = ManagedBuffer.__dict__["last_prefetch_location"]
    assert isinstance(prop, property) and prop.fset is None
    assert "prefetch" in prop.__doc__


@pytest.fixture
def managed(dev):
    """(device, stream, a 4 MiB cuMemAllocManaged allocation) on a device with concurrent managed
    access; freed afterwards."""
    if not dev.properties.concurrent_managed_access:
        pytest.skip("the device has no concurrent managed access")
    err, raw = driver.cuMemAllocManaged(
        2 * MIB2, int(driver.CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)
    )
    assert err == driver.CUresult.CUDA_SUCCESS, err
    s = dev.create_stream()
    yield dev, s, raw
    s.sync()
    s.close()
    assert driver.cuMemFree(raw)[0] == driver.CUresult.CUDA_SUCCESS


@pytest.mark.gpu
def test_none_before_any_prefetch_then_each_requested_target(managed):
    dev, s, raw = managed
    buf = ManagedBuffer.from_handle(int(raw), 2 * MIB2, owner=raw)
    assert buf.last_prefetch_location is None  # never prefetched
    buf.prefetch(dev, stream=s)
    s.sync()
    got = buf.last_prefetch_location
    assert got is Device(dev.device_id) and isinstance(got, Device)
    buf.prefetch(Host(), stream=s)
    s.sync()
    assert buf.last_prefetch_location is Host()
    buf.prefetch(dev.device_id, stream=s)  # an ordinal, as Buffer.prefetch takes
    s.sync()
    assert buf.last_prefetch_location is Device(dev.device_id)
    buf.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = buf.last_prefetch_location


@pytest.mark.gpu
def test_none_unless_every_page_went_to_one_place(managed):
    dev, s, raw = managed
    whole = ManagedBuffer.from_handle(int(raw), 2 * MIB2, owner=raw)
    first = ManagedBuffer.from_handle(int(raw), MIB2, owner=raw)
    second = ManagedBuffer.from_handle(int(raw) + MIB2, MIB2, owner=raw)
    first.prefetch(dev, stream=s)
    s.sync()
    assert first.last_prefetch_location is Device(dev.device_id)
    assert second.last_prefetch_location is None
    assert whole.last_prefetch_location is None  # half of it was never prefetched
    second.prefetch(Host(), stream=s)
    s.sync()
    assert second.last_prefetch_location is Host()
    assert whole.last_prefetch_location is None  # the halves disagree
    second.prefetch(dev, stream=s)
    s.sync()
    assert whole.last_prefetch_location is Device(dev.device_id)  # now they agree


@pytest.mark.gpu
def test_a_pool_allocated_managed_buffer_reports_it_too(dev):
    from cuda_core import ManagedMemoryResource

    if not dev.properties.concurrent_managed_access:
        pytest.skip("the device has no concurrent managed access")
    try:
        mr = ManagedMemoryResource()
    except Exception as exc:  # a driver without managed pools
        pytest.skip(f"no managed memory pool: {exc}")
    s = dev.create_stream()
    buf = mr.allocate(MIB2, stream=s)
    assert isinstance(buf, ManagedBuffer)
    buf.prefetch(Host(), stream=s)
    s.sync()
    assert buf.last_prefetch_location is Host()
    buf.close(s)
    s.sync()
    s.close()
