"""The checks of the collectives added in issue 24 (reduce, send, recv, all_to_all, barrier,
shrink) that need no GPU: ranks, equal splits, excluded ranks, a closed or failed communicator.
Their results are checked against NumPy on 2 and 4 GPUs in tests/helpers/nccl_ranks.py."""

from __future__ import annotations

import threading

import pytest

from cuda_core import nccl
from cuda_core.nccl import _args
from cuda_core.nccl._watchdog import Watchdog


def test_root_and_peer_must_be_ranks():
    assert _args.rank_arg("root", 3, 4) == 3
    with pytest.raises(ValueError, match=r"root must be a rank in 0..3 \(got 4\)"):
        _args.rank_arg("root", 4, 4)
    with pytest.raises(ValueError, match=r"peer must be a rank in 0..1 \(got -1\)"):
        _args.rank_arg("peer", -1, 2, 0, False)
    for bad in (True, 1.0, "1", None):
        with pytest.raises(TypeError, match=r"peer must be an int rank \(got"):
            _args.rank_arg("peer", bad, 2, 0, False)


def test_a_rank_sends_to_itself_only_inside_a_group():
    with pytest.raises(
        ValueError,
        match=r"peer must be another rank than this one \(1\) outside nccl.group\(\) \(got 1\); a rank sends to itself only inside a group",
    ):
        _args.rank_arg("peer", 1, 2, 1, False)
    assert _args.rank_arg("peer", 1, 2, 1, True) == 1


def test_all_to_all_needs_equal_blocks():
    assert _args.equal_blocks(12, 4) == 3 and _args.equal_blocks(0, 4) == 0
    with pytest.raises(
        ValueError,
        match=r"sendbuf must be 4 equal blocks, one per rank \(a length that is a multiple of nranks, 4\) \(got '10 elements'\)",
    ):
        _args.equal_blocks(10, 4)


def test_item_sizes_of_every_nccl_type():
    for name, code in (("int8", 0), ("uint8", 1), ("int32", 2), ("uint32", 3), ("int64", 4),
                       ("uint64", 5), ("float16", 6), ("float32", 7), ("float64", 8)):  # fmt: skip
        assert _args.ITEMSIZE[code] == _args.nccl_dtype(name)[1]
    assert _args.ITEMSIZE[9] == 2 and _args.ITEMSIZE[10] == _args.ITEMSIZE[11] == 1


def test_excluded_ranks_of_a_shrink():
    assert _args.excluded_ranks((3, 1), 0, 4) == [3, 1]
    with pytest.raises(ValueError, match=r"exclude_ranks must be at least one rank \(got \[\]\)"):
        _args.excluded_ranks([], 0, 4)  # NCCL 2.28 refuses it: ncclInvalidArgument
    with pytest.raises(
        ValueError,
        match=r"exclude_ranks must be ranks other than this one \(2\) .*does not call shrink",
    ):
        _args.excluded_ranks([2], 2, 4)
    with pytest.raises(ValueError, match=r"exclude_ranks must be distinct ranks"):
        _args.excluded_ranks([1, 1], 0, 4)
    with pytest.raises(ValueError, match=r"exclude_ranks must be a rank in 0..3 \(got 4\)"):
        _args.excluded_ranks([4], 0, 4)
    with pytest.raises(TypeError, match=r"exclude_ranks must be a sequence of int ranks \(got 3\)"):
        _args.excluded_ranks(3, 0, 4)


def _communicator(failure=None):
    """A Communicator in the state NCCL would leave it (no NCCL needed for what is checked)."""
    comm = object.__new__(nccl.Communicator)
    comm._comm = None if failure is None else object()
    comm._n4p = None if failure is None else object()
    comm._rank, comm._nranks, comm._device_id, comm._scratch = 0, 2, 0, None
    w = Watchdog(5.0, 0, 2, 0, lambda: 0, lambda: None, lambda api, code: None)
    w.failure = failure
    comm._w = w
    return comm


