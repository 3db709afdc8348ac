"""The method entries against the stub driver: ``Stream.record``, ``Buffer.copy_from`` and
``copy_to``, ``DeviceMemoryResource.allocate``, ``Buffer.close`` and ``Stream.sync`` (run by
``drive_launch.py``; the harness is ``launch_env.py``). On the native backend each is a C entry
that takes the common call and hands every other to the Python function it replaced: each
result and error must be that function's. On the pure backend they are the Python functions.
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


def _pool_resource() -> Any:
    """A DeviceMemoryResource over a made-up pool of the stub (not owned: nothing destroys it),
    set up as the resource of a device's current pool is."""
    from cuda_core import DeviceMemoryResource

    mr = object.__new__(DeviceMemoryResource)
    mr._init_pool(0x9000, False, 0)
    return mr


@check
def pool_allocation() -> None:
    """``DeviceMemoryResource.allocate(size, stream=s)`` and ``Buffer.close()`` on the native
    backend are C entries (AllocEntry, CloseEntry): the common call allocates from the pool, or
    frees, without the Python function; every other form, and an allocation the driver
    refuses, goes to the Python functions: each result and error must be theirs."""
    from cuda_core import LEGACY_DEFAULT_STREAM, Buffer, DeviceMemoryResource, Stream
    from cuda_core._handles._method_entries import _slot

    allocate, close = DeviceMemoryResource.__dict__.get("allocate"), Buffer.__dict__["close"]
    if not P.native:
        assert allocate is None and type(close).__name__ == "function", (allocate, close)
        return
    assert (type(allocate).__name__, type(close).__name__) == ("AllocEntry", "CloseEntry")
    py_allocate, py_close = allocate.__wrapped__, close.__wrapped__
    ctxh = N.ContextHandle(P.lib.stub_ctx(), 0)
    s = Stream._wrap(P.stream_address(), None, ctxh)
    mr = _pool_resource()

    # The common calls take no Python function: entries whose fallback would say so.
    def spy(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the Python function ran: {args} {kwargs}")

    slots = {n: Buffer.__dict__[n] for n in ("_h", "_ptr", "_size", "_mr")}
    pool, stream_h = _slot(DeviceMemoryResource, "_alloc_pool"), Stream.__dict__["_h"]
    c_allocate = N.AllocEntry(
        spy, DeviceMemoryResource, pool, Stream, stream_h, Buffer, *slots.values()
    )
    c_close = N.CloseEntry(spy, Buffer, slots["_h"], slots["_ptr"], slots["_mr"])
    allocs, frees = P.count("cuMemAllocFromPoolAsync"), P.count("cuMemFreeAsync")
    size = 1 << 20
    buf = c_allocate(mr, size, stream=s)
    twin = py_allocate(mr, size, stream=s)  # what the Python function makes
    for b in (buf, twin):
        assert type(b) is Buffer and b.size == size and b._size is size and b.memory_resource is mr
        assert type(b._h) is N.Allocation and b._h.is_open and b._h.ptr == b._ptr == int(b.handle)
        assert b._h.stream is s._h and b._h.ctx is ctxh
    assert not hasattr(buf, "_owner") and not hasattr(twin, "_owner")  # left unset by both
    assert buf._ptr != twin._ptr and P.count("cuMemAllocFromPoolAsync") == allocs + 2
    h = buf._h
    assert c_close(buf) is None and not h.is_open and P.count("cuMemFreeAsync") == frees + 1
    assert (buf._h, buf._ptr, buf._mr) == (None, None, None) and buf.memory_resource is None
    assert py_close(twin) is None and (twin._h, twin._ptr, twin._mr) == (None, None, None)
    assert P.count("cuMemFreeAsync") == frees + 2
    # ... and the installed entries are those: mr.allocate / buf.close as users call them.
    b = mr.allocate(64, stream=s)
    assert b.size == 64 and b._h.is_open and b.close() is None and b._ptr is None

    # Every other form: the Python functions' results and errors.
    closed_s = Stream._wrap(P.stream_address(), None, ctxh)
    closed_s._h.release()
    closed_mr = _pool_resource()
    closed_mr.close()

    def refused(fn: Callable[..., Any]) -> Any:
        P.fail("cuMemAllocFromPoolAsync", 2, times=-1)  # out of memory, however often asked
        try:
            return fn(mr, 64, stream=s)
        finally:
            P.fail("cuMemAllocFromPoolAsync", 0, times=0)

    def capturing(fn: Callable[..., Any]) -> Any:
        P.lib.stub_set_capturing(ctypes.c_void_p(s._h.address), 1)
        try:
            return fn(mr, 64, stream=s)
        finally:
            P.lib.stub_set_capturing(ctypes.c_void_p(s._h.address), 0)

    cases: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "driver refuses": refused,
        "capturing": capturing,
        "negative size": lambda fn: fn(mr, -1, stream=s),
        "size not an int": lambda fn: fn(mr, 1.5, stream=s),
        "size too large": lambda fn: fn(mr, 1 << 70, stream=s),
        "closed stream": lambda fn: fn(mr, 64, stream=closed_s),
        "closed resource": lambda fn: fn(closed_mr, 64, stream=s),
        "stream by position": lambda fn: fn(mr, 64, s),
        "not a stream": lambda fn: fn(mr, 64, stream=42),
        "no stream": lambda fn: fn(mr, 64),
        "another keyword": lambda fn: fn(mr, 64, stream=s, flags=1),
    }
    for name, case in cases.items():
        by_c, by_python = outcome(partial(case, allocate)), outcome(partial(case, py_allocate))
        assert by_c == by_python and by_c[0] != "ok", (name, by_c, by_python)
    # A default-stream token's context is whichever is current: the Python function asks.
    token = [type(f(mr, 64, stream=LEGACY_DEFAULT_STREAM)) for f in (allocate, py_allocate)]
    assert token == [Buffer, Buffer], token

    def free_refused(fn: Callable[..., Any]) -> Any:
        b = py_allocate(mr, 64, stream=s)
        P.fail("cuMemFreeAsync", 700, times=-1)  # on the stream, and again in its context
        try:
            return fn(b)
        finally:
            P.fail("cuMemFreeAsync", 0, times=0)
            assert (b._h, b._ptr, b._mr) == (None, None, None)  # closed before the free was tried

    def result(fn: Callable[[], Any]) -> list[str]:
        """outcome(), with the value returned."""
        got = outcome(lambda: out.append(fn()))
        return [*got, repr(out.pop())] if got == ["ok"] else got

    out: list[Any] = []
    close_cases: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "driver refuses the free": free_refused,
        "closed twice": lambda fn: (fn(b := py_allocate(mr, 64, stream=s)), fn(b), b._ptr),
        "not an allocation": lambda fn: (fn(b := P.buffer(PTR, 64)), b._ptr, b._mr),
        "a stream given": lambda fn: fn(py_allocate(mr, 64, stream=s), s),
        "not a stream given": lambda fn: fn(py_allocate(mr, 64, stream=s), stream=42),
        "not a buffer": lambda fn: fn(42),
    }
    for name, case in close_cases.items():
        by_c, by_python = result(partial(case, close)), result(partial(case, py_close))
        assert by_c == by_python, (name, by_c, by_python)
        assert by_c[0] == "CUDAError" or name != "driver refuses the free", by_c


