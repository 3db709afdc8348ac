"""Arguments checked against the kernel's parameter types, where known (mangled names, PTX).

CPU tier: the check through packing (``ParamHolder`` and the launcher's plan), on the types
read from NVRTC's own output. GPU tier: ``launch()``, ``PreparedLaunch`` and graph nodes refuse
a float for a pointer, and a right launch still computes the right result.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
from cuda.bindings import driver

import cuda_core._kernel_arg_handler as handler
from cuda_core import Buffer, Kernel, LaunchConfig, PreparedLaunch, Program, ProgramOptions, launch
from cuda_core._compile._param_types import kernel_param_types
from cuda_core._kernel_arg_handler import ParamHolder
from cuda_core._kernel_arg_rules import ParamType
from cuda_core._launcher import _KernelEntry

SRC = r"""
template <typename T>
__global__ void scale(T* x, T a, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
__global__ void shift(double* x, double by, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += by;
}
__global__ void pick(bool b, double* out) { *out = b ? 1.0 : -1.0; }
extern "C" __global__ void fill(float* p, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
"""
NAMES = ("scale<float>", "scale<double>", "shift", "pick")
# Each kernel's parameter layout, as the driver reports it (cuKernelGetParamInfo).
LAYOUTS = {
    "scale<float>": ((0, 8), (8, 4), (16, 8)),
    "scale<double>": ((0, 8), (8, 8), (16, 8)),
    "shift": ((0, 8), (8, 8), (16, 4)),
    "pick": ((0, 1), (8, 8)),
    "fill": ((0, 8), (8, 4), (12, 4)),
}


@pytest.fixture(scope="module")
def ptx():
    opts = ProgramOptions(arch="sm_90", std="c++17")
    return Program(SRC, code_type="c++", options=opts).compile("ptx", name_expressions=NAMES)


def _types(ptx, name):
    sym = ptx.symbol_mapping.get(name, name.encode())
    return kernel_param_types(sym, ptx.code, "ptx")


class Array:
    """A device array seen through ``__cuda_array_interface__`` (never dereferenced here)."""

    @property
    def __cuda_array_interface__(self):
        return {"data": (0x7F0000002000, False), "shape": (4,), "typestr": "<f4", "version": 3}


BUF = Buffer.from_handle(0x7F0000001000, 1024)  # made-up device memory, never touched

REFUSED = [
    (
        "scale<float>",
        (1.5, np.float32(2), 3),
        r"parameter 0 is float\* but a float \(1\.5\) was "
        r"given; pass a device pointer \(a Buffer, an array or an int address\)",
    ),
    (
        "scale<float>",
        (np.float64(1.5), np.float32(2), 3),
        r"parameter 0 is float\* but a NumPy float64 \(1\.5\)",
    ),
    (
        "scale<float>",
        (ctypes.c_double(1.5), np.float32(2), 3),
        r"parameter 0 is float\* but a ctypes c_double",
    ),
    ("scale<double>", (complex(1, 2), 2.0, 3), r"parameter 0 is double\* but a complex \(1\+2j\)"),
    # An int for a float: it packs as an integer the kernel would read as a garbage float
    # (before the check, a Python int for a 4-byte float was even resized to 4 bytes).
    (
        "scale<float>",
        (BUF, 2, 3),
        r"parameter 1 is float but an int \(2\) was given; pass a "
        r"floating-point value such as np\.float32\(2\)",
    ),
    ("scale<float>", (BUF, np.int32(2), 3), r"parameter 1 is float but a NumPy int32 \(2\)"),
    (
        "scale<double>",
        (BUF, 2, 3),
        r"parameter 1 is double but an int \(2\) was given; pass a "
        r"floating-point value such as 2\.0 or np\.float64\(2\)",
    ),
    ("scale<double>", (BUF, True, 3), r"parameter 1 is double but a bool \(True\)"),
    # A pointer for a float.
    ("scale<double>", (BUF, BUF, 3), r"parameter 1 is double but a pointer \(Buffer\) was given"),
    ("scale<double>", (BUF, Array(), 3), r"parameter 1 is double but a pointer \(Array\)"),
    (
        "scale<float>",
        (BUF, ctypes.c_void_p(16), 3),
        r"parameter 1 is float but a pointer \(c_void_p\)",
    ),
    # A float for an integer.
    (
        "scale<float>",
        (BUF, np.float32(2), 3.0),
        r"parameter 2 is unsigned long but a float \(3\.0\) "
        r"was given; pass an int or a NumPy integer",
    ),
    ("shift", (BUF, 1.0, np.float32(3)), r"parameter 2 is int but a NumPy float32 \(3\.0\)"),
    ("pick", (1.5, BUF), r"parameter 0 is bool but a float \(1\.5\) was given; pass a bool"),
    # PTX (extern "C"): the PTX types.
    (
        "fill",
        (1.5, np.float32(1), 3),
        r"parameter 0 is a pointer or 64-bit integer \(\.u64\) but "
        r"a float \(1\.5\) was given; pass a device pointer \(a Buffer, an array or an int address\) or an integer",
    ),
    ("fill", (BUF, 1, 3), r"parameter 1 is float \(\.f32\) but an int \(1\)"),
    (
        "fill",
        (BUF, np.float32(1), np.float32(3)),
        r"parameter 2 is a 32-bit integer \(\.u32\) but a NumPy float32",
    ),
]


@pytest.mark.parametrize("name,args,message", REFUSED)
def test_a_wrong_kind_of_argument_is_refused_naming_the_c_type(ptx, name, args, message):
    types = _types(ptx, name)
    with pytest.raises(TypeError, match=rf"^kernel 'k': {message}"):
        ParamHolder(args, LAYOUTS[name], "k", param_types=types)
    # The same arguments where the types are not known (an extern "C" kernel in a cubin):
    # the size check alone, which lets through what has the parameter's size.
    try:
        ParamHolder(args, LAYOUTS[name], "k")
    except TypeError as exc:
        assert "bytes" in str(exc) and " but " in str(exc)


class Meters(float):
    pass


def test_a_subclass_of_float_is_a_float(ptx):
    types = _types(ptx, "scale<double>")
    with pytest.raises(TypeError, match=r"parameter 0 is double\* but a Meters \(1\.5\)"):
        ParamHolder((Meters(1.5), 2.0, 3), LAYOUTS["scale<double>"], "k", param_types=types)
    ParamHolder((BUF, Meters(2.0), 3), LAYOUTS["scale<double>"], "k", param_types=types)


VALID = [
    ("scale<float>", (BUF, np.float32(2), 3)),
    ("scale<float>", (0x7F0000001000, ctypes.c_float(2), np.uint64(3))),  # an int address
    ("scale<float>", (np.uint64(0x7F0000001000), np.float32(2), np.int32(3))),  # widened
    ("scale<float>", (ctypes.c_void_p(0x7F0000001000), np.float32(2), ctypes.c_uint64(3))),
    ("scale<float>", (driver.CUdeviceptr(0x7F0000001000), np.float32(2), 3)),
    ("scale<double>", (Array(), 2.0, 3)),
    ("scale<double>", (BUF, np.float64(2), np.uint64(3))),
    ("shift", (BUF, 2.0, 3)),  # an int for an int parameter of another width
    ("pick", (True, BUF)),
    ("pick", (np.bool_(False), BUF)),
    ("pick", (1, BUF)),
    ("fill", (0x7F0000001000, np.float32(1), 3)),
    ("fill", (BUF, ctypes.c_float(1), np.int32(3))),
]


@pytest.mark.parametrize("name,args", VALID)
def test_the_right_kinds_pack_as_before(ptx, name, args):
    types = _types(ptx, name)
    assert types is not None and len(types) == len(args)
    checked = ParamHolder(args, LAYOUTS[name], "k", param_types=types)
    assert checked.data == ParamHolder(args, LAYOUTS[name], "k").data


def test_packed_bytes_of_a_checked_launch(ptx):
    h = ParamHolder(
        (BUF, np.float32(2.5), 7), LAYOUTS["scale<float>"], param_types=_types(ptx, "scale<float>")
    )
    assert h.data == struct.pack("<QfxxxxQ", 0x7F0000001000, 2.5, 7)
    with pytest.raises(TypeError, match=r"^the kernel: parameter 0 is float\* but a float"):
        h.set_arg(0, 1.5)
    with pytest.raises(TypeError, match=r"parameter 1 is float but an int"):
        h.set_arg(1, 2)
    h.set_arg(0, 0x2000)
    assert h.data[:8] == struct.pack("<Q", 0x2000)


def test_types_that_disagree_with_the_layout_are_not_used():
    # A misread type (8 bytes where the driver says 4) would refuse right arguments: the size
    # check alone applies then.
    wrong = (ParamType("float*", "pointer", 8), ParamType("double", "float", 8))
    h = ParamHolder((BUF, np.int32(2)), ((0, 8), (8, 4)), param_types=wrong)
    assert h.data[8:] == struct.pack("<i", 2)
    with pytest.raises(TypeError, match="parameter 1 is 4 bytes"):
        ParamHolder((BUF, 2.0), ((0, 8), (8, 4)), param_types=wrong)
    # A parameter whose type is unknown (None) is left to the size check.
    some = (None, ParamType("float", "float", 4))
    ParamHolder((1.5, np.float32(1)), ((0, 8), (8, 4)), param_types=some)
    with pytest.raises(TypeError, match="parameter 1 is float but an int"):
        ParamHolder((1.5, 1), ((0, 8), (8, 4)), param_types=some)


def _kernel(ptx, name, calls):
    """A Kernel at a made-up address, as ObjectCode.get_kernel makes it, counting how often its
    parameter types are worked out."""
    k = Kernel.from_handle(0xC0DE00)
    k._params = LAYOUTS[name]
    k._label = name  # as get_kernel sets it: no driver call asks a made-up handle its name

    def signature():
        calls.append(name)
        return _types(ptx, name)

    k._signature = signature
    return k


def test_the_check_runs_when_the_plan_is_built_never_per_call(ptx, monkeypatch):
    calls: list[str] = []
    checks = []
    real = handler.type_message
    monkeypatch.setattr(handler, "type_message", lambda *a: checks.append(a) or real(*a))
    k = _kernel(ptx, "scale<float>", calls)
    assert calls == []  # nothing is read before the first plan
    entry = _KernelEntry(k)
    with pytest.raises(TypeError, match=r"parameter 0 is float\* but a float \(1\.5\)"):
        entry.plan(k, (1.5, np.float32(2), 3))
    plan = entry.plan(k, (BUF, np.float32(2), 3))
    built = len(checks)
    assert built == 3 + 1  # three arguments checked, and the refused one
    assert entry.plan(k, (BUF, np.float32(3), 4)) is plan  # the cached plan: no check
    assert len(checks) == built
    assert calls == ["scale<float>"]  # the types were worked out once, for the kernel
    assert k._param_types() is entry.param_types
    assert calls == ["scale<float>"]


def test_a_kernel_without_a_signature_keeps_the_size_check():
    k = Kernel.from_handle(0xC0DE00)  # Kernel.from_handle: its types are not known
    k._params = LAYOUTS["scale<float>"]
    k._label = "scale<float>"  # never asked of the driver: the handle is made up
    assert k._param_types() is None
    entry = _KernelEntry(k)
    entry.plan(k, (1.5, np.float32(2), 3))  # what the layout alone cannot tell
    with pytest.raises(TypeError, match="parameter 1 is 4 bytes"):
        entry.plan(k, (BUF, 2.0, 3))


# ---------------------------------------------------------------------------------------------
# GPU tier.

N = 1000


@pytest.fixture(scope="module")
def stream(dev):
    s = dev.create_stream()
    yield s
    s.close()


@pytest.fixture(scope="module")
def cubin(dev):
    opts = ProgramOptions(arch=f"sm_{dev.arch}", std="c++17")
    return Program(SRC, code_type="c++", options=opts).compile("cubin", name_expressions=NAMES)


def _cfg():
    return LaunchConfig(grid=(N + 127) // 128, block=128)


def _read(buf, dtype, stream):
    host = np.empty(N, dtype)
    buf.copy_to(host, stream=stream)
    stream.sync()
    return host


@pytest.mark.gpu
def test_launch_refuses_a_float_for_a_pointer_of_a_mangled_kernel(dev, stream, cubin):
    ker = cubin.get_kernel("scale<float>")
    buf = dev.allocate(4 * N, stream=stream)
    buf.copy_from(np.arange(N, dtype=np.float32), stream=stream)
    launch(stream, _cfg(), ker, buf, np.float32(2), np.uint64(N))  # the plan is warm now
    with pytest.raises(TypeError, match=r"parameter 0 is float\* but a float \(1\.5\) was given"):
        launch(stream, _cfg(), ker, 1.5, np.float32(2), np.uint64(N))
    with pytest.raises(TypeError, match=r"^kernel 'scale<float>': "):  # named as get_kernel was
        launch(stream, _cfg(), ker, 1.5, np.float32(2), np.uint64(N))
    with pytest.raises(TypeError, match=r"parameter 1 is float but an int \(2\) was given"):
        launch(stream, _cfg(), ker, buf, 2, N)
    with pytest.raises(TypeError, match=r"parameter 0 is float\* but a float"):
        PreparedLaunch(stream, _cfg(), ker, 1.5, np.float32(2), np.uint64(N))
    p = PreparedLaunch(stream, _cfg(), ker, buf, np.float32(2), np.uint64(N))
    with pytest.raises(TypeError, match=r"parameter 0 is float\* but a float"):
        p.set_arg(0, 1.5)
    with pytest.raises(TypeError, match=r"parameter 0 is float\* but a float"):
        p(1.5, np.float32(2), np.uint64(N))
    p()  # the bound arguments are still the right ones
    launch(stream, _cfg(), ker, buf, np.float32(0.5), N)  # an int for size_t: fine
    expected = np.arange(N, dtype=np.float32) * np.float32(2) * np.float32(2) * np.float32(0.5)
    assert _read(buf, np.float32, stream).tolist() == expected.tolist()
    buf.close()


@pytest.mark.gpu
def test_launch_refuses_an_int_for_a_double(dev, stream, cubin):
    ker = cubin.get_kernel("shift")
    buf = dev.allocate(8 * N, stream=stream)
    buf.copy_from(np.zeros(N, np.float64), stream=stream)
    with pytest.raises(TypeError, match=r"parameter 1 is double but an int \(1\) was given"):
        launch(stream, _cfg(), ker, buf, 1, N)
    launch(stream, _cfg(), ker, buf, 1.5, N)
    assert _read(buf, np.float64, stream).tolist() == [1.5] * N
    buf.close()


@pytest.mark.gpu
def test_launch_refuses_a_float_for_a_pointer_of_a_ptx_kernel(dev, stream):
    opts = ProgramOptions(arch=f"sm_{dev.arch}")
    mod = Program(SRC, code_type="c++", options=opts).compile("ptx", name_expressions=NAMES)
    ker = mod.get_kernel("fill")  # extern "C": the types come from the PTX
    buf = dev.allocate(4 * N, stream=stream)
    with pytest.raises(
        TypeError, match=r"parameter 0 is a pointer or 64-bit integer \(\.u64\) but a float"
    ):
        launch(stream, _cfg(), ker, 1.5, np.float32(3.5), np.int32(N))
    with pytest.raises(TypeError, match=r"parameter 1 is float \(\.f32\) but an int \(3\)"):
        launch(stream, _cfg(), ker, buf, 3, np.int32(N))
    launch(stream, _cfg(), ker, buf, np.float32(3.5), np.int32(N))
    assert _read(buf, np.float32, stream).tolist() == [3.5] * N
    buf.close()


@pytest.mark.gpu
def test_a_graph_kernel_node_refuses_a_float_for_a_pointer(dev, stream, cubin):
    from cuda_core.graph import GraphDefinition

    ker = cubin.get_kernel("scale<float>")
    buf = dev.allocate(4 * N, stream=stream)
    buf.copy_from(np.arange(N, dtype=np.float32), stream=stream)
    stream.sync()
    g = GraphDefinition()
    with pytest.raises(TypeError, match=r"parameter 0 is float\* but a float \(1\.5\)"):
        g.launch(_cfg(), ker, 1.5, np.float32(2), np.uint64(N))
    g.launch(_cfg(), ker, buf, np.float32(3), np.uint64(N))
    g.instantiate().launch(stream)
    expected = np.arange(N, dtype=np.float32) * np.float32(3)
    assert _read(buf, np.float32, stream).tolist() == expected.tolist()
    buf.close()
