"""track/release: a release runs once, on close or on collection, and never raises."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from cuda_core._lifetime import is_tracked, release, track, untrack


class Owner:
    pass


def test_runs_once_on_release():
    calls = []
    o = Owner()
    token = track(o, calls.append, 1)
    assert is_tracked(token)
    assert release(token)
    assert not release(token)
    assert calls == [1]
    assert not is_tracked(token)
    del o
    gc.collect()
    assert calls == [1]


def test_runs_on_collection():
    calls = []
    o = Owner()
    token = track(o, calls.append, "x")
    del o
    gc.collect()
    assert calls == ["x"]
    assert not is_tracked(token)


def test_runs_when_owner_is_in_a_cycle():
    calls = []
    o = Owner()
    o.me = o  # type: ignore[attr-defined]
    track(o, calls.append, "cycle")
    del o
    gc.collect()
    assert calls == ["cycle"]


def test_untrack_forgets_and_returns_the_entry():
    calls = []
    o = Owner()
    token = track(o, calls.append, 1)
    assert untrack(token) == (calls.append, 1)
    assert untrack(token) is None
    del o
    gc.collect()
    assert calls == []


def test_error_becomes_a_warning():
    def boom(_):
        raise RuntimeError("context is gone")

    o = Owner()
    token = track(o, boom, 1)
    with pytest.warns(ResourceWarning, match="context is gone"):
        release(token)


def test_error_on_collection_becomes_a_warning():
    def boom(_):
        raise RuntimeError("dead context")

    o = Owner()
    track(o, boom, 1)
    with pytest.warns(ResourceWarning, match="dead context"):
        del o
        gc.collect()


def test_racing_threads_release_once():
    for _ in range(200):
        calls = []
        o = Owner()
        token = track(o, calls.append, 1)
        barrier = threading.Barrier(4)

        def go(t=token, b=barrier):
            b.wait()
            release(t)

        threads = [threading.Thread(target=go) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert calls == [1]


def test_args_do_not_keep_owner_alive():
    o = Owner()
    ref = weakref.ref(o)
    track(o, lambda *a: None, 1, 2)
    del o
    gc.collect()
    assert ref() is None


def test_equal_owners_are_tracked_apart():
    class Same:
        def __eq__(self, other):
            return True

        def __hash__(self):
            return 1

    calls = []
    a, b = Same(), Same()
    ta = track(a, calls.append, "a")
    tb = track(b, calls.append, "b")
    release(tb)
    assert calls == ["b"] and is_tracked(ta)
    release(ta)
    assert calls == ["b", "a"]
