"""Stream: options, priorities, borrowed streams (PyTorch, CuPy), wait ordering, lifetimes."""

from __future__ import annotations

import ctypes
import gc
import threading
import weakref
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import (
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    Device,
    Event,
    Stream,
    StreamOptions,
)
from cuda_core._utils import check_or_create_options, handle_return
from tests.helpers.kernels import DeviceMemory, timing_kernel

_OK = driver.CUresult.CUDA_SUCCESS
_NON_BLOCKING = int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)


# -- CPU tier: options -------------------------------------------------------------------------


def test_stream_options_defaults():
    opts = StreamOptions()
    assert opts.nonblocking is True
    assert opts.priority is None
    assert StreamOptions(nonblocking=False, priority=-1) == StreamOptions(False, -1)


@pytest.mark.parametrize("what", ["invalid_event", 5, object(), None], ids=repr)
def test_wait_refuses_what_is_not_waitable(what):
    # cuda.core raises ValueError here; ours is a TypeError too (the class we raise for a
    # wrong argument type), and names what can be waited on. No driver call is made.
    with pytest.raises(ValueError, match="event_or_stream must be an Event, a Stream") as info:
        LEGACY_DEFAULT_STREAM.wait(what)
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("bad", ["high", 1.5, True])
def test_stream_options_priority_type(bad):
    with pytest.raises(TypeError) as info:
        StreamOptions(priority=bad)
    # cuda.core's (Cython's) wording first, then ours
    assert str(info.value).startswith(f"Expected int, got {type(bad).__name__}: priority must be")
    assert f"(got {bad!r})" in str(info.value)


def test_stream_options_from_dict_and_unknown_field():
    assert check_or_create_options(StreamOptions, {"priority": 0}) == StreamOptions(priority=0)
    with pytest.raises(TypeError, match="prio"):
        check_or_create_options(StreamOptions, {"prio": 0}, "options")


def test_a_stream_keeps_only_its_handle_and_ordinal():
    # Address, closed state and context are read from the StreamHandle: no second source.
    from cuda_core._stream import Stream as S
    from cuda_core._stream import _borrow

    assert set(S.__slots__) == {"__weakref__", "_device_id", "_h", "_nonblocking", "_priority"}
    s, same = _borrow(S, 0x1234, None), _borrow(S, 0x1234, None)
    assert int(s) == 0x1234 and isinstance(s.handle, driver.CUstream) and int(s.handle) == 0x1234
    assert not s.is_closed and s == same and hash(s) == hash(same)
    assert s.__cuda_stream__() == (0, 0x1234)
    s.close()  # borrowed: nothing destroyed, no driver call
    assert s._h.is_released and s.is_closed and s != same
    assert isinstance(s.handle, driver.CUstream) and int(s.handle) == 0  # as in cuda.core
    assert int(s) == 0x1234 and repr(s) == "<Stream handle=0x1234 closed>"
    for call in (s.sync, s.__cuda_stream__, lambda: s.context, lambda: s.device):
        with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
            call()
    with pytest.raises(RuntimeError, match=r"^Stream has been closed: nothing can be recorded"):
        s.record()
    with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
        s.launch_host_func(print)


# -- GPU tier -----------------------------------------------------------------------------------


@pytest.fixture
def dev() -> Device:
    d = Device(0)
    d.set_current()
    return d


def _flags(s: Stream) -> int:
    return int(handle_return(driver.cuStreamGetFlags(s.handle), "cuStreamGetFlags"))


def _alive(handle: int) -> bool:
    err = driver.cuStreamQuery(driver.CUstream(handle))[0]
    return err in (_OK, driver.CUresult.CUDA_ERROR_NOT_READY)


@pytest.mark.gpu
def test_create_stream_defaults(dev):
    s = dev.create_stream()
    try:
        assert s.is_nonblocking is True
        assert _flags(s) & _NON_BLOCKING
        assert s.device is dev
        assert s.context == dev.context
        assert s.priority == int(handle_return(driver.cuStreamGetPriority(s.handle)))
        h = int(s.handle)
        assert h not in (0, 1, 2)
        assert s.__cuda_stream__() == (0, h)
        assert not s.is_closed
        s.sync()
    finally:
        s.close()
    assert s.is_closed
    s.close()  # idempotent
    assert s.is_closed


@pytest.mark.gpu
def test_blocking_stream_from_dict_options(dev):
    with dev.create_stream(options={"nonblocking": False}) as s:
        assert s.is_nonblocking is False
        assert _flags(s) & _NON_BLOCKING == 0
    assert s.is_closed