@check
def stream_sync() -> None:
    """``Stream.sync()`` on the native backend is a C entry (SyncEntry) that synchronises a
    stream of the exact class through its handle and hands every other call to the Python
    function: each result and error must be that function's."""
    from cuda_core import Stream

    entry = Stream.__dict__["sync"]
    if not P.native:
        assert type(entry).__name__ == "function", type(entry)
        return
    assert type(entry).__name__ == "SyncEntry", type(entry)
    python = entry.__wrapped__

    def spy(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the Python function ran: {args} {kwargs}")

    s = P.stream()
    before = P.count("cuStreamSynchronize")
    assert N.SyncEntry(spy, Stream, Stream.__dict__["_h"])(s) is None  # in C: no fallback
    assert s.sync() is None and python(s) is None
    assert P.count("cuStreamSynchronize") == before + 3

    class MyStream(Stream):  # a subclass: the Python function, which syncs it too
        __slots__ = ()

    mine = MyStream.from_handle(P.stream_address())
    assert mine.sync() is None and P.count("cuStreamSynchronize") == before + 4
    closed = P.stream()
    closed._h.release()

    def refused(fn: Callable[..., Any]) -> Any:
        P.fail("cuStreamSynchronize", 700)  # an illegal address: the stream's work failed
        return fn(s)

    cases: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "driver refuses": refused,
        "closed stream": lambda fn: fn(closed),
        "an argument": lambda fn: fn(s, 1),
        "a keyword": lambda fn: fn(s, timeout=1),
        "not a stream": lambda fn: fn(42),
    }
    for name, case in cases.items():
        by_c, by_python = outcome(partial(case, entry)), outcome(partial(case, python))
        assert by_c == by_python and by_c[0] != "ok", (name, by_c, by_python)
