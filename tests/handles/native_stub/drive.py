"""Drive ``cuda_core._handles._native`` against the fake driver in ``stub_cuda.c`` (CPU tier).

Run by ``tests/handles/test_native_stub.py`` in a subprocess, never in the test process (GPU tests
share that one's module): ``python drive.py NATIVE_SO STUB_SO CHECK``. It loads the given
build of the native module on its own, binds it to the stub's symbols, runs one check and
prints ``PASS <check>``. Every check ends by asserting the stub saw no misuse (no double
destroy or free, no stale handle used) and that every context push was popped.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

NATIVE_SO, STUB_SO, CHECK = sys.argv[1:4]

spec = importlib.util.spec_from_file_location("cuda_core._handles._native", NATIVE_SO)
assert spec is not None and spec.loader is not None
N: Any = importlib.util.module_from_spec(spec)
spec.loader.exec_module(N)

lib = ctypes.CDLL(STUB_SO)
lib.stub_ctx.restype = ctypes.c_void_p
lib.stub_ctx_id.restype = ctypes.c_ulonglong
lib.stub_set_current.argtypes = [ctypes.c_void_p]
lib.stub_count.argtypes = [ctypes.c_char_p]
lib.stub_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
lib.stub_set_busy.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.stub_set_capturing.argtypes = [ctypes.c_void_p, ctypes.c_int]
lib.stub_is_dead.argtypes = [ctypes.c_void_p]
lib.stub_frees.argtypes = [ctypes.c_ulonglong]
lib.stub_free_stream.argtypes = [ctypes.c_ulonglong]
lib.stub_free_stream.restype = ctypes.c_void_p
lib.stub_free_current.argtypes = [ctypes.c_ulonglong]
lib.stub_free_current.restype = ctypes.c_void_p


class LaunchSeen(ctypes.Structure):
    _fields_ = [
        ("grid", ctypes.c_uint * 3),
        ("block", ctypes.c_uint * 3),
        ("shmem", ctypes.c_uint),
        ("num_attrs", ctypes.c_uint),
        ("stream", ctypes.c_void_p),
        ("function", ctypes.c_void_p),
        ("params", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
        ("attr_id", ctypes.c_int * 3),
        ("attr_value", (ctypes.c_uint * 3) * 3),
        ("attrs_null", ctypes.c_int),
    ]


class MemcpySeen(ctypes.Structure):
    _fields_ = [
        ("dst", ctypes.c_ulonglong),
        ("src", ctypes.c_ulonglong),
        ("n", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
    ]


launch_seen = LaunchSeen.in_dll(lib, "stub_launch")
memcpy_seen = MemcpySeen.in_dll(lib, "stub_memcpy")
errors = ctypes.c_int.in_dll(lib, "stub_errors")
live = (ctypes.c_int * 3).in_dll(lib, "stub_live")
retains = ctypes.c_int.in_dll(lib, "stub_retains")
releases = ctypes.c_int.in_dll(lib, "stub_releases")
STREAM, EVENT = 1, 2


class FakeCUDAError(Exception):
    def __init__(self, status: int, api: str) -> None:
        super().__init__(f"{api}: {status}")
        self.status = status
        self.api = api


def count(name: str) -> int:
    return int(lib.stub_count(name.encode()))


def fail(name: str, status: int, times: int = 1) -> None:
    assert lib.stub_fail(name.encode(), status, times) == 0, name


def raises(exc_type: type[BaseException], fn: Callable[[], Any], match: str = "") -> BaseException:
    try:
        fn()
    except exc_type as exc:
        assert match in str(exc), (match, str(exc))
        return exc
    raise AssertionError(f"{fn} did not raise {exc_type.__name__}")


def cuda_error(fn: Callable[[], Any], status: int, api: str) -> None:
    exc = raises(FakeCUDAError, fn)
    assert isinstance(exc, FakeCUDAError)
    assert (exc.status, exc.api) == (status, api), (exc.status, exc.api)


CHECKS: dict[str, Callable[[], None]] = {}


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


# The context registry bind() hands the module (cuda_core's is _contexts.context_handle): one
# handle per address; a check may replace its answer (``registry_hook``) and reads what it was
# asked (``registry_asked``).
registry: dict[int, Any] = {}
registry_asked: list[int] = []
registry_hook: list[Callable[[int], Any]] = []


def context_of(address: int) -> Any:
    registry_asked.append(address)
    if registry_hook:
        return registry_hook[0](address)
    h = registry.get(address)
    if h is None:
        h = registry[address] = N.ContextHandle(address)
    return h


def bind() -> None:
    names = N.entry_point_names()
    addresses = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in names}
    N.bind(addresses, FakeCUDAError, context_of)


def new_ctx(device: int = -1) -> Any:
    return N.ContextHandle(lib.stub_ctx(), device)


# ---------------------------------------------------------------------------------------------


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


@check
def launch() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    cfg = N.LaunchConfigHandle(s, (1, 2, 3), [4, 5, 6], 128, (2, 1, 1), True, 1)
    assert cfg.stream is s
    assert cfg.launch(0xF00, 0xBA5) == 0
    seen = launch_seen
    assert tuple(seen.grid) == (1, 2, 3) and tuple(seen.block) == (4, 5, 6) and seen.shmem == 128
    assert (
        seen.stream == s.address
        and seen.function == 0xF00
        and seen.params == 0xBA5
        and seen.extra is None
    )
    assert seen.num_attrs == 3 and not seen.attrs_null
    assert list(seen.attr_id) == [
        4,
        2,
        5,
    ]  # cluster dimension, cooperative, programmatic serialization
    assert (
        tuple(seen.attr_value[0]) == (2, 1, 1)
        and seen.attr_value[1][0] == 1
        and seen.attr_value[2][0] == 1
    )
    plain = N.LaunchConfigHandle(s, (7, 1, 1), (32, 1, 1), 0, None, False, False)
    assert plain.launch(0xF01, None) == 0
    assert (
        seen.num_attrs == 0
        and seen.attrs_null
        and seen.params is None
        and tuple(seen.grid) == (7, 1, 1)
    )
    fail("cuLaunchKernelEx", 719)
    assert plain.launch(0xF01, 0) == 719  # a status, not an exception
    raises(ValueError, lambda: N.LaunchConfigHandle(s, (1, 1), (1, 1, 1), 0, None, False, False))
    raises(
        OverflowError, lambda: N.LaunchConfigHandle(s, (1, 1, 1), (1, 1, 1), -1, None, False, False)
    )
    raises(
        TypeError,
        lambda: N.LaunchConfigHandle(object(), (1, 1, 1), (1, 1, 1), 0, None, False, False),
    )
    s.release()
    raises(RuntimeError, lambda: cfg.launch(0xF00, 0), "Stream has been closed")
    assert count("cuLaunchKernelEx") == 3


@check
def dealloc_warns() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    lib.stub_set_busy(s.address, 1)
    fail("cuStreamDestroy", 999)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            raise KeyError("in flight")
        except KeyError:
            del s  # the failure is a warning; the exception in flight survives
            assert sys.exc_info()[0] is KeyError
    assert len(caught) == 1 and caught[0].category is ResourceWarning
    assert "could not release a stream" in str(caught[0].message) and "cuStreamDestroy" in str(
        caught[0].message
    )
    ev = N.EventHandle.adopt(ctx.create_event(0).address, ctx, 0)
    fail("cuEventDestroy", 999)
    a = N.pool_allocate(0x9000, 64, ctx.create_stream(0, None), ctx)
    fail("cuMemFreeAsync", 1, times=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del ev, a
    messages = sorted(str(w.message) for w in caught)
    assert all(w.category is ResourceWarning for w in caught) and len(messages) == 2, messages
    assert "a garbage-collected allocation of 64 bytes at 0x" in messages[0]
    assert "could not release an event" in messages[1]
    # Warnings turned into errors: nowhere to raise them, so dropped (not a crash, not raised).
    d = N.Allocation.adopt(0x42, 16, lambda *a: 1 / 0, None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del d


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


def main() -> None:
    if CHECK != "unbound":
        bind()
    lib.stub_reset()
    CHECKS[CHECK]()
    gc.collect()
    assert errors.value == 0, (
        f"the stub saw {errors.value} misuses (double destroy/free, stale handle)"
    )
    assert lib.stub_depth() == 0, "a context push was not popped"
    print(f"PASS {CHECK}")


if __name__ == "__main__":
    if CHECK == "--list":
        print(" ".join(CHECKS))
    else:
        main()
