"""IPC through multiprocessing (spawn): resources, buffers and events sent to child processes,
event ordering in both directions, many hand-offs without leaks, and the error cases (the CPU
tier holds those raised before the driver is asked, and the file-descriptor passing itself)."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import pickle
import queue
import subprocess
import sys
import textwrap
import traceback
import uuid
import warnings
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import pytest

from cuda_core import (
    Buffer,
    DeviceMemoryResource,
    Event,
    EventOptions,
    IPCAllocationHandle,
    IPCBufferDescriptor,
    IPCEventDescriptor,
    PinnedMemoryResource,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPAWN = mp.get_context("spawn")
TIMEOUT = 120  # seconds a child may take to answer (a spawned child imports and compiles first)
N = 1 << 16  # uint32 elements per buffer
IPC = EventOptions(ipc_enabled=True)

# A different value at every element and for every seed (wrapping uint32 arithmetic).
KERNELS = r"""
extern "C" __global__ void fill_pattern(unsigned int* p, unsigned int n, unsigned int seed)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = seed * 0x9e3779b1u + i * 0x85ebca77u;
    }
}

// counts[0] += elements that differ from the pattern of seed; counts[1] += 1 per launch.
extern "C" __global__ void check_pattern(const unsigned int* p, unsigned int n, unsigned int seed,
                                         unsigned long long* counts)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && p[i] != seed * 0x9e3779b1u + i * 0x85ebca77u) {
        atomicAdd(&counts[0], 1ull);
    }
    if (i == 0) {
        atomicAdd(&counts[1], 1ull);
    }
}
"""


def pattern(seed: int, n: int = N) -> np.ndarray:
    """The host copy of the kernels' pattern of ``seed`` for ``i < n``."""
    i = np.arange(n, dtype=np.uint64)
    return ((seed * 0x9E3779B1 + i * 0x85EBCA77) & 0xFFFFFFFF).astype(np.uint32)


def _kernels(dev: Any) -> Any:
    from cuda_core import Program, ProgramOptions

    obj = Program(KERNELS, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )
    return obj.get_kernel("fill_pattern"), obj.get_kernel("check_pattern")


