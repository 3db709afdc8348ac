"""The hot driver calls: the compiled accelerator and the cuda.bindings path agree."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from cuda.bindings import driver

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, **env: str) -> str:
    full_env = {**os.environ, **env, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full_env, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_switch_off_by_environment():
    out = _run("import cuda_core._fast as f; print(f.ENABLED)", CUDA_CORE_NO_FASTPATH="1")
    assert out.strip() == "False"


def test_accelerator_is_built_where_a_compiler_is():
    # The README's install builds it (setup.py); a missing build means the slow path in use.
    try:
        from cuda_core import _fastpath  # noqa: F401
    except ImportError:
        pytest.skip("cuda_core._fastpath was not built (no C compiler at install time)")
    import cuda_core._fast as f

    assert f._c is not None


CHECK = """
import cuda_core as cc, cuda_core._fast as f
from cuda.bindings import driver
dev = cc.Device(); dev.set_current()
assert f.ctx_get_device() == int(driver.cuCtxGetDevice()[1]) == dev.device_id
s = dev.create_stream()
e = s.record(options={"timing_enabled": True})
e.sync()
assert e.is_done and f.event_query(e._int) == 0
assert f.stream_query(s._int) == 0
assert cc.Device() is dev
print("ENABLED", f.ENABLED)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("off", ["0", "1"])
def test_both_paths_work_on_a_gpu(off):
    out = _run(CHECK, CUDA_CORE_NO_FASTPATH=off)
    if off == "1":
        assert "ENABLED False" in out
    else:
        try:
            from cuda_core import _fastpath  # noqa: F401
        except ImportError:
            pytest.skip("cuda_core._fastpath was not built")
        assert "ENABLED True" in out


@pytest.mark.gpu
def test_idle_stream_and_event_handles_are_reused():
    from cuda_core import Device

    dev = Device()
    dev.set_current()
    s = dev.create_stream()
    h = int(s.handle)
    s.close()
    s2 = dev.create_stream()
    assert int(s2.handle) == h, "an idle stream should be recycled"
    assert not s2.is_closed and s2.is_nonblocking
    s2.sync()
    e = dev.create_event()
    eh = int(e.handle)
    e.close()
    e2 = dev.create_event()
    assert int(e2.handle) == eh
    assert e2.is_done
    # A stream with a different priority does not come from that pool.
    lo, hi = driver.cuCtxGetStreamPriorityRange()[1:]
    if lo != hi:
        s3 = dev.create_stream(options={"priority": hi})
        assert s3.priority == hi
        s3.close()
    s2.close()
    e2.close()


@pytest.mark.gpu
def test_busy_stream_is_not_recycled():
    from cuda_core import Device
    from tests.helpers.kernels import timing_kernel

    dev = Device()
    dev.set_current()
    spin = timing_kernel("sleep_ns", dev.arch)
    import ctypes

    from cuda_core import _stream

    s = dev.create_stream()
    h = int(s.handle)
    spin.launch(s, 1, 1, ctypes.c_uint64(100_000_000))
    s.close()  # work still running: the handle is destroyed (after the work), not pooled
    pooled = [address for pool in _stream._pool.values() for _, address in pool]
    assert h not in pooled, "a stream with pending work must not be recycled"
    dev.sync()


