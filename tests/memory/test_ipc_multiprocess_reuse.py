"""IPC between processes, repeated and refused: many hand-offs leave every pool and fd table as
they were, and the receiving process's errors (the hand-offs themselves: test_ipc_multiprocess.py)."""

# ruff: noqa: F811 (the fixture imported from test_ipc_multiprocess are parameters of its tests)

from __future__ import annotations

import pickle
import re
from typing import Any

import numpy as np
import pytest

from cuda_core import (
    Buffer,
    DeviceMemoryResource,
    Event,
    IPCBufferDescriptor,
)
from tests.memory.test_ipc_multiprocess import (
    IPC,
    SPAWN,
    N,
    _consumer_child,
    _finish,
    _get,
    _kernels,
    _launch,
    _open_fds,
    _report,
    ipc_mr,  # noqa: F401 (a fixture)
)


@pytest.mark.gpu
def test_many_handoffs_leave_every_pool_and_fd_table_as_they_were(dev, ipc_mr):
    total, slots = 100, 2
    fill, _ = _kernels(dev)
    s = dev.create_stream()
    used0 = ipc_mr.attributes.used_mem_current
    bufs = [ipc_mr.allocate(4 * N, stream=s) for _ in range(slots)]
    q_in, q_out = SPAWN.Queue(), SPAWN.Queue()
    proc = SPAWN.Process(target=_consumer_child, args=(ipc_mr, q_in, q_out))
    proc.start()
    ready: dict[int, Event] = {}
    done: dict[int, Event] = {}
    free = list(range(slots))
    fds = None
    try:
        for k in range(total):
            if not free:
                slot, ev = _get(q_out, proc)
                s.wait(ev)  # the consumer's check has run before the slot is filled again
                done[slot] = ev
                ready.pop(slot).close()
                free.append(slot)
                if k == 10:
                    fds = _open_fds()
            slot = free.pop(0)
            if slot in done:
                done.pop(slot).close()  # this process's handle, before the consumer drops its event
            _launch(s, fill, bufs[slot], np.uint32(k))
            ready[slot] = s.record(options=IPC)
            q_in.put((slot, k, bufs[slot], ready[slot]))
        while ready:
            slot, ev = _get(q_out, proc)
            s.wait(ev)
            done[slot] = ev
            ready.pop(slot).close()
        s.sync()
        for ev in done.values():
            ev.close()
        q_in.put(None)
        mapped, mismatches, checks, c_fds0, c_fds1, left_open = _get(q_out, proc)
    finally:
        _finish(proc)
    assert (mapped, checks, mismatches) == (total, total, 0)
    assert left_open == 0, f"{left_open} imported buffers were left open in the consumer"
    assert c_fds1 <= c_fds0 + 2, (
        f"the consumer's open file descriptors went from {c_fds0} to {c_fds1}"
    )
    assert fds is not None and _open_fds() <= fds + 2, (
        f"open descriptors grew from {fds} to {_open_fds()}"
    )
    for b in bufs:
        b.close(stream=s)
    s.sync()
    assert ipc_mr.attributes.used_mem_current == used0
    assert ipc_mr.attributes.used_mem_high >= slots * 4 * N  # the pool did serve the buffers
    s.close()


def _errors_child(
    mr: Any, desc: IPCBufferDescriptor, other: IPCBufferDescriptor, dangling: bytes, q_out: Any
) -> None:
    def run() -> Any:
        from cuda_core import Device

        dev = Device(0)
        dev.set_current()
        s = dev.create_stream()
        out: dict[str, Any] = {}

        def attempt(name: str, fn: Any) -> None:
            try:
                fn()
            except Exception as exc:
                out[name] = (type(exc).__name__, str(exc), isinstance(exc, TypeError))
            else:
                out[name] = None

        attempt("allocate", lambda: mr.allocate(64, stream=s))
        oversized = IPCBufferDescriptor(desc.payload, 1 << 33)  # more than the whole pool
        attempt("oversized", lambda: Buffer.from_ipc_descriptor(mr, oversized, stream=s))
        attempt("other_pool", lambda: Buffer.from_ipc_descriptor(mr, other, stream=s))
        attempt("not_a_descriptor", lambda: Buffer.from_ipc_descriptor(mr, b"x" * 64, stream=s))
        attempt("dangling", lambda: pickle.loads(dangling))
        s.sync()  # the refused mapping is released before the buffer is mapped again
        buf = Buffer.from_ipc_descriptor(mr, desc, stream=s)
        out["mapped"] = (
            buf.is_mapped,
            buf.ipc_descriptor == desc,  # a mapped buffer passes on what it was mapped from
            type(mr).from_registry(mr.uuid) is mr,
            mr.register(mr.uuid) is mr,
            mr.allocation_handle.uuid == mr.uuid and not mr.allocation_handle.is_closed,
            pickle.loads(pickle.dumps(mr)) is mr,  # plain pickle: by uuid
        )
        buf.close(stream=s)
        s.sync()
        return out

    _report(q_out, run)


@pytest.mark.gpu
def test_errors_in_the_receiving_process(dev, ipc_mr):
    from cuda_core import DeviceMemoryResourceOptions

    s = dev.create_stream()
    buf = ipc_mr.allocate(4096, stream=s)
    other_mr = DeviceMemoryResource(
        dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 26)
    )
    other = other_mr.allocate(4096, stream=s)
    dangling = pickle.dumps(
        other
    )  # plain pickle: names other_mr by uuid, which the child never gets
    s.sync()
    q_out = SPAWN.Queue()
    proc = SPAWN.Process(
        target=_errors_child,
        args=(ipc_mr, buf.ipc_descriptor, other.ipc_descriptor, dangling, q_out),
    )
    proc.start()
    try:
        out = _get(q_out, proc)
    finally:
        _finish(proc)
    # cuda.core's messages, which code written for it may compare
    assert out["allocate"][:2] == (
        "TypeError",
        "Cannot allocate from a mapped IPC-enabled memory resource",
    )
    assert out["oversized"][0] == "ValueError" and "exceeds" in out["oversized"][1], out[
        "oversized"
    ]
    assert out["other_pool"][0] == "CUDAError", out["other_pool"]
    assert out["not_a_descriptor"][0] == "TypeError"
    assert out["not_a_descriptor"][1].startswith("Argument 'ipc_descriptor' has incorrect type"), (
        out["not_a_descriptor"]
    )
    assert out["dangling"][0] == "RuntimeError"
    assert re.match(r"Memory resource [0-9a-f-]{36} was not found", out["dangling"][1]), out[
        "dangling"
    ]
    assert out["mapped"] == (True,) * 6
    for b in (buf, other):
        b.close(stream=s)
    s.sync()
    other_mr.close()
    s.close()
