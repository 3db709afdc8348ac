"""Classes that only a factory makes: what calling the class itself raises.

``cuda.core`` refuses these with a ``RuntimeError`` whose message starts
``"<Class> objects cannot be instantiated directly."`` (``GraphBuilder``: ``NotImplementedError``,
itself a ``RuntimeError``, starting ``"directly creating a GraphBuilder object can be
ambiguous."``). Code that checks that message, as NVIDIA's own test suite does, runs unchanged
here; our message goes on to name the factory to use.
"""

from __future__ import annotations

import importlib
import re

import pytest

import cuda_core

# (class name, exception class cuda.core raises, a factory our message names)
REFUSED = [
    ("Event", RuntimeError, "Stream.record()"),
    ("Buffer", RuntimeError, "MemoryResource.allocate()"),
    ("Kernel", RuntimeError, "ObjectCode.get_kernel()"),
    ("ObjectCode", RuntimeError, "Program.compile()"),
    ("Context", RuntimeError, "Device.context"),
    ("GraphBuilder", NotImplementedError, "stream.create_graph_builder()"),
]
_START = {"GraphBuilder": "directly creating a GraphBuilder object can be ambiguous."}


@pytest.mark.parametrize(("name", "exc_type", "factory"), REFUSED, ids=[r[0] for r in REFUSED])
def test_direct_construction_is_refused_with_cuda_core_wording(name, exc_type, factory):
    cls = getattr(cuda_core, name)
    with pytest.raises(exc_type) as info:
        cls()
    message = str(info.value)
    start = _START.get(name, f"{name} objects cannot be instantiated directly.")
    assert message.startswith(start + " "), message
    assert factory in message
    with pytest.raises(exc_type, match="^" + re.escape(start)):
        cls(1, key=2)  # arguments change nothing


def test_graph_builder_refusal_is_still_a_runtime_error():
    with pytest.raises(RuntimeError):
        cuda_core.GraphBuilder()


def _nv_class(name):
    try:
        nv = importlib.import_module("cuda.core")
        return getattr(nv, name, None) or getattr(importlib.import_module("cuda.core.graph"), name)
    except Exception as exc:
        pytest.skip(f"NVIDIA's cuda.core is not importable here: {exc!r}")


@pytest.mark.parametrize(("name", "exc_type", "factory"), REFUSED, ids=[r[0] for r in REFUSED])
def test_same_class_and_message_start_as_cuda_core(name, exc_type, factory):
    with pytest.raises(Exception) as theirs:
        _nv_class(name)()
    with pytest.raises(Exception) as mine:
        getattr(cuda_core, name)()
    assert isinstance(mine.value, type(theirs.value)), (type(mine.value), type(theirs.value))
    # the first sentence of cuda.core's message, up to its first period, is ours too
    first = str(theirs.value).split(".")[0]
    assert str(mine.value).startswith(first + "."), (str(mine.value), first)
