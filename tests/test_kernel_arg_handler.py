"""ParamHolder: byte-for-byte packing of every argument type, layout checks, property tests."""

from __future__ import annotations

import ctypes
import struct

import ml_dtypes
import numpy as np
import pytest
from cuda.bindings import driver
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_core._kernel_arg_handler import ParamHolder, get_plan


def packed(*args, layout=None):
    return ParamHolder(args, layout=layout, kernel_name="k").data


# ---------------------------------------------------------------------------------------------
# One argument of each type: bytes, size and alignment by hand.

SCALARS = [
    (True, b"\x01"),
    (False, b"\x00"),
    (5, struct.pack("<Q", 5)),
    (-1, b"\xff" * 8),
    (-(2**63), struct.pack("<q", -(2**63))),
    (2**64 - 1, b"\xff" * 8),
    (1.5, struct.pack("<d", 1.5)),
    (complex(1.25, -2.5), struct.pack("<dd", 1.25, -2.5)),
    (np.bool_(True), b"\x01"),
    (np.int8(-3), struct.pack("<b", -3)),
    (np.uint8(250), struct.pack("<B", 250)),
    (np.int16(-300), struct.pack("<h", -300)),
    (np.uint16(65000), struct.pack("<H", 65000)),
    (np.int32(-70000), struct.pack("<i", -70000)),
    (np.uint32(4_000_000_000), struct.pack("<I", 4_000_000_000)),
    (np.int64(-(2**40)), struct.pack("<q", -(2**40))),
    (np.uint64(2**64 - 2), struct.pack("<Q", 2**64 - 2)),
    (np.float16(1.5), np.float16(1.5).tobytes()),
    (np.float32(0.1), struct.pack("<f", np.float32(0.1))),
    (np.float64(0.1), struct.pack("<d", 0.1)),
    (np.complex64(1 + 2j), struct.pack("<ff", 1, 2)),
    (np.complex128(3 - 4j), struct.pack("<dd", 3, -4)),
    (ml_dtypes.bfloat16(1.5), b"\xc0\x3f"),
    (ctypes.c_bool(True), b"\x01"),
    (ctypes.c_int8(-2), struct.pack("<b", -2)),
    (ctypes.c_uint8(200), b"\xc8"),
    (ctypes.c_int16(-2), struct.pack("<h", -2)),
    (ctypes.c_uint16(2), struct.pack("<H", 2)),
    (ctypes.c_int32(-2), struct.pack("<i", -2)),
    (ctypes.c_uint32(2), struct.pack("<I", 2)),
    (ctypes.c_int64(-2), struct.pack("<q", -2)),
    (ctypes.c_uint64(2), struct.pack("<Q", 2)),
    (ctypes.c_float(0.5), struct.pack("<f", 0.5)),
    (ctypes.c_double(0.5), struct.pack("<d", 0.5)),
    (ctypes.c_void_p(0xDEAD0000), struct.pack("<Q", 0xDEAD0000)),
    (ctypes.c_void_p(None), b"\x00" * 8),
    (driver.CUtexObject(0x1234), struct.pack("<Q", 0x1234)),
    (driver.CUsurfObject(0x5678), struct.pack("<Q", 0x5678)),
    (driver.CUgraphConditionalHandle(42), struct.pack("<Q", 42)),
    (driver.CUdeviceptr(0x7000), struct.pack("<Q", 0x7000)),
]


@pytest.mark.parametrize("value,expected", SCALARS, ids=lambda v: type(v).__name__)
def test_scalar_bytes(value, expected):
    h = ParamHolder((value,))
    assert h.data == expected
    assert h.sizes == (len(expected),)
    assert h.offsets == (0,)
    assert ctypes.string_at(h.pointers()[0], len(expected)) == expected


@pytest.mark.parametrize("value,expected", SCALARS, ids=lambda v: type(v).__name__)
def test_scalar_after_a_byte_is_aligned(value, expected):
    # A 1-byte bool first: the second value lands at its own alignment.
    h = ParamHolder((True, value))
    size = len(expected)
    align = 4 if isinstance(value, np.complex64) else min(size, 8)
    off = (1 + align - 1) // align * align
    assert h.offsets == (0, off)
    assert h.data == b"\x01" + b"\x00" * (off - 1) + expected


