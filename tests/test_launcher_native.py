"""launch() and PreparedLaunch through the native backend's C path, on a GPU (gpu tier).

On the native backend the steady state of a launch is packed and launched in C; these tests
check, on a device, that what C launches computes what the Python path computes, that the
module's counters show C ran, and that misuse after a warm launch (C tries, then hands over)
raises what the Python path (``launch.__wrapped__``) raises. On the pure-Python backend the
same launches run (the counter checks are skipped there). The CPU tier drives the same paths
against the stub driver (``tests/handles/test_native_stub_launch.py``).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cuda_core import LaunchConfig, PreparedLaunch, Program, ProgramOptions, launch
from cuda_core._handles import _backend

PY_LAUNCH = getattr(launch, "__wrapped__", launch)

SOURCE = r"""
extern "C" __global__ void mixed(float* out, const float* x, int i, float f, double d,
                                 unsigned long long n, short s, unsigned char u, long long l,
                                 bool flag) {
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        out[0] = x[0] + i; out[1] = f; out[2] = (float)d; out[3] = (float)n;
        out[4] = s; out[5] = u; out[6] = (float)l; out[7] = flag ? 1.0f : 0.0f;
    }
}
extern "C" __global__ void iota(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i * 3 + 1;
}
"""
N = 1000
EXPECTED_IOTA = (np.arange(N, dtype=np.int32) * 3 + 1).tolist()


def _counters():
    return _backend.backend.launch_counters() if _backend.NATIVE else None  # type: ignore[attr-defined]


def _ran(before, index):
    """How many launches the counter ``index`` gained since ``before`` (None: not native)."""
    return None if before is None else _counters()[index] - before[index]


@pytest.fixture(scope="module")
def module(dev):
    opts = ProgramOptions(arch=f"sm_{dev.arch}", std="c++17")
    return Program(SOURCE, code_type="c++", options=opts).compile("cubin")


@pytest.fixture(scope="module")
def stream(dev):
    s = dev.create_stream()
    yield s
    s.close()


def _read(buf, dtype, n, stream):
    host = np.zeros(buf.size, dtype=np.uint8)
    buf.copy_to(host, stream=stream)
    stream.sync()
    return np.frombuffer(host.tobytes(), dtype)[:n].tolist()


@pytest.mark.gpu
def test_mixed_arguments_from_c_equal_the_python_path(dev, stream, module):
    ker = module.get_kernel("mixed")
    x = dev.allocate(4, stream=stream)
    x.copy_from(np.array([0.5], np.float32), stream=stream)
    outs = [dev.allocate(32, stream=stream) for _ in range(3)]
    cfg = LaunchConfig(grid=1, block=32)
    rest = (np.int32(3), np.float32(1.5), 2.5, np.uint64(7), np.int16(-2), np.uint8(9))
    rest += (np.int64(-5), True)
    launch(stream, cfg, ker, outs[0], x, *rest)  # plans in Python
    before = _counters()
    launch(stream, cfg, ker, outs[1], x, *rest)  # packs and launches in C
    assert _ran(before, 0) in (1, None)
    PY_LAUNCH(stream, cfg, ker, outs[2], x, *rest)
    want = [3.5, 1.5, 2.5, 7.0, -2.0, 9.0, -5.0, 1.0]
    assert [_read(o, np.float32, 8, stream) for o in outs] == [want] * 3
    for b in (x, *outs):
        b.close()


@pytest.mark.gpu
def test_prepared_launch_in_c_rebinds_in_place(dev, stream, module):
    ker = module.get_kernel("iota")
    buf = dev.allocate(4 * N, stream=stream)
    cfg = LaunchConfig(grid=(N + 127) // 128, block=128)
    p = PreparedLaunch(stream, cfg, ker, buf, np.int32(N // 2))
    before = _counters()
    p()
    assert _read(buf, np.int32, N, stream) == EXPECTED_IOTA[: N // 2] + [0] * (N - N // 2)
    p(buf, np.int32(N))  # the bound types: packed in place, launched in C
    assert _read(buf, np.int32, N, stream) == EXPECTED_IOTA and p.args[1] == N
    assert _ran(before, 3) in (2, None)
    buf.close()


@pytest.mark.gpu
def test_misuse_after_a_warm_launch_raises_as_the_python_path(dev, stream, module):
    ker = module.get_kernel("iota")
    buf = dev.allocate(4 * N, stream=stream)
    closed = dev.allocate(4 * N, stream=stream)
    closed.close()
    cfg = LaunchConfig(grid=(N + 127) // 128, block=128)
    cases = [
        ((buf, 5), (buf, 2**40)),  # an int beyond the int parameter
        ((buf, np.int32(5)), (closed, np.int32(5))),  # a closed Buffer
        ((buf, np.int32(5)), (buf, 1.5)),  # a float for an int
        ((buf, np.int32(5)), (buf,)),  # a missing argument
        ((int(buf.handle), np.int32(5)), (2**64, np.int32(5))),  # a pointer beyond 64 bits
    ]
    for warm, bad in cases:
        launch(stream, cfg, ker, *warm)
        got = []
        for call in (launch, PY_LAUNCH):
            try:
                call(stream, cfg, ker, *bad)
            except Exception as exc:
                got.append((type(exc), str(exc)))
        assert len(got) == 2 and got[0] == got[1], (bad, got)
        p = PreparedLaunch(stream, cfg, ker, *warm)
        with pytest.raises(got[0][0]):
            p(*bad)
        assert p.args == warm
    launch(stream, cfg, ker, buf, np.int32(N))  # still works
    assert _read(buf, np.int32, N, stream) == EXPECTED_IOTA
    big = LaunchConfig(grid=1, block=1, shmem_size=100 * 1024)  # beyond the kernel's default
    launch_errors = []
    for call in (launch, PY_LAUNCH, lambda *a: PreparedLaunch(*a)()):
        try:
            call(stream, big, ker, buf, np.int32(N))
        except Exception as exc:
            launch_errors.append((type(exc).__name__, str(exc)))
    assert len(launch_errors) == 3 and len(set(launch_errors)) == 1, launch_errors
    buf.close()


@pytest.mark.gpu
def test_launches_from_threads(dev, stream, module):
    # The GIL is released in the driver call: threads launching one kernel at once.
    ker = module.get_kernel("iota")
    cfg = LaunchConfig(grid=(N + 127) // 128, block=128)
    bufs = [dev.allocate(4 * N, stream=stream) for _ in range(4)]
    streams = [dev.create_stream() for _ in bufs]
    launch(streams[0], cfg, ker, bufs[0], np.int32(N))
    errors = []

    def work(s, b):
        try:
            dev.set_current()
            for _ in range(200):
                launch(s, cfg, ker, b, np.int32(N))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=pair) for pair in zip(streams, bufs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for s, b in zip(streams, bufs):
        assert _read(b, np.int32, N, s) == EXPECTED_IOTA
        b.close()
        s.close()
