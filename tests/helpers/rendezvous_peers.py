"""Peers for the rendezvous tests (tests/nccl/test_rendezvous.py, test_server.py), on loopback.

:class:`Rank0` runs rank 0 of :func:`cuda_core.nccl.exchange_unique_id` in a thread and keeps
what it returned or raised and how long it took; :func:`rank` runs another rank in the calling
thread. :func:`stranger` opens a raw connection to rank 0 once it listens, for sending bytes by
hand; :class:`Tap` relays one rank's connection to rank 0 and keeps every byte that crosses it;
:class:`FakeRank0` answers on a port as rank 0 would if it did not hold the job secret.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from typing import Any

from cuda_core import nccl
from cuda_core.nccl import _handshake as hs

ADDR = "127.0.0.1"
UID = bytes(range(7, 7 + 128))
SECRET = "a job secret of 32 characters..."


class Rank0(threading.Thread):
    """Rank 0 in a thread: ``outcome()`` is the id it returned or the exception it raised."""

    def __init__(self, world: int, port: int, *, timeout: float = 10.0, **kw: Any) -> None:
        super().__init__(daemon=True)
        self.args = (0, world, ADDR, port)
        self.kw = {"unique_id": UID, "timeout": timeout, **kw}
        self.result: Any = None
        self.elapsed = -1.0
        self.start()

    def run(self) -> None:
        t0 = time.monotonic()
        try:
            self.result = nccl.exchange_unique_id(*self.args, **self.kw)
        except Exception as exc:
            self.result = exc
        self.elapsed = time.monotonic() - t0

    def outcome(self, wait: float = 30.0) -> Any:
        self.join(wait)
        assert not self.is_alive(), "rank 0 did not return"
        return self.result


def rank(r: int, world: int, port: int, *, timeout: float = 10.0, **kw: Any) -> Any:
    """Rank ``r`` (> 0) in this thread: the id it got, or the exception it raised."""
    try:
        return nccl.exchange_unique_id(r, world, ADDR, port, timeout=timeout, **kw)
    except Exception as exc:
        return exc


def hello(r: int, world: int, mode: int = hs.OPEN, nonce: bytes = bytes(hs.NONCE_BYTES)) -> bytes:
    """A well-formed first message of rank ``r``."""
    return hs.HELLO.pack(hs.MAGIC, r, world, mode, nonce)


def stranger(port: int, wait: float = 10.0) -> socket.socket:
    """A connection to rank 0's port, made as soon as rank 0 listens (reads time out after 5 s)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            sock = socket.create_connection((ADDR, port), timeout=5.0)
            return sock
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def read_all(sock: socket.socket) -> bytes:
    """Everything the peer sends until it closes the connection (at most 5 s of silence). A peer
    that closes with bytes of ours unread resets the connection: that is a close too."""
    data = bytearray()
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return bytes(data)


class Tap(threading.Thread):
    """A relay on loopback for one connection: a rank connects to ``port``, the tap connects to
    rank 0 on ``to_port`` and passes bytes both ways, keeping them in ``seen``."""

    def __init__(self, to_port: int) -> None:
        super().__init__(daemon=True)
        self.to_port = to_port
        self.server = socket.create_server((ADDR, 0))
        self.port = int(self.server.getsockname()[1])
        self.seen = bytearray()
        self.lock = threading.Lock()
        self.start()

    def run(self) -> None:
        with self.server, self.server.accept()[0] as a, stranger(self.to_port) as b:
            pumps = [threading.Thread(target=self._pump, args=(x, y)) for x, y in ((a, b), (b, a))]
            for p in pumps:
                p.start()
            for p in pumps:
                p.join(30)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(4096):
                with self.lock:
                    self.seen += chunk
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class FakeRank0(threading.Thread):
    """Listens on a free loopback port and answers the first rank as rank 0 would, but without
    the job secret: ``challenge`` asks for the rank's proof and then sends an id with a made-up
    proof; otherwise it sends an id at once, as a rank 0 without a secret does."""

    def __init__(self, challenge: bool) -> None:
        super().__init__(daemon=True)
        self.challenge = challenge
        self.server = socket.create_server((ADDR, 0))
        self.port = int(self.server.getsockname()[1])
        self.got_proof = b""
        self.start()

    def run(self) -> None:
        with self.server, self.server.accept()[0] as conn:
            conn.settimeout(10)
            conn.recv(hs.HELLO.size, socket.MSG_WAITALL)
            if not self.challenge:
                conn.sendall(hs.OK + UID)
            else:
                conn.sendall(hs.CHALLENGE + secrets.token_bytes(hs.NONCE_BYTES))
                self.got_proof = conn.recv(hs.MAC_BYTES, socket.MSG_WAITALL)
                conn.sendall(hs.OK + secrets.token_bytes(hs.MAC_BYTES) + UID)
            read_all(conn)