def test_pointer_array_points_at_each_value():
    h = ParamHolder((np.int8(1), 2.0, np.int32(3)))
    base = h.pointers()[0]
    assert [p - base for p in h.pointers()] == [0, 8, 16]
    arr = (ctypes.c_void_p * 3).from_address(h.ptr)
    assert ctypes.c_int8.from_address(arr[0]).value == 1
    assert ctypes.c_double.from_address(arr[1]).value == 2.0
    assert ctypes.c_int32.from_address(arr[2]).value == 3


def test_no_arguments():
    h = ParamHolder(())
    assert h.ptr == 0
    assert h.data == b""
    assert h.pointers() == ()


def test_tensor_map_is_128_bytes_64_aligned():
    tm = driver.CUtensorMap()
    raw = bytes(range(128))
    ctypes.memmove(tm.getPtr(), raw, 128)
    h = ParamHolder((np.int32(7), tm))
    assert h.offsets == (0, 64)
    assert h.data == struct.pack("<i", 7) + b"\x00" * 60 + raw
    assert h.pointers()[1] % 64 == 0


# ---------------------------------------------------------------------------------------------
# Structs by value.


class Padded(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int8), ("b", ctypes.c_double), ("c", ctypes.c_int16)]


def test_ctypes_structure_with_padding():
    s = Padded(-1, 2.5, 7)
    h = ParamHolder((np.int8(9), s))
    assert ctypes.sizeof(Padded) == 24
    assert h.offsets == (0, 8)
    expected_struct = (
        b"\xff" + b"\x00" * 7 + struct.pack("<d", 2.5) + struct.pack("<h", 7) + b"\x00" * 6
    )
    assert h.data == b"\x09" + b"\x00" * 7 + expected_struct


def test_numpy_structured_scalar_aligned():
    dt = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.int16)], align=True)
    v = np.zeros((), dtype=dt)[()]
    v["a"], v["b"], v["c"] = -1, 2.5, 7
    h = ParamHolder((np.int8(9), v))
    assert dt.itemsize == 24
    assert h.offsets == (0, 8)
    assert h.data[8:] == v.tobytes()
    assert h.data[8:17] == b"\xff" + b"\x00" * 7 + struct.pack("<d", 2.5)[:1]


def test_numpy_structured_scalar_packed_has_its_own_layout():
    dt = np.dtype([("a", np.int8), ("b", np.float64)])  # packed: 9 bytes, alignment 1
    v = np.array([(3, 1.0)], dtype=dt)[0]
    h = ParamHolder((True, v))
    assert h.offsets == (0, 1)
    assert h.data == b"\x01\x03" + struct.pack("<d", 1.0)


def test_structured_scalar_of_another_size_is_refused():
    dt8 = np.dtype([("a", np.int64)])
    dt4 = np.dtype([("a", np.int32)])
    h = ParamHolder((np.array([(1,)], dt8)[0],))
    with pytest.raises(TypeError, match="structured scalar of 4 bytes"):
        h.set_arg(0, np.array([(1,)], dt4)[0])


def test_ctypes_array_and_union():
    arr = (ctypes.c_float * 3)(1, 2, 3)

    class U(ctypes.Union):
        _fields_ = [("i", ctypes.c_int32), ("f", ctypes.c_float)]

    u = U()
    u.i = 0x01020304
    h = ParamHolder((arr, u))
    assert h.data == struct.pack("<fffi", 1, 2, 3, 0x01020304)


# ---------------------------------------------------------------------------------------------
# Pointer-like objects.


class CAI:
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {
            "data": (ptr, False),
            "shape": (4,),
            "typestr": "<f4",
            "version": 3,
        }


class DataPtr:
    def __init__(self, ptr):
        self._p = ptr

    def data_ptr(self):
        return self._p


def test_pointer_like_objects():
    h = ParamHolder((CAI(0xA000), DataPtr(0xB000), ctypes.c_void_p(0xC000), 0xD000))
    assert h.data == struct.pack("<QQQQ", 0xA000, 0xB000, 0xC000, 0xD000)


def test_buffer_packs_its_pointer():
    from cuda_core._memory import Buffer

    buf = Buffer.__new__(Buffer)
    buf._ptr = 0x1234000
    assert ParamHolder((buf,)).data == struct.pack("<Q", 0x1234000)


def test_dlpack_host_array_is_refused():
    with pytest.raises(TypeError, match="DLPack device type 1"):
        ParamHolder((np.arange(4),))