def _launch(stream: Any, kernel: Any, buf: Buffer, *args: Any) -> None:
    from cuda_core import LaunchConfig, launch

    launch(stream, LaunchConfig(grid=(N + 255) // 256, block=256), kernel, buf, np.uint32(N), *args)


def _read_u32(buf: Buffer, stream: Any) -> np.ndarray:
    out = np.empty(buf.size // 4, dtype=np.uint32)
    buf.copy_to(out, stream=stream)
    stream.sync()
    return out


def _report(q: Any, fn: Any) -> None:
    """Run ``fn()`` in a child and put ("ok", result) or ("error", traceback) on ``q``."""
    try:
        q.put(("ok", fn()))
    except BaseException:
        q.put(("error", traceback.format_exc()))


def _get(q: Any, proc: Any) -> Any:
    try:
        kind, payload = q.get(timeout=TIMEOUT)
    except queue.Empty:
        raise AssertionError(
            f"the child said nothing for {TIMEOUT} s (exit code {proc.exitcode})"
        ) from None
    assert kind == "ok", payload
    return payload


def _finish(*procs: Any) -> None:
    for proc in procs:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
            proc.join()
        assert proc.exitcode == 0, f"child exit code {proc.exitcode}"


# -- CPU tier: file descriptors through multiprocessing ---------------------------------------------


def _fd_child(first: Any, q_in: Any, q_out: Any) -> None:
    def run() -> list[tuple[Any, bytes]]:
        got = []
        for h in (first, q_in.get(timeout=TIMEOUT)):  # a Process argument, then a Queue item
            assert isinstance(h, IPCAllocationHandle) and not h.is_closed
            got.append((h.uuid, os.read(h.handle, 5)))
            h.close()
        return got

    _report(q_out, run)


def test_allocation_handle_reaches_a_spawned_child_as_argument_and_through_a_queue():
    r, w = os.pipe()
    h = IPCAllocationHandle.from_fd(r)
    os.write(w, b"firstagain")
    q_in, q_out = SPAWN.Queue(), SPAWN.Queue()
    proc = SPAWN.Process(target=_fd_child, args=(h, q_in, q_out))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", UserWarning
            )  # a Queue here may warn about 'fork' (the default)
            proc.start()
            q_in.put(h)
            got = _get(q_out, proc)
    finally:
        _finish(proc)
    assert got == [(None, b"first"), (None, b"again")]  # each one a duplicate of the same pipe
    assert not h.is_closed and os.read(h.handle, 0) == b""  # the sender's descriptor stays open
    h.close()
    os.close(w)


def test_allocation_handle_pickles_only_through_multiprocessing():
    r, w = os.pipe()
    h = IPCAllocationHandle.from_fd(r)
    with pytest.raises(TypeError, match="only through multiprocessing"):
        pickle.dumps(h)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        data = ForkingPickler.dumps(h)
    h2 = pickle.loads(data)  # the duplicate comes back over multiprocessing's Unix socket
    assert isinstance(h2, IPCAllocationHandle) and h2.handle not in (-1, h.handle)
    assert os.fstat(h2.handle).st_ino == os.fstat(r).st_ino
    h2.close()
    h.close()
    assert h.handle == -1 and h.is_closed  # as cuda.core: -1 once closed
    with pytest.raises(ValueError, match="closed"):
        int(h)
    with pytest.raises(RuntimeError, match="closed"):
        ForkingPickler.dumps(h)
    with pytest.raises(RuntimeError, match="closed"):
        PinnedMemoryResource.from_allocation_handle(h)  # refused before the driver is asked
    os.close(w)


@pytest.mark.parametrize(("method", "warned"), [("fork", 1), ("spawn", 0), ("forkserver", 0)])
def test_fork_start_method_warns_once(method, warned):
    script = textwrap.dedent(
        f"""
        import multiprocessing, os, pickle, warnings
        from multiprocessing.reduction import ForkingPickler
        from cuda_core import IPCAllocationHandle

        multiprocessing.set_start_method({method!r})
        r, w = os.pipe()
        h = IPCAllocationHandle.from_fd(r)
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            for _ in range(3):
                pickle.loads(ForkingPickler.dumps(h)).close()
        print(sum(issubclass(x.category, UserWarning) and "'fork'" in str(x.message) for x in got))
        """
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(warned)


# -- CPU tier: errors raised before the driver is asked ---------------------------------------------


def test_descriptors_are_checked_when_made():
    with pytest.raises(TypeError, match="payload must be 64 bytes"):
        IPCBufferDescriptor(b"\0" * 8, 64)
    with pytest.raises(TypeError, match="size must be a non-negative int"):
        IPCBufferDescriptor(b"\0" * 64, -1)
    with pytest.raises(TypeError, match="reserved must be 64 bytes"):
        IPCEventDescriptor(b"\0" * 63)
    d = IPCBufferDescriptor(bytes(range(64)), 4096)
    e = IPCEventDescriptor(bytes(range(64)), False)
    assert pickle.loads(pickle.dumps(d)) == d and pickle.loads(pickle.dumps(e)) == e
    assert pickle.loads(ForkingPickler.dumps(d)) == d  # no file descriptor: plain data both ways


def test_imports_refuse_wrong_arguments_before_the_driver():
    d = IPCBufferDescriptor(bytes(64), 64)
    with pytest.raises(TypeError, match="mr must be a mapped resource"):
        Buffer.from_ipc_descriptor(object(), d)
    # The descriptor's type is checked first, in cuda.core's words (its argument check).
    with pytest.raises(TypeError) as info:
        Buffer.from_ipc_descriptor(object(), b"x" * 64)
    assert str(info.value).startswith(
        "Argument 'ipc_descriptor' has incorrect type (expected IPCBufferDescriptor, got bytes)"
    )
    with pytest.raises(TypeError, match="ipc_descriptor must be an IPCEventDescriptor"):
        Event.from_ipc_descriptor(d)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match="alloc_handle must be an IPCAllocationHandle or a file descriptor"
    ):
        PinnedMemoryResource.from_allocation_handle("3")
    with pytest.raises(TypeError, match="alloc_handle must be"):
        PinnedMemoryResource.from_allocation_handle(-1)


def test_registry_lookups_before_the_driver():
    with pytest.raises(TypeError, match=r"uuid must be a uuid\.UUID"):
        DeviceMemoryResource.from_registry("not-a-uuid")
    key = uuid.uuid4()
    with pytest.raises(
        RuntimeError, match=f"^Memory resource {key} was not found"
    ):  # cuda.core's words first
        DeviceMemoryResource.from_registry(key)
    with pytest.raises(RuntimeError, match=f"^Memory resource {key} was not found"):
        PinnedMemoryResource.from_registry(key)


def test_event_refuses_plain_pickle():
    ev = object.__new__(Event)  # no GPU here: the refusal does not look at the event
    with pytest.raises(TypeError, match="only through multiprocessing"):
        pickle.dumps(ev)


# -- GPU tier ---------------------------------------------------------------------------------------


@pytest.fixture
def ipc_mr(dev):
    from cuda_core import DeviceMemoryResourceOptions

    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 28))
    yield mr
    mr.close()


