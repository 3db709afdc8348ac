"""The watchdog of a communicator (cuda_core/nccl/_watchdog.py), without NCCL: completion objects
and NCCL's status come from the test, so every path (done, timeout, asynchronous error,
ncclInProgress, stop) runs on the CPU tier. The same class runs on the GPU in test_faults.py."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from cuda_core import nccl
from cuda_core.nccl import _watchdog
from cuda_core.nccl._errors import NCCLError
from cuda_core.nccl._watchdog import IN_PROGRESS, WATCH_MAX, Watchdog


class Work:
    """A completion object: done once ``finish()`` was called; counts how often it was asked."""

    def __init__(self, done: bool = False) -> None:
        self.done = done
        self.looks = 0
        self.closed = False

    @property
    def is_done(self) -> bool:
        self.looks += 1
        return self.done

    def finish(self) -> None:
        self.done = True

    def close(self) -> None:
        self.closed = True


class Fake:
    """NCCL's side: an asynchronous status the test sets, and a record of aborts."""

    def __init__(self) -> None:
        self.code = 0
        self.aborts = 0

    def make(self, timeout: float = 0.3) -> Watchdog:
        return Watchdog(timeout, 1, 4, 3, lambda: self.code, self.abort,
                        lambda api, code: NCCLError(api, f"status{code}", "from the test", code))  # fmt: skip

    def abort(self) -> None:
        self.aborts += 1


def _until(pred, limit: float = 5.0) -> float:
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < limit, "condition never came"
        time.sleep(0.005)
    return time.monotonic() - t0


def test_completed_work_is_recycled_and_the_thread_ends_at_stop():
    fake = Fake()
    w = fake.make()
    works = [Work() for _ in range(3)]
    for i, work in enumerate(works):
        w.watch(work, f"op{i}", "ctx")
    assert w.is_alive
    for work in works:
        work.finish()
    w.wait_idle()  # returns: everything completed
    assert w.free == {"ctx": works} and w.failure is None and fake.aborts == 0
    w.stop()
    assert not w.is_alive and all(work.closed for work in works)
    assert not [t for t in threading.enumerate() if t.name.startswith("cuda_core.nccl watchdog")]


def test_work_that_never_completes_aborts_once_and_raises_a_timeout_naming_everything():
    fake = Fake()
    w = fake.make(timeout=0.3)
    t0 = time.monotonic()
    w.watch(Work(), "ncclAllReduce")
    with pytest.raises(nccl.NCCLTimeoutError) as info:
        w.wait_idle()
    took = time.monotonic() - t0
    assert 0.3 <= took < 0.3 + WATCH_MAX + 0.5
    err = info.value
    assert fake.aborts == 1 and isinstance(err, nccl.NCCLError)
    assert (err.api, err.rank, err.nranks, err.device_id, err.timeout) == (
        "ncclAllReduce",
        1,
        4,
        3,
        0.3,
    )
    assert str(err).startswith(
        "ncclAllReduce: timeout: rank 1 of 4 ranks (device 3): not complete after 0.3 s"
    )
    assert "new unique id" in str(err)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is nccl.NCCLTimeoutError and str(back) == str(err) and back.rank == 1
    _until(lambda: not w.is_alive)  # the thread ended by itself after the abort
    with pytest.raises(nccl.NCCLTimeoutError):
        w.check()  # and every later call raises it again
    w.stop()
    assert fake.aborts == 1


def test_the_clock_starts_when_work_becomes_the_oldest():
    # Three operations of 0.2 s each, queued at once, with a 0.35 s timeout: the last one ends
    # 0.6 s after it was queued, but was never the oldest for longer than 0.2 s.
    fake = Fake()
    w = fake.make(timeout=0.35)
    works = [Work() for _ in range(3)]
    for work in works:
        w.watch(work, "ncclAllReduce")
    for work in works:
        time.sleep(0.2)
        work.finish()
    w.wait_idle()
    assert fake.aborts == 0
    w.stop()


def test_an_asynchronous_error_aborts_without_waiting_for_the_timeout():
    fake = Fake()
    w = fake.make(timeout=60)
    w.watch(Work(), "ncclSend")
    fake.code = 6  # ncclRemoteError
    took = _until(lambda: w.failure is not None)
    assert took < 1.0 and fake.aborts == 1
    with pytest.raises(NCCLError, match="ncclSend: status6") as info:
        w.check()
    assert not isinstance(info.value, nccl.NCCLTimeoutError)
    w.stop()


