"""launch() of the launch features on a GPU (clusters, cooperative grids, programmatic dependent
launch, dynamic shared memory above 48 KiB), misuse, and PreparedLaunch against launch() (the
arguments and their packing: test_launcher.py)."""

# ruff: noqa: F811 (the fixtures imported from test_launcher are parameters of its tests)

from __future__ import annotations

import pickle

import numpy as np
import pytest

from cuda_core import LaunchConfig, PreparedLaunch, launch
from cuda_core._errors import CUDAError
from cuda_core._kernel_arg_handler import ParamHolder
from tests.test_launcher import (  # noqa: F401 (fixtures)
    EXPECTED_IOTA,
    N,
    Padded,
    _compile,
    _iota_cfg,
    _read,
    iota,
    stream,
    struct_kernel,
)

CLUSTER = r"""
extern "C" __global__ void cluster_info(unsigned* out) {
    unsigned rank, n, dx, dy, dz;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(dx));
    asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(dy));
    asm volatile("mov.u32 %0, %%cluster_nctaid.z;" : "=r"(dz));
    if (threadIdx.x == 0) {
        unsigned b = blockIdx.x;
        out[b * 5 + 0] = rank; out[b * 5 + 1] = n;
        out[b * 5 + 2] = dx; out[b * 5 + 3] = dy; out[b * 5 + 4] = dz;
    }
}
"""


@pytest.mark.gpu
def test_cluster_launch_reports_rank_and_dims(dev, stream):
    if int(dev.arch) < 90:
        pytest.skip(f"thread block clusters need sm_90 (device is sm_{dev.arch})")
    ker = _compile(dev, CLUSTER).get_kernel("cluster_info")
    cfg = LaunchConfig(grid=3, cluster=2, block=32)  # 3 clusters of 2 blocks
    out = dev.allocate(6 * 5 * 4, stream=stream)
    launch(stream, cfg, ker, out)
    got = np.frombuffer(_read(out, 6 * 5 * 4, stream), np.uint32).reshape(6, 5)
    assert got[:, 0].tolist() == [0, 1, 0, 1, 0, 1]
    assert got[:, 1:].tolist() == [[2, 2, 1, 1]] * 6
    out.close()


