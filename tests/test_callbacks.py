"""Host callbacks as cuda.core takes them: ``host_launch`` and ``GraphBuilder.callback``.

A Python callable takes no arguments; a ctypes function pointer declared ``CUhostFn`` goes to
the driver with ``user_data`` (an int address, or bytes-like data that is copied and kept until
the function has run, or as long as the graph). ``user_data`` with a Python callable is a
``ValueError``, as in cuda.core 1.2.
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time

import numpy as np
import pytest

import cuda_core
from cuda_core import _host_callbacks as _callbacks
from cuda_core import host_launch
from tests.helpers import settled_kept_callbacks

BUMP = r"""
extern "C" __global__ void bump(int* v, unsigned long long i, int by) { v[i] += by; }
"""
HostFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


# --------------------------------------------------------------------------------------------
# CPU tier


def test_host_launch_is_public():
    assert cuda_core.host_launch is host_launch
    assert "host_launch" in cuda_core.__all__


@pytest.mark.parametrize("stream", [None, 42, "stream"])
def test_host_launch_refuses_what_is_not_a_stream(stream):
    with pytest.raises(TypeError, match="stream must be"):
        host_launch(stream, print)


# --------------------------------------------------------------------------------------------
# GPU tier


@pytest.fixture(scope="module")
def bump(dev):
    from cuda_core import Program, ProgramOptions

    return (
        Program(BUMP, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        .compile("cubin")
        .get_kernel("bump")
    )


def _pinned_ints(n):
    from cuda_core import LegacyPinnedMemoryResource

    buf = LegacyPinnedMemoryResource().allocate(4 * n)
    values = np.from_dlpack(buf).view(np.int32)
    values[:] = 0
    return buf, values


def _wait_for_pending(index, target, timeout=10.0):
    t0 = time.monotonic()
    while _callbacks.pending_callbacks()[index] != target and time.monotonic() - t0 < timeout:
        gc.collect()
        time.sleep(0.01)
    return _callbacks.pending_callbacks()[index]


@pytest.mark.gpu
def test_host_launch_runs_between_kernels_in_stream_order(dev, bump):
    from cuda_core import LaunchConfig, launch

    s = dev.create_stream()
    buf, values = _pinned_ints(2)
    seen = []

    def progress():  # sees the first kernel's write, and the second kernel sees its own
        seen.append((int(values[0]), int(values[1])))
        values[1] += 10

    cfg = LaunchConfig(grid=1, block=1)
    launch(s, cfg, bump, buf, np.uint64(0), np.int32(1))
    host_launch(s, progress)
    launch(s, cfg, bump, buf, np.uint64(1), np.int32(1))
    s.sync()
    assert seen == [(1, 0)]
    assert values.tolist() == [1, 11]
    assert _callbacks.pending_callbacks()[0] == 0
    buf.close()
    s.close()


@pytest.mark.gpu
def test_host_launch_ctypes_function_pointer_and_user_data(dev):
    s = dev.create_stream()
    got = []
    cfn = HostFn(lambda p: got.append(None if p is None else ctypes.string_at(p, 4)))
    gate = threading.Event()
    host_launch(s, lambda: gate.wait(30))  # holds the stream until the data below has changed
    data = bytearray(b"abcd")
    host_launch(s, cfn, user_data=data)  # copied at the call
    raw = ctypes.create_string_buffer(b"int!")
    host_launch(s, cfn, user_data=ctypes.addressof(raw))  # passed as the pointer itself
    host_launch(s, cfn)  # NULL
    data[:] = b"wxyz"
    assert got == []
    gate.set()
    s.sync()
    assert got == [b"abcd", b"int!", None]
    # The entries that kept the ctypes objects and the copy alive are gone once they ran.
    assert _wait_for_pending(0, 0) == 0
    s.close()


@pytest.mark.gpu
def test_host_launch_misuse(dev):
    s = dev.create_stream()
    with pytest.raises(ValueError, match="user_data must be None for a Python callable"):
        host_launch(s, print, user_data=b"x")
    with pytest.raises(TypeError, match="CUhostFn"):
        host_launch(s, ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(lambda p: 0))
    with pytest.raises(TypeError, match="user_data must be"):
        host_launch(s, HostFn(lambda p: None), user_data=1.5)
    with pytest.raises(TypeError, match="fn must be"):
        host_launch(s, 42)
    b = s.create_graph_builder()
    with pytest.raises(RuntimeError, match="begin_building"):  # forwarded to GraphBuilder.callback
        host_launch(b, print)
    b.close()
    s.sync()
    assert _callbacks.pending_callbacks()[0] == 0
    s.close()


@pytest.mark.gpu
def test_graph_builder_callback_takes_ctypes_function_pointers(dev, bump):
    from cuda_core import LaunchConfig, launch

    s = dev.create_stream()
    buf, values = _pinned_ints(1)
    got = []
    cfn = HostFn(lambda p: got.append((ctypes.string_at(p, 3), int(values[0]))))
    kept_before = settled_kept_callbacks()
    data = bytearray(b"one")
    b = s.create_graph_builder().begin_building()
    launch(b, LaunchConfig(grid=1, block=1), bump, buf, np.uint64(0), np.int32(1))
    b.callback(cfn, user_data=data)  # copied into the graph
    host_launch(b, lambda: got.append("py"))  # a GraphBuilder forwards to callback()
    with pytest.raises(ValueError, match="user_data must be None"):
        b.callback(print, user_data=1)
    g = b.end_building().complete()
    data[:] = b"xxx"
    for _ in range(3):
        g.launch(s)
    s.sync()
    assert got == [(b"one", 1), "py", (b"one", 2), "py", (b"one", 3), "py"]
    assert _callbacks.pending_callbacks()[1] == kept_before + 2
    g.close()
    b.close()
    del g, b
    assert _wait_for_pending(1, kept_before) == kept_before
    buf.close()
    s.close()


@pytest.mark.gpu
def test_host_func_on_a_device_default_stream_from_a_thread_without_a_context(dev):
    # Device.default_stream's token means "the current context's": queued from a thread where no
    # context is current, the host function still goes to the device's context (its handle's).
    s = dev.default_stream
    ran = threading.Event()
    errors = []

    def worker():
        try:
            s.launch_host_func(ran.set)
            s.sync()
        except Exception as exc:  # reported to the test thread
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    t.join(30)
    assert not errors, errors
    assert ran.is_set()
