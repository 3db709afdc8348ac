"""Foreign streams and arrays (PyTorch, CuPy) in every stream-taking call; cross-stream ordering."""

from __future__ import annotations

import numpy as np
import pytest

KERNELS = r"""
__device__ __forceinline__ unsigned long long gtime()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void delayed_fill(int* a, int n, int v, unsigned long long ns)
{
    unsigned long long t0 = gtime();
    while (gtime() - t0 < ns) { __nanosleep(1000); }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = v;
}
extern "C" __global__ void copy_i32(const int* src, int* dst, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
"""
N = 1024
DELAY_NS = 200_000_000  # 200 ms: long enough that an unordered consumer would read stale data


@pytest.fixture(scope="module")
def env():
    from cuda_core import Device, Program, ProgramOptions

    dev = Device()
    dev.set_current()
    obj = Program(KERNELS, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )
    return dev, obj.get_kernel("delayed_fill"), obj.get_kernel("copy_i32"), obj


def _cfg():
    from cuda_core import LaunchConfig

    return LaunchConfig(grid=N // 256, block=256)


def _busy(handle_int):
    from cuda.bindings import driver

    return (
        driver.cuStreamQuery(driver.CUstream(handle_int))[0] == driver.CUresult.CUDA_ERROR_NOT_READY
    )


def _foreign_streams():
    out = []
    try:
        import torch

        if torch.cuda.is_available():
            out.append(("torch", torch.cuda.Stream(), lambda s: s.cuda_stream))
    except ImportError:
        pass
    try:
        import cupy

        out.append(("cupy", cupy.cuda.Stream(non_blocking=True), lambda s: s.ptr))
    except ImportError:
        pass
    return out


@pytest.mark.gpu
def test_foreign_streams_in_every_stream_taking_call(env):
    from cuda_core import Stream, launch

    dev, fill, _, _ = env
    streams = _foreign_streams()
    if not streams:
        pytest.skip("neither PyTorch nor CuPy is installed")
    for name, fs, ptr_of in streams:
        wrapped = dev.create_stream(fs)
        assert int(wrapped.handle) == ptr_of(fs), name
        buf = dev.allocate(N * 4, stream=fs)  # allocate on a foreign stream
        with pytest.warns(
            DeprecationWarning, match="foreign stream objects"
        ):  # as in cuda.core 1.2
            launch(fs, _cfg(), fill, buf, np.int32(N), np.int32(5), np.uint64(0))
        dst = buf.copy_to(stream=fs)  # copy on a foreign stream
        host = np.zeros(N, dtype=np.int32)
        dst.copy_to(host, stream=fs)
        fs.synchronize()
        assert (host == 5).all(), name
        buf.fill(0, stream=fs)
        buf.close(fs)
        dst.close(fs)
        fs.synchronize()
        wrapped.close()  # borrowed: must not destroy the foreign stream
        launch(
            Stream(fs),
            _cfg(),
            fill,
            dev.allocate(N * 4, stream=fs),
            np.int32(N),
            np.int32(1),
            np.uint64(0),
        )
        fs.synchronize()


@pytest.mark.gpu
@pytest.mark.filterwarnings("ignore:ExternalStream is deprecated:DeprecationWarning")
def test_our_stream_inside_external_streams(env):
    from cuda_core import launch

    dev, fill, _, _ = env
    s = dev.create_stream()
    used = 0
    try:
        import torch

        exts = []
        if hasattr(torch.cuda.Stream, "from_external"):  # newer PyTorch: through __cuda_stream__
            exts.append(torch.cuda.Stream.from_external(s))
        exts.append(
            torch.cuda.ExternalStream(int(s.handle))
        )  # deprecated in newer PyTorch, still works
        for ext in exts:
            assert ext.cuda_stream == int(s.handle)
            t = torch.zeros(N, dtype=torch.int32, device="cuda")
            torch.cuda.synchronize()
            # PyTorch's op is queued on our stream, after our kernel: it sees the kernel's result
            launch(
                s, _cfg(), fill, t.data_ptr(), np.int32(N), np.int32(4), np.uint64(DELAY_NS // 4)
            )
            with torch.cuda.stream(ext):
                t += 3
            s.sync()
            assert int(t.sum()) == 7 * N
        used += 1
    except ImportError:
        pass
    try:
        import cupy as cp

        ext = cp.cuda.ExternalStream(int(s.handle))
        with ext:
            a = cp.full(N, 2, dtype=cp.int32)
        launch(s, _cfg(), fill, a.data.ptr, np.int32(N), np.int32(6), np.uint64(0))
        s.sync()
        assert int(a.sum()) == 6 * N
        used += 1
    except ImportError:
        pass
    if not used:
        pytest.skip("neither PyTorch nor CuPy is installed")
    s.close()


@pytest.mark.gpu
def test_cai_consumer_waits_on_device_for_cupy_producer(env):
    cp = pytest.importorskip("cupy")
    from cuda_core import Stream, launch
    from cuda_core._interop._memoryview import StridedMemoryView

    dev, fill, copy, _ = env
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = dev.create_stream()
    with producer:
        a = cp.zeros(N, dtype=cp.int32)
    out = cp.zeros(N, dtype=cp.int32)
    cp.cuda.Device().synchronize()
    launch(
        Stream(producer), _cfg(), fill, a.data.ptr, np.int32(N), np.int32(42), np.uint64(DELAY_NS)
    )
    with producer:  # CuPy reports the current stream in __cuda_array_interface__["stream"]
        view = StridedMemoryView.from_cuda_array_interface(a, int(consumer.handle))
    assert _busy(producer.ptr), "the view must not synchronise the host with the producer"
    launch(consumer, _cfg(), copy, view.ptr, out.data.ptr, np.int32(N))
    consumer.sync()
    assert int(out.min()) == 42 and int(out.max()) == 42
    consumer.close()


@pytest.mark.gpu
def test_dlpack_consumer_waits_on_device_for_torch_producer(env):
    torch = pytest.importorskip("torch")
    from cuda_core import Stream, launch
    from cuda_core._interop._memoryview import StridedMemoryView

    dev, fill, copy, _ = env
    producer = torch.cuda.Stream()
    consumer = dev.create_stream()
    with torch.cuda.stream(producer):
        t = torch.zeros(N, dtype=torch.int32, device="cuda")
    out = torch.zeros(N, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    launch(
        Stream(producer), _cfg(), fill, t.data_ptr(), np.int32(N), np.int32(17), np.uint64(DELAY_NS)
    )
    with torch.cuda.stream(producer):  # torch orders its current stream before the consumer's
        view = StridedMemoryView.from_dlpack(t, int(consumer.handle))
    assert _busy(producer.cuda_stream), "the view must not synchronise the host with the producer"
    launch(consumer, _cfg(), copy, view.ptr, out.data_ptr(), np.int32(N))
    consumer.sync()
    assert int(out.min()) == 17 and int(out.max()) == 17
    consumer.close()


@pytest.mark.gpu
def test_opt_out_with_minus_one_does_not_order(env):
    cp = pytest.importorskip("cupy")
    from cuda_core._interop._memoryview import StridedMemoryView

    dev, fill, _, _ = env
    from cuda_core import Stream, launch

    producer = cp.cuda.Stream(non_blocking=True)
    consumer = dev.create_stream()
    with producer:
        a = cp.zeros(N, dtype=cp.int32)
    launch(
        Stream(producer),
        _cfg(),
        fill,
        a.data.ptr,
        np.int32(N),
        np.int32(1),
        np.uint64(DELAY_NS // 4),
    )
    with producer:
        StridedMemoryView.from_cuda_array_interface(a, -1)
    consumer.sync()  # nothing was queued on the consumer: returns while the producer still runs
    assert _busy(producer.ptr)
    producer.synchronize()
    consumer.close()
