"""launch() and PreparedLaunch: argument checks (CPU) and launches on a GPU (gpu tier)."""

from __future__ import annotations

import ctypes
import struct
import warnings

import ml_dtypes
import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import LaunchConfig, PreparedLaunch, launch
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
