"""Rank 0 of the unique-id rendezvous against bad input (CPU tier, loopback only): garbage, a
truncated or oversized hello, a hello that never completes, a second connection for a rank, a
wrong world size. Each is refused or dropped without taking a rank's place, and rank 0 and the
honest ranks finish in time. Also where rank 0 listens, and when it warns.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest

from cuda_core.nccl import _handshake as hs
from cuda_core.nccl import _rendezvous, _server
from tests.helpers import nccl_ranks
from tests.helpers.rendezvous_peers import (
    SECRET,
    UID,
    Rank0,
    hello,
    rank,
    read_all,
    stranger,
)

MODES = [pytest.param({}, id="no secret"), pytest.param({"secret": SECRET}, id="secret")]


@pytest.fixture(autouse=True)
def _no_secret_from_outside(monkeypatch):
    monkeypatch.delenv("CUDA_CORE_NCCL_SECRET", raising=False)


def _honest_ranks_finish(r0: Rank0, world: int, port: int, **kw) -> None:
    for r in range(1, world):
        assert rank(r, world, port, **kw) == UID
    assert r0.outcome() == UID
    assert r0.elapsed < 5  # well within rank 0's timeout (10 s)


@pytest.mark.parametrize("kw", MODES)
@pytest.mark.parametrize(
    "junk",
    [b"GET / HTTP/1.0\r\n\r\n" + b"x" * 64, b"\x00" * 69, b"cuda_core.nccl rendezvous v1\n" + bytes(40),
     bytes(range(256)) * 4],
    ids=["http", "zeros", "old magic", "binary"],
)  # fmt: skip
def test_garbage_is_dropped_at_once_without_an_answer(kw, junk):
    port = nccl_ranks.free_port()
    r0 = Rank0(3, port, **kw)
    with stranger(port) as s:
        s.sendall(junk)
        t0 = time.monotonic()
        assert read_all(s) == b""  # closed, not a byte said
        assert time.monotonic() - t0 < 2
    _honest_ranks_finish(r0, 3, port, **kw)


@pytest.mark.parametrize("kw", MODES)
@pytest.mark.parametrize("cut", [1, 28, 40, hs.HELLO.size - 1])
def test_a_truncated_hello_takes_no_place(kw, cut):
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, **kw)
    mode = hs.SECRET if kw else hs.OPEN
    with stranger(port) as s:
        s.sendall(hello(1, 2, mode)[:cut])
    _honest_ranks_finish(r0, 2, port, **kw)


@pytest.mark.parametrize("kw", MODES)
def test_a_hello_that_never_completes_does_not_hold_up_the_others(kw, monkeypatch):
    monkeypatch.setattr(_server, "HANDSHAKE_S", 0.5)
    port = nccl_ranks.free_port()
    r0 = Rank0(3, port, **kw)
    mode = hs.SECRET if kw else hs.OPEN
    with stranger(port) as stalled, stranger(port) as silent:
        stalled.sendall(hello(1, 3, mode)[:30])  # and then nothing
        assert rank(1, 3, port, **kw) == UID  # served while the two stall
        t0 = time.monotonic()
        assert read_all(stalled) == b"" and read_all(silent) == b""  # dropped by rank 0
        assert time.monotonic() - t0 < 2
        assert r0.is_alive()  # still waiting for rank 2
        assert rank(2, 3, port, **kw) == UID
    assert r0.outcome() == UID


def test_at_capacity_a_new_connection_takes_the_place_of_the_oldest_silent_one(monkeypatch):
    monkeypatch.setattr(_server, "MAX_CONNECTIONS", 2)
    monkeypatch.setattr(_server, "HELLO_S", 5.0)
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port)
    with stranger(port) as a:
        time.sleep(0.1)
        with stranger(port) as b:  # every slot taken, by connections that say nothing
            time.sleep(0.1)
            t0 = time.monotonic()
            assert rank(1, 2, port) == UID  # served at once, not after a silent one times out
            assert time.monotonic() - t0 < 1
            assert read_all(a) == b""  # the oldest made room
            assert r0.outcome() == UID
            assert read_all(b) == b""
    assert r0.elapsed < 2


def test_at_capacity_with_every_place_held_rank_0_waits_without_spinning(monkeypatch):
    monkeypatch.setattr(_server, "MAX_CONNECTIONS", 2)
    port = nccl_ranks.free_port()
    r0 = Rank0(4, port)
    with stranger(port) as a, stranger(port) as b:  # ranks 1 and 2, not acknowledged yet
        for s, r in ((a, 1), (b, 2)):
            s.sendall(hello(r, 4))
            assert s.recv(1 + 128, socket.MSG_WAITALL) == hs.OK + UID
        got: list[object] = []
        waiting = threading.Thread(target=lambda: got.append(rank(3, 4, port)))
        cpu = time.process_time()
        waiting.start()
        time.sleep(0.6)
        assert not got  # queued in the listen backlog while every slot holds a rank's place
        assert time.process_time() - cpu < 0.3  # waited, did not poll
        a.sendall(hs.ACK)  # a slot frees
        waiting.join(5)
        assert got == [UID]
        b.sendall(hs.ACK)
    assert r0.outcome() == UID


@pytest.mark.parametrize("kw", MODES)
def test_a_flood_of_silent_connections_does_not_keep_a_rank_out(kw, monkeypatch):
    monkeypatch.setattr(_server, "MAX_CONNECTIONS", 8)
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, timeout=20.0, **kw)
    stranger(port).close()  # rank 0 listens
    stop = threading.Event()
    opened = [0]

    def attacker() -> None:  # reconnects as soon as rank 0 drops it, says nothing
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    opened[0] += 1
                    s.recv(1)
            except OSError:
                time.sleep(0.005)

    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(16)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)  # every slot taken, the backlog full of more
        t0 = time.monotonic()
        assert rank(1, 2, port, timeout=8.0, **kw) == UID
        assert time.monotonic() - t0 < 2  # HELLO_S and HANDSHAKE_S keep their defaults: a
        # slot freed by the hello deadline (2 s) or the handshake one (10 s) would come too
        # late; rank 0 made room for the rank
        assert r0.outcome() == UID
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert opened[0] > 16  # the attackers did reconnect


def test_a_connection_that_sends_no_hello_is_dropped_after_hello_s(monkeypatch):
    monkeypatch.setattr(_server, "HELLO_S", 0.3)
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, secret=SECRET)
    with stranger(port) as silent, stranger(port) as halfway:
        halfway.sendall(hello(1, 2, hs.SECRET)[:20])
        t0 = time.monotonic()
        assert read_all(silent) == b"" and read_all(halfway) == b""
        assert 0.2 < time.monotonic() - t0 < 2  # HELLO_S, not HANDSHAKE_S (10 s)
    with stranger(port) as slow:  # a whole hello in time: HANDSHAKE_S for the rest
        slow.sendall(hello(1, 2, hs.SECRET))
        assert slow.recv(1 + hs.NONCE_BYTES, socket.MSG_WAITALL)[:1] == hs.CHALLENGE
        time.sleep(0.6)
        assert r0.is_alive()
        slow.settimeout(0.05)
        with pytest.raises(TimeoutError):
            slow.recv(1)  # still open past HELLO_S
    _honest_ranks_finish(r0, 2, port, secret=SECRET)


_OUT_OF_DESCRIPTORS = r"""
import os, resource, sys, time
from cuda_core import nccl
from tests.helpers.rendezvous_peers import UID
n = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 8, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
t0, cpu = time.monotonic(), time.process_time()
got = nccl.exchange_unique_id(0, 2, "127.0.0.1", int(sys.argv[1]), unique_id=UID, timeout=20)
print(got == UID, time.monotonic() - t0, time.process_time() - cpu)
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc and RLIMIT_NOFILE")
def test_out_of_descriptors_rank_0_waits_without_spinning_and_recovers():
    port = nccl_ranks.free_port()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen(
        [sys.executable, "-c", _OUT_OF_DESCRIPTORS, str(port)],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    flood: list[socket.socket] = []
    try:
        flood.append(stranger(port, wait=20))
        while len(flood) < 30:  # more than rank 0 has descriptors for: the rest stay queued
            flood.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(1.5)  # rank 0 out of descriptors, connections waiting: it must not spin
    finally:
        for s in flood:
            s.close()
    assert rank(1, 2, port, timeout=15) == UID  # once descriptors free, rank 0 serves again
    out, _ = child.communicate(timeout=30)
    ok, wall, cpu = out.split()
    assert ok == "True"
    assert float(cpu) < 0.5 * float(wall), out  # waited, did not poll accept() in a loop


def test_a_stalled_connection_is_named_when_rank_0_times_out(monkeypatch):
    monkeypatch.setattr(_server, "HANDSHAKE_S", 0.3)
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, timeout=1.0, secret=SECRET)
    with stranger(port) as s:
        s.sendall(hello(1, 2, hs.SECRET))  # and never answers the challenge
        late = r0.outcome()
    assert isinstance(late, TimeoutError) and 1.0 <= r0.elapsed < 3
    assert "(ranks [1])" in str(late)
    assert "Meanwhile: rank 1 (from 127.0.0.1) stalled mid-handshake and was dropped" in str(late)


