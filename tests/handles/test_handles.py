"""The handle layer: the same cases against both backends (native and pure Python), and the
defects the layer exists to prevent (a prepared launch that outlives its config's cache, a
context reset by another library)."""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
from cuda.bindings import driver

import cuda_core._handles._pure as pure
from cuda_core._errors import CUDAWarning
from cuda_core._handles import _backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)
DISABLE_TIMING = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)


def _native():
    try:
        return importlib.import_module("cuda_core._handles._native")
    except ImportError:
        return None


def _backends():
    out = [pytest.param(pure, id="pure")]
    out.append(pytest.param("native", id="native"))
    return out


def _resolve(b):
    if b != "native":
        return b
    mod = _native()
    if mod is None:
        if _compiler_present() and not _backend.REASON.startswith("selected"):
            pytest.fail("a C compiler is present but cuda_core._handles._native was not built")
        pytest.skip("cuda_core._handles._native was not built (no C compiler)")
    mod.set_warning_category(CUDAWarning)  # as _backend does when it loads the module
    return mod


def _compiler_present() -> bool:
    import shutil

    return bool(shutil.which("cc") or shutil.which("gcc"))


# ---------------------------------------------------------------------------------------------
# CPU tier (the protocol's surface in both backends: tests/handles/test_protocol.py).


@pytest.mark.parametrize("b", _backends())
def test_types_match(b):
    b = _resolve(b)
    assert b.types_match((1, 2.0, "x"), (int, float, str))
    assert not b.types_match((1, 2.0), (int, float, str))
    assert not b.types_match((True,), (int,))
    assert b.types_match((), ())


@pytest.mark.parametrize("b", _backends())
def test_adopted_allocation_frees_once(b):
    b = _resolve(b)
    calls = []
    token = object()
    a = b.Allocation.adopt(0x1000, 64, lambda p, n, s: calls.append((p, n, s)), token, None)
    assert (a.ptr, a.size, a.is_open) == (0x1000, 64, True)
    a.close()
    a.close()
    assert calls == [(0x1000, 64, token)] and not a.is_open
    # Collected without close(): freed then, once; a stream given to close() replaces the set one.
    b.Allocation.adopt(0x2000, 8, lambda p, n, s: calls.append((p, n, s)), token, None)
    gc.collect()
    assert calls[-1] == (0x2000, 8, token)
    other = object()
    a2 = b.Allocation.adopt(0x3000, 8, lambda p, n, s: calls.append((p, n, s)), token, None)
    a2.set_stream(other)
    a2.close()
    assert calls[-1] == (0x3000, 8, other)
    a3 = b.Allocation.adopt(0x4000, 8, lambda p, n, s: calls.append((p, n, s)), token, None)
    a3.close(token)
    assert calls[-1] == (0x4000, 8, token) and len(calls) == 4


@pytest.mark.parametrize("b", _backends())
def test_failing_free_on_collection_warns(b):
    b = _resolve(b)

    def free(p, n, s):
        raise RuntimeError("boom")

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        b.Allocation.adopt(0x1000, 8, free, None, None)
        gc.collect()
    # A CUDAWarning (cuda.core 1.3) naming what, its handle and the error.
    assert any(
        issubclass(x.category, CUDAWarning)
        and "could not release a garbage-collected allocation of 8 bytes at 0x1000"
        in str(x.message)
        and str(x.message).endswith("boom")
        for x in w
    ), [str(x.message) for x in w]
    a = b.Allocation.adopt(0x1000, 8, free, None, None)
    with pytest.raises(RuntimeError, match="boom"):
        a.close()  # an explicit close raises what the free raised


@pytest.mark.parametrize("b", _backends())
def test_allocation_in_a_cycle_is_freed_once(b):
    b = _resolve(b)
    calls = []

    class Box:
        pass

    box = Box()
    box.self = box
    box.a = b.Allocation.adopt(
        0x1000, 8, lambda p, n, s: calls.append(p), box, None
    )  # cycle via stream
    del box
    gc.collect()
    assert calls == [0x1000]