# ---------------------------------------------------------------------------------------------
# Errors.


@pytest.mark.parametrize(
    "value",
    ["text", b"bytes", None, [1, 2], object(), np.longdouble(1), np.datetime64(1, "s")],
    ids=repr,
)
def test_unsupported_type_names_position_and_type(value):
    with pytest.raises(TypeError, match=rf"argument 1 .*{type(value).__name__}"):
        ParamHolder((1, value), kernel_name="k")


@pytest.mark.parametrize("value", [ctypes.c_char_p(b"x"), ctypes.pointer(ctypes.c_int(1))])
def test_host_pointers_are_refused(value):
    with pytest.raises(TypeError, match="argument 0"):
        ParamHolder((value,))


@pytest.mark.parametrize("value", [2**64, 2**100, -(2**63) - 1])
def test_int_out_of_range(value):
    with pytest.raises(OverflowError, match="argument 0"):
        ParamHolder((value,))


def test_int_out_of_range_with_a_cached_plan():
    ParamHolder((1, 2))  # the plan for (int, int) exists now
    with pytest.raises(OverflowError, match="argument 1"):
        ParamHolder((1, 2**65))


# ---------------------------------------------------------------------------------------------
# Checks against a given parameter layout.

LAYOUT = ((0, 8), (8, 4), (16, 8))  # e.g. (float* p, int n, double x)


def test_layout_places_each_value_at_its_offset():
    h = ParamHolder((0x1000, np.int32(5), 2.0), layout=LAYOUT)
    assert h.offsets == (0, 8, 16)
    assert h.data == struct.pack("<Qi4xd", 0x1000, 5, 2.0)


def test_layout_offsets_win_over_c_alignment():
    # a kernel with __align__(16) on its third parameter
    h = ParamHolder((np.int8(1), np.int8(2), np.float32(3)), layout=((0, 1), (1, 1), (16, 4)))
    assert h.data == b"\x01\x02" + b"\x00" * 14 + struct.pack("<f", 3)


@pytest.mark.parametrize("args", [(1, np.int32(1)), (1, np.int32(1), 2.0, 3)])
def test_wrong_count(args):
    with pytest.raises(
        TypeError, match=rf"kernel 'k' takes 3 arguments but {len(args)} were given"
    ):
        ParamHolder(args, layout=LAYOUT, kernel_name="k")


def test_wrong_size_names_parameter_expected_and_given():
    with pytest.raises(TypeError) as ei:
        ParamHolder((1, np.int32(5), np.float32(2.0)), layout=LAYOUT, kernel_name="k")
    msg = str(ei.value)
    assert (
        "kernel 'k'" in msg
        and "parameter 2 is 8 bytes" in msg
        and "argument 2 (float32) packs to 4 bytes" in msg
    )
    assert "np.float64" in msg


@pytest.mark.parametrize(
    ("value", "packed"),
    [
        (5, struct.pack("<i", 5)),
        (-7, struct.pack("<i", -7)),
        (2**32 - 1, struct.pack("<I", 2**32 - 1)),  # fits unsigned
        (np.int64(-3), struct.pack("<i", -3)),
        (np.uint64(9), struct.pack("<I", 9)),
        (np.int16(-2), struct.pack("<i", -2)),  # widened keeping its value
        (np.uint8(200), struct.pack("<I", 200)),
        (ctypes.c_int64(11), struct.pack("<i", 11)),
    ],
    ids=repr,
)
def test_integer_of_another_width_packs_like_cuda_core(value, packed):
    # cuda.core points the driver at each argument's own storage and the driver copies the
    # parameter's 4 bytes: a Python int for an int parameter arrives as its low bytes.
    h = ParamHolder((0x1000, value, 2.0), layout=LAYOUT, kernel_name="k")
    assert h.data == struct.pack("<Q", 0x1000) + packed + b"\x00" * 4 + struct.pack("<d", 2.0)


def test_narrower_integer_widens_keeping_its_sign():
    layout = ((0, 8), (8, 8))
    h = ParamHolder((np.int32(-5), np.uint32(7)), layout=layout, kernel_name="k")
    assert h.data == struct.pack("<qQ", -5, 7)


@pytest.mark.parametrize("value", [2**32, -(2**31) - 1, np.int64(2**40)], ids=repr)
def test_integer_that_does_not_fit_its_parameter_is_refused(value):
    with pytest.raises(
        OverflowError, match=r"argument 1: .*does not fit a 4-byte integer parameter"
    ):
        ParamHolder((0x1000, value, 2.0), layout=LAYOUT, kernel_name="k")


