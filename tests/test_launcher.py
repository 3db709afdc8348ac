"""launch() and PreparedLaunch: argument checks (CPU) and launches on a GPU (gpu tier)."""

from __future__ import annotations

import ctypes
import pickle
import struct
import warnings

import ml_dtypes
import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import LaunchConfig, PreparedLaunch, launch
from cuda_core._errors import CUDAError
from cuda_core._kernel_arg_handler import ParamHolder
from cuda_core._stream import LEGACY_DEFAULT_STREAM

CFG = LaunchConfig(grid=1, block=1)


# ---------------------------------------------------------------------------------------------
# CPU tier: misuse caught before any driver call.


@pytest.mark.parametrize("stream", [None, 0, "stream", object()], ids=repr)
def test_stream_must_be_a_stream(stream):
    with pytest.raises(TypeError, match="stream must be a Stream"):
        launch(stream, CFG, object())


@pytest.mark.parametrize("config", [(1, 1), "grid=1", 1], ids=repr)
def test_config_must_be_a_launch_config(config):
    with pytest.raises(TypeError, match="config must be a LaunchConfig or a dict"):
        launch(LEGACY_DEFAULT_STREAM, config, object())
    with pytest.raises(TypeError, match="config must be a LaunchConfig or a dict"):
        PreparedLaunch(LEGACY_DEFAULT_STREAM, config, object())


def test_config_dict_and_none_read_as_cuda_core_reads_them():
    # cuda.core's launch takes a dict of LaunchConfig's arguments, and None as LaunchConfig(),
    # which refuses the missing grid (ValueError there; ours is a TypeError and a ValueError).
    with pytest.raises(TypeError, match="kernel must be a Kernel"):  # the dict was accepted
        launch(LEGACY_DEFAULT_STREAM, {"grid": 1, "block": 1}, object())
    with pytest.raises(ValueError, match=r"^LaunchConfig\.block value must be >= 1"):  # checked
        launch(LEGACY_DEFAULT_STREAM, {"grid": 1, "block": 0}, object())
    with pytest.raises(TypeError, match="unexpected keyword"):
        launch(LEGACY_DEFAULT_STREAM, {"grid": 1, "block": 1, "grid_dim": 2}, object())
    for call in (launch, PreparedLaunch):
        with pytest.raises(ValueError, match=r"LaunchConfig\.grid must be"):
            call(LEGACY_DEFAULT_STREAM, None, object())


@pytest.mark.parametrize("kernel", [None, "k", object()], ids=repr)
def test_kernel_must_be_a_kernel(kernel):
    with pytest.raises(TypeError, match="kernel must be a Kernel"):
        launch(LEGACY_DEFAULT_STREAM, CFG, kernel)


# ---------------------------------------------------------------------------------------------
# GPU tier.

WRITE_SCALAR = r"""
struct alignas(2) half_t { unsigned short bits; };
struct cfloat { float re, im; };
struct cdouble { double re, im; };
template <typename T>
__global__ void write_scalar(T* out, T value) { *out = value; }
"""

# value, C type of the kernel's parameter, expected bytes (computed independently)
SCALAR_CASES = [
    (True, "bool", b"\x01"),
    (np.bool_(False), "bool", b"\x00"),
    (123456789012, "unsigned long long", struct.pack("<Q", 123456789012)),
    (-5, "long long", struct.pack("<q", -5)),
    (2.5e-300, "double", struct.pack("<d", 2.5e-300)),
    (complex(1.5, -2.25), "cdouble", struct.pack("<dd", 1.5, -2.25)),
    (np.int8(-7), "signed char", struct.pack("<b", -7)),
    (np.uint8(250), "unsigned char", struct.pack("<B", 250)),
    (np.int16(-1234), "short", struct.pack("<h", -1234)),
    (np.uint16(60000), "unsigned short", struct.pack("<H", 60000)),
    (np.int32(-123456), "int", struct.pack("<i", -123456)),
    (np.uint32(4000000000), "unsigned int", struct.pack("<I", 4000000000)),
    (np.int64(-(2**62)), "long long", struct.pack("<q", -(2**62))),
    (np.uint64(2**64 - 3), "unsigned long long", struct.pack("<Q", 2**64 - 3)),
    (np.float16(-0.333), "half_t", np.array(-0.333, np.float16).tobytes()),
    (ml_dtypes.bfloat16(3.140625), "half_t", np.array(3.140625, ml_dtypes.bfloat16).tobytes()),
    (np.float32(1 / 3), "float", struct.pack("<f", 1 / 3)),
    (np.float64(1 / 3), "double", struct.pack("<d", 1 / 3)),
    (np.complex64(0.5 - 8j), "cfloat", struct.pack("<ff", 0.5, -8)),
    (np.complex128(-1 + 1e-9j), "cdouble", struct.pack("<dd", -1, 1e-9)),
    (ctypes.c_int16(-3), "short", struct.pack("<h", -3)),
    (ctypes.c_uint64(7), "unsigned long long", struct.pack("<Q", 7)),
    (ctypes.c_float(2.5), "float", struct.pack("<f", 2.5)),
    (ctypes.c_double(-2.5), "double", struct.pack("<d", -2.5)),
    (ctypes.c_void_p(0xABC000), "void*", struct.pack("<Q", 0xABC000)),
    (driver.CUtexObject(77), "unsigned long long", struct.pack("<Q", 77)),
    (driver.CUsurfObject(78), "unsigned long long", struct.pack("<Q", 78)),
    (driver.CUgraphConditionalHandle(79), "unsigned long long", struct.pack("<Q", 79)),
]
SCALAR_NAMES = tuple(sorted({f"write_scalar<{c}>" for _, c, _ in SCALAR_CASES}))