def test_pure_stream_finds_its_context_once(monkeypatch):
    # The pure backend's StreamHandle.context against a fake cuStreamGetCtx / cuCtxGetCurrent
    # and registry (the native one: tests/handles/native_stub/drive.py, check stream_context).
    from cuda_core._handles import _pure_common, _pure_streams

    def fake_ctx(address):
        h = object.__new__(pure.ContextHandle)
        h.address, h.device = address, -1
        return h

    ctx = fake_ctx(0xC0)
    asked, calls, current = [], [], [0]

    def registry(address):
        asked.append(address)
        return ctx

    def get_ctx(stream):
        calls.append(int(stream))
        return (driver.CUresult.CUDA_SUCCESS, driver.CUcontext(0xC0))

    monkeypatch.setattr(_pure_common, "_context_of", registry)
    monkeypatch.setattr(_pure_streams.driver, "cuStreamGetCtx", get_ctx)
    monkeypatch.setattr(
        _pure_streams.driver,
        "cuCtxGetCurrent",
        lambda: (driver.CUresult.CUDA_SUCCESS, driver.CUcontext(current[0])),
    )
    b = pure.StreamHandle.borrow(0x1234)
    assert b.context() is ctx and b.ctx is ctx and calls == [0x1234] and asked == [0xC0]
    assert b.context() is ctx and calls == [0x1234] and asked == [0xC0]  # kept
    b.release()
    assert b.context() is ctx  # known: read after release too
    monkeypatch.setattr(_pure_common, "_context_of", lambda address: object())
    with pytest.raises(TypeError, match="not a ContextHandle"):
        pure.StreamHandle.borrow(0x1234).context()
    monkeypatch.setattr(_pure_common, "_context_of", registry)
    monkeypatch.setattr(
        _pure_common, "_make_error", lambda status, api: RuntimeError(f"{api}: {status}")
    )
    monkeypatch.setattr(
        _pure_streams.driver, "cuStreamGetCtx", lambda s: (driver.CUresult(400), None)
    )
    failed = pure.StreamHandle.borrow(0x1234)
    with pytest.raises(RuntimeError, match="cuStreamGetCtx: 400"):
        failed.context()
    assert failed.ctx is None
    for token in (0, 1, 2):  # the current context's, never kept; None when none is current
        t = pure.StreamHandle.borrow(token)
        current[0] = 0
        assert t.context() is None
        current[0] = 0xC0
        assert t.context() is ctx and t.ctx is None
        t.release()
        assert t.context() is ctx  # a token's answer needs no stream


def test_backend_selection_is_reported():
    assert _backend.backend in (pure, _native())
    assert isinstance(_backend.REASON, str) and _backend.REASON
    assert _backend.NATIVE == (_backend.backend is not pure)


# ---------------------------------------------------------------------------------------------
# GPU tier: each backend against the real driver.


@pytest.fixture
def hb(request, dev):
    """The backend under test, bound to the driver (both can be bound in one process)."""
    from cuda_core._handles._contexts import context_handle
    from cuda_core._utils import make_error

    b = _resolve(request.param)
    # The library's registry for the backend in use; a plain one for the other (its handles).
    context_of = context_handle if b is _backend.backend else b.ContextHandle
    if b is pure:
        b.bind(
            {"cuLaunchKernelEx": _backend.entry_point("cuLaunchKernelEx")}, make_error, context_of
        )
    else:
        b.bind({n: _backend.entry_point(n) for n in b.entry_point_names()}, make_error, context_of)
    return b


def _ctx(hb, dev):
    return hb.ContextHandle(int(dev._primary_ctx()), dev.device_id)


def _sleep(dev, s_address, ns=50_000_000):
    from tests.helpers.kernels import timing_kernel

    k = timing_kernel("sleep_ns", dev.arch)
    from cuda_core import Stream

    k.launch(Stream.from_handle(s_address), 1, 1, ctypes.c_uint64(ns))


gpu_backends = pytest.mark.parametrize("hb", _backends(), indirect=True)


@pytest.mark.gpu
@gpu_backends
def test_idle_streams_are_pooled_and_busy_ones_destroyed(hb, dev):
    ctx = _ctx(hb, dev)
    s = ctx.create_stream(NON_BLOCKING, None)
    assert s.is_owned and s.ctx is ctx and s.address
    a = s.address
    s.release()
    s.release()  # idempotent
    assert s.is_released and ctx.pooled()[0] == 1
    s2 = ctx.create_stream(NON_BLOCKING, None)
    assert s2.address == a and ctx.pooled()[0] == 0
    assert s2.query()
    _sleep(dev, s2.address)
    assert not s2.query()
    s2.release()  # busy: destroyed (after its work), not pooled
    assert ctx.pooled()[0] == 0
    other = ctx.create_stream(0, None)  # other flags: its own pool
    other.release()
    assert ctx.create_stream(NON_BLOCKING, None).address != other.address
    dev.sync()
    for call in (s.sync, s.query, lambda: s.memcpy(0, 0, 0)):
        with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
            call()


@pytest.mark.gpu
@gpu_backends
def test_borrowed_stream_is_never_destroyed(hb, dev):
    ctx = _ctx(hb, dev)
    owned = ctx.create_stream(NON_BLOCKING, None)
    keep = object()
    b = hb.StreamHandle.borrow(owned.address, None, keep)
    assert not b.is_owned and b.owner is keep
    b.sync()
    b.release()
    assert b.owner is None and b.is_released
    owned.sync()  # still alive
    assert ctx.pooled()[0] == 0
    owned.release()


