"""The checks of the collectives added in issue 24 (reduce, send, recv, all_to_all, barrier,
shrink) that need no GPU: ranks, equal splits, excluded ranks, a closed or failed communicator.
Their results are checked against NumPy on 2 and 4 GPUs in tests/helpers/nccl_ranks.py."""

from __future__ import annotations

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
