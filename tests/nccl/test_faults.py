"""Faults end in errors, not hangs (issue 24), on GPUs: a rank SIGKILLed in the middle of a loop
of all-reduces, and a rank that never joins. Every other rank must raise within its timeout plus
5 s and then run a new communicator to completion; no process is left hanging (run_ranks fails
when a rank does not answer). The number of tries of each: ``CUDA_CORE_NCCL_FAULT_TRIES``
(default 5, so 10 in all as the issue asks); the timeout: 5 s. Also the new collectives against
NumPy on 2 GPUs and, where 4 are visible, on 4."""

from __future__ import annotations

import os

import pytest

from tests.helpers import nccl_ranks

TRIES = int(os.environ.get("CUDA_CORE_NCCL_FAULT_TRIES", "5"))
TIMEOUT = 5.0


@pytest.mark.gpu
@pytest.mark.parametrize("world", [2, 4])
def test_reduce_send_recv_all_to_all_barrier_against_numpy(world):
    nccl_ranks.need_gpus(world)
    assert (
        nccl_ranks.run_ranks(nccl_ranks.rank_more_collectives, world, timeout=120) == ["ok"] * world
    )


@pytest.mark.gpu
def test_shrink_leaves_the_last_rank_out():
    nccl_ranks.need_gpus(2)
    assert nccl_ranks.run_ranks(nccl_ranks.rank_shrink, 2, timeout=120) == ["ok", "ok"]


@pytest.mark.gpu
@pytest.mark.parametrize("attempt", range(TRIES))
def test_a_rank_killed_mid_loop_makes_the_others_raise_then_work_on(attempt):
    nccl_ranks.need_gpus(2)
    world = 2
    got = nccl_ranks.run_ranks(nccl_ranks.rank_killed_mid_loop, world, nccl_ranks.free_port(), TIMEOUT,
                               timeout=90, may_die=(world - 1,))  # fmt: skip
    assert got[-1] is None  # the victim died without answering
    assert all(t is not None and t <= TIMEOUT + 5 for t in got[:-1]), got


@pytest.mark.gpu
@pytest.mark.parametrize("attempt", range(TRIES))
def test_a_rank_that_never_joins_makes_the_others_raise_then_work_on(attempt):
    nccl_ranks.need_gpus(2)
    present = 1  # two GPUs: one rank present, a communicator of two, the second never comes
    got = nccl_ranks.run_ranks(nccl_ranks.rank_never_joins, present, nccl_ranks.free_port(), TIMEOUT,
                               timeout=90)  # fmt: skip
    assert all(TIMEOUT - 0.5 <= t <= TIMEOUT + 5 for t in got), got


@pytest.mark.gpu
def test_faults_on_four_gpus():
    nccl_ranks.need_gpus(4)
    got = nccl_ranks.run_ranks(nccl_ranks.rank_killed_mid_loop, 4, nccl_ranks.free_port(), TIMEOUT,
                               timeout=90, may_die=(3,))  # fmt: skip
    assert got[3] is None and all(t <= TIMEOUT + 5 for t in got[:3]), got
    got = nccl_ranks.run_ranks(
        nccl_ranks.rank_never_joins, 3, nccl_ranks.free_port(), TIMEOUT, timeout=90
    )
    assert all(t <= TIMEOUT + 5 for t in got), got
