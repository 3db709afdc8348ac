"""Rank 0's side of the unique-id rendezvous: listen where ``MASTER_ADDR`` points, serve each rank once.

Rank 0 listens only on the addresses ``MASTER_ADDR`` resolves to on its machine (loopback stays
loopback), or where ``CUDA_CORE_NCCL_LISTEN_ADDR`` (``listen_addr=``) says, for an address rank 0
does not own (NAT, a Kubernetes service); a host name that resolves only to loopback warns. One
thread serves every connection at once (``selectors``, non-blocking sockets): a connection that
sends bytes of another protocol, more than a message holds or a wrong proof, that sends no
whole hello within ``HELLO_S`` seconds, or that stalls for ``HANDSHAKE_S`` seconds before it has
the id is refused or dropped on its own while the others go on (once it has the id, it has
until rank 0's timeout to acknowledge). A rank counts as served once it acknowledges the id;
until then one connection holds its place and another asking for the same rank is refused, but
for one detail: without a secret a newer connection replaces the older one (a rank that gave up
and tried again must not be refused because of its own dead connection).
Nothing a stranger sends ends the wait early: only a wrong world size from a rank that proved
the job secret does (the job is misconfigured, and waiting longer would not help). At most
``MAX_CONNECTIONS`` are served at once; at that many, a new connection takes the place of the
oldest that holds no rank's place (silent ones first), so idle connections cannot keep a rank
out; while every one holds a rank's place, rank 0 stops accepting and the rest wait in the
kernel's listen queue. Out of descriptors or memory (``EMFILE`` and the like), rank 0 stops
watching the listeners until a connection closes or ``STARVED_S`` passes, rather than spin.
The wire format is in :mod:`._handshake`.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import os
import secrets
import select
import selectors
import socket
import time
import warnings

from . import _handshake as hs

__all__: list[str] = []  # private module

LISTEN_ENV = "CUDA_CORE_NCCL_LISTEN_ADDR"
HANDSHAKE_S = 10.0  # the most one connection may take, from accept to acknowledgement
HELLO_S = 2.0  # the most it may take to send its hello (an honest rank sends it at once)
MAX_CONNECTIONS = 512  # in flight at once; more wait in the listen backlog
STARVED_S = 0.25  # out of descriptors or memory: how long before accepting is tried again
_STARVED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_HELLO, _PROOF, _ACK = 0, 1, 2  # what rank 0 waits for on a connection
_SIZES = {_HELLO: hs.HELLO.size, _PROOF: hs.MAC_BYTES, _ACK: len(hs.ACK)}
_NOT_OURS = "does not speak the rendezvous protocol"


def listen_address(listen_addr: str | None) -> str | None:
    """Where rank 0 listens instead of ``MASTER_ADDR``: ``listen_addr`` when given, else
    ``$CUDA_CORE_NCCL_LISTEN_ADDR``; ``None`` when neither is set (empty counts as unset)."""
    if listen_addr is None:
        return os.environ.get(LISTEN_ENV, "").strip() or None
    return listen_addr


def listen(addr: str, port: int, backlog: int, name: str = "MASTER_ADDR") -> list[socket.socket]:
    """Non-blocking listening sockets on every address ``addr`` resolves to (one per address);
    ``name`` says where ``addr`` came from, for the messages.

    Raises ``RuntimeError`` when ``addr`` does not resolve, names no address of this machine, or
    ``port`` is taken.
    """
    try:
        infos = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise RuntimeError(
            f"rank 0 cannot resolve {name} {addr!r} to listen on for the unique-id "
            f"rendezvous: {exc}; set it to rank 0's host name or address"
        ) from None
    socks: list[socket.socket] = []
    skipped: list[str] = []
    seen = set()
    for family, kind, proto, _name, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6) or sockaddr[:2] in seen:
            continue
        seen.add(sockaddr[:2])
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as create_server does
            if family == socket.AF_INET6:  # "::" alone: every interface, IPv4 ones included
                dual = sockaddr[0] == "::" and len(infos) == 1
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0 if dual else 1)
            sock.bind(sockaddr)
            sock.listen(backlog)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                for s in socks:
                    s.close()
                raise RuntimeError(
                    f"rank 0 cannot listen on port {port} of {sockaddr[0]} for the unique-id "
                    f"rendezvous: {exc}; choose another port (MASTER_PORT)"
                ) from exc
            skipped.append(f"{sockaddr[0]}: {exc.strerror or exc}")
            continue
        socks.append(sock)
    if not socks:
        raise RuntimeError(
            f"rank 0 cannot listen on {name} {addr!r} ({'; '.join(skipped) or 'no address'}): "
            "it must be rank 0's host name or the address of one of its network interfaces. "
            f"Where MASTER_ADDR is an address rank 0 does not own (NAT, a Kubernetes service), "
            f"set {LISTEN_ENV} on rank 0 to where it listens (0.0.0.0 or :: for every interface)"
        )
    return socks


def _names_loopback_by_name(addr: str) -> bool:
    """Whether ``addr`` is a host name other than ``localhost``: a name the user may expect other
    machines to reach, though it may resolve to loopback (Debian's ``127.0.1.1``)."""
    try:
        ipaddress.ip_address(addr.partition("%")[0])
    except ValueError:
        name = addr.lower().rstrip(".")
        return name != "localhost" and not name.endswith(".localhost")
    return False


def warn_if_loopback_only(addr: str, hosts: list[str], port: int) -> None:
    """Warn when the host name ``addr`` (``MASTER_ADDR``) resolved only to loopback on rank 0:
    ranks on other machines cannot reach it there."""
    if hosts and _names_loopback_by_name(addr) and all(is_loopback(h) for h in hosts):
        warnings.warn(
            f"cuda_core.nccl: MASTER_ADDR {addr!r} resolves only to loopback on rank 0's machine "
            f"({', '.join(hosts)}; Debian and Ubuntu map the host's own name to 127.0.1.1 in "
            f"/etc/hosts), so rank 0 listens on port {port} there and ranks on other machines "
            "cannot reach it. For a job across machines set MASTER_ADDR to the address of the "
            f"interface they reach, or set {LISTEN_ENV} on rank 0 to where it listens (0.0.0.0 "
            "or :: for every interface)",
            UserWarning,
            stacklevel=4,
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address as a socket reports it) is reachable from this machine only."""
    try:
        ip = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def warn_if_exposed(hosts: list[str], port: int, key: bytes | None) -> None:
    """Warn when rank 0 hands the id to whoever connects (no secret) on a non-loopback address."""
    exposed = [h for h in hosts if not is_loopback(h)]
    if key is None and exposed:
        warnings.warn(
            f"cuda_core.nccl: rank 0 serves the NCCL unique id on port {port} of "
            f"{', '.join(exposed)} without a job secret: anyone who can reach that port can take "
            f"a rank's place or learn the id. Set {hs.SECRET_ENV} to the same random value in "
            "every process of the job (see the docs' NCCL page, 'The job secret')",
            UserWarning,
            stacklevel=4,
        )


def _pending(lst: socket.socket) -> bool:
    """Whether a connection waits in ``lst``'s queue (room is made only for one that does)."""
    if hasattr(select, "poll"):  # select.select fails on descriptors past FD_SETSIZE
        poll = select.poll()
        poll.register(lst, select.POLLIN)
        return bool(poll.poll(0))
    return bool(select.select([lst], [], [], 0)[0])  # Windows: no poll, no such limit


class _Conn:
    __slots__ = ("accepted", "buf", "deadline", "holds", "nonce", "nonce0", "peer", "rank",
                 "round", "seq", "sock", "stage", "world")  # fmt: skip

    def __init__(
        self, sock: socket.socket, peer: str, accepted: float, deadline: float, round_: int
    ) -> None:
        self.sock = sock
        self.peer = peer
        self.accepted = accepted
        self.deadline = deadline
        self.round = round_  # the select round that accepted it
        self.seq = 0  # the order of acceptance
        self.stage = _HELLO
        self.buf = bytearray()
        self.rank = self.world = -1
        self.nonce = self.nonce0 = b""
        self.holds = False  # this connection holds its rank's place


class _Server:
    def __init__(self, uid: bytes, world_size: int, key: bytes | None, port: int) -> None:
        self.uid = uid
        self.world = world_size
        self.key = key
        self.port = port
        self.deadline = 0.0
        self.listeners: list[socket.socket] = []
        self.accepting = False
        self.sel = selectors.DefaultSelector()
        self.conns: dict[socket.socket, _Conn] = {}
        # Connections that hold no rank's place, oldest first: those that have not sent a whole
        # hello, and those that have but not yet proved the secret. At the connection cap the
        # oldest of them makes room for a new one (the silent first).
        self.silent: dict[socket.socket, _Conn] = {}
        self.unproven: dict[socket.socket, _Conn] = {}
        self.round = 0
        self.accepted = 0
        self.retry_at = float("inf")  # when to accept again after running out of descriptors
        self.held: dict[int, _Conn] = {}  # rank -> the connection that holds its place
        self.served: set[int] = set()
        self.notes: dict[str, int] = {}  # what was refused or dropped, and how often

    def run(self, listeners: list[socket.socket], timeout: float, deadline: float) -> None:
        self.deadline = deadline
        self.listeners = listeners
        self._accepting(True)
        while len(self.served) < self.world - 1:
            now = time.monotonic()
            if now >= deadline:
                hosts = ", ".join(str(s.getsockname()[0]) for s in listeners)
                raise TimeoutError(self._timeout_message(timeout, hosts))
            if now >= self.retry_at:
                self.retry_at = float("inf")
                self._accepting(True)
            wake = min([deadline, self.retry_at, *(c.deadline for c in self.conns.values())])
            ready = self.sel.select(max(wake - now, 0.0))
            self.round += 1
            for skey, _events in ready:  # reads first: what arrived counts before room is made
                if skey.data is not None and skey.data.sock in self.conns:  # not dropped yet
                    self._read(skey.data)
            for skey, _events in ready:
                if skey.data is None and self.accepting:
                    self._accept(skey.fileobj)  # type: ignore[arg-type]
            now = time.monotonic()
            for c in [c for c in self.conns.values() if c.deadline <= now]:
                self._drop(c, f"{self._who(c)} stalled mid-handshake and was dropped")

    def close(self) -> None:
        for c in list(self.conns.values()):
            c.sock.close()
        self.conns.clear()
        self.sel.close()

    def _timeout_message(self, timeout: float, hosts: str) -> str:
        missing = sorted(set(range(1, self.world)) - self.served)
        msg = (
            f"rank 0 waited {timeout:g} s on port {self.port} ({hosts}) for the other ranks; "
            f"{len(missing)} of them did not get the unique id (ranks {missing[:16]}"
            f"{' ...' if len(missing) > 16 else ''}): are they running, with this MASTER_ADDR, "
            f"MASTER_PORT and {hs.SECRET_ENV}?"
        )
        if self.notes:
            seen = [f"{n}{f' ({k} times)' if k > 1 else ''}" for n, k in self.notes.items()]
            msg += " Meanwhile: " + "; ".join(seen[:6]) + (" ..." if len(seen) > 6 else "")
        return msg

    def _who(self, c: _Conn) -> str:
        return (
            f"rank {c.rank} (from {c.peer})" if c.stage != _HELLO else f"a connection from {c.peer}"
        )

    def _note(self, text: str) -> None:
        if text in self.notes or len(self.notes) < 64:
            self.notes[text] = self.notes.get(text, 0) + 1

    def _accepting(self, on: bool) -> None:
        if on != self.accepting:
            for lst in self.listeners:
                if on:
                    self.sel.register(lst, selectors.EVENT_READ, None)
                else:
                    self.sel.unregister(lst)
            self.accepting = on

    def _accept(self, lst: socket.socket) -> None:
        for _ in range(MAX_CONNECTIONS):  # a bounded batch per round
            if len(self.conns) >= MAX_CONNECTIONS and not (_pending(lst) and self._make_room()):
                break
            try:
                sock, addr = lst.accept()
            except OSError as exc:  # nothing more to accept now, or a connection gone before it was
                if exc.errno in _STARVED:  # the connection stays queued: watching the listeners
                    # now would spin. Stop until a connection closes or STARVED_S has passed
                    self._note(f"rank 0 could not accept a connection: {exc.strerror or exc}")
                    self._accepting(False)
                    self.retry_at = time.monotonic() + STARVED_S
                return
            sock.setblocking(False)
            now = time.monotonic()
            first = min(now + min(HELLO_S, HANDSHAKE_S), self.deadline)
            c = _Conn(sock, str(addr[0]), now, first, self.round)
            self.accepted += 1
            c.seq = self.accepted
            self.conns[sock] = c
            self.silent[sock] = c
            self.sel.register(sock, selectors.EVENT_READ, c)
        if len(self.conns) >= MAX_CONNECTIONS and not (self.silent or self.unproven):
            self._accepting(False)  # every slot holds a rank's place: the others wait in the
            # listen queue until one ends

    def _make_room(self) -> bool:
        """Drop the oldest connection that holds no rank's place and has had a round to be read:
        a silent one while there is any (one that proves the secret is a rank at work); whether
        there was one."""
        pool, why = (
            (self.silent, "before its hello")
            if self.silent
            else (self.unproven, "before its proof")
        )
        c = next(iter(pool.values()), None)
        if c is None or c.round >= self.round:
            return False
        self._drop(c, f"{self._who(c)} made room for a newer connection {why}")
        return True

    def _drop(self, c: _Conn, note: str | None) -> None:
        if self.conns.pop(c.sock, None) is None:
            return
        self.silent.pop(c.sock, None)
        self.unproven.pop(c.sock, None)
        self.sel.unregister(c.sock)
        c.sock.close()
        self._accepting(len(self.conns) < MAX_CONNECTIONS)
        if c.holds:
            del self.held[c.rank]
        if note:
            self._note(note)

    def _send(self, c: _Conn, data: bytes) -> bool:
        # Every reply is small and the only one in flight on its connection: the socket's buffer
        # takes it whole, or the peer is not a rank that follows the protocol.
        try:
            sent = c.sock.send(data)
        except OSError:
            sent = -1
        if sent != len(data):
            self._drop(c, f"{self._who(c)} went away before rank 0's reply")
            return False
        return True

    def _refuse(self, c: _Conn, why: str) -> None:
        self._send(c, hs.error_message(why))
        self._drop(c, f"{self._who(c)} was refused: {why}")

    def _read(self, c: _Conn) -> None:
        size = _SIZES[c.stage]
        try:
            data = c.sock.recv(size - len(c.buf) + 1)  # one byte more shows a message too long
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            note = f"{self._who(c)} went away mid-handshake"
            return self._drop(c, note if c.stage != _HELLO or c.buf else None)
        c.buf += data
        if c.stage == _HELLO and not hs.MAGIC.startswith(bytes(c.buf[: len(hs.MAGIC)])):
            return self._drop(c, f"{self._who(c)} {_NOT_OURS}")
        if len(c.buf) > size:
            return self._drop(c, f"{self._who(c)} sent more than a message holds")
        if len(c.buf) < size:
            return None
        message = bytes(c.buf)
        c.buf.clear()
        if c.stage == _HELLO:
            return self._on_hello(c, message)
        if c.stage == _PROOF:
            return self._on_proof(c, message)
        return self._on_ack(c, message)

    def _on_hello(self, c: _Conn, message: bytes) -> None:
        _magic, c.rank, c.world, mode, c.nonce = hs.HELLO.unpack(message)
        c.stage = _PROOF  # from here on the connection speaks for a rank
        del self.silent[c.sock]
        c.deadline = min(c.accepted + HANDSHAKE_S, self.deadline)
        if mode == hs.OPEN:
            if self.key is not None:
                return self._refuse(
                    c, f"it has no job secret and rank 0 requires one: set {hs.SECRET_ENV} to "
                       "the same value in every process of the job")  # fmt: skip
            return self._admit(c, proven=False)
        if mode == hs.SECRET:
            if self.key is None:
                return self._refuse(
                    c, f"it has a job secret ({hs.SECRET_ENV}) but rank 0 has none: set the "
                       "same secret in every process of the job")  # fmt: skip
            c.nonce0 = secrets.token_bytes(hs.NONCE_BYTES)
            self.unproven[c.sock] = c
            self._send(c, hs.CHALLENGE + c.nonce0)
            return None
        return self._drop(c, f"a connection from {c.peer} {_NOT_OURS} (mode {mode})")

    def _on_proof(self, c: _Conn, proof: bytes) -> None:
        assert self.key is not None
        want = hs.rank_proof(self.key, c.nonce0, c.nonce, c.rank, c.world)
        if not hmac.compare_digest(proof, want):
            return self._refuse(
                c, f"its proof of the job secret is wrong: is {hs.SECRET_ENV} the same in every "
                   "process of the job?")  # fmt: skip
        return self._admit(c, proven=True)

    def _admit(self, c: _Conn, proven: bool) -> None:
        rank, world = c.rank, c.world
        if world != self.world:
            problem = f"rank {rank} says the world size is {world}, rank 0 says {self.world}"
            self._refuse(c, problem)
            if proven:  # a rank of this job, misconfigured: the job cannot complete
                raise RuntimeError(f"unique-id rendezvous on port {self.port}: {problem}")
            return
        if not 0 < rank < world:
            return self._refuse(c, f"rank {rank} is out of range (1..{world - 1})")
        older = self.held.get(rank)
        if older is not None and older.seq < c.seq and self.key is None:
            # Without a secret the older connection proves nothing either: most likely this
            # rank's own earlier try, dead after waiting in the listen queue. The newer one (in
            # the order rank 0 accepted them, which is the order they connected) wins.
            self._drop(older, f"{self._who(older)} was replaced by a newer connection for its rank")
        if rank in self.served or rank in self.held:
            return self._refuse(
                c, f"rank {rank} already joined on another connection: is more than one "
                   f"process started as rank {rank}?")  # fmt: skip
        self.unproven.pop(c.sock, None)
        c.holds = True
        self.held[rank] = c
        c.stage = _ACK
        # The rank has what it needs once the id is sent: a rank paused before its ACK (GC,
        # SIGSTOP, a loaded node) returns the id all the same, so rank 0 must still count it.
        c.deadline = self.deadline
        if self.key is None:
            self._send(c, hs.OK + self.uid)
            return None
        proof = hs.rank0_proof(self.key, c.nonce0, c.nonce, rank, world, self.uid)
        masked = hs.mask(self.key, c.nonce0, c.nonce, rank, world, self.uid)
        self._send(c, hs.OK + proof + masked)
        return None

    def _on_ack(self, c: _Conn, message: bytes) -> None:
        if message != hs.ACK:
            return self._drop(c, f"{self._who(c)} {_NOT_OURS}")
        self.served.add(c.rank)
        return self._drop(c, None)


def serve(
    uid: bytes,
    world_size: int,
    addr: str,
    port: int,
    timeout: float,
    key: bytes | None,
    listen_addr: str | None = None,
) -> None:
    """Hand ``uid`` to ranks 1..world_size-1 on ``port`` of ``addr`` (of ``listen_addr`` when
    given); return once each has it."""
    deadline = time.monotonic() + timeout
    backlog = min(max(world_size, 16), 4096)
    if listen_addr is None:
        listeners = listen(addr, port, backlog)
    else:
        listeners = listen(listen_addr, port, backlog, f"{LISTEN_ENV} (listen_addr)")
    server = _Server(uid, world_size, key, port)
    try:
        hosts = [str(s.getsockname()[0]) for s in listeners]
        if listen_addr is None:
            warn_if_loopback_only(addr, hosts, port)
        warn_if_exposed(hosts, port, key)
        server.run(listeners, timeout, deadline)
    finally:
        server.close()
        for s in listeners:
            s.close()
