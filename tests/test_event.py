"""Event: options, timing, completion, lifetimes and IPC between two processes."""

from __future__ import annotations

import ctypes
import multiprocessing
import pickle
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any

import pytest

from cuda_core import Device, Event, EventOptions, IPCEventDescriptor
from cuda_core._utils import check_or_create_options
from tests.helpers.kernels import timing_kernel

# -- CPU tier -------------------------------------------------------------------------------------


def test_event_options_defaults():
    opts = EventOptions()
    assert (opts.timing_enabled, opts.blocking_sync, opts.ipc_enabled) == (False, False, False)
    assert check_or_create_options(EventOptions, {"timing_enabled": True}).timing_enabled is True


@pytest.mark.parametrize("field", ["timing_enabled", "blocking_sync", "ipc_enabled"])
def test_event_options_types(field):
    with pytest.raises(TypeError) as info:
        EventOptions(**{field: "yes"})
    # cuda.core's (Cython's) wording first, then ours
    assert str(info.value).startswith(f"Expected bool, got str: {field} must be")
    assert "(got 'yes')" in str(info.value)


def test_ipc_events_cannot_time():
    # As in cuda.core: the options are accepted; making an event from them is refused (every
    # path that makes an event turns the options into flags first).
    opts = EventOptions(ipc_enabled=True, timing_enabled=True)
    with pytest.raises(
        TypeError, match="timing_enabled must be False when ipc_enabled is True"
    ) as info:
        opts._flags()
    assert isinstance(info.value, ValueError)  # the class it was before cuda.core's TypeError


def test_event_is_made_by_factories():
    with pytest.raises(RuntimeError, match=r"create_event|record"):
        Event()


# -- GPU tier -------------------------------------------------------------------------------------

_TIMED = {"timing_enabled": True}


@pytest.fixture
def dev() -> Device:
    d = Device(0)
    d.set_current()
    return d


def _sleep(dev: Device, stream: Any, ms: float) -> None:
    timing_kernel("sleep_ns", dev.arch).launch(stream, 1, 1, ctypes.c_uint64(int(ms * 1e6)))


@pytest.mark.gpu
@pytest.mark.parametrize("ms", [50.0, 120.0])
def test_elapsed_time_of_a_sleeping_kernel(dev, ms):
    with dev.create_stream() as s:
        _sleep(dev, s, 0)  # load the module before timing
        s.sync()
        start = s.record(options=_TIMED)
        _sleep(dev, s, ms)
        end = s.record(options=EventOptions(timing_enabled=True))
        end.sync()
        elapsed = end - start
        assert isinstance(elapsed, float)
        assert ms * 0.8 <= elapsed <= ms * 1.2, f"measured {elapsed:.2f} ms for a {ms} ms kernel"
        start.close()
        end.close()


@pytest.mark.gpu
def test_timing_errors_say_why(dev):
    with dev.create_stream() as s:
        untimed_a, untimed_b = s.record(), s.record()
        s.sync()
        with pytest.raises(RuntimeError, match="timing"):
            untimed_b - untimed_a
        never = dev.create_event(_TIMED)
        start = s.record(options=_TIMED)
        s.sync()
        never.sync()  # waiting on an event records nothing
        s.wait(never)
        with pytest.raises(RuntimeError, match="never recorded"):
            never - start
        _sleep(dev, s, 0)
        s.sync()
        _sleep(dev, s, 400)
        end = s.record(options=_TIMED)
        with pytest.raises(RuntimeError, match="complet"):
            end - start
        end.sync()
        assert end - start > 0


@pytest.mark.gpu
def test_is_done_and_sync(dev):
    with dev.create_stream() as s:
        _sleep(dev, s, 0)
        s.sync()
        _sleep(dev, s, 300)
        e = s.record()
        assert e.is_done is False
        e.sync()
        assert e.is_done is True
        assert e.device is dev
        assert int(e.handle) != 0