@pytest.mark.parametrize("kw", MODES)
def test_an_oversized_hello_is_dropped(kw):
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, **kw)
    mode = hs.SECRET if kw else hs.OPEN
    with stranger(port) as s:
        s.sendall(hello(1, 2, mode) + b"\x01" * 1000)
        assert read_all(s) == b""  # neither a challenge nor the id
    _honest_ranks_finish(r0, 2, port, **kw)


def test_an_oversized_proof_is_dropped():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, secret=SECRET)
    with stranger(port) as s:
        s.sendall(hello(1, 2, hs.SECRET))
        assert s.recv(1 + hs.NONCE_BYTES, socket.MSG_WAITALL)[:1] == hs.CHALLENGE
        s.sendall(b"\x02" * (hs.MAC_BYTES + 500))
        assert read_all(s) == b""
    _honest_ranks_finish(r0, 2, port, secret=SECRET)


@pytest.mark.parametrize("kw", MODES)
def test_a_second_connection_for_a_served_rank_is_refused(kw):
    port = nccl_ranks.free_port()
    r0 = Rank0(3, port, **kw)
    assert rank(1, 3, port, **kw) == UID
    again = rank(1, 3, port, **kw)
    assert isinstance(again, RuntimeError) and str(again) == (
        f"rank 0 at 127.0.0.1:{port} refused rank 1: rank 1 already joined on another "
        "connection: is more than one process started as rank 1?"
    )
    assert rank(2, 3, port, **kw) == UID
    assert r0.outcome() == UID


