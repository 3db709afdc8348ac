"""The unique-id rendezvous of cuda_core.nccl, as the ranks see it (CPU tier: ranks in threads of
this process, over loopback; one test runs ranks in spawned processes with a real NCCL id where
nccl4py is installed): every rank gets rank 0's id, with or without the job secret; a wrong or
missing secret, another world size and a rank 0 that does not hold the secret are clear errors.
What rank 0 does with bad input is in test_server.py; the wire format's pieces in
test_handshake.py.
"""

from __future__ import annotations

import threading
import time

import pytest

from cuda_core import nccl
from cuda_core.nccl import _handshake as hs
from tests.helpers import nccl_ranks
from tests.helpers.rendezvous_peers import SECRET, UID, FakeRank0, Rank0, Tap, rank

HAVE_NCCL = nccl.is_available()
needs_nccl4py = pytest.mark.skipif(
    not HAVE_NCCL, reason='nccl4py or libnccl is not installed (pip install "cudacore[nccl]")'
)
ENV = "CUDA_CORE_NCCL_SECRET"


@pytest.fixture(autouse=True)
def _no_secret_from_outside(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def _ranks_in_threads(world: int, port: int, **kw) -> dict[int, object]:
    """Ranks 1..world-1 in threads (started first), rank 0 in this thread: what each returned."""
    results: dict[int, object] = {}
    threads = [
        threading.Thread(target=lambda r=r: results.update({r: rank(r, world, port, **kw)}))
        for r in range(1, world)
    ]
    for t in threads:
        t.start()
    try:
        results[0] = nccl.exchange_unique_id(0, world, "127.0.0.1", port, unique_id=UID, **kw)
    except Exception as exc:
        results[0] = exc
    for t in threads:
        t.join(30)
    return results


def test_rendezvous_gives_every_rank_rank_0s_id():
    got = _ranks_in_threads(5, nccl_ranks.free_port(), timeout=20)
    assert got == {r: UID for r in range(5)}


def test_ranks_that_share_a_secret_get_the_id():
    t0 = time.monotonic()
    got = _ranks_in_threads(4, nccl_ranks.free_port(), timeout=20, secret=SECRET)
    assert got == {r: UID for r in range(4)}
    assert time.monotonic() - t0 < 5


def test_the_secret_is_read_from_the_environment(monkeypatch):
    port = nccl_ranks.free_port()
    monkeypatch.setenv(ENV, SECRET)
    r0 = Rank0(2, port)
    assert rank(1, 2, port, secret=SECRET) == UID  # the same secret, given as an argument
    assert r0.outcome() == UID
    r0 = Rank0(3, port, secret=SECRET.encode())
    assert rank(1, 3, port) == UID  # from the environment, against bytes on rank 0
    monkeypatch.setenv(ENV, "another secret, 32 characters...")
    got = rank(2, 3, port, timeout=2)
    assert isinstance(got, RuntimeError) and "proof of the job secret is wrong" in str(got)
    monkeypatch.setenv(ENV, "")  # empty: no secret
    got = rank(2, 3, port, timeout=2)
    assert isinstance(got, RuntimeError) and "it has no job secret" in str(got)
    monkeypatch.setenv(ENV, SECRET)
    assert rank(2, 3, port) == UID
    assert r0.outcome() == UID


@pytest.mark.parametrize("with_secret", [False, True])
def test_the_secret_never_crosses_the_wire_and_the_id_only_masked(with_secret):
    port = nccl_ranks.free_port()
    kw = {"secret": SECRET} if with_secret else {}
    r0 = Rank0(2, port, **kw)
    tap = Tap(port)
    got = nccl.exchange_unique_id(1, 2, "127.0.0.1", tap.port, timeout=10, **kw)
    assert got == UID and r0.outcome() == UID
    tap.join(10)
    seen = bytes(tap.seen)
    assert len(seen) > 128 and SECRET.encode() not in seen
    assert (UID in seen) is not with_secret  # in the clear only without a secret


def test_a_wrong_secret_is_refused_and_the_honest_ranks_go_on():
    port = nccl_ranks.free_port()
    r0 = Rank0(3, port, secret=SECRET)
    t0 = time.monotonic()
    wrong = rank(1, 3, port, secret="not the job's secret, but long", timeout=5)
    assert time.monotonic() - t0 < 3  # refused at once, not timed out
    assert isinstance(wrong, RuntimeError)
    assert str(wrong) == (
        f"rank 0 at 127.0.0.1:{port} refused rank 1: its proof of the job secret is wrong: is "
        "CUDA_CORE_NCCL_SECRET the same in every process of the job?"
    )
    assert rank(1, 3, port, secret=SECRET) == UID  # the refused one took no place
    assert rank(2, 3, port, secret=SECRET) == UID
    assert r0.outcome() == UID and r0.elapsed < 5


def test_a_rank_without_the_secret_is_told_to_set_it():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, secret=SECRET, timeout=1.0)
    got = rank(1, 2, port, timeout=5)
    assert isinstance(got, RuntimeError)
    assert str(got) == (
        f"rank 0 at 127.0.0.1:{port} refused rank 1: it has no job secret and rank 0 requires "
        "one: set CUDA_CORE_NCCL_SECRET to the same value in every process of the job"
    )
    late = r0.outcome()
    assert isinstance(late, TimeoutError) and "(ranks [1])" in str(late)
    assert "rank 1 (from 127.0.0.1) was refused: it has no job secret" in str(late)