@pytest.mark.gpu
def test_priorities(dev):
    least, greatest = handle_return(driver.cuCtxGetStreamPriorityRange())
    for p in sorted({least, greatest}):
        with dev.create_stream(options=StreamOptions(priority=p)) as s:
            assert s.priority == p
            assert int(handle_return(driver.cuStreamGetPriority(s.handle))) == p
    for bad in (greatest - 1, least + 1):
        with pytest.raises(ValueError) as info:
            dev.create_stream(options=StreamOptions(priority=bad))
        assert "priority" in str(info.value)
        assert str(bad) in str(info.value)


@pytest.mark.gpu
def test_stream_constructor_without_current_context():
    box: dict[str, Any] = {}

    def fresh() -> None:
        try:
            with Stream() as s:
                box["device"] = s.device.device_id
                box["nonblocking"] = s.is_nonblocking
                s.sync()
            box["closed"] = s.is_closed
            with Stream(options=StreamOptions(nonblocking=False)) as s2:
                box["blocking"] = not s2.is_nonblocking
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=fresh)
    t.start()
    t.join(60)
    if "error" in box:
        raise box["error"]
    assert box == {"device": 0, "nonblocking": True, "closed": True, "blocking": True}


@pytest.mark.gpu
def test_a_borrowed_streams_handle_learns_its_context_once(dev):
    # A stream made elsewhere: its handle knows no context until first asked, then carries the
    # context's one registry handle (the same one an owned stream of that context holds).
    owned = dev.create_stream()
    b = Stream.from_handle(int(owned.handle))
    assert b._h.ctx is None
    assert b.context == owned.context
    assert b._h.ctx is owned._h.ctx
    assert b._h.context() is owned._h.ctx  # found once, then read from the handle
    # A borrowed stream first used by a copy: its handle finds the context there.
    c = Stream.from_handle(int(owned.handle))
    dev.allocate(64, stream=c).close()
    assert c._h.ctx is owned._h.ctx
    # The default-stream tokens follow the current context: never pinned.
    legacy = Stream.from_handle(int(driver.CU_STREAM_LEGACY))
    assert legacy.context == dev.context
    assert legacy._h.context() is owned._h.ctx and legacy._h.ctx is None
    owned.close()
    b.close()
    assert b._h.context() is owned._h.ctx  # known: still read after close
    with pytest.raises(RuntimeError, match=r"^Stream has been closed"):
        b.context  # noqa: B018  (the property raises)


@pytest.mark.gpu
def test_from_handle_is_borrowed(dev):
    raw = handle_return(driver.cuStreamCreate(_NON_BLOCKING))
    try:
        b = Stream.from_handle(int(raw))
        assert int(b.handle) == int(raw)
        assert b == Stream.from_handle(int(raw)) and hash(b) == hash(Stream.from_handle(int(raw)))
        b.sync()
        b.close()
        b.close()
        assert b.is_closed
        assert _alive(int(raw)), "closing a borrowed stream destroyed it"
        b2 = Stream.from_handle(int(raw))
        del b2
        gc.collect()
        assert _alive(int(raw)), "collecting a borrowed stream destroyed it"
    finally:
        handle_return(driver.cuStreamDestroy(raw))


class _Foreign:
    """Any object with ``__cuda_stream__``, as other libraries expose their streams."""

    def __init__(self, handle: int, keep: Any = None) -> None:
        self.handle = handle
        self.keep = keep

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle)


@pytest.mark.gpu
def test_cuda_stream_protocol_object_is_borrowed_and_kept_alive(dev):
    raw = handle_return(driver.cuStreamCreate(_NON_BLOCKING))
    try:
        obj = _Foreign(int(raw))
        ref = weakref.ref(obj)
        s = dev.create_stream(obj)
        del obj
        gc.collect()
        assert ref() is not None, "the wrapped object was not kept alive"
        assert int(s.handle) == int(raw)
        s.sync()
        s.close()
        assert _alive(int(raw))
        # A cuda_core stream is itself such an object.
        with dev.create_stream() as owner:
            borrowed = dev.create_stream(owner)
            assert borrowed == owner
            borrowed.close()
            assert _alive(int(owner.handle))
    finally:
        handle_return(driver.cuStreamDestroy(raw))


@pytest.mark.gpu
def test_object_without_protocol_is_rejected(dev):
    with pytest.raises(TypeError):
        dev.create_stream(object())