def test_with_a_secret_the_first_connection_for_a_rank_keeps_its_place():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, secret=SECRET)
    key = SECRET.encode()
    with stranger(port) as first:
        nonce = bytes(range(hs.NONCE_BYTES))
        first.sendall(hello(1, 2, hs.SECRET, nonce))
        challenge = first.recv(1 + hs.NONCE_BYTES, socket.MSG_WAITALL)
        first.sendall(hs.rank_proof(key, challenge[1:], nonce, 1, 2))
        assert first.recv(1, socket.MSG_WAITALL) == hs.OK  # not acknowledged yet
        second = rank(1, 2, port, secret=SECRET)
        assert isinstance(second, RuntimeError) and "rank 1 already joined" in str(second)
        assert r0.is_alive()  # rank 1 is not served until it acknowledges
        first.recv(hs.MAC_BYTES + 128, socket.MSG_WAITALL)
        first.sendall(hs.ACK)
        assert r0.outcome() == UID


def test_without_a_secret_a_newer_connection_for_a_rank_replaces_an_unacknowledged_one():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port)
    with stranger(port) as first:
        first.sendall(hello(1, 2))
        assert first.recv(1 + 128, socket.MSG_WAITALL) == hs.OK + UID  # never acknowledges
        assert rank(1, 2, port) == UID  # this rank trying again, say: not "already joined"
        assert r0.outcome() == UID
        assert read_all(first) == b""  # the older one was closed


def test_a_rank_whose_first_try_waited_in_the_queue_is_not_refused_its_retry(monkeypatch):
    """The retry race: a rank gives up on a connection still in rank 0's listen queue (its hello
    already sent) and tries again; rank 0 accepts both in one round and reads the dead one first."""
    monkeypatch.setattr(_server, "MAX_CONNECTIONS", 2)
    port = nccl_ranks.free_port()
    r0 = Rank0(4, port)
    with stranger(port) as r2, stranger(port) as r3:  # both slots held until they acknowledge
        for s, r in ((r2, 2), (r3, 3)):
            s.sendall(hello(r, 4))
            assert s.recv(1 + 128, socket.MSG_WAITALL) == hs.OK + UID
        with stranger(port) as dead:
            dead.sendall(hello(1, 4))  # in the queue, then given up on
        live = stranger(port)
        live.sendall(hello(1, 4))
        time.sleep(0.1)
        r2.sendall(hs.ACK)  # two slots free at once: rank 0 accepts both in one round
        r3.sendall(hs.ACK)
    with live:
        assert live.recv(1 + 128, socket.MSG_WAITALL) == hs.OK + UID
        live.sendall(hs.ACK)
    assert r0.outcome() == UID