def test_bool_and_float_of_another_size_are_still_refused():
    with pytest.raises(
        TypeError, match=r"parameter 1 is 4 bytes, but argument 1 \(bool\) packs to 1 byte"
    ):
        ParamHolder((0x1000, True, 2.0), layout=LAYOUT, kernel_name="k")
    with pytest.raises(
        TypeError, match=r"parameter 1 is 4 bytes, but argument 1 \(float\) packs to 8 bytes"
    ):
        ParamHolder((0x1000, 1.0, 2.0), layout=LAYOUT, kernel_name="k")


def test_wrong_size_float_for_float_param():
    with pytest.raises(
        TypeError, match=r"parameter 2 is 4 bytes.*\(float\) packs to 8 bytes.*np.float32"
    ):
        ParamHolder((1, np.int32(1), 2.0), layout=((0, 8), (8, 4), (12, 4)), kernel_name="k")


def test_set_arg_in_place_and_with_new_type():
    h = ParamHolder((0x1000, np.int32(5), 2.0), layout=LAYOUT, kernel_name="k")
    ptr = h.ptr
    h.set_arg(1, np.int32(-7))
    h.set_arg(-1, 4.0)
    assert h.ptr == ptr
    assert h.data == struct.pack("<Qi4xd", 0x1000, -7, 4.0)
    h.set_arg(1, np.uint32(9))  # another 4-byte type: re-planned, still checked
    assert h.data == struct.pack("<QI4xd", 0x1000, 9, 4.0)
    h.set_arg(1, 3)  # a Python int for the int parameter: its low 4 bytes, as in cuda.core
    assert h.data == struct.pack("<QI4xd", 0x1000, 3, 4.0)
    with pytest.raises(TypeError, match="parameter 1 is 4 bytes"):
        h.set_arg(1, 3.0)
    with pytest.raises(IndexError):
        h.set_arg(3, 1.0)
    with pytest.raises(OverflowError, match="argument 0"):
        h.set_arg(0, 2**64)


def test_plan_is_cached_per_types_and_layout():
    a = get_plan((1, 2.0), (*LAYOUT[:1], (8, 8)))
    b = get_plan((3, 4.0), (*LAYOUT[:1], (8, 8)))
    c = get_plan((3, 4.0), None)
    assert a is b
    assert a is not c


# ---------------------------------------------------------------------------------------------
# Property-based: random argument tuples pack exactly like struct with C alignment, or raise.

_typed = st.one_of(
    st.booleans().map(lambda v: (v, "?", 1)),
    st.integers(-(2**63), 2**64 - 1).map(lambda v: (v, "Q" if v >= 0 else "q", 8)),
    st.floats(allow_nan=False).map(lambda v: (v, "d", 8)),
    st.integers(-128, 127).map(lambda v: (np.int8(v), "b", 1)),
    st.integers(0, 2**16 - 1).map(lambda v: (np.uint16(v), "H", 2)),
    st.integers(-(2**31), 2**31 - 1).map(lambda v: (np.int32(v), "i", 4)),
    st.floats(width=32, allow_nan=False).map(lambda v: (np.float32(v), "f", 4)),
    st.integers(0, 2**64 - 1).map(lambda v: (np.uint64(v), "Q", 8)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: (ctypes.c_int64(v), "q", 8)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_typed, max_size=12))
def test_random_tuples_pack_like_c(items):
    args = tuple(v for v, _, _ in items)
    expected = b""
    for v, fmt, size in items:
        raw = v.value if isinstance(v, ctypes.c_int64) else v
        pad = (-len(expected)) % size
        expected += b"\x00" * pad + struct.pack("<" + fmt, raw)
    assert ParamHolder(args).data == expected


_anything = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.binary(max_size=3),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_anything, max_size=8))
def test_random_tuples_pack_or_raise_cleanly(args):
    try:
        h = ParamHolder(tuple(args))
    except (TypeError, ValueError, OverflowError):
        return
    assert len(h.data) >= sum(h.sizes)
    assert len(h.pointers()) == len(args)


# ---------------------------------------------------------------------------------------------
# Closed buffers, and the generated launch function of a plan (Plan.bind_launch).


