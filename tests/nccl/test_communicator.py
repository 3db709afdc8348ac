"""A Communicator's lifetime against a fake NCCL (tests/helpers/fake_nccl.py): blocking calls
(ncclCommFinalize of a blocking communicator, ncclCommDestroy) are bounded by the timeout and
end in an abort, an abort happens once, and init_all leaves nothing behind when it fails."""

from __future__ import annotations

import threading
import time

import pytest

from cuda_core import nccl, system
from cuda_core.nccl import _watchdog
from tests.helpers import fake_nccl


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(_watchdog, "ABORT_LOCK_WAIT", 0.1)
    f = fake_nccl.Fake()
    fake_nccl.use_fake(monkeypatch, f)
    return f


def test_a_hung_destroy_is_aborted_after_the_timeout(monkeypatch, fake):
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=0.3)
    fake.block_on.add("ncclCommDestroy")
    t0 = time.monotonic()
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclCommDestroy: timeout: rank 0 of 2"):
        comm.close()
    assert time.monotonic() - t0 < 0.3 + 0.1 + 1.0
    assert fake.log.count("ncclCommAbort 100") == 1 and comm.is_closed
    assert not comm._w.is_alive


def test_a_destroy_that_returns_is_never_followed_by_an_abort(monkeypatch, fake):
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=5.0)
    comm.close()
    assert fake.log == ["ncclCommFinalize 100", "ncclCommDestroy 100"]
    comm._w.abort()  # e.g. the finalizer of a copy: NCCL's communicator is gone
    assert "ncclCommAbort 100" not in fake.log


def test_a_hung_blocking_finalize_is_aborted_after_the_timeout(monkeypatch, fake):
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=0.3)
    fake.block_on.add("ncclCommFinalize")
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclCommFinalize: timeout"):
        comm.finalize()
    assert fake.log.count("ncclCommAbort 100") == 1
    comm.close()  # only releases: the failure was reported
    assert "ncclCommDestroy 100" not in fake.log


def test_two_parties_aborting_at_once_abort_nccl_once(monkeypatch, fake):
    # A caller is stuck inside NCCL (it holds the lock): both the watchdog and a user's abort()
    # give up waiting for the lock; exactly one may call ncclCommAbort, and the other returns
    # only once that call returned.
    comm = fake_nccl.communicator(monkeypatch, fake)
    w = comm._w
    calls, returned = [], []
    real_abort = w._abort

    def slow_abort() -> None:
        calls.append(time.monotonic())
        time.sleep(0.2)
        real_abort()

    w._abort = slow_abort
    w.lock.acquire()
    try:
        parties = [threading.Thread(target=lambda: (w.abort(), returned.append(time.monotonic())))
                   for _ in range(4)]  # fmt: skip
        for p in parties:
            p.start()
        for p in parties:
            p.join()
    finally:
        w.lock.release()
    assert len(calls) == 1 and fake.log.count("ncclCommAbort 100") == 1
    assert all(t >= calls[0] + 0.2 for t in returned), (calls, returned)
    comm.abort()


def test_a_caller_freed_by_the_abort_raises_the_timeout(monkeypatch, fake):
    # The failure is kept before the abort: the caller whose NCCL call the abort ended raises
    # the timeout, not NCCL's error about its call, and never goes on with the freed communicator.
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=0.2)
    w = comm._w
    w.watch(fake_nccl.Event(1), "ncclAllReduce")  # never completes: times out

    def stuck() -> None:
        fake.hang("stuck")

    after_abort = []
    real = fake.bindings.comm_get_async_error
    fake.bindings.comm_get_async_error = lambda c: (
        after_abort.append(fake.aborted.is_set()) or real(c)
    )
    fake.block_on.add("stuck")
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclAllReduce: timeout"):
        comm._enqueue("ncclAllGather", fake_nccl.Stream(10), stuck)
    assert fake.aborted.is_set() and True not in after_abort  # the freed one was never asked
    comm.close()


def test_init_all_aborts_every_communicator_when_one_cannot_be_adopted(monkeypatch, fake):
    monkeypatch.setattr(system, "get_num_devices", lambda: 3)
    fake.fail_rank_of.add(101)
    made = []
    real = fake.core.init_all
    fake.core.init_all = lambda ids: made.extend(real(ids)) or made
    with pytest.raises(nccl.NCCLError, match="ncclCommUserRank"):
        nccl.Communicator.init_all(timeout=5.0)
    assert len(made) == 3
    assert sorted(e for e in fake.log if e.startswith("ncclCommAbort")) == [
        "ncclCommAbort 100",
        "ncclCommAbort 101",
        "ncclCommAbort 102",
    ]
    assert not [t for t in threading.enumerate() if t.name.startswith("cuda_core.nccl watchdog")]


def test_init_makes_a_non_blocking_communicator_then_works_on_its_blocking_twin(monkeypatch, fake):
    # Making is non-blocking (a rank that never joins ends in a timeout); the collectives run on
    # a blocking twin split off it (a non-blocking one hands each call to a thread of NCCL's),
    # and the non-blocking one is closed on every rank.
    from cuda_core.nccl import _communicator

    monkeypatch.setattr(_communicator, "Device", fake_nccl.Device)
    comm = nccl.Communicator.init(2, 1, bytes(128), timeout=5.0)
    assert fake.log == [
        "ncclCommInitRank 2 1 blocking=0",
        "ncclCommSplit 201 color=0 key=1 blocking=1",
        "ncclCommFinalize 201",
        "ncclCommDestroy 201",
    ]
    assert comm.handle == 301 and comm.rank == 1
    comm.close()
    assert fake.log[-2:] == ["ncclCommFinalize 301", "ncclCommDestroy 301"]
    assert "ncclCommAbort" not in " ".join(fake.log)


def test_a_split_that_never_completes_aborts_the_first_communicator(monkeypatch, fake):
    from cuda_core.nccl import _communicator

    monkeypatch.setattr(_communicator, "Device", fake_nccl.Device)
    fake.state[:] = [0, _watchdog.IN_PROGRESS]  # made; then the split never ends
    t0 = time.monotonic()
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclCommSplit: timeout"):
        nccl.Communicator.init(2, 0, bytes(128), timeout=0.3)
    assert time.monotonic() - t0 < 0.3 + 1.0
    assert fake.log[-1] == "ncclCommAbort 200"  # which stops NCCL's making of the twin
    assert "ncclCommDestroy" not in " ".join(fake.log)


def test_a_collective_stuck_inside_a_blocking_call_is_aborted_after_the_timeout(monkeypatch, fake):
    # A blocking communicator may wait inside the call (for room in its queue, or to connect to
    # a peer that died) with nothing else queued: the call itself is watched.
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=0.3)

    def stuck() -> None:
        assert fake.aborted.wait(10), "never aborted"
        raise fake_nccl.NCCLError(3)

    t0 = time.monotonic()
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclAllReduce: timeout"):
        comm._enqueue("ncclAllReduce", fake_nccl.Stream(10), stuck)
    assert time.monotonic() - t0 < 0.3 + 0.1 + 1.0
    assert fake.log.count("ncclCommAbort 100") == 1
    comm.close()
