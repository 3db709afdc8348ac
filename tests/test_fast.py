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
    pooled = [int(x) for pool in _stream._pool.values() for x in pool]
    assert h not in pooled, "a stream with pending work must not be recycled"
    dev.sync()
