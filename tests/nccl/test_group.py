"""nccl.group() against a fake NCCL (tests/helpers/fake_nccl.py): ncclGroupEnd runs under the
communicators' locks, an abort waits for the group's end, and whatever the group started is
watched on every path out of the block."""

from __future__ import annotations

import threading
import time

import pytest

from cuda_core import nccl
from cuda_core.nccl import _watchdog
from tests.helpers import fake_nccl


def _allreduce(fake: fake_nccl.Fake):
    return lambda: fake.log.append("ncclAllReduce")


def test_group_end_runs_under_every_communicators_lock(monkeypatch):
    fake = fake_nccl.Fake()
    fake_nccl.use_fake(monkeypatch, fake)
    comms = [fake_nccl.communicator(monkeypatch, fake, ptr=100 + i) for i in range(2)]
    held = []
    fake.on_group_end = lambda: held.append([c._w.lock.locked() for c in comms])
    streams = [fake_nccl.Stream(10 + i) for i in range(2)]
    with nccl.group():
        for c, s in zip(comms, streams):
            c._enqueue("ncclAllReduce", s, _allreduce(fake))
    assert held == [[True, True]]
    assert not any(c._w.lock.locked() for c in comms)
    for c in comms:
        c.abort()


def test_an_abort_during_a_group_waits_for_ncclgroupend(monkeypatch):
    # NCCL keeps the group's calls per thread until ncclGroupEnd: a communicator aborted (freed)
    # from another thread before then would be used by ncclGroupEnd after it was freed.
    fake = fake_nccl.Fake()
    fake_nccl.use_fake(monkeypatch, fake)
    comm = fake_nccl.communicator(monkeypatch, fake)
    s = fake_nccl.Stream(10)
    with pytest.raises(RuntimeError, match="Communicator has been closed"):  # its work is void
        with nccl.group():
            comm._enqueue("ncclAllReduce", s, _allreduce(fake))
            t = threading.Thread(target=comm._w.abort)
            t.start()
            t.join()
            assert "ncclCommAbort 100" not in fake.log and comm._w.aborted
    assert fake.log[-2:] == ["ncclGroupEnd", "ncclCommAbort 100"]
    comm.abort()
    assert fake.log.count("ncclCommAbort 100") == 1


def test_work_of_a_group_whose_block_raised_is_still_watched(monkeypatch):
    fake = fake_nccl.Fake()
    fake_nccl.use_fake(monkeypatch, fake)
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=0.3)
    s = fake_nccl.Stream(10)
    with pytest.raises(KeyError):  # the block's own exception, not hidden
        with nccl.group():
            comm._enqueue("ncclAllReduce", s, _allreduce(fake))
            raise KeyError("the user's")
    assert "ncclGroupEnd" in fake.log and len(s.events) == 1  # ran, and watched: it hangs...
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclAllReduce: timeout"):
        comm.wait()  # ...so the timeout aborts it
    assert "ncclCommAbort 100" in fake.log
    comm.close()


def test_work_of_a_group_that_ncclgroupend_refused_is_still_watched(monkeypatch):
    fake = fake_nccl.Fake()
    fake_nccl.use_fake(monkeypatch, fake)
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=5.0)
    s = fake_nccl.Stream(10)

    def refuse() -> None:
        raise fake_nccl.NCCLError(5)

    fake.on_group_end = refuse
    with pytest.raises(nccl.NCCLError, match="ncclGroupEnd: ncclStatus5"):
        with nccl.group():
            comm._enqueue("ncclAllReduce", s, _allreduce(fake))
    assert len(s.events) == 1 and comm._w._pending  # watched
    s.events[0].is_done = True
    comm.wait()
    assert comm._w.grouped == 0
    comm.abort()


def test_finalize_in_a_group_is_settled_before_close_destroys(monkeypatch):
    # A non-blocking communicator finalises in the background after ncclGroupEnd: destroying it
    # before its state is ncclSuccess is what NCCL forbids.
    fake = fake_nccl.Fake()
    fake_nccl.use_fake(monkeypatch, fake)
    comm = fake_nccl.communicator(monkeypatch, fake)
    states: list[int] = []

    def group_end_starts_finalize() -> None:
        fake.state[:] = [_watchdog.IN_PROGRESS] * 5 + [0]

    fake.on_group_end = group_end_starts_finalize
    real = fake.bindings.comm_get_async_error

    def poll(c: int) -> int:
        code = real(c)
        states.append(code)
        return code

    fake.bindings.comm_get_async_error = poll
    with nccl.group():
        comm.finalize()
    comm.close()
    assert fake.log.index("ncclCommDestroy 100") > fake.log.index("ncclCommFinalize 100")
    assert states[-1] == 0 and fake.state == [0], states  # NCCL said done before the destroy


def test_a_hung_blocking_group_end_is_aborted_after_the_timeout(monkeypatch):
    monkeypatch.setattr(_watchdog, "ABORT_LOCK_WAIT", 0.1)
    fake = fake_nccl.Fake()
    fake_nccl.use_fake(monkeypatch, fake)
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=0.3)
    fake.block_on.add("ncclGroupEnd")
    t0 = time.monotonic()
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclGroupEnd: timeout"):
        with nccl.group():
            comm._enqueue("ncclAllReduce", fake_nccl.Stream(10), _allreduce(fake))
    assert time.monotonic() - t0 < 0.3 + 0.1 + 1.0
    assert fake.log.count("ncclCommAbort 100") == 1
    comm.close()