CALLS = {
    "all_reduce": lambda c: c.all_reduce(None, stream=None),
    "broadcast": lambda c: c.broadcast(None, stream=None),
    "reduce": lambda c: c.reduce(None, stream=None),
    "all_gather": lambda c: c.all_gather(None, None, stream=None),
    "reduce_scatter": lambda c: c.reduce_scatter(None, None, stream=None),
    "all_to_all": lambda c: c.all_to_all(None, None, stream=None),
    "send": lambda c: c.send(None, 1, stream=None),
    "recv": lambda c: c.recv(None, 1, stream=None),
    "barrier": lambda c: c.barrier(stream=None),
    "wait": lambda c: c.wait(),
    "finalize": lambda c: c.finalize(),
    "shrink": lambda c: c.shrink([1]),
    "as_nccl4py": lambda c: c.as_nccl4py(),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_call_on_a_closed_communicator_says_so(call):
    with pytest.raises(
        RuntimeError,
        match=r"Communicator has been closed; it cannot be used after close\(\) or abort\(\)",
    ):
        CALLS[call](_communicator())


@pytest.mark.parametrize("call", sorted(set(CALLS) - {"as_nccl4py"}))
def test_every_call_after_a_timeout_raises_the_timeout(call):
    err = nccl.NCCLTimeoutError("ncclAllReduce", 0, 2, 0, 5.0)
    with pytest.raises(nccl.NCCLTimeoutError) as info:
        CALLS[call](_communicator(err))
    assert info.value is err


# -- the hot path, against a fake NCCL ---------------------------------------------------------


class _CountingLock:
    """A lock that counts its acquisitions (the communicator's lock, watched)."""

    def __init__(self, lock) -> None:
        self._lock, self.taken = lock, 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.taken += 1
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_a_collective_takes_the_lock_once_and_asks_nccl_its_status_once(monkeypatch):
    from tests.helpers import fake_nccl

    fake = fake_nccl.Fake()
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=60)
    w = comm._w
    s = fake_nccl.Stream(10)
    comm._enqueue("ncclAllReduce", s, lambda: None)  # the first one starts the thread
    mine = threading.current_thread()
    polls = []
    real = fake.bindings.comm_get_async_error
    fake.bindings.comm_get_async_error = lambda c: (
        polls.append(threading.current_thread()) or real(c)
    )
    lock = w.lock = _CountingLock(w.lock)
    taken = []
    for _ in range(5):
        lock.taken = 0  # the watchdog thread's looks count too: one call at a time
        comm._enqueue("ncclAllReduce", s, lambda: None)
        taken.append(lock.taken)
    # once per call; the watchdog thread's own looks (a lock try each) may add one now and then
    assert min(taken) == 1 and polls.count(mine) == 5, taken
    assert len(s.events) == 6
    comm.abort()


def test_in_progress_is_waited_out_without_asking_nccl_again_at_once(monkeypatch):
    from cuda_core.nccl import _watchdog
    from tests.helpers import fake_nccl

    fake = fake_nccl.Fake()
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=60)
    mine = threading.current_thread()
    polls = []  # the caller's own (the watchdog thread, watching the call, may ask too)

    def status(comm: int) -> int:  # the caller's first question is answered ncclInProgress
        polls.append(threading.current_thread())
        return _watchdog.IN_PROGRESS if polls.count(mine) == 1 and polls[-1] is mine else 0

    fake.bindings.comm_get_async_error = status
    yields = []
    monkeypatch.setattr(_watchdog.os, "sched_yield", lambda: yields.append(polls.count(mine)))
    s = fake_nccl.Stream(10)
    comm._enqueue("ncclAllReduce", s, lambda: None)
    assert polls.count(mine) == 2 and yields[:1] == [1]  # asked, yielded, asked again
    assert len(s.events) == 1
    comm.abort()


def test_events_are_reused_only_on_a_stream_of_their_own_context(monkeypatch):
    from tests.helpers import fake_nccl

    fake = fake_nccl.Fake()
    comm = fake_nccl.communicator(monkeypatch, fake, timeout=60)
    a, a2, b, unknown = (fake_nccl.Stream(10, ctx=1), fake_nccl.Stream(11, ctx=1),
                         fake_nccl.Stream(20, ctx=2), fake_nccl.Stream(30, ctx=None))  # fmt: skip
    comm._enqueue("ncclAllReduce", a, lambda: None)  # the pool is empty: a new event
    first = a.events[0]
    first.is_done = True
    comm.wait()
    assert comm._w.free == {1: [first]}
    comm._enqueue("ncclAllReduce", b, lambda: None)  # another context: not that event
    comm._enqueue("ncclAllReduce", unknown, lambda: None)
    comm._enqueue("ncclAllReduce", a2, lambda: None)  # the same context: reused
    assert b.events[0] is not first and unknown.events[0] is not first and a2.events == [first]
    for ev in (b.events[0], unknown.events[0], first):
        ev.is_done = True
    comm.wait()
    assert set(comm._w.free) == {1, 2, 30}
    comm.abort()
    assert first.closed and b.events[0].closed
