"""Errors begin as ``cuda.core``'s: the same class, the message starting with its wording.

Code and tests written for ``cuda.core`` match the start of its messages (``pytest.raises(...,
match=r"^Invalid split count")``); ours begin with the same words and then say more (the value,
the rule, the remedy). Each case here is a situation NVIDIA's test suite (or ``cuda.core`` 1.2.2
itself, run on this machine) shows a message for, checked with ``cuda.core``'s class and
pattern. This file holds the situations reached without a GPU; those that need one are in
``test_dropin_messages_gpu.py``.
"""

from __future__ import annotations

import pytest

from cuda_core import LEGACY_DEFAULT_STREAM
from cuda_core.graph import GraphBuilder


def _builder(kind: str = "primary", *, building: bool = False, ended: bool = False) -> GraphBuilder:
    """A builder in a given state, on a stream that needs no driver (nothing here asks one)."""
    b = GraphBuilder._from_stream(LEGACY_DEFAULT_STREAM, kind=kind)
    b._building = building
    b._ended = ended
    return b


# ------------------------------------------------------------------------------------------------
# graph builders


def test_split_count_below_two():
    with pytest.raises(ValueError, match=r"^Invalid split count: expecting >= 2, got 1") as info:
        _builder(building=True).split(1)
    assert "(got 1)" in str(info.value)  # and ours: the rule and the value


def test_split_needs_building():
    with pytest.raises(
        RuntimeError, match=r"^Graph builder must be building before it can be split\."
    ):
        _builder().split(2)


def test_join_needs_two_builders_of_the_right_type():
    with pytest.raises(ValueError, match=r"^Must join with at least two graph builders"):
        GraphBuilder.join(_builder(building=True))
    with pytest.raises(TypeError, match=r"^All arguments must be GraphBuilder instances"):
        GraphBuilder.join(_builder(building=True), object())


def test_begin_building_twice_or_after_the_end():
    with pytest.raises(RuntimeError, match=r"^Graph builder is already building\."):
        _builder(building=True).begin_building()
    with pytest.raises(
        RuntimeError, match=r"^Cannot resume building after building has ended\."
    ) as info:
        _builder(ended=True).begin_building()
    assert "new GraphBuilder" in str(info.value)  # and ours: the remedy


def test_end_building_when_not_building():
    with pytest.raises(RuntimeError, match=r"^Graph builder is not building\."):
        _builder().end_building()


@pytest.mark.parametrize("building", [False, True])
def test_complete_before_the_graph_is_built(building):
    with pytest.raises(RuntimeError, match=r"^Graph has not finished building\.") as info:
        _builder(building=building).complete()
    assert "end_building()" in str(info.value)
    with pytest.raises(RuntimeError, match=r"^Graph has not finished building\."):
        _builder(building=building).debug_dot_print("unused.dot")


def test_a_closed_builder():
    b = _builder()
    b.close()
    for use in (b.complete, lambda: b.graph_definition, b.begin_building):
        with pytest.raises(RuntimeError, match=r"^Graph builder has been closed\."):
            use()


def test_graph_definition_before_begin_and_during_capture():
    with pytest.raises(RuntimeError, match="before begin_building"):
        _builder().graph_definition  # noqa: B018
    with pytest.raises(RuntimeError, match="capture is in"):
        _builder(building=True).graph_definition  # noqa: B018
    with pytest.raises(RuntimeError, match="forked"):
        _builder("forked", building=True).graph_definition  # noqa: B018


def test_adding_to_a_builder_that_is_not_building():
    with pytest.raises(RuntimeError, match=r"^Cannot add callback when graph is not being built"):
        _builder().callback(print)
    with pytest.raises(
        RuntimeError, match=r"^Cannot create a condition when graph is not being built"
    ):
        _builder().create_condition()
    with pytest.raises(ValueError, match=r"^Child graph has not finished building\."):
        _builder(building=True).embed(_builder(building=True))
    # ours stays a RuntimeError too, as before
    with pytest.raises(RuntimeError, match=r"^Child graph has not finished building\."):
        _builder(building=True).embed(_builder())


def test_conditionals_check_the_condition_first():
    for method in ("if_then", "if_else", "while_loop"):
        with pytest.raises(TypeError, match="GraphCondition"):
            getattr(_builder(), method)(42)
    with pytest.raises(TypeError, match="GraphCondition"):
        _builder().switch([1, 2, 3], 4)


def test_host_callbacks():
    with pytest.raises(ValueError, match="user_data is only supported") as info:
        _builder(building=True).callback(print, user_data=b"hello")
    assert "functools.partial" in str(info.value)
    with pytest.raises(TypeError, match=r"^callback must be callable, got int"):
        _builder(building=True).callback(3)
