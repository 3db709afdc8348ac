"""One descriptor imported twice in a process shares one mapping: the pointer is mapped once
and freed when the last of its buffers closes (cuda.core's behaviour; the driver maps a pointer
once per process)."""

from __future__ import annotations

from typing import Any

import pytest

from cuda_core import Buffer, IPCBufferDescriptor

from .test_ipc_multiprocess import SPAWN, _finish, _get, _report, ipc_mr  # noqa: F401


def _twice_child(mr: Any, desc: IPCBufferDescriptor, q_out: Any) -> None:
    def run() -> Any:
        import numpy as np

        from cuda_core import Device

        dev = Device(0)
        dev.set_current()
        s = dev.create_stream()
        a = Buffer.from_ipc_descriptor(mr, desc, stream=s)
        b = Buffer.from_ipc_descriptor(mr, desc, stream=s)
        same = int(a.handle) == int(b.handle)
        a.close(stream=s)
        s.sync()
        host = np.empty(desc.size, dtype=np.uint8)
        b.copy_to(host, stream=s)  # still mapped: the other buffer holds it
        s.sync()
        b.close(stream=s)
        s.sync()
        c = Buffer.from_ipc_descriptor(mr, desc, stream=s)  # mapped again after both closed
        c.close(stream=s)
        s.sync()
        return same, bytes(host[:4])

    _report(q_out, run)


@pytest.mark.gpu
def test_a_descriptor_imported_twice_shares_one_mapping(dev, ipc_mr):  # noqa: F811
    s = dev.create_stream()
    buf = ipc_mr.allocate(4096, stream=s)
    buf.fill(7, stream=s)
    s.sync()
    q_out = SPAWN.Queue()
    proc = SPAWN.Process(target=_twice_child, args=(ipc_mr, buf.ipc_descriptor, q_out))
    proc.start()
    try:
        same, head = _get(q_out, proc)
    finally:
        _finish(proc)
    assert same and head == b"\x07\x07\x07\x07"
    buf.close(stream=s)
    s.sync()
    s.close()


def _handle_and_resource_child(handle: Any, mr: Any, q_out: Any) -> None:
    def run() -> Any:
        from cuda_core import Device, DeviceMemoryResource

        dev = Device(0)
        dev.set_current()
        # Pickle gave both arguments the same handle object: rebuilding the resource must not
        # have closed it under the code that holds it.
        again = DeviceMemoryResource.from_allocation_handle(dev, handle)
        return handle.is_closed, type(again).__name__

    _report(q_out, run)


@pytest.mark.gpu
def test_a_handle_sent_beside_its_resource_stays_open(dev, ipc_mr):  # noqa: F811
    q_out = SPAWN.Queue()
    proc = SPAWN.Process(
        target=_handle_and_resource_child, args=(ipc_mr.allocation_handle, ipc_mr, q_out)
    )
    proc.start()
    try:
        closed, kind = _get(q_out, proc)
    finally:
        _finish(proc)
    assert not closed and kind == "DeviceMemoryResource"
