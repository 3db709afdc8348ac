"""CPU tier: the native ``LaunchPlan`` packs exactly the bytes of the Python packing plan.

``launch()`` and ``PreparedLaunch`` pack arguments in C on the native backend
(``cuda_core/_handles/_csrc/launch_plan.c``); what C accepts must give the bytes the Python plan
(``cuda_core._kernel_arg_handler``) writes, and what C refuses goes back to the Python path,
which raises. ``LaunchPlan.pack`` runs the C packing without a driver, so it is compared here
value by value, edges included; launches through the stub driver are in
``test_native_stub_launch.py``.
"""

from __future__ import annotations

import ctypes
import struct

import ml_dtypes
import numpy as np
import pytest
from cuda.bindings import driver

from cuda_core import Buffer
from cuda_core._handles import _backend, _protocol
from cuda_core._kernel_arg_handler import make_plan

pytestmark = pytest.mark.skipif(
    not _backend.NATIVE, reason="the native backend is not in use (LaunchPlan is its own)"
)


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int8), ("b", ctypes.c_double)]


def _struct_scalar():
    v = np.zeros(1, dtype=[("a", "<i4"), ("b", "<f8")])[0]
    v["a"], v["b"] = 7, -1.5
    return v


def _bits(fmt: str, raw: int):
    return np.frombuffer(struct.pack("<" + fmt.upper(), raw), "<" + {"i": "f4", "h": "f2"}[fmt])[0]


# Values of every type C packs itself, with the edges of each range.
VALUES = [
    True, False, 0, 5, -5, 2**63 - 1, -(2**63), 2**64 - 1, 0.0, -0.0, 1.25, float("inf"),
    float("nan"), 1e308, complex(2, -3), complex("nan+1j"),
    np.bool_(True), np.bool_(False), np.int8(-128), np.int8(127), np.uint8(255),
    np.int16(-32768), np.uint16(65535), np.int32(-(2**31)), np.uint32(2**32 - 1),
    np.int64(-(2**63)), np.uint64(2**64 - 1), np.float16(0.5), np.float16(-65504),
    np.float16("inf"), _bits("h", 0x7C01), _bits("h", 0xFE00), np.float32(1 / 3),
    np.float32("-inf"), _bits("i", 0x7F800001), _bits("i", 0xFFC00000), np.float64(2.5),
    np.float64("nan"), np.complex64(1 - 2j), np.complex128(3 + 4j),
    ctypes.c_int16(-9), ctypes.c_uint64(2**64 - 1), ctypes.c_float(2.5), ctypes.c_double(-2.5),
    ctypes.c_bool(True), ctypes.c_void_p(0x1234), Pair(3, 4.5), (ctypes.c_int32 * 3)(1, 2, 3),
    _struct_scalar(), ml_dtypes.bfloat16(3.140625), driver.CUtexObject(77),
    driver.CUdeviceptr(0xDEAD000), Buffer.from_handle(0x5000, 8),
]  # fmt: skip


def _both(args, layout=None):
    """(Python plan's bytes, native LaunchPlan's bytes) for ``args``."""
    plan = make_plan(tuple(map(type, args)), args, layout)
    plan.bind_launch(0xF00D)
    assert plan.native is not None, [r.kind for r in plan.rules]
    slot = plan.new_slot()
    plan.pack(slot, args)
    return slot[0].tobytes(), plan.native.pack(args)


def test_every_kind_packs_the_python_plans_bytes():
    python, native = _both(tuple(VALUES))
    assert native == python


@pytest.mark.parametrize("value", VALUES, ids=lambda v: f"{type(v).__name__}")
def test_each_value_alone_and_at_an_odd_offset(value):
    python, native = _both((np.int8(1), value))
    assert native == python


@pytest.mark.parametrize(
    "value,size",
    [
        (2**31 - 1, 4), (-(2**31), 4), (2**32 - 1, 4), (-1, 4), (255, 1), (-128, 1), (65535, 2),
        (np.int64(-5), 4), (np.uint64(2**32 - 1), 4), (np.int32(-7), 8), (np.uint8(200), 8),
        (np.int16(-3), 1),
    ],
)  # fmt: skip
def test_integers_for_an_integer_parameter_of_another_width(value, size):
    # As cuda.core's launches deliver them: the low bytes of a value that fits.
    python, native = _both((value,), ((0, size),))
    assert native == python and len(native) == size


