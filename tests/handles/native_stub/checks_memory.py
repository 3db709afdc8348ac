"""Checks of Allocation: freed once, refused while capturing, the fallback streams, adopted memory."""

from __future__ import annotations

from typing import Any

from stub_env import N, check, count, cuda_error, errors, fail, lib, new_ctx, raises


@check
def allocation_freed_once() -> None:
    ctx = new_ctx()
    s, s2 = ctx.create_stream(0, None), ctx.create_stream(0, None)
    a = N.pool_allocate(0x9000, 256, s, ctx)
    assert a.is_open and a.size == 256 and a.stream is s and a.ctx is ctx and hex(a.ptr) in repr(a)
    a.close()
    a.close()
    assert not a.is_open and lib.stub_frees(a.ptr) == 1 and lib.stub_free_stream(a.ptr) == s.address
    b = N.pool_allocate(0x9000, 8, s, ctx)
    ptr = b.ptr
    del b  # freed by the deallocator
    assert lib.stub_frees(ptr) == 1 and lib.stub_free_stream(ptr) == s.address
    c = N.pool_allocate(0x9000, 8, s, None)
    c.set_stream(s2)
    assert c.stream is s2
    raises(TypeError, lambda: c.set_stream(object()), "StreamHandle")
    c.close()
    assert lib.stub_free_stream(c.ptr) == s2.address
    d = N.pool_allocate(0x9000, 8, s, ctx)
    d.close(stream=s2)
    assert lib.stub_free_stream(d.ptr) == s2.address and d.stream is s
    assert count("cuMemFreeAsync") == 4
    fail("cuMemAllocFromPoolAsync", 2, times=2)
    cuda_error(lambda: N.pool_allocate(0x9000, 8, s, ctx), 2, "cuMemAllocFromPoolAsync")
    assert count("cuMemAllocFromPoolAsync") == 4 + 2  # retried once with the context current
    fail("cuMemAllocFromPoolAsync", 2)
    cuda_error(lambda: N.pool_allocate(0x9000, 8, s, None), 2, "cuMemAllocFromPoolAsync")
    raises(TypeError, lambda: N.pool_allocate(0x9000, 8, object(), None))
    e = N.pool_allocate(0x9000, 8, s, ctx)
    fail("cuMemFreeAsync", 1, times=2)
    cuda_error(e.close, 1, "cuMemFreeAsync")
    assert not e.is_open
    e.close()
    assert lib.stub_frees(e.ptr) == 0


@check
def allocation_refused_while_capturing() -> None:
    # A stream capturing a graph (active: 1, invalidated: 2) gets no pool memory: the request
    # is refused before the driver is asked for memory (it would become a graph node), and
    # not retried in the context (the stream is not in the wrong one).
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    pushes = count("cuCtxPushCurrent")
    for status in (1, 2):
        lib.stub_set_capturing(s.address, status)
        cuda_error(lambda: N.pool_allocate(0x9000, 8, s, ctx), 900, "cuStreamIsCapturing")
    assert count("cuMemAllocFromPoolAsync") == 0 and count("cuCtxPushCurrent") == pushes
    assert count("cuStreamIsCapturing") == 2
    lib.stub_set_capturing(s.address, 0)
    a = N.pool_allocate(0x9000, 8, s, ctx)
    assert a.is_open and count("cuMemAllocFromPoolAsync") == 1 and count("cuStreamIsCapturing") == 3
    a.close()
    fail("cuStreamIsCapturing", 400)  # the query itself failing is reported as such
    cuda_error(lambda: N.pool_allocate(0x9000, 8, s, None), 400, "cuStreamIsCapturing")
    assert count("cuMemAllocFromPoolAsync") == 1 and errors.value == 0


@check
def allocation_fallbacks() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    a = N.pool_allocate(0x9000, 64, s, ctx)
    s.release()
    a.close()  # the deallocation stream is closed: the legacy default stream, context pushed
    assert lib.stub_free_stream(a.ptr) == 1 and lib.stub_free_current(a.ptr) == lib.stub_ctx()
    # A default-stream token with a context runs with that context pushed first (never in
    # whatever context is current: another device's, on a thread where that one is).
    legacy = N.StreamHandle.borrow(1, ctx)
    pushes = count("cuCtxPushCurrent")
    b = N.pool_allocate(0x9000, 64, legacy, ctx)
    assert count("cuMemAllocFromPoolAsync") == 1 + 1 and count("cuCtxPushCurrent") == pushes + 1
    b.close()
    assert lib.stub_frees(b.ptr) == 1 and lib.stub_free_current(b.ptr) == lib.stub_ctx()
    assert count("cuMemFreeAsync") == 1 + 1 and count("cuCtxPushCurrent") == pushes + 2
    # Without a context, a closed stream frees on the legacy stream as it is.
    lib.stub_set_current(lib.stub_ctx())
    s2 = ctx.create_stream(0, None)
    c = N.pool_allocate(0x9000, 64, s2, None)
    s2.release()
    c.close()
    assert lib.stub_free_stream(c.ptr) == 1


@check
def allocation_free_callback() -> None:
    calls: list[tuple[Any, ...]] = []
    token = object()
    a = N.Allocation.adopt(0x1234, 64, lambda *args: calls.append(args), token, None)
    assert a.stream is token and a.ctx is None
    a.close()
    a.close()
    assert calls == [(0x1234, 64, token)]
    b = N.Allocation.adopt(0x5678, 8, lambda *args: calls.append(args), None, None)
    b.set_stream("any")
    b.close(stream="other")
    assert calls[-1] == (0x5678, 8, "other")
    c = N.Allocation.adopt(
        ptr=0x9ABC, size=16, free=lambda *args: calls.append(args), stream=None, ctx=None
    )
    del c
    assert calls[-1] == (0x9ABC, 16, None) and len(calls) == 3

    def boom(*args: Any) -> None:
        raise ValueError("no")

    d = N.Allocation.adopt(0x42, 16, boom, None, None)
    raises(ValueError, d.close, "no")
    assert not d.is_open
    raises(TypeError, lambda: N.Allocation.adopt(1, 2, None, object(), None))
    raises(TypeError, lambda: N.Allocation.adopt(1, 2, None, None))
    assert count("cuMemFreeAsync") == 0
