"""Device and Context: singletons, properties against the driver, context-correctness."""

from __future__ import annotations

import pickle

import pytest
from cuda.bindings import driver

from cuda_core import Context, CUDAError, Device
from cuda_core._compat import (
    driver as compat_driver,  # cuCtxCreate in its CUDA 13 form under either major
)
from cuda_core._utils import handle_return
from tests.helpers import gpu_count, in_thread
from tests.helpers.kernels import current_context_int


@pytest.fixture
def dev() -> Device:
    d = Device(0)
    d.set_current()
    return d


def _attr(dev: Device, name: str) -> int:
    attr = getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name.upper()}")
    return int(
        handle_return(driver.cuDeviceGetAttribute(attr, dev._cu_device), "cuDeviceGetAttribute")
    )


# -- singletons ---------------------------------------------------------------------------


@pytest.mark.gpu
def test_singleton_within_a_thread(dev):
    assert Device(0) is Device(0) is dev
    assert Device(dev) is dev
    assert Device() is dev  # the current context is device 0's


@pytest.mark.gpu
def test_distinct_objects_across_threads(dev):
    def other() -> tuple[Device, bool]:
        d = Device(0)
        return d, d is Device(0) and Device(d) is d

    theirs, same_in_thread = in_thread(other)
    assert same_in_thread
    assert theirs is not dev
    assert theirs == dev and hash(theirs) == hash(dev)


@pytest.mark.gpu
def test_device_creates_no_context_and_defaults_to_zero():
    def fresh() -> tuple[int, int, int]:
        d = Device()  # no context is current on a new thread
        return d.device_id, current_context_int(), Device(0).properties.warp_size

    device_id, ctx, warp = in_thread(fresh)
    assert device_id == 0
    assert ctx == 0, "Device() or reading properties made a context current"
    assert warp == 32


@pytest.mark.gpu
@pytest.mark.parametrize("call", ["create_stream", "create_event", "sync", "context"])
def test_calls_before_set_current_say_to_call_it(call):
    def fresh() -> None:
        d = Device(0)
        attr = getattr(d, call)
        if callable(attr):
            attr()

    with pytest.raises(CUDAError, match=r"set_current\(\)"):
        in_thread(fresh)


@pytest.mark.gpu
def test_out_of_range_and_wrong_type():
    n = gpu_count()
    with pytest.raises(ValueError) as info:
        Device(n)
    text = str(info.value)
    assert text.startswith("device_id must be")
    assert f"(got {n})" in text
    assert str(n) in text.split("(got")[0], "the message should name the valid range"
    with pytest.raises(ValueError):
        Device(-1)
    with pytest.raises(TypeError, match="device_id"):
        Device("0")  # type: ignore[arg-type]


@pytest.mark.gpu
def test_identity_protocols(dev):
    assert int(dev) == dev.device_id == 0
    assert dev == Device(0) and hash(dev) == hash(Device(0))
    assert pickle.loads(pickle.dumps(dev)) is dev
    assert "0" in repr(dev)
    all_devs = Device.get_all_devices()
    assert len(all_devs) == gpu_count()
    assert all(d is Device(i) for i, d in enumerate(all_devs))


# -- properties -----------------------------------------------------------------------------


@pytest.mark.gpu
def test_basic_facts_match_driver(dev):
    raw_name = handle_return(driver.cuDeviceGetName(256, dev._cu_device))
    assert dev.name == raw_name.split(b"\0", 1)[0].decode()
    major = _attr(dev, "compute_capability_major")
    minor = _attr(dev, "compute_capability_minor")
    assert dev.compute_capability == (major, minor)
    assert (dev.compute_capability.major, dev.compute_capability.minor) == (major, minor)
    assert dev.arch == f"{major}{minor}"
    assert dev.total_memory == int(handle_return(driver.cuDeviceTotalMem(dev._cu_device)))
    raw_uuid = handle_return(driver.cuDeviceGetUuid(dev._cu_device)).bytes
    if isinstance(raw_uuid, str):
        raw_uuid = raw_uuid.encode("latin-1")
    assert bytes(raw_uuid[:16]).hex() in dev.uuid.replace("-", "").lower()
    bus = handle_return(driver.cuDeviceGetPCIBusId(32, dev._cu_device))
    assert dev.pci_bus_id.lower() == bus.split(b"\0", 1)[0].decode().lower()


