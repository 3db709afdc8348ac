"""DLPack in ctypes: the C structs, capsule export (for ``Buffer.__dlpack__``) and import.

The layout follows ``dlpack.h`` (v1.x): ``DLTensor``, ``DLManagedTensor`` (capsule name
``"dltensor"``) and ``DLManagedTensorVersioned`` (capsule name ``"dltensor_versioned"``).

Export: :func:`make_capsule` builds a managed tensor whose deleter keeps the owning Python
object alive until the consumer is done with it (the consumer calls the deleter, or the capsule
is destroyed unconsumed and its destructor calls it).

Import: the backend's ``read_capsule`` (see :mod:`cuda_core._handles._protocol`) reads a producer's
capsule; :func:`parse_capsule` is the ctypes reference reader. A consumer keeps the capsule itself alive instead of renaming it: while the capsule lives the
producer's tensor lives, and when the capsule is collected the producer's own destructor calls
the deleter (every conforming producer deletes an unconsumed capsule's tensor).
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

import numpy

from .._lifetime import immortal

__all__: list[str] = []  # private module

# --------------------------------------------------------------------------------------------
# Constants from dlpack.h

DLPACK_MAJOR_VERSION = 1
DLPACK_MINOR_VERSION = 1

# DLDeviceType
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLOpenCL = 4
kDLVulkan = 7
kDLMetal = 8
kDLVPI = 9
kDLROCM = 10
kDLROCMHost = 11
kDLExtDev = 12
kDLCUDAManaged = 13
kDLOneAPI = 14

# DLDataTypeCode
kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLOpaqueHandle = 3
kDLBfloat = 4
kDLComplex = 5
kDLBool = 6
kDLFloat8_e3m4 = 7
kDLFloat8_e4m3 = 8
kDLFloat8_e4m3b11fnuz = 9
kDLFloat8_e4m3fn = 10
kDLFloat8_e4m3fnuz = 11
kDLFloat8_e5m2 = 12
kDLFloat8_e5m2fnuz = 13
kDLFloat8_e8m0fnu = 14
kDLFloat6_e2m3fn = 15
kDLFloat6_e3m2fn = 16
kDLFloat4_e2m1fn = 17

# DLManagedTensorVersioned.flags
DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1
DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED = 1 << 2

# Device types whose memory a CUDA kernel can address.
DEVICE_ACCESSIBLE = frozenset({kDLCUDA, kDLCUDAHost, kDLCUDAManaged})
# Device types whose memory the host can address.
HOST_ACCESSIBLE = frozenset({kDLCPU, kDLCUDAHost, kDLCUDAManaged})

# --------------------------------------------------------------------------------------------
# ctypes declarations


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _Deleter)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Byte layouts used by the import path (one read, one unpack).
# DLTensor: data, device_type, device_id, ndim, code, bits, lanes, shape, strides, byte_offset
_TENSOR = struct.Struct("=QiiiBBHQQQ")
assert _TENSOR.size == ctypes.sizeof(DLTensor)
_VERSIONED_HEAD = ctypes.sizeof(DLPackVersion) + 3 * 8  # version, manager_ctx, deleter, flags
assert DLManagedTensorVersioned.dl_tensor.offset == _VERSIONED_HEAD
_FLAGS_OFFSET = DLManagedTensorVersioned.flags.offset

# --------------------------------------------------------------------------------------------
# Capsule C API, through private function pointers (never change ctypes.pythonapi's signatures).

_api = ctypes.pythonapi
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _Destructor)(
    ("PyCapsule_New", _api)
)
# The destructor receives a capsule whose reference count is already zero: touch it only
# through raw pointers (a py_object argument would resurrect it).
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api)
)
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api)
)

# Capsule names must outlive every capsule: module-level C strings.
_NAME_UNVERSIONED = ctypes.create_string_buffer(b"dltensor")
_NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
NAME_UNVERSIONED = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"

# --------------------------------------------------------------------------------------------
# Export

# address of a managed tensor we exported -> (struct, shape array, strides array, owner)
_exports: dict[int, tuple[Any, ...]] = {}
_exports_lock = threading.Lock()


def _release(addr: int | None) -> None:
    if addr:
        with _exports_lock:
            _exports.pop(addr, None)


@immortal
@_Deleter
def _managed_deleter(addr: int | None) -> None:
    # Called by the consumer (any thread; ctypes takes the GIL) once it is done with the tensor.
    _release(addr)


def _make_destructor(name: bytes) -> Any:
    @_Destructor
    def destructor(capsule: int | None) -> None:
        # A capsule still carrying its original name was never consumed: delete the tensor.
        if capsule and _raw_is_valid(capsule, name):
            _release(_raw_get_pointer(capsule, name))

    return destructor


_destroy_unversioned = immortal(_make_destructor(NAME_UNVERSIONED))
_destroy_versioned = immortal(_make_destructor(NAME_VERSIONED))


def make_capsule(
    ptr: int,
    shape: tuple[int, ...] | int,
    dtype: tuple[int, int, int] | Any = (kDLUInt, 8, 1),
    device_type: int = kDLCUDA,
    device_id: int = 0,
    owner: object = None,
    versioned: bool = True,
    readonly: bool = False,
    strides: tuple[int, ...] | None = None,
) -> Any:
    """Build a DLPack capsule describing memory at ``ptr``.

    Parameters
    ----------
    ptr : int
        Address of the first element.
    shape : tuple of int or int
        The tensor's shape; an int ``n`` means a 1-D tensor of ``n`` elements (for a byte
        buffer, its size in bytes with the default dtype).
    dtype : (code, bits, lanes) or numpy dtype
        The DLPack data type, default ``uint8``.
    device_type, device_id : int
        The ``DLDevice`` (``kDLCUDA`` = 2, ``kDLCUDAHost`` = 3, ``kDLCUDAManaged`` = 13, ``kDLCPU`` = 1).
    owner : object
        Kept alive until the consumer calls the deleter (or the capsule dies unconsumed).
    versioned : bool
        Build a ``"dltensor_versioned"`` capsule (DLPack >= 1.0) instead of ``"dltensor"``.
    readonly : bool
        Set the read-only flag (versioned capsules only).
    strides : tuple of int, optional
        Strides in elements; ``None`` for C-contiguous.

    Returns
    -------
    PyCapsule
    """
    if isinstance(shape, int):
        shape = (shape,)
    ndim = len(shape)
    code, bits, lanes = dtype if isinstance(dtype, tuple) else dtype_to_dlpack(dtype)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides_arr = None
    if strides is not None:
        if len(strides) != ndim:
            raise ValueError(f"strides must have {ndim} entries like shape (got {strides!r})")
        strides_arr = (ctypes.c_int64 * max(ndim, 1))(*strides)
    managed: DLManagedTensor | DLManagedTensorVersioned
    if versioned:
        managed = DLManagedTensorVersioned()
        managed.version.major = DLPACK_MAJOR_VERSION
        managed.version.minor = DLPACK_MINOR_VERSION
        managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0
    else:
        managed = DLManagedTensor()
    managed.deleter = _managed_deleter
    t = managed.dl_tensor
    t.data = ptr
    t.device.device_type = device_type
    t.device.device_id = device_id
    t.ndim = ndim
    t.dtype.code = code
    t.dtype.bits = bits
    t.dtype.lanes = lanes
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    if strides_arr is not None:
        t.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    addr = ctypes.addressof(managed)
    with _exports_lock:
        _exports[addr] = (managed, shape_arr, strides_arr, owner)
    try:
        if versioned:
            return _capsule_new(addr, _NAME_VERSIONED, _destroy_versioned)
        return _capsule_new(addr, _NAME_UNVERSIONED, _destroy_unversioned)
    except BaseException:
        _release(addr)
        raise


def export_args(
    what: str,
    here: tuple[int, int],
    max_version: Any,
    dl_device: Any,
    copy: Any,
    host_ok: bool = False,
) -> tuple[int, int, bool]:
    """Check the ``copy``/``dl_device``/``max_version`` arguments of a ``__dlpack__`` export.

    Parameters
    ----------
    what : str
        The exporter's name for messages (``"Buffer"``, ``"StridedMemoryView"``).
    here : (int, int)
        The exporter's own DLPack ``(device_type, device_id)``.
    max_version, dl_device, copy
        The ``__dlpack__`` arguments.
    host_ok : bool
        The memory is host-accessible, so ``dl_device=(kDLCPU, 0)`` is accepted too.

    Returns
    -------
    (int, int, bool)
        The device type and id to put in the capsule, and whether to make it versioned.

    Raises
    ------
    BufferError
        A copy or another device was requested.
    """
    if copy:
        raise BufferError(f"{what}.__dlpack__ cannot copy (copy=True was requested)")
    if dl_device is not None:
        want = (int(dl_device[0]), int(dl_device[1]))
        if want != here and not (host_ok and want == (kDLCPU, 0)):
            raise BufferError(
                f"dl_device must be the {what}'s DLPack device {here} (got {dl_device!r})"
            )
        here = want
    return here[0], here[1], max_version is not None and int(max_version[0]) >= 1


def live_exports() -> int:
    """How many exported tensors are still held by consumers (for tests)."""
    return len(_exports)


# --------------------------------------------------------------------------------------------
# Import
#
# The hot path is the backend's ``read_capsule``/``dlpack_view`` (cuda_core._handles._backend: the native
# reader in cuda_core/_handles/_csrc/interop.c or the pure one in cuda_core/_handles/_pure_interop.py).
# parse_capsule below is the portable reference reader through ctypes (tests compare with it).

_unpack_tensor = _TENSOR.unpack_from
# Private function objects (argtypes set here never leak into ctypes.pythonapi's).
_capi = ctypes.PyDLL(None)
_get_pointer = _capi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_VERSIONED_BYTES = ctypes.c_char * (_VERSIONED_HEAD + _TENSOR.size)
_UNVERSIONED_BYTES = ctypes.c_char * _TENSOR.size
_int64_arrays = [ctypes.c_int64 * n for n in range(33)]


def parse_capsule(capsule: Any) -> tuple[Any, ...]:
    """Read a ``"dltensor_versioned"`` or ``"dltensor"`` capsule without consuming it.

    Parameters
    ----------
    capsule : PyCapsule
        A capsule returned by a producer's ``__dlpack__``.

    Returns
    -------
    tuple
        ``(ptr, shape, strides, code, bits, lanes, device_type, device_id, readonly)``: the
        pointer is ``data + byte_offset``; strides are in elements as the producer gave them,
        ``None`` when it gave none (C-contiguous). The memory stays valid while the capsule lives.

    Raises
    ------
    BufferError
        The object is not an unconsumed DLPack capsule, or describes an unsupported tensor.
    """
    return _parse_ctypes(capsule)


def _parse_ctypes(capsule: Any) -> tuple[Any, ...]:
    # The portable reader: capsule API through ctypes, then ctypes arrays.
    try:
        raw = _VERSIONED_BYTES.from_address(_get_pointer(capsule, NAME_VERSIONED)).raw
    except (ValueError, TypeError):
        try:
            base = _get_pointer(capsule, NAME_UNVERSIONED)
        except (ValueError, TypeError):
            raise BufferError(f"expected an unconsumed DLPack capsule (got {capsule!r})") from None
        fields = _unpack_tensor(_UNVERSIONED_BYTES.from_address(base).raw)
        readonly = False
    else:
        major = int.from_bytes(raw[0:4], "little")
        if major > DLPACK_MAJOR_VERSION:
            raise BufferError(
                f"DLPack major version {major} is not supported (at most {DLPACK_MAJOR_VERSION})"
            )
        readonly = bool(raw[_FLAGS_OFFSET] & DLPACK_FLAG_BITMASK_READ_ONLY)
        fields = _unpack_tensor(raw, _VERSIONED_HEAD)
    data, device_type, device_id, ndim, code, bits, lanes, shape_p, strides_p, offset = fields
    if ndim < 0 or ndim > 32:
        raise BufferError(f"DLPack tensor has an unsupported number of dimensions ({ndim})")
    if ndim:
        arr = _int64_arrays[ndim]
        shape = tuple(arr.from_address(shape_p))
        strides = tuple(arr.from_address(strides_p)) if strides_p else None
    else:  # a 0-d tensor: strides () when the producer gave a strides array, as cuda.core reports
        shape = ()
        strides = () if strides_p else None
    return (data + offset, shape, strides, code, bits, lanes, device_type, device_id, readonly)


# --------------------------------------------------------------------------------------------
# dtypes

_DL_TO_NUMPY: dict[tuple[int, int, int], numpy.dtype[Any]] = {}
_NUMPY_TO_DL: dict[numpy.dtype[Any], tuple[int, int, int]] = {}


def _register(code: int, bits: int, dt: Any) -> None:
    d = numpy.dtype(dt)
    _DL_TO_NUMPY[(code, bits, 1)] = d
    _NUMPY_TO_DL[d] = (code, bits, 1)


for _bits in (8, 16, 32, 64):
    _register(kDLInt, _bits, f"int{_bits}")
    _register(kDLUInt, _bits, f"uint{_bits}")
for _bits in (16, 32, 64):
    _register(kDLFloat, _bits, f"float{_bits}")
_register(kDLComplex, 64, numpy.complex64)
_register(kDLComplex, 128, numpy.complex128)
_register(kDLBool, 8, numpy.bool_)

try:  # the narrow float types NumPy lacks, where ml_dtypes provides them
    import ml_dtypes as _ml

    for _code, _bits, _name in (
        (kDLBfloat, 16, "bfloat16"),
        (kDLFloat8_e3m4, 8, "float8_e3m4"),
        (kDLFloat8_e4m3, 8, "float8_e4m3"),
        (kDLFloat8_e4m3b11fnuz, 8, "float8_e4m3b11fnuz"),
        (kDLFloat8_e4m3fn, 8, "float8_e4m3fn"),
        (kDLFloat8_e4m3fnuz, 8, "float8_e4m3fnuz"),
        (kDLFloat8_e5m2, 8, "float8_e5m2"),
        (kDLFloat8_e5m2fnuz, 8, "float8_e5m2fnuz"),
        (kDLFloat8_e8m0fnu, 8, "float8_e8m0fnu"),
    ):
        if hasattr(_ml, _name):
            _register(_code, _bits, getattr(_ml, _name))
except ImportError:  # pragma: no cover - ml_dtypes is optional
    pass


def dlpack_to_dtype(code: int, bits: int, lanes: int) -> numpy.dtype[Any]:
    """The NumPy dtype of a DLPack ``(code, bits, lanes)``; ``BufferError`` when there is none."""
    dt = _DL_TO_NUMPY.get((code, bits, lanes))
    if dt is None:
        narrow = code in (kDLBfloat, 7, 8, 9, 10, 11, 12, 13, 14)
        hint = " (install ml_dtypes for bfloat16/float8 types)" if narrow else ""
        msg = (
            f"DLPack dtype (code={code}, bits={bits}, lanes={lanes}) has no NumPy equivalent{hint}"
        )
        if narrow:
            # cuda.core's class (NotImplementedError) and, for bfloat16, its words first
            lead = "Support for bfloat16 within cuda-core requires `ml_dtypes`to be installed. "
            raise _NeedsMlDtypes((lead if code == kDLBfloat else "") + msg)
        raise BufferError(msg)
    return dt


class _NeedsMlDtypes(BufferError, NotImplementedError):
    """A narrow float type without ml_dtypes: a BufferError as every DLPack refusal here, and
    the NotImplementedError cuda.core raises."""


def dtype_to_dlpack(dtype: Any) -> tuple[int, int, int]:
    """The DLPack ``(code, bits, lanes)`` of a NumPy dtype; ``BufferError`` when there is none."""
    d = numpy.dtype(dtype)
    dl = _NUMPY_TO_DL.get(d)
    if dl is None:
        dl = _NUMPY_TO_DL.get(d.newbyteorder("="))
        if dl is None or not d.isnative:
            raise BufferError(f"dtype {d} cannot be expressed in DLPack")
    return dl


_DTYPE_WORD = struct.Struct("=BBH")
_WORD = struct.Struct("=I")


def _pack_dtype(code: int, bits: int, lanes: int) -> int:
    return int(_WORD.unpack(_DTYPE_WORD.pack(code & 0xFF, bits & 0xFF, lanes & 0xFFFF))[0])


def dtype_key(word: int) -> tuple[int, int, int]:
    """The ``(code, bits, lanes)`` of a ``DLDataType`` read as one native ``uint32``."""
    code, bits, lanes = _DTYPE_WORD.unpack(_WORD.pack(word))
    return (code, bits, lanes)


# dtype word -> numpy dtype, for the hot path (one dict lookup)
DTYPE_BY_WORD: dict[int, numpy.dtype[Any]] = {_pack_dtype(*k): v for k, v in _DL_TO_NUMPY.items()}


def dtype_from_word(word: int) -> numpy.dtype[Any]:
    """The NumPy dtype of a ``DLDataType`` read as one native ``uint32``; ``BufferError`` when none."""
    dt = DTYPE_BY_WORD.get(word)
    return dt if dt is not None else dlpack_to_dtype(*dtype_key(word))