@pytest.mark.parametrize(
    "value,size",
    [(2**32, 4), (-(2**31) - 1, 4), (256, 1), (np.uint64(2**40), 4), (np.int64(-(2**40)), 2)],
)
def test_what_does_not_fit_is_refused_by_both(value, size):
    plan = make_plan((type(value),), (value,), ((0, size),))
    plan.bind_launch(0xF00D)
    with pytest.raises(OverflowError):
        plan.pack(plan.new_slot(), (value,))
    with pytest.raises(OverflowError):
        plan.native.pack((value,))


def test_values_c_refuses_are_left_to_python():
    # The plan is made for good values; later values of the same types that do not pack are
    # refused by C with any exception, and the Python path then raises the user-facing one.
    buf = Buffer.from_handle(0x5000, 8)
    closed = Buffer.from_handle(0x6000, 8)
    closed.close()
    ptr = make_plan((int, Buffer), (1, buf), None)
    ptr.bind_launch(1)
    for bad in ((2**64, buf), (-(2**63) - 1, buf), (1, closed)):
        with pytest.raises((OverflowError, TypeError)):
            ptr.native.pack(bad)
    small = np.zeros(1, dtype=[("a", "<i4")])[0]
    void = make_plan((np.void,), (_struct_scalar(),), None)
    void.bind_launch(1)
    with pytest.raises(TypeError):
        void.native.pack((small,))
    with pytest.raises(TypeError, match="not of the plan's types"):
        ptr.native.pack((1, 2))
    with pytest.raises(TypeError, match="not of the plan's types"):
        ptr.native.pack((1,))


def test_an_empty_struct_packs_no_bytes():
    class Empty(ctypes.Structure):
        _fields_ = ()

    python, native = _both((np.int8(3), Empty(), np.int8(4)))
    assert native == python == b"\x03\x04"


def test_types_without_a_native_kind_have_no_native_plan():
    # A ctypes integer for a wider integer parameter: only Python packs it.
    plan = make_plan((ctypes.c_int16,), (ctypes.c_int16(-3),), ((0, 4),))
    plan.bind_launch(1)
    assert plan.native is None


def test_a_buffer_subclass_reads_its_own_pointer():
    class Shifted(Buffer):  # a subclass whose _ptr is a property, not Buffer's slot
        @property
        def _ptr(self):
            return None if self._at is None else self._at + 0x10

        @_ptr.setter
        def _ptr(self, value):
            self._at = value

    b = Shifted.from_handle(0x5000, 8)
    python, native = _both((b,))
    assert native == python == (0x5010).to_bytes(8, "little")


def test_plan_construction_checks_what_it_is_given():
    kinds = {name: i for i, name in enumerate(_protocol.ARG_KINDS)}
    plan_type = _backend.backend.LaunchPlan  # type: ignore[attr-defined]
    good = plan_type(1, (int,), (kinds["fit"],), (0,), (8,), (None,), 8)
    assert good.function == 1 and good.types == (int,) and good.size == 8
    assert good.pack((-1,)) == b"\xff" * 8
    for kind, size, getter, total in [
        (len(kinds), 8, None, 8),  # no such kind
        (kinds["fit"], 3, None, 8),  # no such integer size
        (kinds["float"], 8, None, 4),  # beyond the packed size
        (kinds["call_index"], 8, None, 8),  # a call kind without its getter
        (kinds["call_index"], 8, 5, 8),  # a getter that is not callable
        (kinds["bool"], 1, len, 1),  # a getter where there is no call
    ]:
        with pytest.raises(ValueError):
            plan_type(1, (int,), (kind,), (0,), (size,), (getter,), total)
    with pytest.raises(ValueError):
        plan_type(1, (int, int), (0,), (0,), (8,), (None,), 8)  # lengths differ
    with pytest.raises(TypeError):
        plan_type(1, [int], (0,), (0,), (8,), (None,), 8)  # not a tuple


def test_the_shortcuts_each_common_argument_takes():
    args = (1.5, np.float64(2.0), np.int32(3), np.float32(1.0), np.bool_(True),
            Buffer.from_handle(0x5000, 8), 7, np.complex64(1j))  # fmt: skip
    plan = make_plan(tuple(map(type, args)), args, None)
    plan.bind_launch(1)
    before = plan.native.shortcuts
    assert before == ("f64", "f64", "inline?", "inline?", "inline?", "slot", "", "")
    plan.native.pack(args)  # the first NumPy value confirms where its type keeps the value
    assert plan.native.shortcuts[2:5] == ("inline", "inline", "inline")