COOP = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void grid_sum(int* data, int* out) {
    cg::grid_group g = cg::this_grid();
    unsigned i = g.thread_rank();
    data[i] = (int)i;
    g.sync();
    // after the grid-wide barrier every block sees every other block's writes
    if (i == 0) { long long s = 0; for (unsigned j = 0; j < g.size(); ++j) s += data[j]; out[0] = (int)s; }
}
"""


@pytest.mark.gpu
def test_cooperative_launch_with_grid_sync(dev, stream):
    ker = _compile(dev, COOP, include=True).get_kernel("grid_sum")
    blocks = dev.properties.multiprocessor_count
    n = blocks * 128
    data = dev.allocate(4 * n, stream=stream)
    out = dev.allocate(4, stream=stream)
    launch(stream, LaunchConfig(grid=blocks, block=128, is_cooperative=True), ker, data, out)
    assert np.frombuffer(_read(out, 4, stream), np.int32)[0] == n * (n - 1) // 2
    # a grid too large to be co-resident is refused, with the numbers
    with pytest.raises(
        CUDAError, match=r"cannot be co-resident.*blocks of 1024 threads per SM x \d+ SMs"
    ) as ei:
        launch(
            stream, LaunchConfig(grid=blocks * 64, block=1024, is_cooperative=True), ker, data, out
        )
    assert isinstance(ei.value, ValueError)  # cuda.core's class for a cooperative grid too large
    assert pickle.loads(pickle.dumps(ei.value)).__class__ is ei.value.__class__
    launch(stream, LaunchConfig(grid=blocks, block=128, is_cooperative=True), ker, data, out)
    assert np.frombuffer(_read(out, 4, stream), np.int32)[0] == n * (n - 1) // 2
    data.close()
    out.close()


PDL = r"""
extern "C" __global__ void pdl_primary(int* data, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = i + 1;
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");  // let the next kernel start
}
extern "C" __global__ void pdl_secondary(const int* data, int* out, int n) {
    asm volatile("griddepcontrol.wait;" ::: "memory");  // the primary's writes are visible after this
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2 * data[i];
}
"""


@pytest.mark.gpu
def test_programmatic_dependent_launch(dev, stream):
    if int(dev.arch) < 90:
        pytest.skip(f"programmatic dependent launch needs sm_90 (device is sm_{dev.arch})")
    mod = _compile(dev, PDL)
    primary, secondary = mod.get_kernel("pdl_primary"), mod.get_kernel("pdl_secondary")
    n = 64 * 256
    data = dev.allocate(4 * n, stream=stream)
    out = dev.allocate(4 * n, stream=stream)
    cfg = LaunchConfig(grid=64, block=256, programmatic_stream_serialization=True)
    expected = [2 * (i + 1) for i in range(n)]
    for _ in range(3):
        out.copy_from(np.zeros(n, np.int32), stream=stream)
        launch(stream, LaunchConfig(grid=64, block=256), primary, data, np.int32(n))
        launch(stream, cfg, secondary, data, out, np.int32(n))
        assert np.frombuffer(_read(out, 4 * n, stream), np.int32).tolist() == expected
    out.copy_from(np.zeros(n, np.int32), stream=stream)
    PreparedLaunch(stream, LaunchConfig(grid=64, block=256), primary, data, np.int32(n))()
    PreparedLaunch(stream, cfg, secondary, data, out, np.int32(n))()
    assert np.frombuffer(_read(out, 4 * n, stream), np.int32).tolist() == expected
    data.close()
    out.close()


SHMEM = r"""
extern "C" __global__ void shmem_fill(int* out, int n) {
    extern __shared__ int s[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = i;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
}
"""


@pytest.mark.gpu
def test_dynamic_shared_memory_above_48k(dev, stream):
    ker = _compile(dev, SHMEM).get_kernel("shmem_fill")
    size = 100 * 1024
    n = size // 4
    out = dev.allocate(size, stream=stream)
    cfg = LaunchConfig(grid=1, block=256, shmem_size=size)
    with pytest.raises(CUDAError, match="CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"):
        launch(stream, cfg, ker, out, np.int32(n))
    ker.attributes[dev].max_dynamic_shared_size_bytes = size
    launch(stream, cfg, ker, out, np.int32(n))
    assert np.frombuffer(_read(out, size, stream), np.int32).tolist() == list(range(n - 1, -1, -1))
    out.close()


@pytest.mark.gpu
def test_misuse_raises_and_the_process_keeps_working(dev, stream, iota):
    buf = dev.allocate(4 * N, stream=stream)
    cfg = _iota_cfg()
    with pytest.raises(TypeError, match=r"takes 2 arguments but 1 was given"):
        launch(stream, cfg, iota, buf)
    with pytest.raises(TypeError, match=r"takes 2 arguments but 3 were given"):
        launch(stream, cfg, iota, buf, np.int32(N), 1)
    with pytest.raises(
        TypeError, match=r"parameter 1 is 4 bytes, but argument 1 \(float\) packs to 8"
    ):
        launch(stream, cfg, iota, buf, float(N))
    with pytest.raises(
        OverflowError, match=r"argument 1: .*does not fit a 4-byte integer parameter"
    ):
        launch(stream, cfg, iota, buf, 2**40)
    with pytest.raises(TypeError, match=r"argument 1 has unsupported type builtins.str"):
        launch(stream, cfg, iota, buf, "1000")
    with pytest.raises(OverflowError, match="argument 0"):
        launch(stream, cfg, iota, 2**64, np.int32(N))
    with pytest.raises(
        ValueError,
        match=rf"block \(2048, 1, 1\) has 2048 threads, more than the 1024 allowed on {dev.name}",
    ):
        launch(stream, LaunchConfig(grid=1, block=2048), iota, buf, np.int32(N))
    with pytest.raises(ValueError, match=r"65536 blocks in y, more than the 65535"):
        launch(stream, LaunchConfig(grid=(1, 65536), block=1), iota, buf, np.int32(N))
    with pytest.raises(ValueError, match=r"shmem_size 1073741824 bytes is more than"):
        launch(stream, LaunchConfig(grid=1, block=1, shmem_size=2**30), iota, buf, np.int32(N))
    with pytest.raises(TypeError, match="stream must be"):
        launch(None, cfg, iota, buf, np.int32(N))
    with pytest.raises(TypeError, match="parameter 1 is 4 bytes"):
        PreparedLaunch(stream, cfg, iota, buf, 5.0)
    # still works
    launch(stream, cfg, iota, buf, np.int32(N))
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    buf.close()


@pytest.mark.gpu
def test_python_int_for_an_int_parameter_works_as_in_cuda_core(dev, stream, iota):
    # cuda.core passes a Python int as 8 bytes and the driver copies the int parameter's 4:
    # real code written for it passes plain ints for int parameters, and so may code for us.
    buf = dev.allocate(4 * N, stream=stream)
    launch(stream, _iota_cfg(), iota, buf, N)
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    buf.copy_from(bytes(4 * N), stream=stream)
    PreparedLaunch(stream, _iota_cfg(), iota, buf, np.int64(N))()
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    buf.close()


ADD = r"""
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.mark.gpu
def test_prepared_launch_equals_launch(dev, stream):
    ker = _compile(dev, ADD).get_kernel("axpy")
    n = 4096
    x = dev.allocate(4 * n, stream=stream)
    x.copy_from(np.arange(n, dtype=np.float32), stream=stream)
    y1 = dev.allocate(4 * n, stream=stream)
    y2 = dev.allocate(4 * n, stream=stream)
    for y in (y1, y2):
        y.copy_from(np.ones(n, np.float32), stream=stream)
    cfg = LaunchConfig(grid=n // 256, block=256)
    for a in (2.0, 0.5, -1.0):
        launch(stream, cfg, ker, y1, x, np.float32(a), np.int32(n))
    p = PreparedLaunch(stream, cfg, ker, y2, x, np.float32(2.0), np.int32(n))
    p()
    p.set_arg(2, np.float32(0.5))
    p()
    p(y2, x, np.float32(-1.0), np.int32(n))
    r1 = _read(y1, 4 * n, stream)
    assert r1 == _read(y2, 4 * n, stream)
    expected = np.ones(n, np.float32)
    for a in (2.0, 0.5, -1.0):
        expected = np.float32(a) * np.arange(n, dtype=np.float32) + expected
    assert np.frombuffer(r1, np.float32).tolist() == expected.tolist()
    with pytest.raises(TypeError, match="parameter 2 is 4 bytes"):
        p.set_arg(2, 1.0)
    assert p.args[2] == np.float32(-1.0)
    for b in (x, y1, y2):
        b.close()


@pytest.mark.gpu
def test_packing_matches_the_kernels_layout(dev, struct_kernel):
    layout = struct_kernel._param_layout()
    assert layout == ((0, 24), (24, 4), (32, 8))
    h = ParamHolder((Padded(1, 2.0, 3), np.int32(4), 0x1000), layout=layout)
    assert h.offsets == (0, 24, 32)


# ---------------------------------------------------------------------------------------------
# Launches through the handle layer (whichever backend runs the suite) and closed buffers.


@pytest.mark.gpu
def test_launch_and_prepared_launch_alike_and_report_failures(dev, stream, iota):
    buf = dev.allocate(4 * N, stream=stream)
    cfg = _iota_cfg()
    launch(stream, cfg, iota, buf, np.int32(N))
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    buf.copy_from(np.zeros(N, np.int32), stream=stream)
    p = PreparedLaunch(stream, cfg, iota, buf, np.int32(N // 2))
    p()
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA[
        : N // 2
    ] + [0] * (N - N // 2)
    p.set_arg(1, np.int32(N))
    p()
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    # A refusal by the driver goes through the one error funnel, named after cuLaunchKernelEx.
    big = LaunchConfig(grid=1, block=1, shmem_size=100 * 1024)  # over the kernel's 48 KiB default
    for attempt in (
        lambda: launch(stream, big, iota, buf, np.int32(N)),
        PreparedLaunch(stream, big, iota, buf, np.int32(N)),
    ):
        with pytest.raises(CUDAError, match=r"^cuLaunchKernelEx: CUDA_ERROR_") as ei:
            attempt()
        assert ei.value.api == "cuLaunchKernelEx"
        if "INVALID_VALUE" in str(ei.value):
            assert "MAX_DYNAMIC_SHARED_SIZE_BYTES" in str(ei.value)
    launch(stream, cfg, iota, buf, np.int32(N))  # still works
    stream.sync()
    buf.close()


@pytest.mark.gpu
def test_closed_buffer_argument_is_refused(dev, stream, iota):
    buf = dev.allocate(4 * N, stream=stream)
    cfg = _iota_cfg()
    launch(stream, cfg, iota, buf, np.int32(N))  # the plan for (Buffer, int32) now exists
    stream.sync()
    buf.close()
    with pytest.raises(ValueError, match="argument 0 is a closed Buffer"):
        launch(stream, cfg, iota, buf, np.int32(N))
    with pytest.raises(ValueError, match="argument 0 is a closed Buffer"):
        PreparedLaunch(stream, cfg, iota, buf, np.int32(N))
    live = dev.allocate(4 * N, stream=stream)
    p = PreparedLaunch(stream, cfg, iota, live, np.int32(N))
    with pytest.raises(ValueError, match="argument 0 is a closed Buffer"):
        p.set_arg(0, buf)
    with pytest.raises(ValueError, match="argument 0 is a closed Buffer"):
        p(buf, np.int32(N))
    p(live, np.int32(N))  # still works
    assert np.frombuffer(_read(live, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    live.close()