def _writer_child(mr: Any, buf: Buffer, seed: int, q_in: Any, q_out: Any) -> None:
    def run() -> Any:
        from cuda_core import Device

        assert mr.is_mapped and buf.is_mapped and buf.memory_resource is mr
        dev = Device(0)
        dev.set_current()
        fill, _ = _kernels(dev)
        s = dev.create_stream()
        _launch(s, fill, buf, np.uint32(seed))
        return _answer(s, buf, q_in, q_out, lambda done: done)

    _report(q_out, run)


def _answer(s: Any, buf: Buffer, q_in: Any, q_out: Any, payload: Any) -> str:
    """In a child: unmap ``buf`` after the work on ``s``, record an IPC event after that and send
    ``payload(event)``; keep the event open until the parent says "bye" (it has waited on it)."""
    buf.close(stream=s)
    done = s.record(options=IPC)
    q_out.put(("ok", payload(done)))
    assert q_in.get(timeout=TIMEOUT) == "bye"
    done.close()
    s.close()
    return "closed"


@pytest.mark.gpu
def test_children_write_buffers_the_parent_reads(dev, ipc_mr):
    s = dev.create_stream()
    bufs = [ipc_mr.allocate(4 * N, stream=s) for _ in range(2)]
    for b in bufs:
        b.fill(0, stream=s)
    s.sync()
    children = []
    for i, b in enumerate(bufs):
        q_in, q_out = SPAWN.Queue(), SPAWN.Queue()
        proc = SPAWN.Process(target=_writer_child, args=(ipc_mr, b, 1000 + i, q_in, q_out))
        proc.start()
        children.append((proc, q_in, q_out))
    try:
        for i, (proc, q_in, q_out) in enumerate(children):
            done = _get(q_out, proc)
            assert isinstance(done, Event) and done.is_ipc_enabled
            s.wait(done)  # the child's kernel, ordered on the device
            got = _read_u32(bufs[i], s)
            done.close()
            q_in.put("bye")
            assert _get(q_out, proc) == "closed"
            np.testing.assert_array_equal(got, pattern(1000 + i))
    finally:
        _finish(*(c[0] for c in children))
    for b in bufs:
        b.close(stream=s)
    s.sync()
    assert ipc_mr.attributes.used_mem_current == 0
    s.close()


def _ordering_child(first: Event, mr: Any, q_in: Any, q_out: Any) -> None:
    def run() -> Any:
        from cuda_core import Device
        from tests.helpers.kernels import timing_kernel

        # ``first`` was opened while this process was being started, before any set_current().
        assert first.is_ipc_enabled and first.device.device_id == 0
        dev = Device(0)
        dev.set_current()
        s = dev.create_stream()
        s.wait(first)
        first.close()
        q_out.put(("ok", "ready"))
        buf, ready = q_in.get(timeout=TIMEOUT)
        busy_on_arrival = not ready.is_done  # the parent's 1 s sleep is still running
        s.wait(ready)  # without it this copy would run during the parent's sleep and read zeros
        seen = _read_u32(buf, s)
        ready.close()
        # Now the other way: a sleep, then a fill, then an event the parent waits on.
        timing_kernel("sleep_ns", dev.arch).launch(s, 1, 1, ctypes.c_uint64(1_000_000_000))
        buf.fill(b"\x11\x11\x11\x11", stream=s)
        saw_fill = bool((seen == 0x7A7A7A7A).all())
        return _answer(s, buf, q_in, q_out, lambda back: (busy_on_arrival, saw_fill, back))

    _report(q_out, run)