@pytest.mark.gpu
def test_busy_event_is_not_recycled():
    import ctypes

    from cuda_core import Device, _event
    from tests.helpers.kernels import timing_kernel

    dev = Device()
    dev.set_current()
    spin = timing_kernel("sleep_ns", dev.arch)
    s = dev.create_stream()

    def pooled() -> list[int]:
        return [address for pool in _event._pool.values() for _, address in pool]

    # Recorded by Stream.record behind a sleeping kernel.
    e = dev.create_event()
    spin.launch(s, 1, 1, ctypes.c_uint64(100_000_000))
    s.record(e)
    h = e._int
    e.close()
    assert h not in pooled(), "an event with pending work must not be recycled"
    # Recorded by someone given .handle (cuda.bindings directly): still checked before pooling.
    e2 = dev.create_event()
    spin.launch(s, 1, 1, ctypes.c_uint64(100_000_000))
    assert driver.cuEventRecord(e2.handle, s.handle)[0] == driver.CUresult.CUDA_SUCCESS
    h2 = e2._int
    e2.close()
    assert h2 not in pooled()
    s.sync()
    # Never recorded: pooled without asking the driver, and it behaves as a new event.
    e3 = dev.create_event()
    h3 = e3._int
    e3.close()
    assert h3 in pooled()
    e4 = dev.create_event()
    assert e4._int == h3 and e4.is_done
    e4.close()
    s.close()


@pytest.mark.gpu
def test_collected_owners_give_their_handles_back():
    import gc

    from cuda_core import Device, _event, _stream

    dev = Device()
    dev.set_current()
    e = dev.create_event()
    s = dev.create_stream()
    eh, sh = e._int, s._int
    del e, s  # no close(): the holder releases with its owner
    gc.collect()
    assert eh in [a for pool in _event._pool.values() for _, a in pool]
    assert sh in [a for pool in _stream._pool.values() for _, a in pool]


RECORD_CHECK = """
import cuda_core as cc, cuda_core._fast as f, inspect
dev = cc.Device(); dev.set_current()
s = dev.create_stream()
timed = {"timing_enabled": True}
a, b = dev.create_event(timed), dev.create_event(timed)
assert s.record(a) is a and s.record(event=b) is b
b.sync()
assert b - a >= 0.0
class MyStream(cc.Stream):
    __slots__ = ()
m = MyStream()
assert type(m) is MyStream and m.record(a) is a  # a subclass takes the general path
m.close()
for bad, exc in ((42, TypeError), (s, TypeError)):
    try:
        s.record(bad)
    except exc as err:
        assert "event" in str(err), err
    else:
        raise AssertionError(bad)
try:
    s.record(a, options=timed)
except ValueError:
    pass
else:
    raise AssertionError("options with an event")
c = dev.create_event()
c.close()
try:
    s.record(c)
except RuntimeError as err:
    assert "event is closed" in str(err)
else:
    raise AssertionError("closed event")
s2 = dev.create_stream()
s2.close()
try:
    s2.record(a)
except RuntimeError as err:
    assert "stream is closed" in str(err)
else:
    raise AssertionError("closed stream")
assert list(inspect.signature(cc.Stream.record).parameters) == ["self", "event", "options"]
assert "Record" in cc.Stream.record.__doc__
s.sync()
m2 = MyStream()
m2.sync()  # a subclass: the general path
m2.close()
try:
    s2.sync()
except RuntimeError as err:
    assert "stream is closed" in str(err)
else:
    raise AssertionError("sync of a closed stream")
print("ENABLED", f.ENABLED, type(cc.Stream.__dict__["record"]).__name__, type(cc.Stream.__dict__["sync"]).__name__)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("off", ["0", "1"])
def test_stream_record_on_both_paths(off):
    out = _run(RECORD_CHECK, CUDA_CORE_NO_FASTPATH=off)
    if off == "1":
        assert "ENABLED False function function" in out
    else:
        try:
            from cuda_core import _fastpath  # noqa: F401
        except ImportError:
            pytest.skip("cuda_core._fastpath was not built")
        assert "ENABLED True method_descriptor method_descriptor" in out


def test_owned_holder_releases_once():
    try:
        from cuda_core._fastpath import Owned
    except ImportError:
        pytest.skip("cuda_core._fastpath was not built")
    pool: list = []
    o = Owned(None, 0, (None, 0), pool, 4)
    assert o.pending
    assert o.release() is True and not o.pending
    assert o.release() is False
    for args, exc in (
        ((None, 2, (None, 0), pool, 4), ValueError),
        ((None, 0, (None,), pool, 4), TypeError),
        ((None, 0, (None, 0), (), 4), TypeError),
        ((None, 0, (None, 0), pool), TypeError),
    ):
        with pytest.raises(exc):
            Owned(*args)


def test_python_holder_has_the_same_interface():
    from cuda_core import _fast

    class Owner:
        pass

    owner = Owner()
    calls = []
    from cuda_core._lifetime import track

    token = track(owner, calls.append, "released")
    assert token.pending
    assert token.release(False) is True and calls == ["released"]
    assert not token.pending and token.release() is False
    assert callable(_fast._py_own)


BUFFER_CHECK = """
import gc, cuda_core as cc, cuda_core._fast as f, inspect
from cuda_core import Buffer, DeviceMemoryResource
dev = cc.Device(); dev.set_current()
s = dev.create_stream()
mr = dev.memory_resource
free0 = mr.attributes.used_mem_current
b = mr.allocate(1 << 20, stream=s)
assert type(b) is Buffer and b.size == 1 << 20 and b.memory_resource is mr and not b.is_closed
assert mr.attributes.used_mem_current >= free0 + (1 << 20)
b.close()
assert b.is_closed
b.close()  # idempotent
z = mr.allocate(0, stream=s)
assert z.size == 0
z.close()
for bad, exc in ((-1, ValueError), (1.5, TypeError)):
    try:
        mr.allocate(bad, stream=s)
    except exc:
        pass
    else:
        raise AssertionError(bad)
