"""The rendezvous's wire format and its proofs of the job secret (standard library only).

Every message has a fixed size, so neither side reads more than the protocol allows. A rank
(the client) opens with ``HELLO``: ``MAGIC``, its rank and world size (big-endian int32), its
mode (``OPEN``: no secret, ``SECRET``: it holds the job secret) and a 32-byte random nonce.

Without a secret rank 0 answers ``OK`` and the 128-byte id. With one, rank 0 sends ``CHALLENGE``
and a nonce of its own; the rank answers :func:`rank_proof` (32 bytes); rank 0 checks it and
answers ``OK``, :func:`rank0_proof` -- which covers the id -- and the id masked with a keystream
derived from the secret and both nonces (:func:`mask`). The rank unmasks the id and trusts it
only when rank 0's proof holds. Either way the rank ends with ``ACK``, and rank 0 counts it served
only then. At any step rank 0 may answer ``ERROR`` instead: a big-endian uint16 length and a
UTF-8 message of at most ``MAX_ERROR_BYTES``.

Each proof is an HMAC-SHA256 keyed with the secret over a label of its own and both nonces,
the rank and the world size: the secret never crosses the wire, a proof made for one
connection is worth nothing on another, and neither side's proof can pass for the other's.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from typing import Any

from .._utils import arg_error

__all__: list[str] = []  # private module

SECRET_ENV = "CUDA_CORE_NCCL_SECRET"
MIN_SECRET_BYTES = 16
UNIQUE_ID_BYTES = 128
NONCE_BYTES = 32
MAC_BYTES = 32  # HMAC-SHA256

MAGIC = b"cuda_core.nccl rendezvous v2\n"
OPEN, SECRET = 0, 1  # the mode a rank announces
HELLO = struct.Struct(f"!{len(MAGIC)}siiB{NONCE_BYTES}s")  # magic, rank, world size, mode, nonce
OK, CHALLENGE, ERROR = b"K", b"C", b"E"  # what rank 0's replies start with
ACK = b"A"
ERROR_LEN = struct.Struct("!H")
MAX_ERROR_BYTES = 1000

_RANK_PROOF = b"cuda_core.nccl rendezvous v2: rank proof\0"
_RANK0_PROOF = b"cuda_core.nccl rendezvous v2: rank 0 proof\0"
_MASK = b"cuda_core.nccl rendezvous v2: unique id mask\0"
_RANKS = struct.Struct("!ii")


def job_secret(secret: Any) -> bytes | None:
    """The key of the job secret: ``secret`` when given, else ``$CUDA_CORE_NCCL_SECRET``; ``None``
    when neither is set (an empty variable counts as unset). Checked for type and length; the
    value itself never appears in a message."""
    if secret is None:
        value = os.environ.get(SECRET_ENV, "")
        if not value:
            return None
        key, name = os.fsencode(value), SECRET_ENV
    elif isinstance(secret, str):
        key, name = os.fsencode(secret), "secret"  # as the variable is: the same value, the
        # same key (a str from os.environ may carry surrogate escapes)
    elif isinstance(secret, bytes | bytearray):
        key, name = bytes(secret), "secret"
    else:
        raise arg_error("secret", "None, a str or bytes", type(secret).__name__, exc=TypeError)
    if len(key) < MIN_SECRET_BYTES:
        raise arg_error(
            name,
            f"at least {MIN_SECRET_BYTES} bytes long",
            f"{len(key)} bytes",
            'make one with python -c "import secrets; print(secrets.token_hex(32))"',
        )
    return key


def _mac(key: bytes, label: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, label + b"".join(parts), hashlib.sha256).digest()


def _transcript(nonce0: bytes, nonce: bytes, rank: int, world_size: int) -> bytes:
    return nonce0 + nonce + _RANKS.pack(rank, world_size)


def rank_proof(key: bytes, nonce0: bytes, nonce: bytes, rank: int, world_size: int) -> bytes:
    """What rank ``rank`` answers to rank 0's challenge ``nonce0`` (``nonce``: the rank's own)."""
    return _mac(key, _RANK_PROOF, _transcript(nonce0, nonce, rank, world_size))


def rank0_proof(
    key: bytes, nonce0: bytes, nonce: bytes, rank: int, world_size: int, unique_id: bytes
) -> bytes:
    """What rank 0 sends with the id: proves it holds the secret and that the id is its own."""
    return _mac(key, _RANK0_PROOF, _transcript(nonce0, nonce, rank, world_size), unique_id)


def mask(key: bytes, nonce0: bytes, nonce: bytes, rank: int, world_size: int, data: bytes) -> bytes:
    """``data`` (at most 256 * 32 bytes) XOR a keystream of HMAC blocks; applied twice, the
    identity. Someone who reads the wire without the secret does not learn the id."""
    seed = _transcript(nonce0, nonce, rank, world_size)
    blocks = (len(data) + MAC_BYTES - 1) // MAC_BYTES
    stream = b"".join(_mac(key, _MASK, seed, bytes([i])) for i in range(blocks))
    return bytes(a ^ b for a, b in zip(data, stream, strict=False))


def error_message(text: str) -> bytes:
    """``ERROR`` with ``text`` (cut to ``MAX_ERROR_BYTES`` of UTF-8)."""
    raw = text.encode("utf-8")[:MAX_ERROR_BYTES]
    return ERROR + ERROR_LEN.pack(len(raw)) + raw
