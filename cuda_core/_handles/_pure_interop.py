"""The pure-Python backend of the interop readers (DLPack capsules, PyTorch tensors).

The native backend states the same functions in ``cuda_core/_handles/_csrc/interop.c``; the protocol
(names, arguments, results, errors) is :class:`cuda_core._handles._protocol.Backend`;
:mod:`cuda_core._handles._pure` re-exports these names, and
``tests/interop/test_interop_backends.py`` runs the same cases against both. Capsules are read through the CPython capsule API (``PyCapsule_GetName`` and
``PyCapsule_GetPointer`` called through ``ctypes``) and the DLPack structs' bytes; no object is
read by offset.
"""

from __future__ import annotations

import ctypes
import datetime
import operator
import struct
import threading
from typing import Any

from .._compat import driver

__all__: list[str] = []  # private module

AMBIGUOUS = (
    "stream_ptr=None is ambiguous: pass the address of the consumer stream "
    "(e.g. int(stream.handle)), or -1 to opt out of stream ordering"
)
_DLPACK_MAJOR = 1
_MAX_VERSION = (_DLPACK_MAJOR, 0)
_READ_ONLY = 1
_MAX_NDIM = 32
_MAX_DEVICES = 64
_MAX_LEGACY_TYPES = 256
_MASK64 = (1 << 64) - 1
# DLPack device type -> (needs a stream, device memory, accessible to kernels)
_RULES = {
    1: (False, False, False),
    2: (True, True, True),
    3: (False, False, True),
    13: (False, True, True),
}
_ACCESSIBLE = frozenset({2, 3, 13})

# ---------------------------------------------------------------------------------------------
# ViewInfo


class ViewInfo:
    """The fields of a strided view (the base of ``StridedMemoryView``)."""

    __slots__ = (
        "__weakref__", "_capsule", "_dl_device_type", "_dtype", "_raw_strides",
        "device_id", "exporting_obj", "is_device_accessible", "ptr", "readonly", "shape",
    )  # fmt: skip

    ptr: int
    shape: tuple[int, ...]
    device_id: int
    is_device_accessible: bool
    readonly: bool
    exporting_obj: Any
    _capsule: Any
    _dl_device_type: int
    _dtype: Any  # a numpy dtype, the DLPack dtype word (int) not resolved yet, or None
    _raw_strides: tuple[int, ...] | None

    @property
    def strides(self) -> tuple[int, ...] | None:
        """Strides in elements as the producer gave them, or ``None`` when it gave none."""
        return self._raw_strides


def _check_cls(cls: Any) -> None:
    if not (isinstance(cls, type) and issubclass(cls, ViewInfo)):
        raise TypeError(f"cls must be a subclass of ViewInfo (got {cls!r})")


def _make(
    cls: Any, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...] | None, dtype: Any, device_id: int,
    accessible: bool, readonly: bool, exporting: Any, capsule: Any, devtype: int,
) -> Any:  # fmt: skip
    view = ViewInfo.__new__(cls)
    view.ptr = ptr
    view.shape = shape
    view._raw_strides = strides
    view._dtype = dtype
    view.device_id = device_id
    view.is_device_accessible = accessible
    view.readonly = readonly
    view.exporting_obj = exporting
    view._capsule = capsule
    view._dl_device_type = devtype
    return view


# ---------------------------------------------------------------------------------------------
# DLPack capsules

_CAPSULE_TYPE = type(datetime.datetime_CAPI)  # type: ignore[attr-defined]
_get_name = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi)
)
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
# DLTensor: data, device_type, device_id, ndim, dtype (code, bits, lanes as one native uint32),
# shape, strides, byte_offset. A versioned tensor is preceded by version, manager_ctx, deleter,
# flags; only version.major and flags are read.
_TENSOR = struct.Struct("=QiiiIQQQ")
_VERSIONED = struct.Struct("=I4x16xQ")
_VERSIONED_SIZE = _VERSIONED.size + _TENSOR.size
_NAME_VERSIONED = b"dltensor_versioned"
_NAME_UNVERSIONED = b"dltensor"
_string_at = ctypes.string_at


def _capsule_tensor(capsule: Any) -> tuple[tuple[Any, ...], bool]:
    """The DLTensor fields of an unconsumed capsule and its read-only flag; BufferError else."""
    name_p = _get_name(capsule) if type(capsule) is _CAPSULE_TYPE else None
    name = _string_at(name_p) if name_p else None
    if name == _NAME_VERSIONED:
        raw = _string_at(_get_pointer(capsule, name), _VERSIONED_SIZE)
        major, flags = _VERSIONED.unpack_from(raw)
        if major > _DLPACK_MAJOR:
            raise BufferError(
                f"DLPack major version {major} is not supported (at most {_DLPACK_MAJOR})"
            )
        fields = _TENSOR.unpack_from(raw, _VERSIONED.size)
        readonly = bool(flags & _READ_ONLY)
    elif name == _NAME_UNVERSIONED:
        fields = _TENSOR.unpack_from(_string_at(_get_pointer(capsule, name), _TENSOR.size))
        readonly = False
    else:
        raise BufferError(f"expected an unconsumed DLPack capsule (got {capsule!r})")
    ndim = fields[3]
    if ndim < 0 or ndim > _MAX_NDIM:
        raise BufferError(f"DLPack tensor has an unsupported number of dimensions ({ndim})")
    if ndim and not fields[5]:
        raise BufferError(f"DLPack tensor of {ndim} dimensions has no shape")
    return fields, readonly