@pytest.fixture(scope="module")
def stream(dev):
    s = dev.create_stream()
    yield s
    s.close()


def _compile(dev, code, names=(), include=False):
    from cuda_core import Program, ProgramOptions

    opts = {"arch": f"sm_{dev.arch}", "std": "c++17"}
    if include:
        opts["include_path"] = cuda_include_paths()
    return Program(code, code_type="c++", options=ProgramOptions(**opts)).compile(
        "cubin", name_expressions=names
    )


def cuda_include_paths():
    """Directories with cooperative_groups.h and its libcu++ headers (CUDA 13 keeps them in cccl/)."""
    import os

    from cuda.pathfinder import find_nvidia_header_directory

    dirs = [
        d
        for d in (find_nvidia_header_directory("cudart"), find_nvidia_header_directory("cccl"))
        if d
    ]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    dirs += [
        p
        for p in (os.path.join(home, "include"), os.path.join(home, "include", "cccl"))
        if os.path.isdir(p)
    ]
    if not any(os.path.exists(os.path.join(d, "cooperative_groups.h")) for d in dirs):
        pytest.skip("cooperative_groups.h not found (no CUDA headers on this machine)")
    return dirs


def _read(buf, n, stream):
    host = np.zeros(buf.size, dtype=np.uint8)
    buf.copy_to(host, stream=stream)
    stream.sync()
    return host[:n].tobytes()


@pytest.fixture(scope="module")
def scalar_module(dev):
    return _compile(dev, WRITE_SCALAR, SCALAR_NAMES)


@pytest.mark.gpu
@pytest.mark.parametrize("value,ctype,expected", SCALAR_CASES, ids=lambda v: type(v).__name__)
def test_scalar_round_trip(dev, stream, scalar_module, value, ctype, expected):
    ker = scalar_module.get_kernel(f"write_scalar<{ctype}>")
    out = dev.allocate(16, stream=stream)
    out.copy_from(np.full(16, 0xEE, np.uint8), stream=stream)
    launch(stream, CFG, ker, out, value)
    assert _read(out, len(expected), stream) == expected
    # the prepared launch writes the same bytes
    out.copy_from(np.full(16, 0xEE, np.uint8), stream=stream)
    PreparedLaunch(stream, CFG, ker, out, value)()
    assert _read(out, len(expected), stream) == expected
    out.close()


STRUCT_CODE = r"""
struct Padded { signed char a; double b; short c; };
extern "C" __global__ void read_struct(Padded p, int tail, double* out) {
    out[0] = p.a; out[1] = p.b; out[2] = p.c; out[3] = tail;
}
"""


class Padded(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int8), ("b", ctypes.c_double), ("c", ctypes.c_int16)]


PADDED_DT = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.int16)], align=True)


@pytest.fixture(scope="module")
def struct_kernel(dev):
    return _compile(dev, STRUCT_CODE).get_kernel("read_struct")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["ctypes", "numpy"])
def test_struct_by_value(dev, stream, struct_kernel, kind):
    if kind == "ctypes":
        s = Padded(-9, 6.5, -300)
    else:
        s = np.array([(-9, 6.5, -300)], dtype=PADDED_DT)[0]
    out = dev.allocate(32, stream=stream)
    launch(stream, CFG, struct_kernel, s, np.int32(41), out)
    got = np.frombuffer(_read(out, 32, stream), dtype=np.float64)
    assert got.tolist() == [-9.0, 6.5, -300.0, 41.0]
    out.close()