def test_in_progress_is_not_an_error_and_the_watchdog_sleeps_rather_than_spins():
    fake = Fake()
    fake.code = IN_PROGRESS
    w = fake.make(timeout=60)
    work = Work()
    w.watch(work, "ncclAllReduce")
    time.sleep(1.0)
    # sleeps that grow from 1 ms to 100 ms: about 20 looks in a second, never thousands
    assert 3 <= work.looks <= 40, work.looks
    assert w.failure is None and fake.aborts == 0
    w.stop()
    assert not w.is_alive


def test_settle_waits_out_in_progress_then_returns_or_times_out():
    fake = Fake()
    w = fake.make(timeout=0.3)
    fake.code = IN_PROGRESS
    threading.Timer(0.1, lambda: setattr(fake, "code", 0)).start()
    w.settle("ncclCommInitRank")  # in progress for 0.1 s, then done
    assert fake.aborts == 0
    fake.code = IN_PROGRESS
    t0 = time.monotonic()
    with pytest.raises(nccl.NCCLTimeoutError, match="ncclCommInitRank: timeout: rank 1 of 4"):
        w.settle("ncclCommInitRank")
    assert 0.3 <= time.monotonic() - t0 < 1.0 and fake.aborts == 1
    assert w.reported


def test_settle_polls_without_sleeping_while_the_enqueue_is_short(monkeypatch):
    # A non-blocking communicator answers most calls ncclInProgress for microseconds; the
    # shortest sleep costs 100 us or more, and time.sleep(0) the timer's slack (about 60 us on
    # Linux): the first SETTLE_SPIN seconds only yield, then the pauses grow from SETTLE_MIN.
    fake = Fake()
    w = fake.make(timeout=5.0)
    slept: list[float] = []
    yields: list[int] = []
    real_sleep = time.sleep
    monkeypatch.setattr(_watchdog.time, "sleep", lambda d: slept.append(d) or real_sleep(d))
    monkeypatch.setattr(_watchdog.os, "sched_yield", lambda: yields.append(1))
    for spin, want_sleeps, want_yields in (
        (60.0, [], 2),
        (0.0, [_watchdog.SETTLE_MIN, 2 * _watchdog.SETTLE_MIN], 0),
    ):
        monkeypatch.setattr(_watchdog, "SETTLE_SPIN", spin)
        answers = iter([IN_PROGRESS, IN_PROGRESS, 0])
        w._async_error = lambda a=answers: next(a)
        slept.clear()
        yields.clear()
        w.settle("ncclAllReduce")
        assert (slept, len(yields)) == (want_sleeps, want_yields), spin
    assert fake.aborts == 0


def test_after_a_plain_abort_settle_and_wait_raise_instead_of_succeeding():
    # abort() records no failure, and status() answers 0 once aborted: a settle or a wait then
    # must not report NCCL's work as done (a caller would go on to use the freed communicator).
    fake = Fake()
    w = fake.make(timeout=5.0)
    fake.code = IN_PROGRESS
    w.abort()
    assert fake.aborts == 1 and w.failure is None
    with pytest.raises(RuntimeError, match="Communicator has been closed"):
        w.settle("ncclAllReduce")
    # A wait cut short by stop() (close() or abort() on another thread) with work pending
    # raises too, instead of returning as if the work had completed.
    w2 = fake.make(timeout=5.0)
    w2.watch(Work(), "ncclAllReduce")
    threading.Timer(0.05, w2.stop).start()
    with pytest.raises(RuntimeError, match="Communicator has been closed"):
        w2.wait_idle()


def test_a_wait_that_wakes_after_stop_emptied_the_queue_still_raises():
    # stop() empties the queue once it has joined the thread; a waiter that gets the lock only
    # after that (it lost the race on a loaded 64-core machine) must still hear that work was
    # dropped. Waiting after stop() is the same state, without the race.
    fake = Fake()
    w = fake.make(timeout=5.0)
    w.watch(Work(), "ncclAllReduce")
    w.stop()
    w.stop()  # a second stop() does not forget the first one's dropped work
    with pytest.raises(RuntimeError, match="Communicator has been closed"):
        w.wait_idle()
    idle = fake.make(timeout=5.0)
    idle.stop()
    idle.wait_idle()  # nothing was pending: nothing to report


def test_settle_turns_an_error_status_into_an_abort_and_the_error():
    fake = Fake()
    w = fake.make()
    fake.code = 3  # ncclInternalError
    with pytest.raises(NCCLError, match="ncclCommFinalize: status3"):
        w.settle("ncclCommFinalize")
    assert fake.aborts == 1
    w.abort()  # idempotent: NCCL is never asked twice
    assert fake.aborts == 1 and w.status() == 0