@pytest.mark.gpu
@gpu_backends
def test_borrowed_stream_finds_its_context_once(hb, dev):
    ctx = _ctx(hb, dev)
    owned = ctx.create_stream(NON_BLOCKING, None)
    assert owned.context() is ctx  # known from creation
    b = hb.StreamHandle.borrow(owned.address)
    assert b.ctx is None
    found = b.context()  # cuStreamGetCtx, then the registry bound with the backend
    assert isinstance(found, hb.ContextHandle) and found.address == ctx.address
    assert b.ctx is found and b.context() is found  # kept
    b.release()
    assert b.context() is found  # known: read after release too
    unknown = hb.StreamHandle.borrow(owned.address)
    unknown.release()
    with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
        unknown.context()
    # A default-stream token: the current context's, never kept.
    token = hb.StreamHandle.borrow(int(driver.CU_STREAM_LEGACY))
    assert token.context().address == int(dev._primary_ctx()) and token.ctx is None
    owned.release()


@pytest.mark.gpu
@gpu_backends
def test_event_pools(hb, dev):
    ctx = _ctx(hb, dev)
    s = ctx.create_stream(NON_BLOCKING, None)
    e = ctx.create_event(DISABLE_TIMING)
    assert not e.recorded and e.query()
    a = e.address
    e.release()
    assert ctx.pooled() == (0, 1, 0)
    e = ctx.create_event(DISABLE_TIMING)
    assert e.address == a
    s.record(e)
    assert e.recorded
    e.sync()
    e.release()
    assert ctx.pooled() == (0, 0, 1)  # recorded: only record_event draws from that pool
    fresh = ctx.create_event(DISABLE_TIMING)
    assert fresh.address != a and ctx.pooled() == (0, 0, 1)
    _sleep(dev, s.address)
    r = ctx.record_event(DISABLE_TIMING, s)
    assert r.address == a and r.recorded and not r.query()
    r.sync()
    assert r.query()
    fresh.expose()  # its handle was handed out: it may be recorded behind our back
    fresh.release()
    assert ctx.pooled() == (0, 0, 1)
    for call in (fresh.query, fresh.sync, lambda: fresh.record(s)):
        with pytest.raises(RuntimeError, match=r"^Event has been closed"):
            call()
    w = ctx.create_event(DISABLE_TIMING)
    s.wait(w)
    r.release()
    w.release()
    # An interprocess event is destroyed at release, never pooled: another process may hold it.
    before = ctx.pooled()
    ipc_flags = DISABLE_TIMING | int(driver.CUevent_flags.CU_EVENT_INTERPROCESS)
    first = ctx.record_event(ipc_flags, s)
    first.sync()
    first.release()
    assert ctx.pooled() == before
    second = ctx.record_event(ipc_flags, s)
    assert second.recorded and ctx.pooled() == before
    second.release()
    s.release()


@pytest.mark.gpu
@gpu_backends
def test_errors_go_through_the_funnel(hb, dev):
    from cuda_core import CUDAError

    ctx = _ctx(hb, dev)
    with pytest.raises(CUDAError, match="cuStreamCreate") as info:
        ctx.create_stream(0xFFFF, None)
    assert info.value.code == int(driver.CUresult.CUDA_ERROR_INVALID_VALUE)
    with pytest.raises(CUDAError, match="cuEventCreate"):
        ctx.create_event(0xFFFF)
    assert hb.ctx_get_device() == dev.device_id


def _pool_used(dev) -> int:
    pool = driver.cuDeviceGetMemPool(dev._cu_device)[1]
    attr = driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_USED_MEM_CURRENT
    return int(driver.cuMemPoolGetAttribute(pool, attr)[1])


@pytest.mark.gpu
@gpu_backends
def test_pool_allocations_are_freed_once(hb, dev):
    ctx = _ctx(hb, dev)
    s = ctx.create_stream(NON_BLOCKING, None)
    pool = int(driver.cuDeviceGetMemPool(dev._cu_device)[1])
    s.sync()
    base = _pool_used(dev)
    a = hb.pool_allocate(pool, 1 << 20, s, ctx)
    assert a.ptr and a.size == 1 << 20 and a.stream is s and a.ctx is ctx
    s.memcpy(a.ptr, a.ptr, 16)
    s.sync()
    assert _pool_used(dev) >= base + (1 << 20)
    a.close()
    a.close()
    s.sync()
    assert _pool_used(dev) == base
    hb.pool_allocate(pool, 1 << 20, s, ctx)  # dropped: freed on collection
    gc.collect()
    s.sync()
    assert _pool_used(dev) == base
    b = hb.pool_allocate(pool, 4096, s, ctx)
    s.release()  # its deallocation stream closed: freed on the legacy default stream
    b.close()
    dev.sync()
    assert _pool_used(dev) == base