def test_a_rank_with_a_secret_refuses_rank_0_without_one():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, timeout=1.0)
    got = rank(1, 2, port, secret=SECRET, timeout=5)
    assert isinstance(got, RuntimeError)
    assert str(got) == (
        f"rank 0 at 127.0.0.1:{port} refused rank 1: it has a job secret (CUDA_CORE_NCCL_SECRET) "
        "but rank 0 has none: set the same secret in every process of the job"
    )
    late = r0.outcome()
    assert isinstance(late, TimeoutError) and "it has a job secret" in str(late)


def test_a_rank_0_that_does_not_hold_the_secret_is_found_out():
    fake = FakeRank0(challenge=True)  # asks for the proof, then answers with a made-up one
    got = rank(1, 2, fake.port, secret=SECRET, timeout=5)
    assert isinstance(got, RuntimeError)
    assert str(got) == (
        f"what answers at 127.0.0.1:{fake.port} did not prove that it holds the job secret: is "
        "CUDA_CORE_NCCL_SECRET the same in every process of the job, and is it rank 0 that "
        "listens there?"
    )
    fake.join(10)
    assert len(fake.got_proof) == 32 and SECRET.encode() not in fake.got_proof
    fake = FakeRank0(challenge=False)  # hands out an id without asking
    got = rank(1, 2, fake.port, secret=SECRET, timeout=5)
    assert isinstance(got, RuntimeError)
    assert "handed out the unique id without asking for the job secret" in str(got)
    fake.join(10)


def test_rendezvous_refuses_a_rank_with_another_world_size():
    # Without a secret anyone may claim to be rank 1: the refusal takes no place, rank 0 goes on.
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port)
    got = rank(1, 3, port, timeout=5)
    assert isinstance(got, RuntimeError) and str(got) == (
        f"rank 0 at 127.0.0.1:{port} refused rank 1: rank 1 says the world size is 3, rank 0 says 2"
    )
    assert rank(1, 2, port) == UID
    assert r0.outcome() == UID
    # A rank that proved the secret is one of the job's: rank 0 stops at once, as that rank does.
    r0 = Rank0(2, port, secret=SECRET, timeout=20)
    got = rank(1, 3, port, secret=SECRET, timeout=5)
    assert isinstance(got, RuntimeError) and "rank 1 says the world size is 3" in str(got)
    late = r0.outcome()
    assert isinstance(late, RuntimeError) and r0.elapsed < 5
    assert str(late) == (
        f"unique-id rendezvous on port {port}: rank 1 says the world size is 3, rank 0 says 2"
    )


@needs_nccl4py
def test_rendezvous_across_processes_hands_out_a_fresh_nccl_id():
    ids = nccl_ranks.run_ranks(nccl_ranks.rank_exchange_only, 2, timeout=120)
    assert len(ids[0]) == 128 and ids == [ids[0]] * 2 and ids[0] != bytes(128)


def test_rendezvous_of_one_rank_needs_no_network():
    assert (
        nccl.exchange_unique_id(0, 1, "no-such-host.invalid", 1, unique_id=b"\x01" * 128)
        == b"\x01" * 128
    )


def test_rendezvous_times_out_naming_the_missing_side():
    port = nccl_ranks.free_port()
    with pytest.raises(
        TimeoutError,
        match=rf"rank 1 could not get the unique id from rank 0 at 127.0.0.1:{port} within 0.5 s",
    ):
        nccl.exchange_unique_id(1, 2, "127.0.0.1", port, timeout=0.5)
    with pytest.raises(
        TimeoutError,
        match=r"rank 0 waited 0.5 s on port \d+ \(127.0.0.1\) .* \(ranks \[1, 2\]\): are they "
        r"running, with this MASTER_ADDR, MASTER_PORT and CUDA_CORE_NCCL_SECRET\?$",
    ):
        nccl.exchange_unique_id(0, 3, "127.0.0.1", port, unique_id=bytes(128), timeout=0.5)


