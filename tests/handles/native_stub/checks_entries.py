"""The method entries against the stub driver: ``Stream.record``, ``Buffer.copy_from`` and
``copy_to`` (run by ``drive_launch.py``;
the harness is ``launch_env.py``). On the native backend each is a C entry that takes the common
call and hands every other to the Python function it replaced: each result and error must be
that function's. On the pure backend they are the Python functions.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import partial
from typing import Any

from launch_env import PTR, N, P, check, outcome


@check
def stream_record() -> None:
    """``Stream.record(event)`` on the native backend is a C entry (RecordEntry) that records an
    Event of the exact class in C and hands every other form to the Python function: each
    result and error must be the Python function's. (The pure backend has no entry; its
    contexts cannot be made on the stub, so it checks only that.)"""
    from cuda_core import Stream
    from cuda_core._event import Event

    entry = Stream.__dict__["record"]
    if not P.native:
        assert type(entry).__name__ == "function", type(entry)
        return
    assert type(entry).__name__ == "RecordEntry", type(entry)
    python = entry.__wrapped__  # the Python function, as the fallback calls it
    ctxh = N.ContextHandle(P.lib.stub_ctx(), 0)
    s = Stream._wrap(P.stream_address(), None, ctxh)
    ev = Event._wrap(ctxh.create_event(2), 0)
    before = P.count("cuEventRecord")
    assert s.record(ev) is ev and ev._h.recorded
    for _ in range(5):
        assert s.record(ev) is ev
    assert P.count("cuEventRecord") == before + 6

    class MyEvent(Event):  # a subclass: the Python function, which records it too
        __slots__ = ()

    mine = MyEvent._wrap(ctxh.create_event(2), 0)
    assert s.record(mine) is mine and P.count("cuEventRecord") == before + 7
    assert s.record(event=ev) is ev  # a keyword: the Python function
    ipc = Event._wrap(ctxh.create_event(2), 0)
    ipc._flags |= 4  # CU_EVENT_INTERPROCESS: recorded once, when made
    closed_ev = Event._wrap(ctxh.create_event(2), 0)
    closed_ev._h.release()
    closed_s = Stream._wrap(P.stream_address(), None, ctxh)
    closed_s._h.release()

    def refused(record: Callable[..., Any]) -> Any:
        P.fail("cuEventRecord", 700)  # the driver refuses the next record: a CUDAError
        return record(s, ev)

    cases: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "driver refuses": refused,
        "ipc event": lambda record: record(s, ipc),
        "closed event": lambda record: record(s, closed_ev),
        "closed stream": lambda record: record(closed_s, ev),
        "not an event": lambda record: record(s, 42),
        "options with an event": lambda record: record(s, ev, {"enable_timing": True}),
    }
    for name, case in cases.items():
        by_c, by_python = outcome(partial(case, entry)), outcome(partial(case, python))
        assert by_c == by_python and by_c[0] != "ok", (name, by_c, by_python)
    assert "cuEventRecord" in outcome(lambda: refused(entry))[1]
    assert "has been closed" in outcome(lambda: closed_s.record(ev))[1]


@check
def buffer_copy() -> None:
    """``Buffer.copy_from`` and ``copy_to`` on the native backend are C entries (CopyEntry) that
    copy between two open buffers of the exact class and one size on a stream of its own, and
    hand every other form to the Python functions: each result and error must be theirs."""
    from cuda_core import LEGACY_DEFAULT_STREAM, Buffer

    entries = [Buffer.__dict__[name] for name in ("copy_from", "copy_to")]
    if not P.native:
        assert {type(e).__name__ for e in entries} == {"function"}, entries
        return
    assert {type(e).__name__ for e in entries} == {"CopyEntry"}, entries
    fields = [(name, ctypes.c_uint64) for name in ("dst", "src", "n", "stream")]  # LP64
    seen: Any = type("Seen", (ctypes.Structure,), {"_fields_": fields}).in_dll(P.lib, "stub_memcpy")
    s, a, b = P.stream(), P.buffer(PTR, 64), P.buffer(PTR + 4096, 64)
    before = P.count("cuMemcpyAsync")
    assert a.copy_from(b, stream=s) is None
    assert (seen.dst, seen.src, seen.n) == (PTR, PTR + 4096, 64)
    assert a.copy_to(b, stream=s) is b
    assert (seen.dst, seen.src) == (PTR + 4096, PTR)
    assert P.count("cuMemcpyAsync") == before + 2 and seen.stream == int(s.handle)

    class MyBuffer(Buffer):  # a subclass: the Python function, which copies it too
        __slots__ = ()

    mine = MyBuffer.from_handle(PTR, 64)
    assert a.copy_from(mine, stream=s) is None and P.count("cuMemcpyAsync") == before + 3
    closed_a, closed_s = P.buffer(PTR, 64), P.stream()
    closed_a.close(), closed_s._h.release()

    def refused(entry: Callable[..., Any]) -> Any:
        P.fail("cuMemcpyAsync", 1, times=3)  # refused by C and by each Python attempt alike
        return entry(a, b, stream=s)

    cases: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "driver refuses": refused,
        "closed buffer": lambda entry: entry(closed_a, b, stream=s),
        "closed other": lambda entry: entry(a, closed_a, stream=s),
        "closed stream": lambda entry: entry(a, b, stream=closed_s),
        "sizes differ": lambda entry: entry(a, P.buffer(PTR, 32), stream=s),
        "stream by position": lambda entry: entry(a, b, s),
        "not a stream": lambda entry: entry(a, b, stream=42),
        "not a buffer": lambda entry: entry(a, 42, stream=s),
        "no stream": lambda entry: entry(a, b),
        "another keyword": lambda entry: entry(a, b, stream=s, flags=1),
        # a token: the Python function, which asks for the current context (no stub for it)
        "default-stream token": lambda entry: entry(a, b, stream=LEGACY_DEFAULT_STREAM),
    }
    for entry in entries:
        python = entry.__wrapped__  # the Python function, as the fallback calls it
        for name, case in cases.items():
            by_c, by_python = outcome(partial(case, entry)), outcome(partial(case, python))
            assert by_c == by_python and by_c[0] != "ok", (entry, name, by_c, by_python)
    empty = P.buffer(PTR, 0)
    assert outcome(lambda: empty.copy_from(P.buffer(PTR, 0), stream=s)) == ["ok"]
