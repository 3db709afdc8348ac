"""IPC, GPU tier: a buffer passed on by a process that only mapped it.

Process A (this one) allocates from an IPC-enabled pool and gives the buffer to B (a ``Process``
argument); B never touches it but sends it on to C through a ``Queue``; C writes it and A reads
what C wrote. B's sending exercises what an importer does when it pickles: its mapped resource
travels with B's own duplicate of the allocation handle (served to C over B's fd-passing
socket, so B stays alive until C has it) and the buffer with the descriptor B mapped it from.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import traceback
from typing import Any

import pytest

from tests.helpers import cuda13_bindings

pytestmark = pytest.mark.gpu

SPAWN = mp.get_context("spawn")
TIMEOUT = 120  # seconds a child may take (a spawned child imports cuda_core first)
NBYTES = 4096


def _forwarder(buf: Any, q_bc: Any, release: Any, q_out: Any) -> None:
    """B: send the mapped buffer on to C, keep it open until A says C is done."""
    try:
        from cuda_core import Device

        Device(0).set_current()
        assert buf.is_mapped and buf.memory_resource.is_mapped
        q_bc.put(buf)
        assert release.wait(TIMEOUT), "A never released B"
        buf.close()
        q_out.put(("B", "ok"))
    except BaseException:
        q_out.put(("B", traceback.format_exc()))


def _writer(q_bc: Any, q_out: Any) -> None:
    """C: map the buffer B sent, fill it with 0x3c, unmap it."""
    try:
        from cuda_core import Device

        dev = Device(0)
        dev.set_current()
        buf = q_bc.get(timeout=TIMEOUT)
        assert buf.is_mapped and buf.size == NBYTES
        s = dev.create_stream()
        before = bytearray(NBYTES)
        buf.copy_to(before, stream=s)  # a host copy is complete on return
        buf.fill(0x3C, stream=s)
        buf.close(stream=s)
        s.sync()
        q_out.put(
            ("C", "ok" if bytes(before) == b"\x5a" * NBYTES else "C read other bytes than A wrote")
        )
    except BaseException:
        q_out.put(("C", traceback.format_exc()))


def _pass_on(mr: Any, dev: Any) -> None:
    s = dev.create_stream()
    buf = mr.allocate(NBYTES, stream=s)
    buf.fill(0x5A, stream=s)
    s.sync()
    q_bc, q_out, release = SPAWN.Queue(), SPAWN.Queue(), SPAWN.Event()
    b = SPAWN.Process(target=_forwarder, args=(buf, q_bc, release, q_out))
    c = SPAWN.Process(target=_writer, args=(q_bc, q_out))
    b.start()
    c.start()
    said: dict[str, str] = {}
    try:
        try:
            who, what = q_out.get(timeout=TIMEOUT)
            said[who] = what
            if who == "C":
                release.set()  # C has the buffer and is done with it: B may close its mapping
            who, what = q_out.get(timeout=TIMEOUT)
            said[who] = what
            release.set()
        except queue.Empty:
            raise AssertionError(f"the children said only {said} in {TIMEOUT} s") from None
    finally:
        release.set()
        for proc in (b, c):
            proc.join(60)
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert said == {"B": "ok", "C": "ok"}, said
    assert (b.exitcode, c.exitcode) == (0, 0)
    out = bytearray(NBYTES)
    buf.copy_to(out, stream=s)
    assert bytes(out) == b"\x3c" * NBYTES  # C's writes, seen by A
    buf.close(stream=s)
    s.sync()
    s.close()


def test_device_pool_buffer_passed_on_by_an_importer(dev):
    from cuda_core import DeviceMemoryResource, DeviceMemoryResourceOptions

    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 26))
    try:
        _pass_on(mr, dev)
    finally:
        mr.close()


@cuda13_bindings
def test_pinned_pool_buffer_passed_on_by_an_importer(dev):
    from cuda_core import CUDAError, PinnedMemoryResource, PinnedMemoryResourceOptions

    try:
        mr = PinnedMemoryResource(PinnedMemoryResourceOptions(ipc_enabled=True, max_size=1 << 26))
    except CUDAError as exc:
        pytest.skip(f"this machine cannot make an IPC-enabled pinned pool: {exc}")
    try:
        _pass_on(mr, dev)
    finally:
        mr.close()