@pytest.mark.gpu
def test_events_order_work_between_processes_both_ways(dev, ipc_mr):
    from tests.helpers.kernels import timing_kernel

    s = dev.create_stream()
    buf = ipc_mr.allocate(4 * N, stream=s)
    buf.fill(0, stream=s)
    first = s.record(options=IPC)
    with pytest.warns(DeprecationWarning, match="Event.ipc_descriptor"):  # the 0.x name
        assert first.get_ipc_descriptor() is first.ipc_descriptor  # made once, when recorded
    q_in, q_out = SPAWN.Queue(), SPAWN.Queue()
    proc = SPAWN.Process(target=_ordering_child, args=(first, ipc_mr, q_in, q_out))
    proc.start()
    try:
        assert _get(q_out, proc) == "ready"
        first.close()  # the child has waited on it
        timing_kernel("sleep_ns", dev.arch).launch(s, 1, 1, ctypes.c_uint64(1_000_000_000))
        buf.fill(b"\x7a\x7a\x7a\x7a", stream=s)
        ready = s.record(options=IPC)
        q_in.put((buf, ready))
        busy_on_arrival, saw_fill, back = _get(q_out, proc)
        assert busy_on_arrival, (
            "the parent's event completed before the child saw it: the test proves nothing"
        )
        assert saw_fill, "the child read the buffer before the parent's fill"
        ready.close()
        child_busy = not back.is_done
        s.wait(back)
        got = _read_u32(buf, s)
        back.close()
        q_in.put("bye")
        assert _get(q_out, proc) == "closed"
    finally:
        _finish(proc)
    assert child_busy, (
        "the child's event completed before the parent waited: the test proves nothing"
    )
    assert (got == 0x11111111).all(), "the parent read the buffer before the child's fill"
    buf.close(stream=s)
    s.sync()
    s.close()


def _consumer_child(mr: Any, q_in: Any, q_out: Any) -> None:
    def run() -> Any:
        from cuda_core import Device

        dev = Device(0)
        dev.set_current()
        _, check = _kernels(dev)
        s = dev.create_stream()
        counts = dev.allocate(16, stream=s)
        counts.fill(0, stream=s)
        fds0 = _open_fds()  # the driver does not report an imported pool's use (see below)
        imported: list[Any] = []
        done: dict[int, Event] = {}
        mapped = 0
        while (msg := q_in.get(timeout=TIMEOUT)) is not None:
            slot, seed, buf, ready = msg
            if slot in done:
                done.pop(slot).close()  # the parent has waited on it before sending the slot again
            s.wait(ready)
            _launch(s, check, buf, np.uint32(seed), counts)
            buf.close(stream=s)
            imported.append(buf)
            mapped += 1
            ready.close()  # before the parent closes its own
            done[slot] = s.record(options=IPC)
            q_out.put(("ok", (slot, done[slot])))
        for ev in done.values():
            ev.close()
        host = np.zeros(2, dtype=np.uint64)
        counts.copy_to(host, stream=s)
        s.sync()
        counts.close()
        left_open = sum(1 for b in imported if not b.is_closed)
        return (mapped, int(host[0]), int(host[1]), fds0, _open_fds(), left_open)

    _report(q_out, run)


def _pool_use_child(mr: Any, desc: IPCBufferDescriptor, q_out: Any) -> None:
    def run() -> Any:
        from cuda_core import Device

        dev = Device(0)
        dev.set_current()
        from cuda_core import CUDAError

        s = dev.create_stream()
        buf = Buffer.from_ipc_descriptor(mr, desc, stream=s)
        try:
            _ = mr.attributes.used_mem_current
        except CUDAError as exc:
            refused = str(exc)
        else:
            refused = ""
        buf.close(stream=s)
        s.sync()
        return refused, buf.is_closed

    _report(q_out, run)


@pytest.mark.gpu
def test_mapped_pool_use_is_not_reported_and_the_mapping_keeps_working(dev, ipc_mr):
    # The driver does not answer cuMemPoolGetAttribute for an imported pool (H100, driver 580:
    # CUDA_ERROR_INVALID_VALUE): the error names the call, and the mapping keeps working. The
    # leak checks of importing processes therefore count open imports and file descriptors.
    s = dev.create_stream()
    buf = ipc_mr.allocate(4 * N, stream=s)
    s.sync()
    q_out = SPAWN.Queue()
    proc = SPAWN.Process(target=_pool_use_child, args=(ipc_mr, buf.ipc_descriptor, q_out))
    proc.start()
    try:
        refused, closed = _get(q_out, proc)
    finally:
        _finish(proc)
    assert "cuMemPoolGetAttribute" in refused and closed
    buf.close(stream=s)
    s.sync()
    s.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))