@pytest.mark.parametrize(
    "values",
    [
        [np.float32(1.5), np.float32("nan"), _bits("i", 0x7F800001), np.float32("-inf"),
         np.float32(-0.0), np.float32(3.4e38)],
        [np.float16(0.5), _bits("h", 0x7C01), np.float16("inf"), np.float16(-65504)],
        [np.float64(2.5), np.float64("nan"), np.float64(-0.0), np.float64(1e308)],
        [np.int8(-128), np.int8(127), np.int8(0)],
        [np.uint64(0), np.uint64(2**64 - 1)],
        [np.int32(-(2**31)), np.int32(2**31 - 1)],
        [np.bool_(True), np.bool_(False)],
        [1.0, float("nan"), -0.0, float("inf")],
    ],
    ids=lambda vs: type(vs[0]).__name__,
)  # fmt: skip
def test_a_shortcut_packs_every_later_value_as_the_python_plan(values):
    # One plan per type, made from the first value, then used for all of them: the shortcut,
    # once confirmed, must give the Python plan's bytes for each (NaNs and edges included).
    plan = make_plan((type(values[0]), np.int8), (values[0], np.int8(1)), None)
    plan.bind_launch(1)
    for v in values:
        slot = plan.new_slot()
        plan.pack(slot, (v, np.int8(1)))
        assert plan.native.pack((v, np.int8(1))) == slot[0].tobytes(), v
    assert plan.native.shortcuts[0] in ("inline", "f64")


def test_a_pointer_slot_read_in_place_falls_back_when_unset():
    buf = Buffer.from_handle(0x5000, 8)
    plan = make_plan((Buffer,), (buf,), None)
    plan.bind_launch(1)
    assert plan.native.shortcuts == ("slot",)
    assert plan.native.pack((Buffer.from_handle(0x7000, 8),)) == (0x7000).to_bytes(8, "little")
    for address in (0, 2**32 + 8, 2**63 + 4096, 2**64 - 4096):  # every digit count of an address
        packed = plan.native.pack((Buffer.from_handle(address, 8),))
        assert packed == address.to_bytes(8, "little"), hex(address)
    closed = Buffer.from_handle(0x6000, 8)
    closed.close()
    with pytest.raises(TypeError):  # the getter's path refuses; launch() then says why
        plan.native.pack((closed,))


def test_a_pointer_slot_remembers_only_the_int_it_read_last():
    # launch_pack.c keeps the int a Buffer's slot held last with its value: the same int object
    # packs without a conversion, any other int (an equal one, another address, a Buffer closed
    # since) is read again.
    a, b = Buffer.from_handle(0x5000, 8), Buffer.from_handle(2**47 + 0x1000, 8)
    plan = make_plan((Buffer,), (a,), None)
    plan.bind_launch(1)
    for buf in (a, a, b, a, b, b, Buffer.from_handle(int("5000", 16), 8), a):
        assert plan.native.pack((buf,)) == buf.handle.to_bytes(8, "little")
    a.close()  # its slot now holds None: the getter's path refuses, as for any closed Buffer
    with pytest.raises(TypeError):
        plan.native.pack((a,))
    assert plan.native.pack((b,)) == (2**47 + 0x1000).to_bytes(8, "little")


@pytest.mark.parametrize("n", [1, 3, 512])
def test_a_plan_of_only_doubles_packs_them_in_one_loop_as_the_python_plan(n):
    # Every argument a float at 8 * its index (launch_pack.c's dense_f64 loop): floats and
    # NumPy float64s (a float subclass) with the edges, against the Python plan's bytes.
    edges = [1.5, -0.0, float("nan"), float("inf"), 1e308, np.float64(2.5), np.float64("-inf")]
    args = tuple(edges[i % len(edges)] for i in range(n))
    plan = make_plan(tuple(map(type, args)), args, None)
    plan.bind_launch(1)
    assert plan.native.shortcuts == ("f64",) * n
    later = tuple(
        float(i) * -3.25 if type(a) is float else np.float64(i) for i, a in enumerate(args)
    )
    for values in (args, later):
        slot = plan.new_slot()
        plan.pack(slot, values)
        assert plan.native.pack(values) == slot[0].tobytes()
    with pytest.raises(TypeError):  # another type at the last place: no longer this plan's
        plan.native.pack((*args[:-1], np.float32(1)))


def test_doubles_behind_a_narrower_argument_keep_their_offsets():
    args = (np.int32(-7), 1.5, 2.5, float("nan"))  # the doubles at 8, 16, 24: not 8 * index
    plan = make_plan(tuple(map(type, args)), args, None)
    plan.bind_launch(1)
    slot = plan.new_slot()
    plan.pack(slot, args)
    assert plan.native.pack(args) == slot[0].tobytes()
