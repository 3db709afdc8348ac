"""The unique-id rendezvous of cuda_core.nccl (CPU tier: ranks in threads of this process, over
loopback; one test runs ranks in spawned processes with a real NCCL id where nccl4py is installed).
"""

from __future__ import annotations

import threading

import pytest

from cuda_core import nccl
from tests.helpers import nccl_ranks

HAVE_NCCL = nccl.is_available()
needs_nccl4py = pytest.mark.skipif(
    not HAVE_NCCL, reason='nccl4py or libnccl is not installed (pip install "cudacore[nccl]")'
)


def _ranks_in_threads(
    world: int, port: int, uid: bytes | None = b"\x07" * 128, worlds=None, timeout=20.0
):
    results: dict[int, object] = {}

    def one(rank: int) -> None:
        try:
            results[rank] = nccl.exchange_unique_id(
                rank, (worlds or {}).get(rank, world), "127.0.0.1", port,
                unique_id=uid if rank == 0 else None, timeout=timeout,
            )  # fmt: skip
        except Exception as exc:
            results[rank] = exc

    threads = [
        threading.Thread(target=one, args=(r,)) for r in reversed(range(world))
    ]  # clients first
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_rendezvous_gives_every_rank_rank_0s_id():
    uid = bytes(range(128))
    got = _ranks_in_threads(5, nccl_ranks.free_port(), uid)
    assert got == {r: uid for r in range(5)}


@needs_nccl4py
def test_rendezvous_across_processes_hands_out_a_fresh_nccl_id():
    ids = nccl_ranks.run_ranks(nccl_ranks.rank_exchange_only, 2, timeout=120)
    assert len(ids[0]) == 128 and ids == [ids[0]] * 2 and ids[0] != bytes(128)


def test_rendezvous_of_one_rank_needs_no_network():
    assert (
        nccl.exchange_unique_id(0, 1, "no-such-host.invalid", 1, unique_id=b"\x01" * 128)
        == b"\x01" * 128
    )


def test_rendezvous_refuses_a_rank_with_another_world_size():
    got = _ranks_in_threads(2, nccl_ranks.free_port(), worlds={1: 3})
    assert isinstance(
        got[0], RuntimeError
    ) and "rank 1 says the world size is 3, rank 0 says 2" in str(got[0])
    assert isinstance(got[1], RuntimeError) and "refused rank 1" in str(got[1])


def test_rendezvous_times_out_naming_the_missing_side():
    port = nccl_ranks.free_port()
    with pytest.raises(
        TimeoutError,
        match=rf"rank 1 could not get the unique id from rank 0 at 127.0.0.1:{port} within 0.5 s",
    ):
        nccl.exchange_unique_id(1, 2, "127.0.0.1", port, timeout=0.5)
    with pytest.raises(
        TimeoutError, match=r"rank 0 waited 0.5 s on port \d+ .* \(ranks \[1, 2\]\)"
    ):
        nccl.exchange_unique_id(0, 3, "127.0.0.1", port, unique_id=bytes(128), timeout=0.5)


def test_rendezvous_on_a_taken_port_says_so():
    import socket

    with socket.create_server(("", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(
            RuntimeError, match=rf"rank 0 cannot listen on port {port} .*choose another port"
        ):
            nccl.exchange_unique_id(0, 2, "127.0.0.1", port, unique_id=bytes(128), timeout=1)


def test_rendezvous_ignores_strangers_on_its_port():
    import socket

    port = nccl_ranks.free_port()
    uid = b"\x05" * 128
    got: dict[str, object] = {}
    server = threading.Thread(target=lambda: got.update(
        uid=nccl.exchange_unique_id(0, 2, "127.0.0.1", port, unique_id=uid, timeout=20)))  # fmt: skip
    server.start()
    for _ in range(200):  # a port scanner: connects, says something else, leaves
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 64)
            break
        except OSError:
            threading.Event().wait(0.05)
    assert nccl.exchange_unique_id(1, 2, "127.0.0.1", port, timeout=20) == uid
    server.join(30)
    assert got == {"uid": uid}


@pytest.mark.parametrize(
    ("args", "kw", "exc", "text"),
    [((2, 2, "h", 1), {}, ValueError, r"rank must be in 0..1 \(world_size is 2\) \(got 2\)"),
     ((0, 0, "h", 1), {}, ValueError, r"world_size must be at least 1 \(got 0\)"),
     ((0, 2, "h", 0), {}, ValueError, r"port must be a TCP port, 1..65535 \(got 0\)"),
     ((0, 2, "h", "29500"), {}, TypeError, r"port must be an int \(got '29500'\)"),
     ((1, 2, "", 1), {}, TypeError, r"addr must be rank 0's host name"),
     ((1, 2, "h", 1), {"unique_id": bytes(128)}, ValueError, r"unique_id must be None on ranks other than 0"),
     ((0, 2, "h", 1), {"unique_id": b"short"}, TypeError, r"unique_id must be None or the 128 bytes"),
     ((1, 2, "h", 1), {"timeout": 0}, ValueError, r"timeout must be a positive number of seconds")],
)  # fmt: skip
def test_rendezvous_checks_its_arguments(args, kw, exc, text):
    with pytest.raises(exc, match=text):
        nccl.exchange_unique_id(*args, **kw)