@pytest.mark.gpu
def test_every_property_matches_cuDeviceGetAttribute(dev):
    props = dev.properties
    compared = 0
    for attr in driver.CUdevice_attribute:
        name = attr.name.removeprefix("CU_DEVICE_ATTRIBUTE_").lower()
        if name == "max" or not hasattr(type(props), name):
            continue
        err, expected = driver.cuDeviceGetAttribute(attr, dev._cu_device)
        if err != driver.CUresult.CUDA_SUCCESS:
            continue  # an attribute newer than the driver
        value = getattr(props, name)
        assert type(value) in (int, bool), (name, type(value))
        assert int(value) == int(expected), name
        compared += 1
    assert compared >= 100, f"only {compared} attributes are exposed on DeviceProperties"


@pytest.mark.gpu
def test_property_types_and_caching(dev):
    props = dev.properties
    assert props is dev.properties
    for name in (
        "unified_addressing",
        "concurrent_kernels",
        "managed_memory",
        "cooperative_launch",
        "can_map_host_memory",
        "ecc_enabled",
        "integrated",
    ):
        assert type(getattr(props, name)) is bool, name
    for name in (
        "max_threads_per_block",
        "multiprocessor_count",
        "warp_size",
        "l2_cache_size",
        "max_shared_memory_per_block",
        "max_block_dim_x",
        "max_grid_dim_x",
    ):
        assert type(getattr(props, name)) is int, name
    assert props.max_threads_per_block == _attr(dev, "max_threads_per_block") >= 1024
    assert props.multiprocessor_count == props.multiprocessor_count
    with pytest.raises(AttributeError):
        props.warp_size = 1


# -- contexts ---------------------------------------------------------------------------------


@pytest.mark.gpu
def test_context_object(dev):
    primary = handle_return(driver.cuDevicePrimaryCtxRetain(dev._cu_device))
    try:
        ctx = dev.context
        assert isinstance(ctx, Context)
        assert int(ctx.handle) == int(primary)
        assert ctx.device is dev
        assert ctx == dev.context and hash(ctx) == hash(dev.context)
        assert current_context_int() == int(primary)
    finally:
        handle_return(driver.cuDevicePrimaryCtxRelease(dev._cu_device))


@pytest.mark.gpu
def test_methods_use_the_device_context_and_restore_the_callers(dev):
    primary = int(dev.context.handle)
    other = handle_return(compat_driver.cuCtxCreate(None, 0, dev._cu_device))  # made current
    try:
        assert current_context_int() == int(other) != primary
        s = dev.create_stream()
        assert int(handle_return(driver.cuStreamGetCtx(s.handle))) == primary
        assert int(s.context.handle) == primary
        assert current_context_int() == int(other)
        e = dev.create_event()
        assert current_context_int() == int(other)
        s.record(e)
        e.sync()
        s.sync()
        dev.sync()
        assert current_context_int() == int(other)
        assert Device() is dev  # the current (non-primary) context belongs to device 0
        s.close()
        e.close()
        assert current_context_int() == int(other)
    finally:
        handle_return(driver.cuCtxDestroy(other))
        dev.set_current()
    assert current_context_int() == primary


@pytest.mark.gpu
@pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")
def test_methods_act_on_their_own_device_with_two_gpus():
    d0, d1 = Device(0), Device(1)
    d1.set_current()
    d0.set_current()
    ctx0 = current_context_int()
    s1 = d1.create_stream()
    try:
        assert int(handle_return(driver.cuStreamGetCtx(s1.handle))) == int(d1.context.handle)
        assert current_context_int() == ctx0
        d1.sync()
        assert current_context_int() == ctx0
        assert s1.device is d1
        expected = bool(handle_return(driver.cuDeviceCanAccessPeer(d0._cu_device, d1._cu_device)))
        assert d0.can_access_peer(d1) is expected
    finally:
        s1.close()


@pytest.mark.gpu
def test_can_access_itself(dev):
    assert dev.can_access_peer(dev) is True
    assert dev.can_access_peer(0) is True
