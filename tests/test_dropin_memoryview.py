"""Drop-in: StridedMemoryView's shape and stride reporting, compared with NVIDIA's ``cuda.core``.

cuda.core 1.2 reports strides as the producer gave them, in elements: a DLPack producer's strides
array (``None`` only when it gave none, ``()`` for a 0-d tensor that gave one), the CUDA/NumPy
array interface's byte strides divided by the item size (``None`` when the interface leaves them
out), and a ``from_buffer``/``view`` layout's strides as passed. It never replaces C-contiguous
strides by ``None``. The CPU tests compare through DLPack and ``from_buffer`` (which need no
driver there); the array interfaces need a driver in cuda.core, so they are compared on a GPU.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import cuda_core as ours
from cuda_core._interop import _dlpack as dl
from tests.helpers import gpu_skip_reason
from tests.helpers.dropin import host_resource, outcome, same_outcome


def _smv(lib):
    return lib.utils.StridedMemoryView


def _numpy_cases():
    base = np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8)
    return {
        "C-contiguous": base,
        "F-contiguous": np.asfortranarray(base),
        "sliced": base[1:, 1:, 2:6],
        "strided": base[:, ::2, ::3],
        "transposed": base.T,
        "reversed": base[:, :, ::-1],
        "broadcast": np.broadcast_to(np.arange(3, dtype=np.int16), (4, 3)),
        "extent 1": base[:1, :, ::2],
        "0-d": np.array(5, dtype=np.int64),
        "empty": np.zeros((0, 3), dtype=np.float64),
        "empty strided": np.zeros((0, 4), dtype=np.float64)[:, ::2],
        "1-d": np.arange(7, dtype=np.uint8),
        "complex": np.zeros((4, 4), dtype=np.complex128)[:, ::2],
        "bool": np.zeros((2, 5), dtype=bool),
    }


def _fields(v):
    return (v.ptr, v.shape, v.strides, v.dtype, v.size, v.readonly, v.is_device_accessible)


@pytest.mark.parametrize("case", list(_numpy_cases()))
def test_numpy_strides_through_dlpack_match_cuda_core(nv, case):
    a = _numpy_cases()[case]
    makers = {
        "from_dlpack": lambda S: S.from_dlpack(a, -1),
        "from_any_interface": lambda S: S.from_any_interface(a, -1),
        "StridedMemoryView(obj, -1)": lambda S: S(a, -1),
    }
    for name, make in makers.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            theirs, mine = make(_smv(nv)), make(_smv(ours))
        assert _fields(mine) == _fields(theirs), f"{case} {name}"
        assert type(mine.strides) is type(theirs.strides)
    # NumPy's DLPack export gives its strides for every array of one or more dimensions.
    if a.ndim:
        assert mine.strides == tuple(s // a.itemsize for s in a.strides)
    else:
        assert mine.strides is None


class _Producer:
    """A DLPack producer over ``owner``'s memory with the shape and strides chosen (a new capsule
    for every consumer), so the test controls exactly what the producer gives."""

    def __init__(self, owner, shape, strides):
        self.owner, self.shape, self.strides = owner, shape, strides

    def __dlpack__(self, stream=None, max_version=None):
        return dl.make_capsule(self.owner.ctypes.data, self.shape, np.float32, dl.kDLCPU, 0, owner=self.owner,
                               strides=self.strides)  # fmt: skip

    def __dlpack_device__(self):
        return (dl.kDLCPU, 0)


_GIVEN = {
    "none (C-contiguous)": ((3, 4), None),
    "C-contiguous given": ((3, 4), (4, 1)),
    "F-contiguous given": ((3, 4), (1, 3)),
    "extent-1 stride odd": ((3, 1), (1, 99)),
    "0-d with strides": ((), ()),
    "0-d without strides": ((), None),
    "empty with strides": ((0, 4), (7, 3)),
}


@pytest.mark.parametrize("case", list(_GIVEN))
def test_dlpack_strides_reported_as_the_producer_gave_them(nv, case):
    shape, strides = _GIVEN[case]
    owner = np.zeros(16, dtype=np.float32)
    p = _Producer(owner, shape, strides)
    theirs, mine = _smv(nv).from_dlpack(p, -1), _smv(ours).from_dlpack(p, -1)
    assert mine.strides == theirs.strides == strides
    assert mine.shape == theirs.shape == shape
    assert mine.size == theirs.size


@pytest.mark.parametrize(
    "shape,strides",
    [
        ((3, 4), None),
        ((3, 4), (4, 1)),
        ((3, 4), (1, 3)),
        ((2, 2), (4, 1)),
        ((5,), (1,)),
        ((), None),
        ((), ()),
    ],
)
def test_from_buffer_and_view_keep_the_strides_given(nv, shape, strides):
    if (
        gpu_skip_reason() is None
    ):  # with a driver, cuda.core 1.2.0's from_handle needs a current context
        ours.Device(0).set_current()
    host = np.zeros(16, dtype=np.float32)
    out = []
    for lib in (nv, ours):
        buf = lib.Buffer.from_handle(host.ctypes.data, host.nbytes, mr=host_resource(lib))
        v = _smv(lib).from_buffer(buf, shape, strides, dtype=np.dtype(np.float32))
        w = v.view(
            dtype=np.dtype(np.int32)
        )  # same item size: the layout, strides included, carries over
        out.append((v.shape, v.strides, v.size, w.shape, w.strides, w.dtype))
        buf.close()
    assert out[0] == out[1]
    assert out[1][1] == strides


def test_strides_reported_in_elements_not_bytes(nv):
    a = np.zeros((4, 4), dtype=np.complex128)[:, ::2]  # byte strides (64, 32), item size 16
    assert _smv(ours).from_dlpack(a, -1).strides == _smv(nv).from_dlpack(a, -1).strides == (4, 2)


def test_view_without_changes_is_the_view_itself(nv):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for lib in (nv, ours):
        v = _smv(lib).from_dlpack(a, -1)
        assert v.view() is v and v.view(None, None) is v


class _NoProtocol:
    pass


@pytest.mark.parametrize(
    "entry", ["from_dlpack", "from_array_interface", "from_any_interface", "ctor"]
)
def test_objects_without_the_protocol_raise_cuda_core_class(nv, entry):
    def make(S):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            if entry == "ctor":
                return S(_NoProtocol(), -1)
            if entry == "from_array_interface":
                return S.from_array_interface(_NoProtocol())
            return getattr(S, entry)(_NoProtocol(), -1)

    nv_out, our_out = outcome(make, _smv(nv)), outcome(make, _smv(ours))
    same_outcome(nv_out, our_out, entry)
    assert issubclass(our_out[1], BufferError)  # and always a BufferError, as documented here


# -- the CUDA Array Interface and NumPy's array interface (cuda.core needs a driver for both) --


class _CAI:
    def __init__(self, ptr, shape, typestr, strides):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": strides, "stream": None}  # fmt: skip


class _AI:
    def __init__(self, owner, shape, typestr, strides):
        self.owner = owner
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "data": (owner.ctypes.data, False),
                                    "version": 3, "strides": strides}  # fmt: skip


_INTERFACE_CASES = [
    ((3, 4), "<f4", None),
    ((3, 4), "<f4", (16, 4)),  # C-contiguous, given: reported as (4, 1), not None
    ((3, 4), "<f4", (4, 12)),
    ((4,), "<f8", (16,)),
    ((2, 3), "<i2", (2, 4)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape,typestr,strides", _INTERFACE_CASES)
def test_array_interface_strides_match_cuda_core(nv, dev, shape, typestr, strides):
    s = dev.create_stream()
    buf = dev.allocate(256, stream=s)
    s.sync()
    host = np.zeros(64, dtype=np.float64)
    cai, ai = _CAI(int(buf.handle), shape, typestr, strides), _AI(host, shape, typestr, strides)
    item = np.dtype(typestr).itemsize
    expected = None if strides is None else tuple(x // item for x in strides)
    for make in (lambda S: S.from_cuda_array_interface(cai, -1), lambda S: S.from_any_interface(cai, -1),
                 lambda S: S.from_array_interface(ai)):  # fmt: skip
        theirs, mine = make(_smv(nv)), make(_smv(ours))
        assert (mine.ptr, mine.shape, mine.strides, mine.dtype, mine.size) == (
            theirs.ptr,
            theirs.shape,
            theirs.strides,
            theirs.dtype,
            theirs.size,
        )
        assert mine.strides == expected
    buf.close(s)
    s.close()


@pytest.mark.gpu
def test_interface_strides_not_item_multiples_raise_cuda_core_class(nv, dev):
    s = dev.create_stream()
    buf = dev.allocate(64, stream=s)
    s.sync()
    odd = _CAI(int(buf.handle), (2,), "<f8", (12,))
    # cuda.core raises ValueError when the layout is first read; we refuse the view at once, with
    # an error that is a ValueError (and a BufferError).
    nv_out = outcome(lambda: _smv(nv).from_cuda_array_interface(odd, -1).strides)
    our_out = outcome(lambda: _smv(ours).from_cuda_array_interface(odd, -1).strides)
    same_outcome(nv_out, our_out, "strides (12,) for an 8-byte item")
    assert our_out == ("raises", our_out[1]) and issubclass(our_out[1], BufferError)
    buf.close(s)
    s.close()
