"""CPU tier: OwnedHandle, the handle of the cold kinds (no driver: fake destroy functions)."""

from __future__ import annotations

import gc

from cuda_core._handles._owned import KINDS, OwnedHandle


def test_release_destroys_once_and_collection_then_does_nothing():
    destroyed = []
    h = OwnedHandle("graph", 0x10, destroyed.append)
    assert h.value == 0x10 and not h.is_released
    h.release()
    h.release()
    assert destroyed == [0x10] and h.is_released and h.value is None
    del h
    gc.collect()
    assert destroyed == [0x10]


def test_collection_destroys_and_adopt_replaces():
    destroyed = []
    h = OwnedHandle("nvrtc program", None, destroyed.append)  # made on first use
    assert h.is_released
    h.adopt(1)
    h.adopt(2)  # the first value is destroyed when replaced
    assert destroyed == [1]
    del h
    assert destroyed == [1, 2]  # CPython collects at once


def test_a_dependency_outlives_what_depends_on_it():
    destroyed = []
    array = OwnedHandle("array", 0xA, destroyed.append)
    texture = OwnedHandle("texture object", 0x7, destroyed.append, (array,))
    del array
    assert destroyed == []
    del texture
    assert destroyed == [0x7, 0xA]


def test_borrowed_is_never_destroyed_but_keeps_its_dependencies():
    destroyed = []
    parent = OwnedHandle("mipmapped array", 0xB, destroyed.append)
    level = OwnedHandle("array", 0xC, None, (parent,))
    level.release()
    assert level.is_released and destroyed == []
    del parent
    assert destroyed == []  # the level still holds it
    del level
    assert destroyed == [0xB]


def test_a_failing_destroy_never_raises():
    def fail(value):
        raise RuntimeError("driver gone")

    h = OwnedHandle("library", 0x5, fail)
    h.release()
    assert h.is_released
    assert "library released" in repr(h)
    assert "graph exec" in KINDS and "ipc file descriptor" in KINDS
