"""DLPack capsules: export through make_capsule, import through parse_capsule and both backends'
read_capsule (CPU tier)."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from cuda_core._interop import _dlpack as dl


class _Producer:
    """Hands out one prepared capsule, as a DLPack producer would."""

    def __init__(self, capsule, device=(dl.kDLCPU, 0)):
        self.capsule = capsule
        self.device = device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


class _Owner:
    pass


class _Info:
    def __init__(self, t):
        (
            self.ptr,
            self.shape,
            self.strides,
            self.code,
            self.bits,
            self.lanes,
            self.device_type,
            self.device_id,
            self.readonly,
        ) = t


def _parse(cap):
    return _Info(dl.parse_capsule(cap))


@pytest.mark.parametrize("versioned", [True, False])
def test_export_is_consumed_by_numpy_and_releases_owner(versioned):
    base = np.arange(32, dtype=np.uint8)
    owner = _Owner()
    before = dl.live_exports()
    cap = dl.make_capsule(
        base.ctypes.data, 32, device_type=dl.kDLCPU, device_id=0, owner=owner, versioned=versioned
    )
    assert dl.live_exports() == before + 1
    arr = np.from_dlpack(_Producer(cap))
    del cap
    gc.collect()
    assert dl.live_exports() == before + 1  # numpy holds it
    assert arr.ctypes.data == base.ctypes.data
    np.testing.assert_array_equal(arr, base)
    del arr
    gc.collect()
    assert dl.live_exports() == before


def test_unconsumed_capsule_releases_owner():
    base = np.zeros(4, dtype=np.uint8)
    before = dl.live_exports()
    cap = dl.make_capsule(base.ctypes.data, 4, device_type=dl.kDLCPU, owner=_Owner())
    assert dl.live_exports() == before + 1
    del cap
    gc.collect()
    assert dl.live_exports() == before


def test_export_shape_strides_dtype_readonly_roundtrip():
    base = np.arange(24, dtype=np.float32)
    cap = dl.make_capsule(
        base.ctypes.data,
        (3, 4),
        np.dtype(np.float32),
        dl.kDLCPU,
        0,
        owner=base,
        readonly=True,
        strides=(8, 1),
    )
    info = _parse(cap)
    assert info.ptr == base.ctypes.data
    assert info.shape == (3, 4)
    assert info.strides == (8, 1)
    assert (info.code, info.bits, info.lanes) == (dl.kDLFloat, 32, 1)
    assert info.readonly is True
    assert info.device_type == dl.kDLCPU
    arr = np.from_dlpack(
        _Producer(
            dl.make_capsule(
                base.ctypes.data, (3, 4), np.float32, dl.kDLCPU, 0, base, strides=(8, 1)
            )
        )
    )
    np.testing.assert_array_equal(arr, base.reshape(3, 8)[:, :4])


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_parse_numpy_capsules(max_version):
    a = np.arange(60, dtype=np.int32).reshape(3, 4, 5)[1:, ::2, ::-1]
    cap = a.__dlpack__() if max_version is None else a.__dlpack__(max_version=max_version)
    info = _parse(cap)
    assert info.ptr == a.__array_interface__["data"][0]
    assert info.shape == a.shape
    assert info.strides == tuple(s // a.itemsize for s in a.strides)
    assert dl.dlpack_to_dtype(info.code, info.bits, info.lanes) == a.dtype


def test_parse_rejects_non_capsules_and_consumed():
    with pytest.raises(BufferError):
        dl.parse_capsule(object())
    a = np.arange(3)
    cap = a.__dlpack__()
    np.from_dlpack(_Producer(cap))  # consumes (renames) it
    with pytest.raises(BufferError):
        dl.parse_capsule(cap)


def test_dtype_tables_roundtrip():
    for name in (
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
        "bool",
    ):
        d = np.dtype(name)
        assert dl.dlpack_to_dtype(*dl.dtype_to_dlpack(d)) == d
    with pytest.raises(BufferError):
        dl.dtype_to_dlpack(np.dtype("U3"))
    with pytest.raises(BufferError):
        dl.dlpack_to_dtype(dl.kDLFloat, 8, 1)


def test_bfloat16_when_ml_dtypes_present():
    ml = pytest.importorskip("ml_dtypes")
    assert dl.dlpack_to_dtype(dl.kDLBfloat, 16, 1) == np.dtype(ml.bfloat16)
    assert dl.dtype_to_dlpack(ml.float8_e4m3fn) == (dl.kDLFloat8_e4m3fn, 8, 1)


# ----------------------------------------------------------------------------- fast reader


def _numpy_capsules():
    base = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    ro = np.arange(6.0)
    ro.flags.writeable = False
    for a in (base, base[1:, ::2, ::-1], base.T, np.array(7, dtype=np.uint8), base[:, :0]):
        yield a, a.__dlpack__(max_version=(1, 0))
        yield a, a.__dlpack__()
    yield ro, ro.__dlpack__(max_version=(1, 0))  # read-only needs a versioned capsule


def _readers():
    from cuda_core._handles import _pure_interop as _interop_py

    out = [pytest.param(_interop_py.read_capsule, id="pure")]
    try:
        from cuda_core._handles import _native
    except ImportError:
        out.append(
            pytest.param(
                None,
                id="native",
                marks=pytest.mark.skip(reason="cuda_core._handles._native not built"),
            )
        )
    else:
        out.append(pytest.param(_native.read_capsule, id="native"))
    return out


@pytest.fixture(params=_readers())
def read_capsule(request):
    return request.param


def _fields(info):
    return info.ptr, info.shape, info._raw_strides, info._dtype, info.readonly


def test_read_capsule_matches_ctypes_reader(read_capsule):
    for a, cap in _numpy_capsules():
        info = read_capsule(cap)
        ptr, shape, strides, word, readonly = _fields(info)
        ref = dl._parse_ctypes(cap)
        assert (ptr, shape, strides, readonly) == (ref[0], ref[1], ref[2], ref[8])
        assert (info._dl_device_type, info.device_id) == (ref[6], ref[7])
        assert (
            info._capsule is cap
            and info.exporting_obj is None
            and info.is_device_accessible is False
        )
        assert dl.dtype_key(word) == (ref[3], ref[4], ref[5])
        assert dl.dtype_from_word(word) == a.dtype
        assert shape == a.shape and ptr == a.__array_interface__["data"][0]
        assert readonly is (not a.flags.writeable and cap_is_versioned(cap))
        assert _fields(read_capsule(cap)) == _fields(info)  # not consumed: readable again


def cap_is_versioned(cap):
    return "dltensor_versioned" in repr(cap)


def _raw_capsule(managed, name_buf):
    return dl._capsule_new(ctypes.addressof(managed), name_buf, dl._Destructor())


def _managed(versioned, ndim=1, major=1, shape=None):
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*(shape or [3] * ndim))
    m = dl.DLManagedTensorVersioned() if versioned else dl.DLManagedTensor()
    if versioned:
        m.version.major = major
    m.dl_tensor.data = 0x1000
    m.dl_tensor.ndim = ndim
    m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes = dl.kDLFloat, 32, 1
    m.dl_tensor.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    return m, shape_arr


def test_read_capsule_rejects_foreign_consumed_and_renamed_capsules(read_capsule):
    with pytest.raises(BufferError):
        read_capsule(object())
    m, _keep = _managed(False)
    other = ctypes.create_string_buffer(b"not_a_tensor")
    with pytest.raises(BufferError, match="unconsumed DLPack capsule"):
        read_capsule(_raw_capsule(m, other))
    prefix = ctypes.create_string_buffer(b"dltensor_v")
    with pytest.raises(BufferError):
        read_capsule(_raw_capsule(m, prefix))
    a = np.arange(3)
    cap = a.__dlpack__(max_version=(1, 0))
    np.from_dlpack(_Producer(cap))  # consumes (renames) it
    with pytest.raises(BufferError):
        read_capsule(cap)


def test_read_capsule_rechecks_the_name_each_time(read_capsule):
    m, _keep = _managed(False, shape=[5])
    name = ctypes.create_string_buffer(b"dltensor")
    cap = _raw_capsule(m, name)
    assert _fields(read_capsule(cap))[:3] == (0x1000, (5,), None)
    ctypes.memmove(name, b"used_dlt", 8)  # same address, other name: must not be trusted
    with pytest.raises(BufferError):
        read_capsule(cap)


def test_read_capsule_rejects_bad_version_and_ndim(read_capsule):
    m, _keep = _managed(True, major=dl.DLPACK_MAJOR_VERSION + 1)
    with pytest.raises(BufferError, match="major version"):
        read_capsule(_raw_capsule(m, dl._NAME_VERSIONED))
    m, _keep = _managed(True)
    m.dl_tensor.ndim = 33
    with pytest.raises(BufferError, match="dimensions"):
        read_capsule(_raw_capsule(m, dl._NAME_VERSIONED))
    m.dl_tensor.ndim = -1
    with pytest.raises(BufferError, match="dimensions"):
        read_capsule(_raw_capsule(m, dl._NAME_VERSIONED))


def test_dtype_word_table_covers_every_registered_dtype():
    for key, dt in dl._DL_TO_NUMPY.items():
        assert dl.DTYPE_BY_WORD[dl._pack_dtype(*key)] == dt
        assert dl.dtype_key(dl._pack_dtype(*key)) == key
    with pytest.raises(BufferError):
        dl.dtype_from_word(dl._pack_dtype(dl.kDLFloat, 8, 1))


_EXIT_SCRIPT = """
import numpy as np
from cuda_core._interop import _dlpack

host = np.arange(64, dtype=np.uint8)


class Producer:
    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return _dlpack.make_capsule(
            host.ctypes.data, 64, device_type=1, device_id=0, owner=host, versioned=bool(max_version)
        )

    def __dlpack_device__(self):
        return (1, 0)


class Cycle:
    pass


c = Cycle()
c.me = c  # collected only by the interpreter's last garbage collection
c.arr = np.from_dlpack(Producer())  # NumPy calls our deleter when the array dies
c.cap = Producer().__dlpack__()  # never consumed: our capsule destructor runs
print("done")
"""


def test_exported_tensors_alive_at_interpreter_exit_do_not_crash():
    # Our deleters are ctypes callbacks that NumPy/PyTorch/CuPy call when they are done, which
    # may be during the interpreter's teardown: they must still be valid then.
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", _EXIT_SCRIPT],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert "Fatal Python error" not in out.stderr
        assert out.stdout.strip() == "done"