def test_closed_buffer_is_refused_by_name():
    from cuda_core._memory import Buffer

    buf = Buffer.from_handle(0x1000, 64)
    h = ParamHolder((buf, np.int32(1)))
    assert h.data[:8] == struct.pack("<Q", 0x1000)
    buf.close()
    with pytest.raises(ValueError, match="argument 1 is a closed Buffer"):
        ParamHolder((np.int32(1), buf))
    with pytest.raises(ValueError, match="argument 0 is a closed Buffer"):
        h.set_arg(0, buf)  # same type: the in-place setter path


class _RecordingConfig:
    """A stand-in for a ``LaunchConfigHandle`` that records what ``launch`` was given (the
    contract of ``Plan.run``: the function as given, the void** of the packed values)."""

    def __init__(self, calls, nbytes, status=0):
        self.calls, self.nbytes, self.status = calls, nbytes, status

    def launch(self, func, params):
        n = self.nbytes
        ptrs = (ctypes.c_void_p * len(n)).from_address(params) if n else ()
        self.calls.append((self, func, [ctypes.string_at(p, k) for p, k in zip(ptrs, n)]))
        return self.status


def _types_match_backends():
    import importlib

    import cuda_core._handles._pure as pure

    out = [pure]
    try:
        out.append(importlib.import_module("cuda_core._handles._native"))
    except ImportError:
        pass
    return out


@pytest.mark.parametrize(
    "args,sizes",
    [
        ((), ()),
        ((0x7000, np.int32(-3), 2.5), (8, 4, 8)),
        ((-5, 2**64 - 1, np.uint8(9)), (8, 8, 1)),  # a negative int takes the fallback packer
        (tuple(float(i) for i in range(40)), (8,) * 40),  # more than the inline type checks
        (tuple(range(-20, 20)), (8,) * 40),
    ],
    ids=["none", "mixed", "negative-int", "40-doubles", "40-ints"],
)
def test_plan_run_passes_the_packed_values(args, sizes):
    from cuda_core._kernel_arg_handler import MISS, make_plan

    calls: list = []
    cfg, bad = _RecordingConfig(calls, sizes), _RecordingConfig(calls, sizes, status=7)
    plan = make_plan(tuple(map(type, args)), args, None)
    plan.bind_launch(0xF00)
    assert plan.run(cfg, args) == 0
    expected = ParamHolder(args)
    (got_cfg, func, values) = calls[-1]
    assert (got_cfg, func) == (cfg, 0xF00)
    assert values == [expected.data[o : o + n] for o, n in zip(expected.offsets, sizes)]
    assert plan.run(bad, args) == 7  # the driver's status is returned as is
    # Other types or another count: MISS, and the driver is not called.
    n = len(calls)
    assert plan.run(cfg, (*args, 1)) == MISS
    if args:
        assert plan.run(cfg, (np.int8(1), *args[1:])) == MISS
        assert plan.run(cfg, args[:-1]) == MISS
        # A subclass is another type (np.float64 is a float, np.int64 is not an int): MISS too.
        other = np.float64(1.0) if type(args[-1]) is float else np.int64(1)
        assert plan.run(cfg, (*args[:-1], other)) == MISS
    assert len(calls) == n


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([1, 2.0, True, np.float64(2.0), np.int32(1), None, "s", 3j]), max_size=40
    ),
    st.lists(
        st.sampled_from([int, float, bool, np.float64, np.int32, type(None), str, complex]),
        max_size=40,
    ),
)
def test_types_match_is_the_exact_type_comparison_in_each_backend(values, types):
    args = tuple(values)
    for b in _types_match_backends():
        for t in (tuple(types), tuple(map(type, args))):
            assert b.types_match(args, t) is (list(map(type, args)) == list(t))


def test_plan_run_overflow_raises_and_reuses_no_bad_state():
    from cuda_core._kernel_arg_handler import make_plan

    calls: list = []
    plan = make_plan((int,), (1,), None)
    cfg = _RecordingConfig(calls, (8,))
    plan.bind_launch(0xF00)
    with pytest.raises(struct.error):
        plan.run(cfg, (2**64,))
    assert (
        plan.explain((2**64,), struct.error())
        .args[0]
        .startswith("argument 0 (int 18446744073709551616) does not fit")
    )
    assert plan.run(cfg, (-(2**63),)) == 0
    assert calls[-1][2] == [struct.pack("<q", -(2**63))]