SHAPE_SRC = r"""
extern "C" __global__ void shape(unsigned* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) { out[0] = gridDim.x; out[1] = blockDim.x; }
    atomicAdd(&out[2], 1u);
}
"""


def _shape_kernel(dev):
    from cuda_core import Program, ProgramOptions

    prog = Program(SHAPE_SRC, "c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    return prog.compile("cubin").get_kernel("shape")


def _read3(dev, buf, stream):
    out = np.zeros(3, np.uint32)
    buf.copy_to(out, stream=stream)
    return out.tolist()


@pytest.mark.gpu
@gpu_backends
def test_launch_config_handle(hb, dev):
    ker = _shape_kernel(dev)
    ctx = _ctx(hb, dev)
    s = ctx.create_stream(NON_BLOCKING, None)
    from cuda_core import Stream

    stream = Stream.from_handle(s.address)
    buf = dev.allocate(12, stream=stream)
    buf.fill(0, stream=stream)
    cfg = hb.LaunchConfigHandle(s, (5, 1, 1), (64, 1, 1), 0, None, False, False)
    assert cfg.stream is s
    p = ctypes.c_uint64(buf.handle)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(p))
    assert cfg.launch(int(ker._handle), ctypes.addressof(params)) == 0
    assert _read3(dev, buf, stream) == [5, 64, 320]
    s.release()
    with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
        cfg.launch(int(ker._handle), ctypes.addressof(params))
    buf.close(dev.default_stream)


# ---------------------------------------------------------------------------------------------
# The defects the handle layer fixes, through the public API.


@pytest.mark.gpu
def test_prepared_launch_keeps_its_config_after_its_config_served_40_streams(dev):
    """A PreparedLaunch holds its own LaunchConfigHandle (and through it its stream): its
    config's per-stream cache being cleared and refilled cannot change what it launches."""
    from cuda_core import LaunchConfig, PreparedLaunch, launch

    ker = _shape_kernel(dev)
    s0 = dev.create_stream()
    out = dev.allocate(12, stream=s0)
    scratch = dev.allocate(12, stream=s0)
    out.fill(0, stream=s0)
    cfg = LaunchConfig(grid=7, block=32)
    other = LaunchConfig(grid=99, block=64)
    p = PreparedLaunch(s0, cfg, ker, out)
    s0.sync()
    streams = [dev.create_stream() for _ in range(40)]
    for s in streams:
        launch(s, cfg, ker, scratch)
        launch(s, other, ker, scratch)
    for s in streams:
        s.sync()
        s.close()
    gc.collect()
    # Block s0 on the host, launch, and check the launch waits for s0 (its own stream).
    gate = threading.Event()
    s0.launch_host_func(gate.wait, 30)
    p()
    time.sleep(0.2)
    side = dev.create_stream()
    assert _read3(dev, out, side) == [0, 0, 0], (
        "the prepared launch ran before its stream was released"
    )
    gate.set()
    s0.sync()
    assert _read3(dev, out, side) == [7, 32, 7 * 32]
    side.close()
    out.close(s0)
    scratch.close(s0)
    s0.close()


RESET_CHECK = r"""
import gc, numpy as np
from cuda.bindings import driver
import cuda_core as cc, cuda_core._handles._backend as b
dev = cc.Device(); dev.set_current()
print("backend", b.NATIVE)
# Fill the idle pools, then have "another library" reset the primary context.
for _ in range(3):
    s = dev.create_stream(); e = dev.create_event(); s.record(e); s.sync(); s.close(); e.close()
    buf = dev.allocate(1 << 20); buf.close(); dev.sync()
keep_stream = dev.create_stream()
keep_buf = dev.allocate(4096, stream=keep_stream)
assert driver.cuDevicePrimaryCtxReset(dev._cu_device)[0] == 0
dev.set_current()
streams = [dev.create_stream() for _ in range(4)]
events = [dev.create_event() for _ in range(4)]
code = 'extern "C" __global__ void k(int* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 3 * i; }'
ker = cc.Program(code, "c++", options=cc.ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("k")
for s, e in zip(streams, events):
    buf = dev.allocate(4 * 32, stream=s)
    cc.launch(s, cc.LaunchConfig(grid=1, block=32), ker, buf, np.int32(32))
    s.record(e)
    e.sync()
    host = np.zeros(32, np.int32)
    buf.copy_to(host, stream=s)
    assert host.tolist() == [3 * i for i in range(32)], host
    buf.close()
    s.close(); e.close()
# The objects made before the reset are dead; closing or dropping them is harmless.
keep_buf.close(); keep_stream.close()
del keep_buf, keep_stream
gc.collect()
print("OK after reset")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("choice", ["native", "python"])
def test_objects_work_after_another_library_resets_the_context(choice):
    env = {
        **os.environ,
        "CUDA_CORE_BACKEND": choice,
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RESET_CHECK)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK after reset" in out.stdout
