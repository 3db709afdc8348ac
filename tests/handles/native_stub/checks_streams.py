"""Checks of StreamHandle: before bind, the idle pools, its context, busy streams, its operations."""

from __future__ import annotations

from typing import Any

from stub_env import (
    STREAM,
    N,
    check,
    count,
    cuda_error,
    fail,
    lib,
    live,
    memcpy_seen,
    new_ctx,
    raises,
    registry,
    registry_asked,
    registry_hook,
)


@check
def unbound() -> None:
    assert not N.is_bound()
    assert N.ctx_get_device() == -3
    raises(RuntimeError, lambda: N.ContextHandle(1), "status 3")
    s = N.StreamHandle.borrow(7)  # no driver call: allowed before bind
    raises(RuntimeError, s.sync, "status 3")
    raises(RuntimeError, s.context, "status 3")
    raises(RuntimeError, N.StreamHandle.borrow(1).context, "status 3")
    s.release()
    assert s.is_released
    raises(RuntimeError, s.context, "Stream has been closed")


@check
def stream_pool() -> None:
    ctx = new_ctx()
    assert (
        ctx.generation == lib.stub_ctx_id() and ctx.device == -1 and ctx.address == lib.stub_ctx()
    )
    s = ctx.create_stream(0, None)
    assert count("cuStreamCreate") == 1 and count("cuCtxPushCurrent") == 1  # no context was current
    assert s.is_owned and not s.is_released and s.ctx is ctx and s.owner is None
    first = s.address
    s.release()
    s.release()  # idempotent
    assert s.is_released and ctx.pooled() == (1, 0, 0)
    assert count("cuStreamDestroy") == 0 and count("cuStreamQuery") == 1
    s2 = ctx.create_stream(0, None)
    assert s2.address == first and count("cuStreamCreate") == 1 and ctx.pooled() == (0, 0, 0)
    # Another key is another pool; a priority uses cuStreamCreateWithPriority.
    lib.stub_set_current(lib.stub_ctx())
    s3 = ctx.create_stream(1, None)
    s4 = ctx.create_stream(0, -1)
    assert count("cuStreamCreate") == 2 and count("cuStreamCreateWithPriority") == 1
    assert count("cuCtxPushCurrent") == 1  # the context was current: nothing pushed
    del s3  # released by its deallocator
    s4.release()
    assert ctx.pooled() == (2, 0, 0)
    assert (
        ctx.create_stream(0, -1).address == s4.address
        and ctx.create_stream(0, -2).address != s4.address
    )
    assert count("cuStreamCreateWithPriority") == 2
    # The cap: 32 idle streams per key, the rest destroyed.
    many = [ctx.create_stream(5, None) for _ in range(40)]
    del many
    assert count("cuStreamDestroy") == 8
    # A borrowed stream is never queried nor destroyed; it drops its owner at release.
    owner = object()
    b = N.StreamHandle.borrow(1, ctx, owner)
    assert not b.is_owned and b.owner is owner and b.ctx is ctx
    b.release()
    assert b.owner is None and count("cuStreamDestroy") == 8
    assert "0x1" in repr(b) and hex(s2.address) in repr(s2)
    ctx.drop_pools()
    assert ctx.pooled() == (0, 0, 0)


@check
def stream_context() -> None:
    ctx = registry[lib.stub_ctx()] = new_ctx()
    s = ctx.create_stream(0, None)
    assert s.context() is ctx and count("cuStreamGetCtx") == 0  # owned: known from creation
    # A borrowed stream: found once (cuStreamGetCtx, then the registry), kept in ctx.
    b = N.StreamHandle.borrow(s.address)
    assert b.ctx is None
    assert b.context() is ctx and b.ctx is ctx and registry_asked == [lib.stub_ctx()]
    assert b.context() is ctx and count("cuStreamGetCtx") == 1 and len(registry_asked) == 1
    b.release()
    assert b.context() is ctx  # known: read after release too
    # Released before it was found: refused, no driver call.
    c = N.StreamHandle.borrow(s.address)
    c.release()
    raises(RuntimeError, c.context, "Stream has been closed")
    assert count("cuStreamGetCtx") == 1
    # A failed cuStreamGetCtx goes through the funnel; nothing is kept, the registry not asked.
    d = N.StreamHandle.borrow(s.address)
    fail("cuStreamGetCtx", 400)
    cuda_error(d.context, 400, "cuStreamGetCtx")
    assert d.ctx is None and len(registry_asked) == 1
    # The registry must answer a ContextHandle; its exception propagates; nothing is kept.
    registry_hook.append(lambda address: object())
    raises(TypeError, d.context, "not a ContextHandle")
    registry_hook[0] = lambda address: 1 // 0
    raises(ZeroDivisionError, d.context)
    assert d.ctx is None
    # Found by another caller while the registry ran (Python code): the first answer stays.
    other = N.ContextHandle(lib.stub_ctx())

    def reentrant(address: int) -> Any:
        registry_hook[0] = lambda address: other
        assert d.context() is other
        return ctx

    registry_hook[0] = reentrant
    assert d.context() is other and d.ctx is other
    registry_hook.clear()
    assert count("cuStreamGetCtx") == 6
    # The default-stream tokens: the current context's, never kept; None when none is current.
    for address in (0, 1, 2):
        t = N.StreamHandle.borrow(address)
        assert t.context() is None and count("cuStreamGetCtx") == 6
        lib.stub_set_current(lib.stub_ctx())
        assert t.context() is ctx and t.ctx is None
        t.release()
        assert t.context() is ctx  # a token's answer needs no stream
        lib.stub_set_current(None)
    # A token given its context (a device's default stream) keeps it, whatever is current.
    assert N.StreamHandle.borrow(1, ctx).context() is ctx
    s.release()


@check
def busy_stream_destroyed() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    assert s.query()
    lib.stub_set_busy(s.address, 1)
    assert s.query() is False
    address = s.address
    s.release()
    assert ctx.pooled() == (0, 0, 0) and count("cuStreamDestroy") == 1 and lib.stub_is_dead(address)
    assert live[STREAM] == 0


@check
def stream_ops() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    ev = ctx.create_event(0)
    s.sync()
    s.record(ev)
    assert ev.recorded
    s.wait(ev)
    s.memcpy(0x1000, 0x2000, 77)
    assert (memcpy_seen.dst, memcpy_seen.src, memcpy_seen.n, memcpy_seen.stream) == (
        0x1000,
        0x2000,
        77,
        s.address,
    )
    assert (
        count("cuStreamSynchronize") == 1
        and count("cuEventRecord") == 1
        and count("cuStreamWaitEvent") == 1
    )
    raises(TypeError, lambda: s.record(s))
    raises(TypeError, lambda: s.wait(1))
    raises(TypeError, lambda: s.memcpy(1, 2))
    raises(TypeError, lambda: ctx.create_stream(0))
    raises(OverflowError, lambda: s.memcpy(-1, 2, 3))
