"""Finalizer: runs once, on close or on collection, never raises."""

from __future__ import annotations

import gc
import threading
import warnings

import pytest

from cuda_core._lifetime import Finalizer


class Owner:
    pass


def test_runs_once_on_call():
    calls = []
    o = Owner()
    fin = Finalizer(o, calls.append, 1)
    assert fin.alive
    fin()
    fin()
    assert calls == [1]
    assert not fin.alive
    del o
    gc.collect()
    assert calls == [1]


def test_runs_on_collection():
    calls = []
    o = Owner()
    fin = Finalizer(o, calls.append, "x")
    del o
    gc.collect()
    assert calls == ["x"]
    assert not fin.alive


def test_runs_when_owner_is_in_a_cycle():
    calls = []
    o = Owner()
    o.me = o  # type: ignore[attr-defined]
    Finalizer(o, calls.append, "cycle")
    del o
    gc.collect()
    assert calls == ["cycle"]


def test_detach_forgets():
    calls = []
    o = Owner()
    fin = Finalizer(o, calls.append, 1)
    assert fin.detach()
    assert not fin.detach()
    del o
    gc.collect()
    assert calls == []


def test_error_becomes_a_warning():
    def boom(_):
        raise RuntimeError("context is gone")

    o = Owner()
    fin = Finalizer(o, boom, 1)
    with pytest.warns(ResourceWarning, match="context is gone"):
        fin()


def test_racing_threads_release_once():
    for _ in range(200):
        calls = []
        o = Owner()
        fin = Finalizer(o, calls.append, 1)
        barrier = threading.Barrier(4)

        def go(f=fin, b=barrier):
            b.wait()
            f()

        threads = [threading.Thread(target=go) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert calls == [1]


def test_args_do_not_keep_owner_alive():
    o = Owner()
    import weakref

    ref = weakref.ref(o)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Finalizer(o, lambda *a: None, 1, 2)
    del o
    gc.collect()
    assert ref() is None