@pytest.mark.gpu
def test_blocking_sync_event(dev):
    with dev.create_stream() as s:
        _sleep(dev, s, 0)
        _sleep(dev, s, 50)
        e = s.record(options={"blocking_sync": True})
        t0 = time.perf_counter()
        e.sync()
        assert e.is_done
        assert time.perf_counter() - t0 < 5


@pytest.mark.gpu
def test_close_twice_and_context_manager(dev):
    e = dev.create_event()
    assert not e.is_closed
    e.close()
    e.close()
    assert e.is_closed
    with dev.create_event(_TIMED) as e2:
        assert not e2.is_closed
    assert e2.is_closed


def _ipc_child(conn: Any) -> None:
    """Child process: open the parent's event, wait for it, report what it saw."""
    try:
        from cuda_core import Device, Event

        dev = Device(0)
        dev.set_current()
        conn.send(("ready", None))
        ev = Event.from_ipc_descriptor(conn.recv())
        done_before = ev.is_done
        t0 = time.perf_counter()
        ev.sync()
        waited = time.perf_counter() - t0
        s = dev.create_stream()
        s.wait(ev)
        s.sync()
        s.close()
        ev.close()
        conn.send(("ok", (done_before, waited)))
    except BaseException as exc:  # reported to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def _recv(conn: Any, timeout: float) -> Any:
    if not conn.poll(timeout):
        raise AssertionError(f"the child process said nothing for {timeout} s")
    return conn.recv()


@pytest.mark.gpu
def test_ipc_event_round_trip_between_processes(dev):
    mp = multiprocessing.get_context("spawn")
    parent, child = mp.Pipe()
    proc = mp.Process(target=_ipc_child, args=(child,))
    proc.start()
    ev = None
    try:
        kind, payload = _recv(parent, 120)
        assert kind == "ready", payload
        with dev.create_stream() as s:
            _sleep(dev, s, 0)
            s.sync()
            _sleep(dev, s, 1000)
            ev = s.record(options=EventOptions(ipc_enabled=True))  # recorded once, when made
            desc = ev.ipc_descriptor
            assert pickle.loads(pickle.dumps(desc)) == desc
            parent.send(desc)
            kind, payload = _recv(parent, 60)
            assert kind == "ok", payload
            done_before, waited = payload
            assert done_before is False, "the child saw the event complete before the kernel ended"
            assert waited > 0.3, f"the child's sync returned after {waited:.3f} s"
            s.sync()
        assert ev.is_done
    finally:
        proc.join(60)
        if proc.is_alive():
            proc.kill()
        if ev is not None:
            ev.close()
    assert proc.exitcode == 0


@pytest.mark.gpu
def test_ipc_event_rules(dev):
    s = dev.create_stream()
    with pytest.raises(TypeError, match="recorded when it is made"):
        dev.create_event(EventOptions(ipc_enabled=True))
    with pytest.raises(TypeError, match="timing_enabled must be False"):
        s.record(options={"ipc_enabled": True, "timing_enabled": True})
    ev = s.record(options=EventOptions(ipc_enabled=True))
    assert ev.is_ipc_enabled and not ev.is_timing_enabled
    with pytest.raises(TypeError, match="recorded once"):
        s.record(ev)
    with pytest.raises(TypeError, match="only through multiprocessing"):
        pickle.dumps(ev)
    desc = ev.ipc_descriptor
    assert isinstance(desc, IPCEventDescriptor) and pickle.loads(pickle.dumps(desc)) == desc
    plain = s.record()
    with pytest.raises(RuntimeError, match="not IPC-enabled"):
        _ = plain.ipc_descriptor
    with pytest.raises(RuntimeError, match="not IPC-enabled"):
        ForkingPickler.dumps(plain)
    ev.close()
    with pytest.raises(RuntimeError, match="closed"):
        _ = ev.ipc_descriptor
    plain.close()
    s.close()