IOTA = r"""
extern "C" __global__ void iota(int* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = i * 3 + 1;
}
"""
N = 1000
EXPECTED_IOTA = (np.arange(N, dtype=np.int32) * 3 + 1).tolist()


@pytest.fixture(scope="module")
def iota(dev):
    return _compile(dev, IOTA).get_kernel("iota")


def _iota_cfg():
    return LaunchConfig(grid=(N + 127) // 128, block=128)


@pytest.mark.gpu
@pytest.mark.parametrize("as_what", ["buffer", "int"])
def test_pointer_from_buffer_and_int(dev, stream, iota, as_what):
    buf = dev.allocate(4 * N, stream=stream)
    ptr = buf if as_what == "buffer" else buf.handle
    launch(stream, _iota_cfg(), iota, ptr, np.int32(N))
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    buf.close()


@pytest.mark.gpu
def test_pointer_from_cupy(dev, stream, iota):
    cp = pytest.importorskip("cupy")
    a = cp.zeros(N, dtype=cp.int32)
    cp.cuda.Device().synchronize()
    launch(stream, _iota_cfg(), iota, a, np.int32(N))
    stream.sync()
    assert a.get().tolist() == EXPECTED_IOTA
    # a CuPy stream works as the stream argument (deprecated, as in cuda.core 1.2)
    b = cp.zeros(N, dtype=cp.int32)
    cs = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    with pytest.warns(DeprecationWarning, match="foreign stream objects"):
        launch(cs, _iota_cfg(), iota, b, np.int32(N))
    cs.synchronize()
    assert b.get().tolist() == EXPECTED_IOTA


@pytest.mark.gpu
def test_pointer_from_torch(dev, stream, iota):
    torch = pytest.importorskip("torch")
    t = torch.zeros(N, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    launch(stream, _iota_cfg(), iota, t, np.int32(N))
    stream.sync()
    assert t.cpu().tolist() == EXPECTED_IOTA
    with pytest.raises(TypeError, match="argument 0"):
        launch(stream, _iota_cfg(), iota, torch.zeros(N, dtype=torch.int32), np.int32(N))


FOREIGN_STREAM_DEPRECATION = (  # the words of cuda.core 1.2's warning, which its tests match
    r"Passing foreign stream objects to this function via the stream protocol is deprecated\. "
    r"Convert the object explicitly using Stream\(obj\) instead\."
)


class _ForeignStream:
    """A stream of another library: only the ``__cuda_stream__`` protocol."""

    def __init__(self, stream):
        self._address = int(stream.handle)

    def __cuda_stream__(self):
        return (0, self._address)


@pytest.mark.gpu
def test_foreign_stream_launch_is_deprecated_but_works(dev, stream, iota):
    from cuda_core import Stream

    buf = dev.allocate(4 * N, stream=stream)
    with pytest.warns(DeprecationWarning, match=FOREIGN_STREAM_DEPRECATION) as record:
        launch(_ForeignStream(stream), _iota_cfg(), iota, buf, np.int32(N))
    ours = [
        w
        for w in record
        if issubclass(w.category, DeprecationWarning) and "foreign stream" in str(w.message)
    ]
    assert len(ours) == 1
    assert ours[0].filename == __file__  # attributed to the caller of launch()
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    # No warning for what cuda.core takes silently (a Stream, a graph builder) nor for the
    # converted object, nor for calls cuda.core has no foreign-stream warning for.
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "error", message="Passing foreign stream", category=DeprecationWarning
        )
        launch(stream, _iota_cfg(), iota, buf, np.int32(N))
        launch(Stream(_ForeignStream(stream)), _iota_cfg(), iota, buf, np.int32(N))
        launch(dev.create_stream(_ForeignStream(stream)), _iota_cfg(), iota, buf, np.int32(N))
        PreparedLaunch(_ForeignStream(stream), _iota_cfg(), iota, buf, np.int32(N))()
        other = dev.create_stream()
        other.wait(_ForeignStream(stream))
        buf.copy_to(stream=_ForeignStream(stream)).close(stream)
        builder = other.create_graph_builder().begin_building()
        launch(builder, _iota_cfg(), iota, buf, np.int32(N))
        graph = builder.end_building().complete()
        graph.launch(stream)
        stream.sync()
        graph.close()
        builder.close()
        other.close()
    assert np.frombuffer(_read(buf, 4 * N, stream), np.int32).tolist() == EXPECTED_IOTA
    buf.close()


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