def test_a_broken_completion_object_ends_the_communicator_with_its_error():
    class Broken:
        @property
        def is_done(self) -> bool:
            raise RuntimeError("cuEventQuery: CUDA_ERROR_LAUNCH_FAILED")

    fake = Fake()
    w = fake.make(timeout=60)
    w.watch(Broken(), "ncclAllGather")
    _until(lambda: w.failure is not None)
    with pytest.raises(NCCLError, match="ncclAllGather: RuntimeError: cuEventQuery"):
        w.check()
    assert fake.aborts == 1
    w.stop()


def test_stop_joins_a_waiting_thread_at_once_and_watch_after_stop_is_ignored():
    fake = Fake()
    w = fake.make(timeout=60)
    w.watch(Work(), "ncclAllReduce")
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < 0.5 and not w.is_alive
    w.watch(Work(), "ncclAllReduce")
    assert not w.is_alive and fake.aborts == 0


def test_many_watchdogs_leave_no_thread_behind():
    fakes = [Fake() for _ in range(20)]
    dogs = [f.make() for f in fakes]
    for d in dogs:
        work = Work()
        d.watch(work, "ncclAllReduce")
        work.finish()
    for d in dogs:
        d.wait_idle()
        d.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("cuda_core.nccl watchdog")]


def test_an_abort_does_not_wait_forever_for_a_caller_stuck_in_nccl():
    # A caller holds the lock inside an NCCL call that only the abort can end (an enqueue on a
    # rank whose peer died): the watchdog aborts after ABORT_LOCK_WAIT without it.
    from cuda_core.nccl._watchdog import ABORT_LOCK_WAIT

    fake = Fake()
    w = fake.make(timeout=0.2)
    w.lock.acquire()
    try:
        w.watch(Work(), "ncclAllReduce")
        took = _until(lambda: fake.aborts == 1)  # aborted while the caller still holds the lock
        assert w.failure is not None
    finally:
        w.lock.release()
    assert fake.aborts == 1 and took < 0.2 + ABORT_LOCK_WAIT + 1.0
    w.stop()


def test_a_child_communicator_is_read_only_once_its_parent_settled(monkeypatch):
    # ncclCommShrink on a non-blocking communicator: NCCL makes the child as the parent's
    # asynchronous work and writes the child's handle (NULL until then) when that is done.
    # Reading it at once (what the H200 run did) polled a NULL communicator: ncclInvalidArgument.
    from cuda_core.nccl import _communicator

    parent_code = [IN_PROGRESS, IN_PROGRESS, 0]
    fake = Fake()
    parent = fake.make(timeout=5.0)
    parent._async_error = lambda: parent_code.pop(0) if len(parent_code) > 1 else parent_code[0]

    class Child:  # nccl4py's Communicator: NCCL writes ptr when the parent's work is done
        def __init__(self) -> None:
            self.aborted = False

        @property
        def ptr(self) -> int:
            return 0xC0FFEE if parent_code == [0] else 0

        def abort(self) -> None:
            self.aborted = True

    class Bindings:  # the binding calls the child's watchdog and adoption make
        class NCCLError(Exception):
            pass

        @staticmethod
        def Comm(ptr: int) -> int:
            assert ptr, "the child's handle was read before NCCL wrote it"
            return ptr

        comm_get_async_error = staticmethod(lambda comm: 0)
        comm_user_rank = staticmethod(lambda comm: 0)
        comm_count = staticmethod(lambda comm: 1)
        comm_cu_device = staticmethod(lambda comm: 0)

    class Core:
        NCCLConfig = staticmethod(lambda **kw: kw)

    child = Child()
    monkeypatch.setattr(_communicator, "_make_current", lambda device_id: None)
    made = _communicator.Communicator._start(
        Core, Bindings, "ncclCommShrink", lambda config: child, 5.0, 0, 1, 0, parent=parent
    )
    assert (made._rank, made._nranks, made._comm) == (0, 1, 0xC0FFEE) and not child.aborted
    made._w.stop()
    made._finalizer.detach()


def test_wait_idle_notices_completion_promptly_without_spinning_for_long():
    # The watchdog's sleeps grow to 100 ms while nobody waits; a waiter (wait(), barrier())
    # must learn of the completion within a few ms, not up to 100 ms later, and a long wait
    # must not burn a core.
    fake = Fake()
    w = fake.make(timeout=60)
    work = Work()
    w.watch(work, "ncclAllReduce")
    time.sleep(0.3)  # the watchdog's sleeps have grown by now
    finished = []
    threading.Timer(0.45, lambda: (work.finish(), finished.append(time.monotonic()))).start()
    cpu0 = time.process_time()
    w.wait_idle()
    late = time.monotonic() - finished[0]
    cpu = time.process_time() - cpu0
    assert late < 0.02, late
    assert cpu < 0.25, cpu  # 0.45 s of waiting: mostly asleep
    assert work.looks < 2000, work.looks
    w.stop()
