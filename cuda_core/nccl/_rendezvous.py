"""Unique ids: rank 0 makes one and hands it to the other ranks over TCP (standard library only).

Every rank of a group must pass the same unique id to :meth:`Communicator.init`.
:func:`exchange_unique_id` is the small rendezvous for launches that have no other channel
(``torchrun``, ``mpirun`` or a batch system setting ``MASTER_ADDR``/``MASTER_PORT``): rank 0
listens on the port and answers each other rank once; the others connect (retrying until rank 0
is up) and read the 128 bytes. It works unchanged across machines.

Wire format (one connection per rank > 0): the rank sends ``_MAGIC`` and ``(rank, world_size)``
as two big-endian int32; rank 0 answers ``b"K"`` and the id, or ``b"E"``, a big-endian uint16
length and a UTF-8 message (a world size that differs from its own, a rank that joined twice).
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from .._utils import arg_error
from ._args import check_rank
from ._errors import nccl_error
from ._loader import load

__all__ = ["exchange_unique_id", "get_unique_id"]

UNIQUE_ID_BYTES = 128
_MAGIC = b"cuda_core.nccl unique id v1\n"
_HELLO = struct.Struct("!ii")  # rank, world size
_LEN = struct.Struct("!H")


def get_unique_id() -> bytes:
    """A new NCCL unique id: the 128 bytes every rank of one group passes to :meth:`Communicator.init`.

    Make it on one rank (rank 0) and send it to the others (:func:`exchange_unique_id`,
    ``multiprocessing``, MPI, a shared file...). No GPU is needed.

    Returns
    -------
    bytes

    Raises
    ------
    NCCLNotFoundError
        nccl4py or the NCCL library is missing.
    NCCLError
        NCCL could not make one (no usable network interface).
    """
    core, bindings = load()
    try:
        return bytes(core.get_unique_id())
    except bindings.NCCLError as exc:
        raise nccl_error("ncclGetUniqueId", exc, bindings) from None


def _check(rank: Any, world_size: Any, addr: Any, port: Any, unique_id: Any, timeout: Any) -> None:
    check_rank(rank, world_size, "world_size")
    if isinstance(port, bool) or not isinstance(port, int):
        raise arg_error("port", "an int", port, exc=TypeError)
    if not 1 <= port <= 65535:
        raise arg_error("port", "a TCP port, 1..65535", port)
    if not isinstance(addr, str) or not addr:
        raise arg_error(
            "addr", "rank 0's host name or address (a non-empty str)", addr, exc=TypeError
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise arg_error("timeout", "a positive number of seconds", timeout)
    if unique_id is not None:
        if rank != 0:
            raise arg_error(
                "unique_id", "None on ranks other than 0 (they receive rank 0's)", "bytes"
            )
        if not isinstance(unique_id, bytes | bytearray) or len(unique_id) != UNIQUE_ID_BYTES:
            raise arg_error("unique_id", f"None or the {UNIQUE_ID_BYTES} bytes from get_unique_id()", unique_id,
                            exc=TypeError)  # fmt: skip


def exchange_unique_id(
    rank: int,
    world_size: int,
    addr: str,
    port: int,
    *,
    unique_id: bytes | None = None,
    timeout: float = 300.0,
) -> bytes:
    """Give every rank the same unique id: rank 0 serves it on ``port``, the others fetch it.

    Call it on every rank with the same ``world_size``, ``addr`` and ``port`` (for example from
    ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``). Rank 0 returns once every
    other rank has fetched the id; the others return as soon as they have it. Rank 0 listens on
    all interfaces: use a port that only the job's machines can reach.

    Parameters
    ----------
    rank : int
        This rank, ``0 <= rank < world_size``.
    world_size : int
        The number of ranks.
    addr : str
        Rank 0's host name or address (ignored on rank 0).
    port : int
        The TCP port rank 0 listens on.
    unique_id : bytes, optional
        On rank 0, the id to hand out; ``None`` makes one with :func:`get_unique_id`.
    timeout : float
        Seconds to wait for the other side (rank 0: for all ranks; others: for rank 0).

    Returns
    -------
    bytes
        The 128-byte unique id, the same on every rank.

    Raises
    ------
    TimeoutError
        The other side did not show up in time (the message says who and where).
    RuntimeError
        A rank announced another world size or joined twice (raised on rank 0 and on that rank),
        or rank 0 cannot listen on ``port``.
    TypeError, ValueError
        A bad argument.

    Examples
    --------
    >>> env = os.environ
    >>> uid = nccl.exchange_unique_id(int(env["RANK"]), int(env["WORLD_SIZE"]),
    ...                               env["MASTER_ADDR"], int(env["MASTER_PORT"]))
    """
    _check(rank, world_size, addr, port, unique_id, timeout)
    if rank == 0:
        uid = bytes(unique_id) if unique_id is not None else get_unique_id()
        if world_size > 1:
            _serve(uid, world_size, port, timeout)
        return uid
    return _fetch(rank, world_size, addr, port, timeout)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionResetError(f"the connection closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def _listen(port: int, backlog: int) -> socket.socket:
    if socket.has_dualstack_ipv6():
        try:  # IPv6 and IPv4 peers; a host whose IPv6 is switched off falls through to IPv4
            return socket.create_server(
                ("", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=backlog
            )
        except OSError:
            pass
    try:
        return socket.create_server(("", port), backlog=backlog)
    except OSError as exc:
        raise RuntimeError(f"rank 0 cannot listen on port {port} for the unique-id rendezvous: {exc}; "
                           "choose another port (MASTER_PORT)") from exc  # fmt: skip


def _serve(uid: bytes, world_size: int, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    waiting = set(range(1, world_size))
    with _listen(port, min(world_size, 4096)) as srv:
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(waiting)
                raise TimeoutError(
                    f"rank 0 waited {timeout:g} s on port {port} for the other ranks; "
                    f"{len(missing)} never asked for the unique id (ranks {missing[:16]}"
                    f"{' ...' if len(missing) > 16 else ''}): are they running, with this MASTER_ADDR and MASTER_PORT?"
                )
            srv.settimeout(left)
            try:
                conn, _peer = srv.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(min(max(left, 0.1), 30.0))
                try:
                    hello = _recv_exact(conn, len(_MAGIC) + _HELLO.size)
                except OSError:
                    continue  # a connection that went away: not a rank of ours
                if not hello.startswith(_MAGIC):
                    continue  # something else knocked on the port: ignore it
                peer_rank, peer_world = _HELLO.unpack(hello[len(_MAGIC) :])
                problem = None
                if peer_world != world_size:
                    problem = f"rank {peer_rank} says the world size is {peer_world}, rank 0 says {world_size}"
                elif peer_rank not in waiting:
                    problem = (
                        f"rank {peer_rank} is out of range (1..{world_size - 1}) or already joined"
                    )
                if problem is not None:
                    msg = problem.encode()[:1000]
                    try:
                        conn.sendall(b"E" + _LEN.pack(len(msg)) + msg)
                    except OSError:
                        pass
                    raise RuntimeError(f"unique-id rendezvous on port {port}: {problem}")
                try:
                    conn.sendall(b"K" + uid)
                except OSError:
                    continue  # it went away before reading: it will ask again
                waiting.discard(peer_rank)


def _fetch(rank: int, world_size: int, addr: str, port: int, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    hello = _MAGIC + _HELLO.pack(rank, world_size)
    delay = 0.05
    last: BaseException | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"rank {rank} could not get the unique id from rank 0 at {addr}:{port} within "
                f"{timeout:g} s (last error: {last}); is rank 0 running, and do all ranks use this "
                "MASTER_ADDR and MASTER_PORT?"
            )
        try:
            with socket.create_connection((addr, port), timeout=min(left, 30.0)) as conn:
                conn.sendall(hello)
                kind = _recv_exact(conn, 1)
                if kind == b"K":
                    return _recv_exact(conn, UNIQUE_ID_BYTES)
                if kind == b"E":
                    (n,) = _LEN.unpack(_recv_exact(conn, _LEN.size))
                    msg = _recv_exact(conn, n).decode("utf-8", "replace")
                    raise RuntimeError(f"rank 0 at {addr}:{port} refused rank {rank}: {msg}")
                raise RuntimeError(
                    f"{addr}:{port} is not a cuda_core.nccl rendezvous (it answered {kind!r})"
                )
        except OSError as exc:  # not up yet, reset, unreachable, name not resolvable yet: try again
            last = exc
        time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, 1.0)