try:
    mr.allocate(16, stream=42)
except TypeError:
    pass
else:
    raise AssertionError("not a stream")
s2 = dev.create_stream()
c = mr.allocate(64, stream=s2)
c.close(stream=s)  # an explicit stream takes the general path
s2.close()
try:
    mr.allocate(16, stream=s2)
except RuntimeError as err:
    assert "closed" in str(err), err
else:
    raise AssertionError("closed stream")
d = mr.allocate(64, stream=dev.default_stream)  # a default-stream token: the general path
d.close()
import numpy as np
src = mr.allocate(256, stream=s)
src.copy_from(np.arange(256, dtype=np.uint8), stream=s)
dst = mr.allocate(256, stream=s)
assert dst.copy_from(src, stream=s) is None  # the compiled copy
out = np.zeros(256, np.uint8)
assert src.copy_to(dst, stream=s) is dst
dst.copy_to(out, stream=s)
assert (out == np.arange(256, dtype=np.uint8)).all()
small = mr.allocate(128, stream=s)
for call in (lambda: small.copy_from(src, stream=s), lambda: src.copy_to(small, stream=s)):
    try:
        call()
    except ValueError as err:
        assert "size" in str(err)
    else:
        raise AssertionError("size mismatch")
dst.close()
try:
    src.copy_to(dst, stream=s)
except RuntimeError:
    pass
else:
    raise AssertionError("closed destination")
src.close(); small.close()
for _ in range(1000):
    mr.allocate(4096, stream=s)  # dropped: freed by the holder with the buffer
gc.collect()
dev.sync()
assert mr.attributes.used_mem_current <= free0 + (1 << 20), (mr.attributes.used_mem_current, free0)
assert list(inspect.signature(DeviceMemoryResource.allocate).parameters) == ["self", "size", "stream"]
assert "Free the memory" in Buffer.close.__doc__
print("ENABLED", f.ENABLED, type(Buffer.__dict__["close"]).__name__)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("off", ["0", "1"])
def test_pool_allocate_and_close_on_both_paths(off):
    out = _run(BUFFER_CHECK, CUDA_CORE_NO_FASTPATH=off)
    if off == "1":
        assert "ENABLED False function" in out
    else:
        try:
            from cuda_core import _fastpath  # noqa: F401
        except ImportError:
            pytest.skip("cuda_core._fastpath was not built")
        assert "ENABLED True method_descriptor" in out
