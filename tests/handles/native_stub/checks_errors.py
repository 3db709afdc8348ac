"""Checks of refusals and failures: released handles, driver errors, failed releases in deallocators."""

from __future__ import annotations

import ctypes
import re
import sys
import warnings
from typing import Any

from stub_env import STUB_SO, N, check, count, cuda_error, fail, lib, new_ctx, raises


@check
def released_refuse() -> None:
    ctx = new_ctx()
    s, s2 = ctx.create_stream(0, None), ctx.create_stream(0, None)
    ev = ctx.create_event(0)
    s.release()
    for fn in (
        s.sync,
        s.query,
        lambda: s.record(ev),
        lambda: s.wait(ev),
        lambda: s.memcpy(1, 2, 3),
        lambda: ev.record(s),
        lambda: ctx.record_event(0, s),
        lambda: N.pool_allocate(0x9000, 8, s, ctx),
        lambda: N.LaunchConfigHandle(s, (1, 1, 1), (1, 1, 1), 0, None, False, False),
    ):
        raises(RuntimeError, fn, "Stream has been closed")
    ev.release()
    for fn in (
        ev.sync,
        ev.query,
        lambda: ev.record(s2),
        lambda: s2.wait(ev),
        lambda: s2.record(ev),
    ):
        raises(RuntimeError, fn, "Event has been closed")
    assert (
        count("cuStreamSynchronize") == 0
        and count("cuEventRecord") == 0
        and count("cuMemAllocFromPoolAsync") == 0
    )


@check
def driver_errors() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    ev = ctx.create_event(0)
    fail("cuStreamSynchronize", 700)
    cuda_error(s.sync, 700, "cuStreamSynchronize")
    s.sync()
    fail("cuStreamQuery", 999)
    cuda_error(s.query, 999, "cuStreamQuery")
    fail("cuEventQuery", 999)
    cuda_error(ev.query, 999, "cuEventQuery")
    fail("cuEventSynchronize", 999)
    cuda_error(ev.sync, 999, "cuEventSynchronize")
    fail("cuStreamWaitEvent", 999)
    cuda_error(lambda: s.wait(ev), 999, "cuStreamWaitEvent")
    fail("cuMemcpyAsync", 1)
    cuda_error(lambda: s.memcpy(1, 2, 3), 1, "cuMemcpyAsync")
    fail("cuEventRecord", 400)
    cuda_error(lambda: ev.record(s), 400, "cuEventRecord")
    assert not ev.recorded  # a failed record does not mark it
    fail("cuStreamCreate", 2)
    cuda_error(lambda: ctx.create_stream(0, None), 2, "cuStreamCreate")
    fail("cuStreamCreateWithPriority", 1)
    cuda_error(lambda: ctx.create_stream(0, 3), 1, "cuStreamCreateWithPriority")
    fail("cuEventCreate", 2)
    cuda_error(lambda: ctx.create_event(0), 2, "cuEventCreate")
    fail("cuCtxPushCurrent", 201)
    cuda_error(lambda: ctx.create_stream(0, None), 201, "cuCtxPushCurrent")
    fail("cuCtxPopCurrent", 201)
    cuda_error(lambda: ctx.create_event(1), 201, "cuCtxPopCurrent")
    lib.stub_set_current(None)
    # lib.stub_depth() is 1 now (the failed pop); pop it to keep the invariant.
    assert lib.stub_depth() == 1
    ctypes.CDLL(STUB_SO).cuCtxPopCurrent(ctypes.byref(ctypes.c_void_p()))
    fail("cuStreamDestroy", 999)
    lib.stub_set_busy(s.address, 1)
    cuda_error(s.release, 999, "cuStreamDestroy")
    assert s.is_released
    s.release()  # claimed: no second try
    assert count("cuStreamDestroy") == 1
    assert N.ctx_get_device() == -201
    lib.stub_set_current(lib.stub_ctx())
    assert N.ctx_get_device() == 0


class StubWarning(RuntimeWarning):
    """Stands for cuda_core.CUDAWarning, which the module is handed at import."""


@check
def dealloc_warns() -> None:
    ctx = new_ctx()
    raises(TypeError, lambda: N.set_warning_category(int), "Warning subclass")
    N.set_warning_category(StubWarning)
    s = ctx.create_stream(0, None)
    address = s.address
    lib.stub_set_busy(address, 1)
    fail("cuStreamDestroy", 999)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            raise KeyError("in flight")
        except KeyError:
            del s  # the failure is a warning; the exception in flight survives
            assert sys.exc_info()[0] is KeyError
    assert len(caught) == 1 and caught[0].category is StubWarning
    text = str(caught[0].message)  # the call, the handle and the error
    assert f"could not release a stream 0x{address:x}: cuStreamDestroy: 999" in text, text
    ev = N.EventHandle.adopt(ctx.create_event(0).address, ctx, 0)
    fail("cuEventDestroy", 999)
    a = N.pool_allocate(0x9000, 64, ctx.create_stream(0, None), ctx)
    fail("cuMemFreeAsync", 1, times=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del ev, a
    messages = sorted(str(w.message) for w in caught)
    assert all(w.category is StubWarning for w in caught) and len(messages) == 2, messages
    assert re.search(r"allocation of 64 bytes at 0x[0-9a-f]+: cuMemFreeAsync: 1$", messages[0])
    assert "could not release an event 0x" in messages[1] and "cuEventDestroy" in messages[1]
    # CUDA_ERROR_DEINITIALIZED (4): the driver is shutting down; nothing is reported.
    s = ctx.create_stream(0, None)
    lib.stub_set_busy(s.address, 1)
    fail("cuStreamDestroy", 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del s
    assert caught == [], [str(w.message) for w in caught]
    # Warnings turned into errors: nothing can be raised from a finalizer, so the escalated
    # warning goes to the unraisable hook (not dropped, not a crash).
    seen: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        d = N.Allocation.adopt(0x42, 16, lambda *a: 1 / 0, None, None)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            del d
    finally:
        sys.unraisablehook = hook
    assert len(seen) == 1 and isinstance(seen[0].exc_value, StubWarning), seen
    assert "ZeroDivisionError" in str(seen[0].exc_value) or "division" in str(seen[0].exc_value)