def test_a_rank_that_never_acknowledges_gives_its_place_back():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port)
    with stranger(port) as first:
        first.sendall(hello(1, 2))
        assert first.recv(1 + 128, socket.MSG_WAITALL) == hs.OK + UID
    assert rank(1, 2, port) == UID  # after the first closed without acknowledging
    assert r0.outcome() == UID


@pytest.mark.parametrize("kw", MODES)
def test_a_rank_paused_before_its_ack_is_still_counted(kw, monkeypatch):
    monkeypatch.setattr(_server, "HANDSHAKE_S", 0.3)
    real = _rendezvous._recv_exact

    def paused(conn, n, until):  # a GC pause, SIGSTOP, a loaded node... after the id arrived
        data = real(conn, n, until)
        if n == hs.UNIQUE_ID_BYTES:
            time.sleep(0.8)
        return data

    monkeypatch.setattr(_rendezvous, "_recv_exact", paused)
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port, timeout=5.0, **kw)
    assert rank(1, 2, port, **kw) == UID
    assert r0.outcome() == UID  # counted: not a TimeoutError naming rank 1
    assert r0.elapsed < 3


@pytest.mark.parametrize(("r", "world"), [(1, 3), (1, 1), (0, 2), (2, 2), (-1, 2)])
def test_a_hello_with_another_world_size_or_rank_takes_no_place(r, world):
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port)
    with stranger(port) as s:
        s.sendall(hello(r, world))
        reply = read_all(s)
    assert reply[:1] == hs.ERROR
    (n,) = hs.ERROR_LEN.unpack(reply[1:3])
    text = reply[3:].decode()
    assert len(text) == n
    assert ("says the world size is" if world != 2 else "is out of range (1..1)") in text
    _honest_ranks_finish(r0, 2, port)


def test_an_unknown_mode_is_dropped():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port)
    with stranger(port) as s:
        s.sendall(hello(1, 2, mode=7))
        assert read_all(s) == b""
    _honest_ranks_finish(r0, 2, port)


def test_rank_0_listens_only_where_master_addr_points():
    for addr in ("127.0.0.1", "localhost"):
        socks = _server.listen(addr, 0, 1)
        try:
            hosts = [s.getsockname()[0] for s in socks]
            assert hosts and all(_server.is_loopback(h) for h in hosts), hosts
            assert "0.0.0.0" not in hosts and "::" not in hosts
        finally:
            for s in socks:
                s.close()
    with pytest.raises(
        RuntimeError,
        match=r"rank 0 cannot listen on MASTER_ADDR '203.0.113.77' \(203.0.113.77: .*\): it must "
        r"be rank 0's host name or the address of one of its network interfaces. Where "
        r"MASTER_ADDR is an address rank 0 does not own \(NAT, a Kubernetes service\), set "
        r"CUDA_CORE_NCCL_LISTEN_ADDR on rank 0 to where it listens \(0.0.0.0 or :: for every "
        r"interface\)$",
    ):
        _server.listen("203.0.113.77", 0, 1)  # TEST-NET-3: no interface of this machine


