"""Unique ids: rank 0 makes one and hands it to the other ranks over TCP (standard library only).

Every rank of a group must pass the same unique id to :meth:`Communicator.init`.
:func:`exchange_unique_id` is the small rendezvous for launches that have no other channel
(``torchrun``, ``mpirun`` or a batch system setting ``MASTER_ADDR``/``MASTER_PORT``): rank 0
listens on the port, on the addresses ``MASTER_ADDR`` names (:mod:`._server`), and answers each
other rank once; the others connect (retrying until rank 0 is up) and read the 128 bytes. With a
job secret (``CUDA_CORE_NCCL_SECRET``) both sides prove they hold it before the id is handed
over, and the id crosses the wire masked (:mod:`._handshake`). It works unchanged across
machines.
"""

from __future__ import annotations

import hmac
import secrets
import socket
import time
from typing import Any

from .._utils import arg_error
from . import _handshake as hs
from ._args import check_rank
from ._errors import nccl_error
from ._loader import load
from ._server import LISTEN_ENV, listen_address, serve

__all__ = ["exchange_unique_id", "get_unique_id"]

UNIQUE_ID_BYTES = hs.UNIQUE_ID_BYTES


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


def _check(
    rank: Any, world_size: Any, addr: Any, port: Any, unique_id: Any, timeout: Any, listen: Any
) -> None:
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
    if listen is not None and (not isinstance(listen, str) or not listen):
        raise arg_error(
            "listen_addr", "None or where rank 0 listens (a non-empty str)", listen, exc=TypeError
        )
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
    secret: str | bytes | None = None,
    listen_addr: str | None = None,
) -> bytes:
    """Give every rank the same unique id: rank 0 serves it on ``port``, the others fetch it.

    Call it on every rank with the same ``world_size``, ``addr``, ``port`` and job secret (for
    example from ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` and
    ``CUDA_CORE_NCCL_SECRET``). Rank 0 listens only on the addresses ``addr`` resolves to on its
    own machine (``127.0.0.1`` or ``localhost``: loopback only) and returns once every other rank
    has the id; the others return as soon as they have it.

    With a job secret, rank 0 hands the id only to a rank that proves it holds the secret, and a
    rank takes the id only from a rank 0 that proves the same (HMAC-SHA256 challenge-response:
    the secret never crosses the wire, and the id crosses it masked). Without one, rank 0 hands
    the id to whoever connects and warns (``UserWarning``) when it listens on an address other
    machines can reach. Connections that do not follow the protocol, send too much, stall or
    fail the proof are refused or dropped and never take a rank's place. See
    :ref:`nccl-job-secret` for setting one per job.

    Where ``addr`` is not an address of rank 0's machine (a NAT'd public address, a Kubernetes
    service), ``listen_addr`` (or ``CUDA_CORE_NCCL_LISTEN_ADDR``) tells rank 0 where to listen
    instead, for example ``0.0.0.0`` or ``::`` for every interface. A host name ``addr`` that
    resolves only to loopback on rank 0's machine warns (``UserWarning``): ranks on other
    machines cannot reach it.

    Parameters
    ----------
    rank : int
        This rank, ``0 <= rank < world_size``.
    world_size : int
        The number of ranks.
    addr : str
        Rank 0's host name or address (``MASTER_ADDR``): where the others connect, and where
        rank 0 listens.
    port : int
        The TCP port rank 0 listens on.
    unique_id : bytes, optional
        On rank 0, the id to hand out; ``None`` makes one with :func:`get_unique_id`.
    timeout : float
        Seconds to wait for the other side (rank 0: for all ranks; others: for rank 0).
    secret : str or bytes, optional
        The job secret, at least 16 bytes, the same on every rank; ``None`` reads
        ``CUDA_CORE_NCCL_SECRET`` (unset or empty: no secret).
    listen_addr : str, optional
        Rank 0 only: the host name or address it listens on instead of ``addr`` (``0.0.0.0`` or
        ``::``: every interface); ``None`` reads ``CUDA_CORE_NCCL_LISTEN_ADDR`` (unset or empty:
        listen on ``addr``). The other ranks ignore it and connect to ``addr``.

    Returns
    -------
    bytes
        The 128-byte unique id, the same on every rank.

    Raises
    ------
    TimeoutError
        The other side did not show up in time (the message says who and where, and on rank 0
        what was refused meanwhile).
    RuntimeError
        Rank 0 refused this rank (another world size, a rank that already joined, a wrong or
        missing secret: raised on that rank, and on rank 0 for the world size of a rank that
        proved the secret); rank 0 did not prove the secret or is not a rendezvous; rank 0
        cannot listen on ``addr`` (or ``listen_addr``) and ``port``.
    TypeError, ValueError
        A bad argument (also a secret shorter than 16 bytes).

    Examples
    --------
    >>> env = os.environ
    >>> uid = nccl.exchange_unique_id(int(env["RANK"]), int(env["WORLD_SIZE"]),
    ...                               env["MASTER_ADDR"], int(env["MASTER_PORT"]))
    """
    _check(rank, world_size, addr, port, unique_id, timeout, listen_addr)
    key = hs.job_secret(secret)
    if rank == 0:
        uid = bytes(unique_id) if unique_id is not None else get_unique_id()
        if world_size > 1:
            serve(uid, world_size, addr, port, timeout, key, listen_address(listen_addr))
        return uid
    return _fetch(rank, world_size, addr, port, timeout, key)


