"""The default timeout of NCCL communicators: set_default_timeout, CUDA_CORE_NCCL_TIMEOUT, checks."""

from __future__ import annotations

import math

import pytest

from cuda_core import nccl
from cuda_core.nccl import _timeout


@pytest.fixture(autouse=True)
def _restore(monkeypatch):
    monkeypatch.delenv(_timeout.ENV, raising=False)
    yield
    nccl.set_default_timeout(None)


def test_default_is_ten_minutes():
    assert nccl.get_default_timeout() == 600.0


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30.0), (" 2.5 ", 2.5), ("inf", math.inf), ("1e3", 1000.0)]
)
def test_environment_variable_sets_the_default(monkeypatch, text, seconds):
    monkeypatch.setenv("CUDA_CORE_NCCL_TIMEOUT", text)
    assert nccl.get_default_timeout() == seconds


def test_empty_variable_means_the_default(monkeypatch):
    monkeypatch.setenv("CUDA_CORE_NCCL_TIMEOUT", "  ")
    assert nccl.get_default_timeout() == 600.0


@pytest.mark.parametrize("text", ["abc", "0", "-5", "nan", "5s"])
def test_a_bad_variable_is_named_with_its_value(monkeypatch, text):
    monkeypatch.setenv("CUDA_CORE_NCCL_TIMEOUT", text)
    with pytest.raises(
        ValueError,
        match=rf"CUDA_CORE_NCCL_TIMEOUT must be a number of seconds > 0 \(math.inf: never\) \(got '{text}'\); unset it",
    ):
        nccl.get_default_timeout()


def test_set_default_timeout_wins_over_the_variable_and_none_restores(monkeypatch):
    monkeypatch.setenv("CUDA_CORE_NCCL_TIMEOUT", "30")
    nccl.set_default_timeout(5)
    assert nccl.get_default_timeout() == 5.0 and isinstance(nccl.get_default_timeout(), float)
    nccl.set_default_timeout(math.inf)
    assert nccl.get_default_timeout() == math.inf
    nccl.set_default_timeout(None)
    assert nccl.get_default_timeout() == 30.0


@pytest.mark.parametrize(("bad", "exc"), [(0, ValueError), (-1.0, ValueError), (math.nan, ValueError),
                                          (True, TypeError), ("5", TypeError), (None, TypeError)])  # fmt: skip
def test_bad_timeouts_are_refused(bad, exc):
    if bad is None:
        with pytest.raises(exc):
            _timeout.check_timeout(bad)
        return
    with pytest.raises(
        exc, match=r"seconds must be a number of seconds > 0 \(math.inf: never\) \(got"
    ):
        nccl.set_default_timeout(bad)
    assert nccl.get_default_timeout() == 600.0  # unchanged


def test_init_checks_its_timeout_before_nccl_is_needed():
    with pytest.raises(ValueError, match=r"timeout must be a number of seconds > 0 .*\(got -1\)"):
        nccl.Communicator.init(2, 0, bytes(128), timeout=-1)
    with pytest.raises(TypeError, match=r"timeout must be a number of seconds"):
        nccl.Communicator.init_all([0], timeout="1")