@pytest.fixture
def debian_hosts(monkeypatch):
    """/etc/hosts as Debian and Ubuntu write it: the host's own name maps to 127.0.1.1."""
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kw):
        return real("127.0.1.1" if host == "node0" else host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_a_host_name_that_resolves_only_to_loopback_warns(debian_hosts):
    with pytest.warns(UserWarning) as record:
        _server.serve(UID, 1, "node0", 0, 1.0, None)  # world 1: listens, warns, returns
    assert [str(w.message) for w in record] == [
        "cuda_core.nccl: MASTER_ADDR 'node0' resolves only to loopback on rank 0's machine "
        "(127.0.1.1; Debian and Ubuntu map the host's own name to 127.0.1.1 in /etc/hosts), so "
        "rank 0 listens on port 0 there and ranks on other machines cannot reach it. For a job "
        "across machines set MASTER_ADDR to the address of the interface they reach, or set "
        "CUDA_CORE_NCCL_LISTEN_ADDR on rank 0 to where it listens (0.0.0.0 or :: for every "
        "interface)"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # loopback by name or literal: meant, not a mistake
        for addr in ("localhost", "LOCALHOST", "127.0.0.1", "127.0.1.1"):
            _server.serve(UID, 1, addr, 0, 1.0, None)
        _server.serve(UID, 1, "node0", 0, 1.0, None, "127.0.0.1")  # told where to listen


class _Rank0At(Rank0):
    """Rank 0 told that MASTER_ADDR is ``addr``, an address it need not own."""

    def __init__(self, addr: str, port: int, **kw) -> None:
        self.addr = addr
        super().__init__(2, port, **kw)

    def run(self) -> None:
        self.args = (0, 2, self.addr, self.args[3])
        super().run()


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_rank_0_listens_where_it_is_told_when_master_addr_is_not_its_own(how, monkeypatch):
    port = nccl_ranks.free_port()
    kw = {"listen_addr": "127.0.0.1"} if how == "argument" else {}
    if how == "environment":
        monkeypatch.setenv("CUDA_CORE_NCCL_LISTEN_ADDR", "127.0.0.1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r0 = _Rank0At("203.0.113.77", port, **kw)  # the address the others reach, behind NAT
        assert rank(1, 2, port) == UID  # connects to 127.0.0.1, where rank 0 listens
        assert r0.outcome() == UID


def test_listening_on_every_interface_without_a_secret_warns(monkeypatch):
    port = nccl_ranks.free_port()
    monkeypatch.setenv("CUDA_CORE_NCCL_LISTEN_ADDR", "0.0.0.0")
    with pytest.warns(UserWarning, match=r"of 0\.0\.0\.0 without a job secret"):
        r0 = _Rank0At("203.0.113.77", port)
        assert rank(1, 2, port) == UID
        assert r0.outcome() == UID
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # with a secret: silent
        r0 = _Rank0At("203.0.113.77", port, secret=SECRET)
        assert rank(1, 2, port, secret=SECRET) == UID
        assert r0.outcome() == UID


def test_listening_on_the_ipv6_wildcard_takes_ipv4_connections_too():
    try:
        socks = _server.listen("::", 0, 1)
    except RuntimeError as exc:
        pytest.skip(f"no IPv6 here: {exc}")
    try:
        assert len(socks) == 1
        port = socks[0].getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # "::" alone means every interface, IPv4 ones included
    finally:
        for s in socks:
            s.close()


def test_an_override_rank_0_cannot_listen_on_is_named(monkeypatch):
    monkeypatch.setenv("CUDA_CORE_NCCL_LISTEN_ADDR", "203.0.113.78")
    got = Rank0(2, nccl_ranks.free_port()).outcome()
    assert isinstance(got, RuntimeError)
    assert str(got).startswith(
        "rank 0 cannot listen on CUDA_CORE_NCCL_LISTEN_ADDR (listen_addr) '203.0.113.78' "
    )
    with pytest.raises(TypeError, match=r"^listen_addr must be None or where rank 0 listens"):
        _server_exchange(listen_addr=b"0.0.0.0")
    with pytest.raises(TypeError, match=r"^listen_addr must be"):
        _server_exchange(listen_addr="")


def _server_exchange(**kw):
    from cuda_core import nccl

    return nccl.exchange_unique_id(0, 2, "127.0.0.1", 1, unique_id=UID, timeout=0.1, **kw)


def test_the_loopback_test():
    yes = ["127.0.0.1", "127.0.1.1", "::1", "::ffff:127.0.0.1", "::1%lo"]
    assert all(_server.is_loopback(h) for h in yes)
    assert not any(_server.is_loopback(h) for h in ["192.0.2.2", "0.0.0.0", "::", "fe80::1", ""])


def test_rank_0_warns_when_it_serves_other_machines_without_a_secret():
    with pytest.warns(UserWarning) as record:
        _server.warn_if_exposed(["127.0.0.1", "192.0.2.2"], 29500, None)
    assert len(record) == 1
    assert str(record[0].message) == (
        "cuda_core.nccl: rank 0 serves the NCCL unique id on port 29500 of 192.0.2.2 without a "
        "job secret: anyone who can reach that port can take a rank's place or learn the id. Set "
        "CUDA_CORE_NCCL_SECRET to the same random value in every process of the job (see the "
        "docs' NCCL page, 'The job secret')"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _server.warn_if_exposed(["127.0.0.1", "::1"], 29500, None)  # loopback: silent
        _server.warn_if_exposed(["192.0.2.2", "0.0.0.0"], 29500, SECRET.encode())  # a secret


def test_rank_0_on_loopback_without_a_secret_does_not_warn():
    port = nccl_ranks.free_port()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r0 = Rank0(2, port)
        assert rank(1, 2, port) == UID
        assert r0.outcome() == UID


def test_rank_0_stops_answering_once_every_rank_has_the_id():
    port = nccl_ranks.free_port()
    r0 = Rank0(2, port)
    with stranger(port) as early:  # connected, says nothing
        assert rank(1, 2, port) == UID
        assert r0.outcome() == UID
        assert read_all(early) == b""  # closed when rank 0 returned
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
