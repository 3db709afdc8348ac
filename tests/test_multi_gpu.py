"""Several GPUs in one process: threads per device, default streams, peer access and peer copies.

CPU tier: the peer-access planning and its argument errors, which copies are peer copies, and
the default streams of two devices told apart. GPU tier: one thread per GPU allocating,
launching and checking; ``Device()`` per thread; a device's default stream (allocations,
launches, synchronisation, frees) used while another device is current; a buffer of device 1
collected while device 0 is current; peer access granted and revoked with a kernel on device 1
reading device 0's pool; peer copies in both directions, with and without access, checked
byte for byte; streams of two devices ordered with ``wait``. Tests that need two GPUs skip
with "needs two GPUs" elsewhere.
"""

from __future__ import annotations

import gc
import threading
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import (
    Device,
    DeviceMemoryResource,
    DeviceMemoryResourceOptions,
    LaunchConfig,
    PreparedLaunch,
    Program,
    ProgramOptions,
    launch,
)
from cuda_core._memory._peer import plan_peer_access, replace_peer_access, resolve_device
from cuda_core._stream import LEGACY_DEFAULT_STREAM, _DeviceDefaultStream
from cuda_core._stream_ops import peer_devices
from cuda_core._utils import handle_return
from cuda_core.utils import StridedMemoryView
from tests.helpers import gpu_count
from tests.helpers.kernels import TIMING_SRC, current_context_int

gpu = pytest.mark.gpu
two_gpus = pytest.mark.skipif(gpu_count() < 2, reason="needs two GPUs")


# ---------------------------------------------------------------------------------------------
# CPU tier.


def _yes(peer: int, owner: int) -> bool:
    return True


def test_plan_grants_and_revokes_the_difference():
    assert plan_peer_access(0, [1, 3], [2, 3, 0], _yes) == ((2,), (1,))
    assert plan_peer_access(0, [2], [2], _yes) == ((), ())
    assert plan_peer_access(1, [], [1, 1], _yes) == ((), ())  # the owner is never a peer
    assert plan_peer_access(1, [0, 2, 3], [], _yes) == ((), (0, 2, 3))


def test_plan_names_every_device_that_cannot_reach_the_owner():
    def only_1(peer: int, owner: int) -> bool:
        assert owner == 0
        return peer == 1

    with pytest.raises(
        ValueError,
        match=r"device 0's memory \(got device 2, 3, which cannot: "
        r"Device\(2\)\.can_access_peer\(0\) is False\)",
    ):
        plan_peer_access(0, [], [1, 2, 3], only_1)
    # Revoking is always allowed; only new grants are checked.
    assert plan_peer_access(0, [2, 3], [1], only_1) == ((1,), (2, 3))


@pytest.mark.parametrize("value", ["1", 1.0, True, object(), b"\x01"], ids=repr)
def test_peer_values_must_be_devices_or_ordinals(value: Any):
    with pytest.raises(TypeError, match="peer_accessible_by must be a Device or a device ordinal"):
        resolve_device(value)


@pytest.mark.parametrize("devices", [5, "01", b"01", None], ids=repr)
def test_peer_accessible_by_takes_an_iterable(devices: Any):
    with pytest.raises(
        TypeError, match="peer_accessible_by must be an iterable of Devices or device ordinals"
    ):
        replace_peer_access(None, devices)  # refused before the resource is touched


def _device_memory(d: int) -> tuple[int, bool, bool, bool]:
    return (d, True, False, False)


def test_which_copies_are_peer_copies():
    assert peer_devices(_device_memory(0), _device_memory(0), 0) is None
    assert peer_devices(_device_memory(1), _device_memory(0), 0) == (1, 0)
    assert peer_devices(_device_memory(0), _device_memory(1), 1) == (0, 1)
    assert peer_devices(_device_memory(0), _device_memory(0), 1) == (
        0,
        0,
    )  # another device's stream
    pinned, managed = (-1, True, True, False), (1, True, True, True)
    assert peer_devices(pinned, _device_memory(0), 1) is None
    assert peer_devices(_device_memory(0), managed, 0) is None
    assert peer_devices(managed, managed, 0) is None


def test_default_streams_of_two_devices_are_not_equal():
    legacy = int(driver.CU_STREAM_LEGACY)

    def bound(ctx_address):
        # A device's default stream: the legacy token whose handle carries the device's
        # context (a stand-in handle: no driver here to make a ContextHandle).
        s = _DeviceDefaultStream._wrap(legacy, None)
        ctx = SimpleNamespace(address=ctx_address)
        s._h = SimpleNamespace(address=legacy, ctx=ctx, is_released=False)
        return s

    a, b, a2 = bound(0x1000), bound(0x2000), bound(0x1000)
    assert a != b and a == a2 and hash(a) == hash(b)
    assert a == LEGACY_DEFAULT_STREAM  # the token itself stands for any context's


