"""The shared plumbing: argument errors, option checking, 3-tuples, run-once."""

from __future__ import annotations

import dataclasses
import re
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuda_core._utils import (
    arg_error,
    cast_to_3_tuple,
    check_int,
    check_or_create_options,
    nvrtc_version,
    run_once,
)


def test_arg_error_wording():
    err = arg_error("block", "an int >= 1", 0)
    assert isinstance(err, ValueError)
    assert str(err) == "block must be an int >= 1 (got 0)"


def test_arg_error_uses_repr_hint_and_type():
    err = arg_error("name", "a str", b"x", hint="decode it first", exc=TypeError)
    assert isinstance(err, TypeError)
    assert str(err) == "name must be a str (got b'x'); decode it first"


def test_check_int():
    assert check_int("n", 5) == 5
    assert check_int("n", 5, minimum=5, maximum=5) == 5
    with pytest.raises(TypeError, match=r"^n must be an integer \(got True\)$"):
        check_int("n", True)
    with pytest.raises(TypeError, match=r"n must be an integer >= 0 \(got 1.5\)"):
        check_int("n", 1.5, minimum=0)
    with pytest.raises(ValueError, match=r"^n must be an integer >= 1 \(got 0\)$"):
        check_int("n", 0, minimum=1)
    with pytest.raises(ValueError, match=r"^n must be an integer <= 3 \(got 4\)$"):
        check_int("n", 4, maximum=3)


@dataclasses.dataclass
class _Opts:
    alpha: int = 1
    beta: str = "b"

    def __post_init__(self) -> None:
        if self.alpha < 0:
            raise arg_error("alpha", "an int >= 0", self.alpha)


def test_check_or_create_options_accepts_none_dict_and_instance():
    assert check_or_create_options(_Opts, None) == _Opts()
    assert check_or_create_options(_Opts, {"alpha": 3}) == _Opts(alpha=3)
    inst = _Opts(beta="x")
    assert check_or_create_options(_Opts, inst) is inst


def test_check_or_create_options_rejects_unknown_fields_by_name():
    with pytest.raises(TypeError) as info:
        check_or_create_options(_Opts, {"alpha": 1, "gamma": 2}, "options")
    text = str(info.value)
    assert text == "the options dict has unknown _Opts field 'gamma'; help(_Opts) lists the fields"


def test_check_or_create_options_rejects_other_types():
    # cuda.core's message (and class), which names the description passed
    with pytest.raises(
        TypeError,
        match=r"^The opts must be provided as an object of type _Opts or as a dict with valid "
        r"opts\. The provided object is '42'\.$",
    ):
        check_or_create_options(_Opts, 42, "opts")
    with pytest.raises(TypeError, match=r"^The options must be provided"):
        check_or_create_options(_Opts, [1])


def test_check_or_create_options_keeps_none_when_asked():
    assert check_or_create_options(_Opts, None, "opts", keep_none=True) is None
    assert check_or_create_options(_Opts, {}, keep_none=True) == _Opts()


def test_check_or_create_options_runs_validation():
    with pytest.raises(ValueError, match=r"alpha must be an int >= 0 \(got -1\)"):
        check_or_create_options(_Opts, {"alpha": -1})


@pytest.mark.parametrize(
    ("value", "expected"),
    [(4, (4, 1, 1)), ((4,), (4, 1, 1)), ((4, 2), (4, 2, 1)), ((4, 2, 3), (4, 2, 3))],
)
def test_cast_to_3_tuple(value, expected):
    assert cast_to_3_tuple("grid", value) == expected


@pytest.mark.parametrize(
    ("value", "lead"),
    [
        (0, "grid value must be >= 1 (got 0)"),
        (-1, "grid value must be >= 1 (got -1)"),
        ((0,), "grid value must be >= 1 (got (0,))"),
        ((1, 0), "grid values must be >= 1 (got (1, 0))"),
    ],
)
def test_cast_to_3_tuple_value_errors(value, lead):
    # cuda.core's message first, then the rule and the value
    with pytest.raises(ValueError) as info:
        cast_to_3_tuple("grid", value)
    assert str(info.value).startswith(lead + "; grid takes an int or a tuple of 1 to 3 ints")
    assert str(info.value).endswith(f"(got {value!r})")


@pytest.mark.parametrize(
    ("value", "got"),
    [
        (1.0, "<class 'float'>"),
        ("2", "<class 'str'>"),
        (True, "<class 'bool'>"),
        ((1, 2.0), "(1, 2.0)"),
        ((1, True), "(1, True)"),
        ([1, 2], "<class 'list'>"),
        (None, "<class 'NoneType'>"),
        ((1, 1, 1, 1), "tuple with length 4"),
    ],
)
def test_cast_to_3_tuple_type_errors(value, got):
    lead = f"block must be an int, or a tuple with up to 3 ints (got {got})"
    with pytest.raises(TypeError, match=r"^" + re.escape(lead) + "; block takes an int or a"):
        cast_to_3_tuple("block", value)


def test_cast_to_3_tuple_takes_an_empty_tuple_as_cuda_core_does():
    assert cast_to_3_tuple("grid", ()) == (1, 1, 1)


@given(st.lists(st.integers(min_value=1, max_value=2**31), min_size=1, max_size=3))
def test_cast_to_3_tuple_pads_with_ones(dims):
    out = cast_to_3_tuple("grid", tuple(dims))
    assert out == tuple(dims) + (1,) * (3 - len(dims))


def test_run_once_runs_once_across_threads():
    calls = []

    @run_once
    def f():
        calls.append(1)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(f())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert all(r is results[0] for r in results)
    assert f.__name__ == "f"


def test_nvrtc_version_matches_bindings():
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    assert nvrtc_version() == (major, minor)