def _ints(address: int, n: int) -> tuple[int, ...]:
    return struct.unpack(f"={n}q", _string_at(address, 8 * n))


def _tensor_view(
    cls: Any, fields: tuple[Any, ...], device_id: int, accessible: bool, readonly: bool, exporting: Any, capsule: Any,
    devtype: int,
) -> Any:  # fmt: skip
    data, _, _, ndim, word, shape_p, strides_p, offset = fields
    shape = _ints(shape_p, ndim) if ndim else ()
    # As given (a 0-d tensor's are () when the producer gave a strides array): cuda.core's rule.
    strides = (_ints(strides_p, ndim) if ndim else ()) if strides_p else None
    return _make(cls, (data + offset) & _MASK64, shape, strides, word, device_id, accessible, readonly, exporting,
                 capsule, devtype)  # fmt: skip


def read_capsule(capsule: Any) -> ViewInfo:
    """A :class:`ViewInfo` of an unconsumed ``"dltensor_versioned"`` or ``"dltensor"`` capsule
    (not consumed: readable again). ``ptr`` is ``data + byte_offset``; ``_raw_strides`` are in
    elements or ``None``; ``_dtype`` is the ``DLDataType`` as one native ``uint32``;
    ``device_id`` and ``_dl_device_type`` are the capsule's; ``is_device_accessible`` is true for
    CUDA, CUDA host and CUDA managed memory; ``exporting_obj`` is ``None`` and ``_capsule`` the
    capsule. ``BufferError`` for anything else (not a capsule, another name, a consumed one, a
    newer major version, more than 32 dimensions, no shape)."""
    fields, readonly = _capsule_tensor(capsule)
    devtype = fields[1]
    return _tensor_view(
        ViewInfo, fields, fields[2], devtype in _ACCESSIBLE, readonly, None, capsule, devtype
    )


_legacy_types: set[type] = set()


def dlpack_view(cls: Any, obj: Any, stream_ptr: Any) -> Any:
    """A view (an instance of ``cls``, a subclass of :class:`ViewInfo`) of the DLPack producer
    ``obj`` for the consumer stream ``stream_ptr`` (the rules: ``Backend.dlpack_view`` in
    :mod:`cuda_core._handles._protocol`)."""
    _check_cls(cls)
    try:
        dev = obj.__dlpack_device__()
    except AttributeError:  # the protocol probe: nothing else is caught
        raise BufferError(
            f"{type(obj).__name__} does not support DLPack (no __dlpack_device__)"
        ) from None
    pair = tuple(dev)
    if len(pair) != 2:
        raise BufferError(f"__dlpack_device__ must return (device_type, device_id) (got {pair!r})")
    index = operator.index(pair[0])
    devid = operator.index(pair[1])
    rule = _RULES.get(index)
    if rule is None:
        raise BufferError(
            f"DLPack device type {index} is not supported (CPU, CUDA, CUDA host, CUDA managed are)"
        )
    needs_stream, has_device, accessible = rule
    stream = stream_ptr
    if needs_stream and stream is None:
        raise BufferError(AMBIGUOUS)
    if not needs_stream and not accessible:
        stream = None
    if isinstance(stream, int) and not stream:  # DLPack names the legacy default stream 1
        stream = 1
    tp = type(obj)
    legacy = tp in _legacy_types
    if not legacy:
        try:
            capsule = obj.__dlpack__(stream=stream, max_version=_MAX_VERSION)
        except TypeError:
            # The protocol's one fallback: a producer older than DLPack 1.0 rejects max_version;
            # it is asked again without it (and remembered). No other error retries.
            legacy = True
            if len(_legacy_types) < _MAX_LEGACY_TYPES:
                _legacy_types.add(tp)
    if legacy:
        capsule = obj.__dlpack__(stream=stream)
    fields, readonly = _capsule_tensor(capsule)
    return _tensor_view(
        cls, fields, devid if has_device else -1, accessible, readonly, obj, capsule, index
    )


# ---------------------------------------------------------------------------------------------
# PyTorch and ordering


def torch_setup(tensor_type: type, exchange_api: Any) -> bool:
    """Always ``False``: the pure backend reads tensors through their Python attributes."""
    if not isinstance(tensor_type, type):
        raise TypeError("torch_setup(tensor_type, exchange_api)")
    return False


def torch_view(cls: Any, tensor: Any, stream_ptr: Any) -> Any:
    """Always ``NotImplemented``: the pure backend reads a ``torch.Tensor`` through its Python
    attributes, which is what the caller does whenever ``torch_view`` declines
    (``_interop._fast_arrays.torch_fields``, shared with the native backend's declined cases)."""
    _check_cls(cls)
    return NotImplemented


_order_events: dict[int, int] = {}
_order_lock = threading.Lock()


def set_order_event(device_id: int, event: int) -> bool:
    """Keep the event ``torch_view`` orders through on ``device_id`` (``False``: not kept)."""
    device_id = int(device_id)
    if not 0 <= device_id < _MAX_DEVICES:
        return False
    _order_events[device_id] = int(event)
    return True


def record_wait(event: int, producer: int, consumer: int) -> int:
    """``cuEventRecord(event, producer)`` then ``cuStreamWaitEvent(consumer, event, 0)``, one
    pair at a time: 0, ``-status`` of a failed record (nothing ordered), ``+status`` of a
    failed wait."""

    ev, p, c = driver.CUevent(event), driver.CUstream(producer), driver.CUstream(consumer)
    with _order_lock:
        err = int(driver.cuEventRecord(ev, p)[0])
        if err:
            return -err
        return int(driver.cuStreamWaitEvent(c, ev, 0)[0])