# ---------------------------------------------------------------------------------------------
# GPU tier: helpers.

# The timing kernels of tests/helpers (sleep_ns, gtime) and a few of our own.
SRC = (
    TIMING_SRC
    + r"""
extern "C" __global__ void fill_index(int* out, unsigned long long n, int base) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = base + (int)i;
}
extern "C" __global__ void copy_ints(int* out, const int* in, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
}
extern "C" __global__ void sleep_then_fill(int* out, unsigned long long n, unsigned long long ns, int value) {
    unsigned long long t0 = gtime();
    while (gtime() - t0 < ns) { __nanosleep(2000); }
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        out[i] = value;
    }
}
"""
)
_modules: dict[str, Any] = {}
_lock = threading.Lock()


def kernel(dev: Device, name: str) -> Any:
    """Kernel ``name`` of SRC for ``dev``'s architecture (compiled once per architecture)."""
    with _lock:
        mod = _modules.get(dev.arch)
        if mod is None:
            prog = Program(SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
            mod = _modules[dev.arch] = prog.compile("cubin")
    return mod.get_kernel(name)


def grid(n: int) -> LaunchConfig:
    return LaunchConfig(grid=(n + 255) // 256, block=256)


def host_ints(buf: Any, stream: Any) -> np.ndarray:
    out = np.empty(buf.size // 4, np.int32)
    buf.copy_to(out, stream=stream)  # complete when it returns
    return out


def pointer_device(buf: Any) -> int:
    """The device whose pool ``buf`` came from, asked of the driver through the pointer.

    Not ``CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL``: on driver 580 it reads 0 for pool memory of
    every device (seen on two H200s); the pool handle of the pointer is what tells.
    """
    attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE
    pool = int(
        handle_return(driver.cuPointerGetAttribute(attr, buf.handle), "cuPointerGetAttribute")
    )
    owners = [
        i
        for i in range(gpu_count())
        if int(handle_return(driver.cuDeviceGetMemPool(i), "cuDeviceGetMemPool")) == pool
    ]
    assert len(owners) == 1, f"pool 0x{pool:x} of {buf!r} belongs to devices {owners}"
    return owners[0]


def two_devices() -> tuple[Device, Device]:
    """Devices 0 and 1 of this thread, both with a context; device 0 current."""
    d0, d1 = Device(0), Device(1)
    d1.set_current()
    d0.set_current()
    return d0, d1


def pool_access(mr: Any, device_id: int) -> Any:
    loc = driver.CUmemLocation()
    loc.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    loc.id = device_id
    return handle_return(driver.cuMemPoolGetAccess(mr.handle, loc), "cuMemPoolGetAccess")


# ---------------------------------------------------------------------------------------------
# GPU tier: threads.


@gpu
def test_one_thread_per_device_allocates_launches_and_checks():
    main_devices = Device.get_all_devices()
    for d in main_devices:
        kernel(d, "fill_index")  # compiled here; the Kernel objects serve every thread
    n, rounds = (1 << 16) + 7, 10
    barrier = threading.Barrier(len(main_devices))
    errors: list[tuple[int, BaseException]] = []
    pools: dict[int, int] = {}

    def work(i: int) -> None:
        try:
            dev = Device(i)
            assert dev is Device(i) and dev is not main_devices[i] and dev == main_devices[i]
            dev.set_current()
            assert Device() is dev
            fill = kernel(dev, "fill_index")
            mr = dev.memory_resource
            assert mr.device_id == i
            pools[i] = int(mr.handle)
            s = dev.create_stream()
            barrier.wait()  # every GPU works at once
            expected = np.arange(n, dtype=np.int32)
            for r in range(rounds):
                base = 1000 * (i + 1) + r
                buf = dev.allocate(n * 4, stream=s)
                assert pointer_device(buf) == i
                launch(s, grid(n), fill, buf, np.uint64(n), np.int32(base))
                np.testing.assert_array_equal(host_ints(buf, s), base + expected)
                buf.close()
                d = dev.allocate(n * 4)  # ordered on the device's default stream
                launch(dev.default_stream, grid(n), fill, d, np.uint64(n), np.int32(-base))
                np.testing.assert_array_equal(host_ints(d, dev.default_stream), expected - base)
                d.close()
            s.close()
        except BaseException as exc:
            errors.append((i, exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(main_devices))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, d in enumerate(main_devices):  # each thread's resource is over the device's one pool
        assert pools[i] == int(d.memory_resource.handle)


@gpu
def test_device_is_per_thread_and_follows_the_threads_context(dev):
    last = gpu_count() - 1
    before = current_context_int()
    seen: dict[str, Any] = {}

    def work() -> None:
        seen["fresh"] = Device()  # nothing is current on a new thread: device 0
        seen["fresh_ctx"] = current_context_int()
        Device(last).set_current()
        seen["after"] = Device()
        seen["same"] = Device(last)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen["fresh"].device_id == 0 and seen["fresh_ctx"] == 0
    assert seen["after"] is seen["same"] and seen["after"].device_id == last
    assert seen["after"] is not Device(last) and seen["after"] == Device(last)
    assert current_context_int() == before  # the other thread's set_current() did not touch ours


# ---------------------------------------------------------------------------------------------
# GPU tier: one device's objects used while another device is current.


@gpu
@two_gpus
def test_default_stream_of_another_device_while_one_is_current():
    d0, d1 = two_devices()
    ctx0 = current_context_int()
    fill, sleep = kernel(d1, "fill_index"), kernel(d1, "sleep_ns")
    ds1 = d1.default_stream
    assert isinstance(ds1, _DeviceDefaultStream) and ds1.device is d1
    assert ds1 != d0.default_stream and ds1 == d1.default_stream
    n = 4099
    buf = d1.allocate(n * 4)  # from device 1's pool, on device 1's default stream
    assert buf.device_id == 1 and pointer_device(buf) == 1
    launch(ds1, grid(n), fill, buf, np.uint64(n), np.int32(7))  # runs on device 1
    np.testing.assert_array_equal(host_ints(buf, ds1), 7 + np.arange(n, dtype=np.int32))
    PreparedLaunch(ds1, grid(n), fill, buf, np.uint64(n), np.int32(-3))()
    np.testing.assert_array_equal(host_ints(buf, ds1), np.arange(n, dtype=np.int32) - 3)
    assert current_context_int() == ctx0

    launch(ds1, LaunchConfig(grid=1, block=1), sleep, np.uint64(300_000_000))
    ev = ds1.record()  # an event of device 1, recorded behind the sleeping kernel
    assert not ev.is_done
    t0 = time.perf_counter()
    d0.default_stream.sync()  # device 0's default stream has nothing to wait for
    assert time.perf_counter() - t0 < 0.2
    ds1.sync()  # waits for the kernel on device 1
    assert time.perf_counter() - t0 > 0.25 and ev.is_done
    assert current_context_int() == ctx0

    buf.close()
    mr1 = DeviceMemoryResource(d1, DeviceMemoryResourceOptions())
    own = mr1.allocate(n * 4, stream=ds1)  # allocated and freed on device 1's default stream
    launch(ds1, grid(n), fill, own, np.uint64(n), np.int32(1))
    own.close()
    ds1.sync()
    assert mr1.attributes.used_mem_current == 0
    assert current_context_int() == ctx0
    mr1.close()


@gpu
@two_gpus
def test_buffer_of_device_1_collected_while_device_0_is_current():
    _, d1 = two_devices()
    ctx0 = current_context_int()
    mr1 = DeviceMemoryResource(d1, DeviceMemoryResourceOptions())
    s1 = d1.create_stream()
    box: dict[str, Any] = {}

    def make() -> None:  # another thread, with device 1 current, allocates
        Device(1).set_current()
        box["stream"] = mr1.allocate(1 << 20, stream=s1)
        box["default"] = mr1.allocate(4096, stream=Device(1).default_stream)

    t = threading.Thread(target=make)
    t.start()
    t.join()
    s1.sync()
    d1.default_stream.sync()
    assert mr1.attributes.used_mem_current >= (1 << 20) + 4096
    box.clear()
    gc.collect()  # the buffers are freed here, on device 1's streams, with device 0 current
    s1.sync()
    d1.default_stream.sync()
    assert mr1.attributes.used_mem_current == 0
    assert current_context_int() == ctx0
    s1.close()
    mr1.close()


@gpu
@two_gpus
def test_stream_waits_for_a_stream_of_another_device():
    d0, d1 = two_devices()
    sleep_then_fill = kernel(d0, "sleep_then_fill")
    s0, s1 = d0.create_stream(), d1.create_stream()
    n = 1024
    b0 = d0.allocate(n * 4, stream=s0)
    b1 = d1.allocate(n * 4, stream=s1)
    b0.fill(0, stream=s0)
    b1.fill(0, stream=s1)
    s0.sync()
    s1.sync()
    cases = (
        (s1, s0),
        (d1.default_stream, s0),
        (s1, d0.default_stream),
        (d1.default_stream, d0.default_stream),
    )
    for value, (waiter, target) in enumerate(cases, start=1):
        launch(
            target,
            LaunchConfig(grid=4, block=256),
            sleep_then_fill,
            b0,
            np.uint64(n),
            np.uint64(200_000_000),
            np.int32(value),
        )
        waiter.wait(target)  # later work on waiter (device 1) runs after the kernel (device 0)
        b1.copy_from(b0, stream=waiter)
        np.testing.assert_array_equal(host_ints(b1, waiter), np.full(n, value, np.int32))
        target.sync()
    b0.close()
    b1.close()
    s0.close()
    s1.close()


# ---------------------------------------------------------------------------------------------
# GPU tier: peer access.


@gpu
@two_gpus
def test_peer_access_grant_revoke_and_a_kernel_reading_a_peer_pool():
    d0, d1 = two_devices()
    mr0 = DeviceMemoryResource(d0, DeviceMemoryResourceOptions())
    peers = mr0.peer_accessible_by
    assert len(peers) == 0 and peers == set() and list(peers) == [] and 1 not in peers

    mr0.peer_accessible_by = [1]
    assert peers == {d1} and len(peers) == 1 and 1 in peers and d1 in peers
    assert 0 not in peers and d0 not in peers and 99 not in peers and "x" not in peers
    assert list(mr0.peer_accessible_by) == [d1]  # a new view sees the same driver state
    assert pool_access(mr0, 1) == driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE

    n = (1 << 18) + 5
    s0 = d0.create_stream()
    src = mr0.allocate(n * 4, stream=s0)
    values = np.random.default_rng(3).integers(-(2**31), 2**31 - 1, n, dtype=np.int32)
    src.copy_from(values, stream=s0)  # done when it returns
    s1 = d1.create_stream()
    out = d1.allocate(n * 4, stream=s1)
    launch(
        s1, grid(n), kernel(d1, "copy_ints"), out, src, np.uint64(n)
    )  # device 1 reads device 0's pool
    np.testing.assert_array_equal(host_ints(out, s1), values)

    mr0.peer_accessible_by = []
    assert peers == set() and 1 not in peers
    assert pool_access(mr0, 1) == driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_NONE
    out.fill(0, stream=s1)
    out.copy_from(src, stream=s1)  # no access any more: a peer copy, still byte for byte
    np.testing.assert_array_equal(host_ints(out, s1), values)

    # The set operations, each one driver call; results of binary operators are plain sets.
    peers.add(1)
    assert peers == {d1}
    peers.add(0)  # the owner is ignored
    assert peers == {d1} and (peers & {d1}) == {d1} and isinstance(peers | set(), set)
    peers.discard(1)
    peers.discard(99)  # nothing to revoke
    assert peers == set()
    peers |= {d1}
    assert 1 in peers
    peers -= {1}
    assert 1 not in peers
    peers ^= {1}
    assert 1 in peers
    peers.clear()
    assert len(peers) == 0
    peers.update([d1])
    assert repr(peers) == f"PeerAccessibleBySetProxy({ {d1}!r})"
    peers.intersection_update([0])
    assert peers == set()

    # Bad input.
    with pytest.raises(
        ValueError, match=r"peer_accessible_by must be a Device or a device ordinal in \[0, "
    ):
        peers.add(99)
    with pytest.raises(TypeError, match="peer_accessible_by must be a Device or a device ordinal"):
        peers.add("1")
    with pytest.raises(TypeError, match="an iterable of Devices or device ordinals"):
        mr0.peer_accessible_by = 1
    with pytest.raises(ValueError, match=r"in \[0, "):
        mr0.peer_accessible_by = [1, -1]
    assert peers == set()  # nothing was changed by a refused assignment

    # Two resources over the device's current pool see one state.
    a, b = DeviceMemoryResource(d0), DeviceMemoryResource(d0)
    before = set(a.peer_accessible_by)
    a.peer_accessible_by.add(d1)
    assert d1 in b.peer_accessible_by
    b.peer_accessible_by = before
    assert set(a.peer_accessible_by) == before

    for buf in (src, out):
        buf.close()
    s0.sync()
    s1.sync()
    mr0.close()
    with pytest.raises(RuntimeError, match="closed"):
        peers.add(1)
    with pytest.raises(RuntimeError, match="closed"):
        len(peers)
    s0.close()
    s1.close()


@gpu
@two_gpus
def test_closing_a_pool_revokes_its_peer_access():
    d0, d1 = two_devices()
    opts = DeviceMemoryResourceOptions()
    mr = DeviceMemoryResource(d0, opts)
    mr.peer_accessible_by = [d1]
    handle = int(mr.handle)
    mr.close()  # no memory in use: access is revoked before the pool is destroyed
    made = []
    try:
        for _ in range(16):
            made.append(DeviceMemoryResource(d0, opts))
            if int(made[-1].handle) == handle:
                break
        else:
            pytest.skip("the driver did not hand the destroyed pool's handle out again")
        assert 1 not in made[-1].peer_accessible_by
    finally:
        for m in made:
            m.close()


@gpu
@two_gpus
@pytest.mark.parametrize("access", [False, True], ids=["no-peer-access", "peer-access"])
def test_peer_copies_both_directions_byte_for_byte(access: bool):
    d0, d1 = two_devices()
    devices = (d0, d1)
    opts = DeviceMemoryResourceOptions()
    mrs = [DeviceMemoryResource(d0, opts), DeviceMemoryResource(d1, opts)]
    if access:
        mrs[0].peer_accessible_by = [d1]
        mrs[1].peer_accessible_by = [d0]
    streams = [d0.create_stream(), d1.create_stream()]
    rng = np.random.default_rng(11)
    try:
        for size in (1, 4099, (1 << 20) + 3):
            data = rng.integers(0, 256, size, dtype=np.uint8)
            for a, b in ((0, 1), (1, 0)):
                src = mrs[a].allocate(size, stream=streams[a])
                src.copy_from(data, stream=streams[a])  # done when it returns
                for how in ("copy_to", "copy_from"):
                    for s in (
                        streams[a],
                        streams[b],
                        devices[b].default_stream,
                        devices[a].default_stream,
                    ):
                        dst = mrs[b].allocate(size, stream=streams[b])
                        dst.fill(0, stream=streams[b])
                        streams[b].sync()
                        if how == "copy_to":
                            src.copy_to(dst, stream=s)
                        else:
                            dst.copy_from(src, stream=s)
                        s.sync()
                        back = np.empty(size, np.uint8)
                        dst.copy_to(back, stream=streams[b])
                        assert back.tobytes() == data.tobytes(), (size, a, b, how, s)
                        dst.close()
                src.close()
        # Two buffers of device 0, copied on a stream of device 1.
        x, y = mrs[0].allocate(4099, stream=streams[0]), mrs[0].allocate(4099, stream=streams[0])
        data = rng.integers(0, 256, 4099, dtype=np.uint8)
        x.copy_from(data, stream=streams[0])
        y.fill(0, stream=streams[0])
        streams[0].sync()
        y.copy_from(x, stream=streams[1])
        streams[1].sync()
        back = np.empty(4099, np.uint8)
        y.copy_to(back, stream=streams[0])
        assert back.tobytes() == data.tobytes()
        x.close()
        y.close()
    finally:
        for s in streams:
            s.sync()
            s.close()
        for m in mrs:
            m.close()


@gpu
@two_gpus
def test_views_on_two_devices_copy_when_contiguous():
    d0, d1 = two_devices()
    s0, s1 = d0.create_stream(), d1.create_stream()
    n = 1000
    values = np.arange(n, dtype=np.int32) * 3 - 7
    src = d0.allocate(n * 4, stream=s0)
    src.copy_from(values, stream=s0)
    s0.sync()  # the copies below run on s1 too: src must hold the values first
    dst = d1.allocate(n * 4, stream=s1)
    dst.fill(0, stream=s1)
    s1.sync()
    for shape in ((n,), (10, 100)):
        sv = StridedMemoryView.from_buffer(src, shape, dtype=np.int32)
        dv = StridedMemoryView.from_buffer(dst, shape, dtype=np.int32)
        dv.copy_from(sv, s1)
        s1.sync()
        np.testing.assert_array_equal(host_ints(dst, s1), values)
        dst.fill(0, stream=s1)
        s1.sync()  # the copy below runs on s0: the fill must not land after it
        sv.copy_to(dv, s0)
        s0.sync()
        np.testing.assert_array_equal(host_ints(dst, s1), values)
    half = StridedMemoryView.from_buffer(src, (n // 2,), strides=(2,), dtype=np.int32)
    dhalf = StridedMemoryView.from_buffer(dst, (n // 2,), dtype=np.int32)
    with pytest.raises(ValueError, match="between contiguous views"):
        dhalf.copy_from(half, s1)
    src.close()
    dst.close()
    s0.close()
    s1.close()