def test_a_rank_0_that_never_answers_cannot_hold_a_rank_past_its_timeout():
    import socket

    with socket.create_server(("127.0.0.1", 0)) as mute:  # the kernel accepts; nobody answers
        port = mute.getsockname()[1]
        t0 = time.monotonic()
        got = rank(1, 2, port, timeout=0.5)
    assert isinstance(got, TimeoutError) and time.monotonic() - t0 < 2
    assert "within 0.5 s (last error: 0 of the 1 bytes expected arrived in time)" in str(got)


def test_a_rank_0_that_answers_byte_by_byte_cannot_either():
    import socket

    with socket.create_server(("127.0.0.1", 0)) as slow:
        port = slow.getsockname()[1]

        def drip() -> None:  # a well-formed answer, one byte every 0.1 s (13 s in all)
            conn, _ = slow.accept()
            with conn:
                for b in b"K" + UID:
                    try:
                        conn.sendall(bytes([b]))
                    except OSError:
                        return
                    time.sleep(0.1)

        t = threading.Thread(target=drip, daemon=True)
        t.start()
        t0 = time.monotonic()
        got = rank(1, 2, port, timeout=0.5)
        assert isinstance(got, TimeoutError) and time.monotonic() - t0 < 2
        t.join(15)


def test_an_error_from_rank_0_is_shown_without_control_characters():
    import socket

    text = "go away\x1b[2J\x1b]0;pwned\x07\r\nrank 0: all fine\u202eevil"
    raw = text.encode()
    with socket.create_server(("127.0.0.1", 0)) as fake:
        port = fake.getsockname()[1]

        def refuse() -> None:
            conn, _ = fake.accept()
            with conn:
                conn.recv(hs.HELLO.size, socket.MSG_WAITALL)
                conn.sendall(hs.ERROR + hs.ERROR_LEN.pack(len(raw)) + raw)

        t = threading.Thread(target=refuse, daemon=True)
        t.start()
        got = rank(1, 2, port, timeout=5)
        t.join(5)
    assert isinstance(got, RuntimeError)
    assert str(got) == (
        f"rank 0 at 127.0.0.1:{port} refused rank 1: go away[2J]0;pwnedrank 0: all fineevil"
    )


def test_rendezvous_on_a_taken_port_says_so():
    import socket

    with socket.create_server(("", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(
            RuntimeError, match=rf"rank 0 cannot listen on port {port} .*choose another port"
        ):
            nccl.exchange_unique_id(0, 2, "127.0.0.1", port, unique_id=bytes(128), timeout=1)


@pytest.mark.parametrize(
    ("args", "kw", "exc", "text"),
    [((2, 2, "h", 1), {}, ValueError, r"rank must be in 0..1 \(world_size is 2\) \(got 2\)"),
     ((0, 0, "h", 1), {}, ValueError, r"world_size must be at least 1 \(got 0\)"),
     ((0, 2, "h", 0), {}, ValueError, r"port must be a TCP port, 1..65535 \(got 0\)"),
     ((0, 2, "h", "29500"), {}, TypeError, r"port must be an int \(got '29500'\)"),
     ((1, 2, "", 1), {}, TypeError, r"addr must be rank 0's host name"),
     ((1, 2, "h", 1), {"unique_id": bytes(128)}, ValueError, r"unique_id must be None on ranks other than 0"),
     ((0, 2, "h", 1), {"unique_id": b"short"}, TypeError, r"unique_id must be None or the 128 bytes"),
     ((1, 2, "h", 1), {"timeout": 0}, ValueError, r"timeout must be a positive number of seconds"),
     ((1, 2, "h", 1), {"secret": 12345}, TypeError, r"secret must be None, a str or bytes \(got 'int'\)"),
     ((1, 2, "h", 1), {"secret": "short"}, ValueError, r"secret must be at least 16 bytes long \(got '5 bytes'\); make one with")],
)  # fmt: skip
def test_rendezvous_checks_its_arguments(args, kw, exc, text):
    with pytest.raises(exc, match=text):
        nccl.exchange_unique_id(*args, **kw)


def test_a_short_secret_in_the_environment_is_named_but_not_shown(monkeypatch):
    monkeypatch.setenv(ENV, "hunter2")
    with pytest.raises(ValueError) as info:
        nccl.exchange_unique_id(1, 2, "127.0.0.1", 1, timeout=1)
    assert str(info.value).startswith(
        "CUDA_CORE_NCCL_SECRET must be at least 16 bytes long (got '7 bytes'); make one with "
    )
    assert "hunter2" not in str(info.value)
