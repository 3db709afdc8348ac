"""Checks of lifetimes and types: reference cycles collected (and released once), the handle types."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from stub_env import FakeCUDAError, N, check, count, lib, new_ctx, raises


@check
def gc_cycles() -> None:
    ctx = new_ctx()

    class Holder:
        pass

    # A borrowed stream whose owner refers back to it.
    o = Holder()
    b = N.StreamHandle.borrow(1, ctx, o)
    o.h = b  # type: ignore[attr-defined]
    wo, wb = weakref.ref(o), weakref.ref(b)
    del o, b
    gc.collect()
    assert wo() is None and wb() is None
    # An owned stream and an event reachable only from a cycle: released (pooled) exactly once.
    cyc: list[Any] = [ctx.create_stream(0, None), ctx.create_event(0)]
    cyc.append(cyc)
    del cyc
    gc.collect()
    assert ctx.pooled() == (1, 1, 0) and count("cuStreamDestroy") == 0
    # An adopted allocation whose free callback holds it: the free still runs, once.
    calls: list[tuple[Any, ...]] = []

    class Resource:
        def free(self, *args: Any) -> None:
            calls.append(args)

    r = Resource()
    r.alloc = N.Allocation.adopt(0x77, 8, r.free, None, None)  # type: ignore[attr-defined]
    wr = weakref.ref(r)
    del r
    gc.collect()
    assert calls == [(0x77, 8, None)] and wr() is None
    # A pool allocation in a cycle with its stream, which the cycle releases too.
    s = ctx.create_stream(0, None)
    a = N.pool_allocate(0x9000, 32, s, ctx)
    ptr = a.ptr
    cyc2: list[Any] = [a, s]
    cyc2.append(cyc2)
    del a, s, cyc2
    gc.collect()
    assert lib.stub_frees(ptr) == 1 and count("cuMemFreeAsync") >= 1


@check
def types() -> None:
    for t in (N.StreamHandle, N.EventHandle, N.Allocation):
        raises(TypeError, t)
    for t in (N.ContextHandle, N.StreamHandle, N.EventHandle, N.Allocation, N.LaunchConfigHandle):
        try:
            type("Sub", (t,), {})
        except TypeError:
            pass
        else:
            raise AssertionError(f"{t.__name__} can be subclassed")
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    for obj in (ctx, s, ctx.create_event(0), N.pool_allocate(0x9000, 8, s, ctx)):
        assert weakref.ref(obj)() is obj
        raises(AttributeError, lambda o=obj: setattr(o, "address", 1))
    assert hex(ctx.address) in repr(ctx)
    assert N.types_match((1, "a", 2.0), (int, str, float)) and N.types_match([], ())
    assert not N.types_match((1, "a"), (int, int)) and not N.types_match((1,), (int, int))
    assert not N.types_match((True,), (int,))
    raises(TypeError, lambda: N.types_match(1, ()))
    raises(TypeError, lambda: N.StreamHandle.borrow(1, object()))
    raises(TypeError, lambda: N.StreamHandle.borrow(1, ctx, None, 4))
    raises(TypeError, lambda: N.StreamHandle.borrow(address=1, bogus=2))
    assert N.StreamHandle.borrow(address=3, owner=ctx).owner is ctx
    raises(TypeError, lambda: N.bind({}, FakeCUDAError))  # the registry is not optional
    raises(TypeError, lambda: N.bind({}, FakeCUDAError, None))