def _recv_exact(conn: socket.socket, n: int, until: float) -> bytes:
    """``n`` bytes, all of them by ``until`` (``time.monotonic()``): a peer that sends slowly
    cannot hold this rank past its deadline."""
    data = bytearray()
    while len(data) < n:
        try:
            conn.settimeout(max(until - time.monotonic(), 1e-6))
            chunk = conn.recv(n - len(data))
        except TimeoutError:
            raise TimeoutError(f"{len(data)} of the {n} bytes expected arrived in time") from None
        if not chunk:
            raise ConnectionResetError(f"the connection closed after {len(data)} of {n} bytes")
        data += chunk
    return bytes(data)


def _fetch(
    rank: int, world_size: int, addr: str, port: int, timeout: float, key: bytes | None
) -> bytes:
    deadline = time.monotonic() + timeout
    delay = 0.05
    last: BaseException | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(
                f"rank {rank} could not get the unique id from rank 0 at {addr}:{port} within "
                f"{timeout:g} s (last error: {last}); is rank 0 running, and do all ranks use this "
                "MASTER_ADDR and MASTER_PORT? (rank 0 listens only on the addresses MASTER_ADDR "
                f"names on its machine, unless {LISTEN_ENV} says otherwise there)"
            )
        try:
            with socket.create_connection((addr, port), timeout=min(left, 30.0)) as conn:
                until = min(deadline, time.monotonic() + 30.0)
                return _ask(conn, rank, world_size, key, f"{addr}:{port}", until)
        except OSError as exc:  # not up yet, reset, unreachable, name not resolvable yet: try again
            last = exc
        time.sleep(min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, 1.0)


def _ask(
    conn: socket.socket, rank: int, world_size: int, key: bytes | None, where: str, until: float
) -> bytes:
    """One try on a connected socket: the id, or ``RuntimeError`` for an answer that will not
    change (``OSError`` for a connection that failed: the caller tries again)."""
    nonce = secrets.token_bytes(hs.NONCE_BYTES)
    mode = hs.OPEN if key is None else hs.SECRET
    conn.sendall(hs.HELLO.pack(hs.MAGIC, rank, world_size, mode, nonce))
    kind = _reply(conn, rank, where, until)
    if key is None:
        if kind == hs.CHALLENGE:
            raise RuntimeError(
                f"rank 0 at {where} requires the job secret and rank {rank} has none: set "
                f"{hs.SECRET_ENV} to the same value in every process of the job"
            )
        uid = _recv_exact(conn, hs.UNIQUE_ID_BYTES, until)
    else:
        if kind == hs.OK:
            raise RuntimeError(
                f"rank 0 at {where} handed out the unique id without asking for the job secret, "
                f"which rank {rank} holds ({hs.SECRET_ENV}): set the same secret in every process "
                "of the job, and check that it is rank 0 that listens there"
            )
        nonce0 = _recv_exact(conn, hs.NONCE_BYTES, until)
        conn.sendall(hs.rank_proof(key, nonce0, nonce, rank, world_size))
        if _reply(conn, rank, where, until) != hs.OK:
            raise RuntimeError(f"{where} is not a cuda_core.nccl rendezvous (it asked twice)")
        proof = _recv_exact(conn, hs.MAC_BYTES, until)
        uid = hs.mask(
            key, nonce0, nonce, rank, world_size, _recv_exact(conn, hs.UNIQUE_ID_BYTES, until)
        )
        if not hmac.compare_digest(
            proof, hs.rank0_proof(key, nonce0, nonce, rank, world_size, uid)
        ):
            raise RuntimeError(
                f"what answers at {where} did not prove that it holds the job secret: is "
                f"{hs.SECRET_ENV} the same in every process of the job, and is it rank 0 that "
                "listens there?"
            )
    conn.sendall(hs.ACK)
    return uid


def _reply(conn: socket.socket, rank: int, where: str, until: float) -> bytes:
    """The kind of rank 0's next reply (``OK`` or ``CHALLENGE``); raises on ``ERROR`` and on
    anything that is not this protocol."""
    kind = _recv_exact(conn, 1, until)
    if kind == hs.ERROR:
        (n,) = hs.ERROR_LEN.unpack(_recv_exact(conn, hs.ERROR_LEN.size, until))
        raw = _recv_exact(conn, min(n, hs.MAX_ERROR_BYTES), until).decode("utf-8", "replace")
        # What a peer sends goes into a message that may reach a terminal or a log: keep only
        # printable characters (no escape sequences, newlines or bidirectional overrides).
        msg = "".join(ch for ch in raw if ch.isprintable())
        raise RuntimeError(f"rank 0 at {where} refused rank {rank}: {msg}")
    if kind not in (hs.OK, hs.CHALLENGE):
        raise RuntimeError(f"{where} is not a cuda_core.nccl rendezvous (it answered {kind!r})")
    return kind