@pytest.mark.gpu
def test_equality_and_hash(dev):
    with dev.create_stream() as a, dev.create_stream() as b:
        assert a != b
        assert a == Stream.from_handle(int(a.handle))
        assert len({a, b, Stream.from_handle(int(a.handle))}) == 2


@pytest.mark.gpu
def test_default_stream_constants(dev):
    assert int(LEGACY_DEFAULT_STREAM.handle) == int(driver.CU_STREAM_LEGACY)
    assert int(PER_THREAD_DEFAULT_STREAM.handle) == int(driver.CU_STREAM_PER_THREAD)
    LEGACY_DEFAULT_STREAM.sync()
    PER_THREAD_DEFAULT_STREAM.sync()
    ds = dev.default_stream
    assert ds is dev.default_stream
    ds.sync()
    assert not ds.is_closed


@pytest.mark.gpu
def test_record_returns_events(dev):
    with dev.create_stream() as s:
        e = s.record()
        assert isinstance(e, Event)
        assert s.record(e) is e
        e2 = s.record(options={"timing_enabled": True})
        s.sync()
        assert e.is_done and e2.is_done
        e.close()
        e2.close()


def _run_flag_pair(dev: Device, how: str) -> tuple[int, int]:
    """Stream 1 sets a flag after 200 ms; stream 2 spins on it. Returns (polls, flag seen)."""
    set_flag = timing_kernel("set_flag_after", dev.arch)
    spin = timing_kernel("spin_on_flag", dev.arch)
    with DeviceMemory(4) as flag, DeviceMemory(16) as out:
        dev.sync()
        with dev.create_stream() as s1, dev.create_stream() as s2:
            set_flag.launch(s1, 1, 1, flag.arg(), ctypes.c_uint64(200_000_000))
            if how == "stream":
                s2.wait(s1)
            elif how == "event":
                s2.wait(s1.record())
            spin.launch(s2, 1, 1, flag.arg(), out.arg(), ctypes.c_uint64(5_000_000_000))
            s2.sync()
            s1.sync()
        polls, seen = out.read(np.uint64)
    return int(polls), int(seen)


@pytest.mark.gpu
def test_wait_orders_streams(dev):
    # Control: without wait the spinning kernel starts at once and polls until the flag appears.
    polls, seen = _run_flag_pair(dev, "none")
    assert seen == 1
    assert polls > 0, "without wait the spinning kernel should have started before the flag was set"
    for how in ("stream", "event"):
        polls, seen = _run_flag_pair(dev, how)
        assert seen == 1, how
        assert polls == 0, f"wait({how}) did not hold back the second stream ({polls} polls)"


def _torch_like(stream: Any, handle: int) -> Any:
    return stream if hasattr(stream, "__cuda_stream__") else _Foreign(handle, keep=stream)


@pytest.mark.gpu
def test_borrowed_pytorch_stream(dev):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch was built without CUDA or sees no GPU")
    fill = timing_kernel("fill_i32", dev.arch)
    ts = torch.cuda.Stream(device=0)
    t = torch.zeros(1024, dtype=torch.int32, device="cuda:0")
    torch.cuda.synchronize()
    s = dev.create_stream(_torch_like(ts, ts.cuda_stream))
    assert int(s.handle) == ts.cuda_stream
    fill.launch(s, 4, 256, ctypes.c_uint64(t.data_ptr()), ctypes.c_int(1024), ctypes.c_int(7))
    s.sync()
    assert bool((t == 7).all())
    s.close()
    del s
    gc.collect()
    assert _alive(ts.cuda_stream), "closing the borrowed PyTorch stream destroyed it"
    with torch.cuda.stream(ts):
        t2 = t + 1
    ts.synchronize()
    assert bool((t2 == 8).all())


@pytest.mark.gpu
def test_borrowed_cupy_stream(dev):
    cp = pytest.importorskip("cupy")
    fill = timing_kernel("fill_i32", dev.arch)
    cs = cp.cuda.Stream(non_blocking=True)
    a = cp.zeros(1024, dtype=cp.int32)
    cp.cuda.Device(0).synchronize()
    s = dev.create_stream(_torch_like(cs, cs.ptr))
    assert int(s.handle) == cs.ptr
    fill.launch(s, 4, 256, ctypes.c_uint64(a.data.ptr), ctypes.c_int(1024), ctypes.c_int(5))
    s.sync()
    assert int((a == 5).sum()) == 1024
    s.close()
    del s
    gc.collect()
    assert _alive(cs.ptr), "closing the borrowed CuPy stream destroyed it"
    with cs:
        b = a * 2
    cs.synchronize()
    assert int((b == 10).sum()) == 1024
