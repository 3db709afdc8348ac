"""Checks of EventHandle's pools and of ContextHandle: a changed, a destroyed and a reset context."""

from __future__ import annotations

from stub_env import N, check, count, cuda_error, fail, lib, new_ctx, releases, retains


@check
def event_pools() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    e = ctx.create_event(2)
    assert not e.recorded and e.flags == 2 and e.ctx is ctx and count("cuEventCreate") == 1
    clean = e.address
    e.release()
    e.release()
    assert ctx.pooled() == (0, 1, 0)
    e = ctx.create_event(2)
    assert e.address == clean and count("cuEventCreate") == 1
    e.record(s)
    assert e.recorded
    e.release()
    assert ctx.pooled() == (0, 0, 1)  # a recorded event goes to the recorded pool
    e2 = ctx.create_event(2)  # create_event never draws a recorded one
    assert e2.address != clean and count("cuEventCreate") == 2 and not e2.recorded
    e3 = ctx.record_event(2, s)  # record_event does, and records it at once
    assert (
        e3.address == clean
        and e3.recorded
        and count("cuEventCreate") == 2
        and count("cuEventRecord") == 2
    )
    assert ctx.pooled() == (0, 0, 0)
    e2.expose()
    assert e2.recorded
    del e2, e3
    assert ctx.pooled() == (0, 0, 2)
    # A recorded event whose new record fails goes back to the recorded pool, not the clean one.
    fail("cuEventRecord", 999)
    cuda_error(lambda: ctx.record_event(2, s), 999, "cuEventRecord")
    assert ctx.pooled() == (0, 0, 2)
    # Flags are keys; an IPC-adopted event is destroyed, never pooled.
    other = ctx.create_event(0)
    assert count("cuEventCreate") == 3
    adopted = N.EventHandle.adopt(other.address, ctx, 0)
    assert adopted.recorded
    other_addr = other.address
    adopted.release()
    assert (
        count("cuEventDestroy") == 1 and lib.stub_is_dead(other_addr) and ctx.pooled() == (0, 0, 2)
    )
    other.release()  # bypassing the real flow: its driver event is gone, so it must not be reused
    ctx.drop_pools()
    # The cap: 64 idle events per pool.
    evs = [ctx.create_event(1) for _ in range(70)]
    del evs
    assert ctx.pooled() == (0, 64, 0) and count("cuEventDestroy") == 7
    assert ctx.record_event(1, s).recorded and count("cuEventCreate") == 3 + 70
    assert ctx.pooled() == (0, 63, 1)
    # An interprocess event (flag 4) is destroyed, never pooled: another process may hold it.
    for _ in range(2):
        ipc = ctx.record_event(4 | 2, s)
        ipc.release()
    assert (
        ctx.pooled() == (0, 63, 1)
        and count("cuEventCreate") == 3 + 72
        and count("cuEventDestroy") == 9
    )


@check
def context_changed() -> None:
    ctx = new_ctx()
    s1, s2 = ctx.create_stream(0, None), ctx.create_stream(0, None)
    e1, e2 = ctx.create_event(0), ctx.create_event(0)
    a = N.pool_allocate(0x9000, 64, s2, ctx)
    s1.release()
    e1.release()
    assert ctx.pooled() == (1, 1, 0)
    gen = ctx.generation
    lib.stub_change_ctx_id()
    assert ctx.check() is True  # alive, but another context: pools dropped, new generation
    assert ctx.generation == lib.stub_ctx_id() != gen and ctx.pooled() == (0, 0, 0)
    queries = count("cuStreamQuery")
    s2.release()
    e2.release()
    a.close()
    # Stale handles are neither pooled, nor queried, nor destroyed, nor freed.
    assert ctx.pooled() == (0, 0, 0) and count("cuStreamQuery") == queries
    assert (
        count("cuStreamDestroy") == 0
        and count("cuEventDestroy") == 0
        and count("cuMemFreeAsync") == 0
    )
    s3 = ctx.create_stream(0, None)
    assert count("cuStreamCreate") == 3
    # Destroyed (not a primary context): check() fails, creation raises the funnel's error.
    lib.stub_destroy_ctx()
    assert ctx.check() is False
    cuda_error(lambda: ctx.create_stream(0, None), 709, "cuCtxGetId")
    cuda_error(lambda: ctx.create_event(0), 709, "cuCtxGetId")
    s3.release()
    assert count("cuStreamDestroy") == 0


@check
def primary_context_reset() -> None:
    ctx = new_ctx(device=0)
    s = ctx.create_stream(0, None)
    s.release()
    assert ctx.pooled() == (1, 0, 0)
    gen = ctx.generation
    lib.stub_destroy_ctx()  # a reset primary context
    s2 = ctx.create_stream(0, None)  # re-initialised: retained once more and released
    assert retains.value == 1 and releases.value == 1
    assert ctx.generation == lib.stub_ctx_id() != gen and count("cuStreamCreate") == 2
    assert s2.address != s.address
    lib.stub_destroy_ctx()
    fail("cuDevicePrimaryCtxRetain", 3)
    cuda_error(ctx.check, 3, "cuDevicePrimaryCtxRetain")
    s2.release()  # died with the context
    assert count("cuStreamDestroy") == 0
