"""The rendezvous's wire format and proofs (cuda_core.nccl._handshake): fixed sizes, where the
job secret comes from, and that each proof and the mask depend on everything they cover."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from cuda_core.nccl import _handshake as hs

KEY = b"k" * 32
N0, N1 = b"\x01" * 32, b"\x02" * 32
UID = bytes(range(128))


def test_messages_have_fixed_sizes():
    assert hs.HELLO.size == len(hs.MAGIC) + 4 + 4 + 1 + 32 == 70
    assert hs.HELLO.unpack(hs.HELLO.pack(hs.MAGIC, 3, 8, hs.SECRET, N1)) == (hs.MAGIC, 3, 8, 1, N1)
    assert (
        len(hs.rank_proof(KEY, N0, N1, 1, 2)) == len(hs.rank0_proof(KEY, N0, N1, 1, 2, UID)) == 32
    )
    msg = hs.error_message("é" * 600)  # cut at 1000 bytes of UTF-8
    assert msg[:1] == hs.ERROR and hs.ERROR_LEN.unpack(msg[1:3]) == (1000,) and len(msg) == 1003


def test_the_rank_proof_is_an_hmac_of_both_nonces_the_rank_and_the_world_size():
    want = hmac.new(KEY, b"cuda_core.nccl rendezvous v2: rank proof\0" + N0 + N1
                    + (1).to_bytes(4, "big") + (2).to_bytes(4, "big"), hashlib.sha256).digest()  # fmt: skip
    assert hs.rank_proof(KEY, N0, N1, 1, 2) == want
    others = {hs.rank_proof(b"K" * 32, N0, N1, 1, 2), hs.rank_proof(KEY, N1, N0, 1, 2),
              hs.rank_proof(KEY, N0, N1, 2, 2), hs.rank_proof(KEY, N0, N1, 1, 3),
              hs.rank0_proof(KEY, N0, N1, 1, 2, UID)}  # fmt: skip
    assert want not in others and len(others) == 5


def test_rank_0s_proof_covers_the_id():
    base = hs.rank0_proof(KEY, N0, N1, 1, 2, UID)
    assert base != hs.rank0_proof(KEY, N0, N1, 1, 2, UID[:-1] + b"\xff")
    assert base != hs.rank0_proof(KEY, N1, N0, 1, 2, UID)


def test_the_mask_hides_the_id_and_undoes_itself():
    masked = hs.mask(KEY, N0, N1, 1, 2, UID)
    assert len(masked) == 128 and masked != UID
    assert hs.mask(KEY, N0, N1, 1, 2, masked) == UID
    assert hs.mask(KEY, N0, N1, 2, 2, UID) != masked  # another rank, another keystream
    assert hs.mask(b"K" * 32, N0, N1, 1, 2, UID) != masked


def test_the_secret_comes_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv(hs.SECRET_ENV, raising=False)
    assert hs.job_secret(None) is None
    monkeypatch.setenv(hs.SECRET_ENV, "")
    assert hs.job_secret(None) is None
    monkeypatch.setenv(hs.SECRET_ENV, "s" * 16)
    assert hs.job_secret(None) == b"s" * 16
    assert hs.job_secret("é" * 8) == "é".encode() * 8  # 16 bytes of UTF-8: long enough
    assert hs.job_secret(bytearray(b"b" * 20)) == b"b" * 20
    raw = b"\xff\xfe not UTF-8, from the environment"  # os.environ holds it surrogate-escaped
    monkeypatch.setenv(hs.SECRET_ENV, raw.decode("utf-8", "surrogateescape"))
    assert hs.job_secret(None) == raw
    assert hs.job_secret(raw.decode("utf-8", "surrogateescape")) == raw  # the same as an argument
    with pytest.raises(
        ValueError, match=r"^secret must be at least 16 bytes long \(got '15 bytes'\)"
    ):
        hs.job_secret("x" * 15)
