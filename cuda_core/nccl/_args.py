"""What a collective's arguments mean to NCCL: an address, an element count, a data type, an op.

A :class:`~cuda_core.Buffer` is raw bytes (``uint8``) unless ``dtype=`` says otherwise; a
:class:`~cuda_core.utils.StridedMemoryView` carries its dtype and element count; any other
array (CuPy, PyTorch, ... through DLPack or the CUDA Array Interface) is viewed first, ordered
on the collective's stream. Everything is checked here, before NCCL is called, so a mistake is
an error that names the argument rather than a hang or wrong numbers.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy

from .._interop._dlpack import kDLCUDA, kDLCUDAManaged
from .._interop._memoryview import StridedMemoryView
from .._memory import Buffer
from .._stream import as_stream
from .._utils import arg_error
from ._errors import closed as closed

__all__: list[str] = []  # private module

# ncclDataType_t, by NumPy dtype; the ml_dtypes types by name (they share kind and size with others)
_BY_KIND_SIZE = {
    ("i", 1): 0, ("u", 1): 1, ("i", 4): 2, ("u", 4): 3, ("i", 8): 4, ("u", 8): 5,
    ("f", 2): 6, ("f", 4): 7, ("f", 8): 8,
}  # fmt: skip
_BY_NAME = {"bfloat16": 9, "float8_e4m3fn": 10, "float8_e5m2": 11}
_DTYPE_RULE = (
    "a data type NCCL reduces and moves: int8, uint8, int32, uint32, int64, uint64, float16, "
    "float32, float64, bfloat16, float8_e4m3fn or float8_e5m2"
)
_codes: dict[Any, tuple[int, int]] = {}  # dtype (or what named it) -> (code, item size), as seen

ITEMSIZE = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}  # by code

# ncclRedOp_t
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
UINT8 = 1
_Buffer = Buffer
_View = StridedMemoryView
_from_any = StridedMemoryView.from_any_interface
_DTYPE_NAMES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64", 6: "float16",
                7: "float32", 8: "float64", 9: "bfloat16", 10: "float8_e4m3fn", 11: "float8_e5m2"}  # fmt: skip
_DEVICE_TYPES = (kDLCUDA, kDLCUDAManaged)


def nccl_dtype(dtype: Any, name: str = "dtype") -> tuple[int, int]:
    """``(ncclDataType_t, item size)`` of a NumPy dtype (or anything ``numpy.dtype()`` reads)."""
    try:
        known = _codes.get(dtype)
    except TypeError:  # unhashable: numpy.dtype() below says what it makes of it
        known = None
    if known is not None:
        return known
    try:
        dt = numpy.dtype(dtype)
    except (TypeError, ValueError):
        raise arg_error(name, _DTYPE_RULE, dtype, exc=TypeError) from None
    code = _BY_NAME.get(dt.name)
    if code is None and dt.isnative and not dt.fields:
        code = _BY_KIND_SIZE.get((dt.kind, dt.itemsize))
    if code is None:
        raise arg_error(name, _DTYPE_RULE, dt, exc=TypeError)
    if len(_codes) < 64:
        _codes[dt] = (code, dt.itemsize)
        if dtype.__class__.__hash__ is not None:
            _codes[dtype] = _codes[dt]
    return code, dt.itemsize


def reduction_op(op: Any) -> int:
    """The ``ncclRedOp_t`` of ``op``: a name (``"sum"``, ``"prod"``, ``"max"``, ``"min"``,
    ``"avg"``), or an integer op such as nccl4py's ``SUM`` or a custom op it created."""
    if type(op) is str:
        code = OPS.get(op.lower())
        if code is not None:
            return code
    elif not isinstance(op, bool) and hasattr(op, "__index__"):
        return op.__index__()  # type: ignore[no-any-return]
    elif not isinstance(op, numbers.Number) and hasattr(type(op), "__int__"):
        return int(op)  # nccl4py's CustomRedOp (from Communicator.create_pre_mul_sum)
    raise arg_error("op", "one of 'sum', 'prod', 'max', 'min', 'avg' or an NCCL reduction op", op,
                    exc=ValueError if isinstance(op, str) else TypeError)  # fmt: skip


def check_rank(rank: Any, size: Any, size_name: str) -> None:
    """``rank`` and ``size`` are ints (not bools), ``size >= 1`` and ``0 <= rank < size``."""
    for name, value in (("rank", rank), (size_name, size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise arg_error(name, "an int", value, exc=TypeError)
    if size < 1:
        raise arg_error(size_name, "at least 1", size)
    if not 0 <= rank < size:
        raise arg_error("rank", f"in 0..{size - 1} ({size_name} is {size})", rank)


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    want = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            return False
        want *= n
    return True


def resolve(
    obj: Any, dtype: Any, name: str, stream_ptr: int, device_id: int, typed: bool, dest: bool
) -> tuple[int, int, int]:
    """``(address, element count, ncclDataType_t)`` of the buffer argument ``name``.

    ``typed``: the collective reduces, so raw bytes are refused (a Buffer needs ``dtype=``).
    ``dest``: NCCL writes into it, so a read-only view is refused. The memory must be device
    (or managed) memory of ``device_id``, the communicator's device.
    """
    if obj.__class__ is _Buffer or isinstance(obj, _Buffer):
        ptr = obj._ptr
        if ptr is None:
            raise RuntimeError(f"{name} is a closed Buffer; it cannot be used after close()")
        if dtype is None:
            if typed:
                raise arg_error(
                    "dtype",
                    f"given when {name} is a Buffer (a reduction needs the element type)",
                    None,
                    hint="pass dtype=numpy.float32 (or the buffer's type), or a typed StridedMemoryView",
                    exc=TypeError,
                )
            code, item = UINT8, 1
        else:
            code, item = nccl_dtype(dtype)
        size = obj._size
        if size % item:
            raise arg_error(name, f"a whole number of {numpy.dtype(dtype)} elements ({item} bytes each)",
                            obj, hint=f"it holds {size} bytes")  # fmt: skip
        dev, dev_ok, host_ok, managed = obj._pointer_attrs()
        if not dev_ok or (host_ok and not managed):
            raise arg_error(
                name, "device or managed memory", obj, hint="NCCL cannot reach host memory"
            )
        if dev != device_id and not managed:
            raise arg_error(name, f"memory of device {device_id}, the communicator's device", obj,
                            hint=f"it is on device {dev}")  # fmt: skip
        return ptr, size // item, code
    if obj is None:
        raise arg_error(name, "a Buffer, a StridedMemoryView or a device array", obj, exc=TypeError)
    if not isinstance(obj, _View):
        try:
            obj = _from_any(
                obj, stream_ptr
            )  # the producer orders its pending work before our stream
        except BufferError as exc:
            raise arg_error(name, "a Buffer, a StridedMemoryView or a device array", obj,
                            hint=str(exc), exc=TypeError) from None  # fmt: skip
    dt = obj.dtype
    if dt is None:
        if dtype is None:
            raise arg_error(
                "dtype", f"given when {name} is a view without a dtype", None, exc=TypeError
            )
        dt = numpy.dtype(dtype)
    elif dtype is not None and numpy.dtype(dtype) != dt:
        raise arg_error("dtype", f"None or {name}'s own dtype {dt}", dtype,
                        hint="make a view of another type with view.view(dtype=...)")  # fmt: skip
    code, _item = nccl_dtype(dt, name=f"{name}.dtype")
    strides = obj.strides
    if strides is not None and not _c_contiguous(obj.shape, strides):
        raise arg_error(name, "C-contiguous (NCCL reads one dense span)", obj)
    if obj._dl_device_type not in _DEVICE_TYPES:
        raise arg_error(
            name, "a view of device or managed memory", obj, hint="NCCL cannot reach host memory"
        )
    if obj._dl_device_type == kDLCUDA and obj.device_id != device_id:
        raise arg_error(
            name, f"a view of device {device_id}'s memory, the communicator's device", obj
        )
    if dest and obj.readonly:
        raise arg_error(name, "writable (NCCL writes the result into it)", obj)
    return obj.ptr, obj.size, code


def stream_of(stream: Any, device_id: int) -> tuple[Any, int]:
    """``(Stream, address)`` of a collective's ``stream``, checked: open, of ``device_id``."""
    st = as_stream(stream)
    h = st._h
    if h.is_released:
        raise RuntimeError("Stream has been closed; it cannot be used after close()")
    ordinal = st._device_id
    if ordinal >= 0 and ordinal != device_id:
        raise arg_error("stream", f"a stream of device {device_id}, the communicator's device", st,
                        hint=f"it belongs to device {ordinal}")  # fmt: skip
    return st, h.address


def same_type(name: str, want: int, got: int) -> None:
    if got != want:
        raise arg_error(name, f"of the same data type as sendbuf ({_DTYPE_NAMES.get(want, want)})",
                        _DTYPE_NAMES.get(got, got), hint="pass dtype= for Buffers")  # fmt: skip


def at_least(name: str, have: int, need: int, why: str) -> None:
    if have < need:
        raise arg_error(name, f"at least {need} elements long ({why})", f"{have} elements")


def rank_arg(name: str, value: Any, nranks: int, rank: int = -1, grouped: bool = True) -> int:
    """A ``root`` or ``peer`` argument: an int rank in ``0..nranks-1``; for a peer (``rank``
    given), this rank itself only inside a group (NCCL pairs a send to oneself with its recv
    there)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise arg_error(name, "an int rank", value, exc=TypeError)
    if not 0 <= value < nranks:
        raise arg_error(name, f"a rank in 0..{nranks - 1}", value)
    if value == rank and not grouped:
        raise arg_error(name, f"another rank than this one ({rank}) outside nccl.group()", value,
                        hint="a rank sends to itself only inside a group, with the matching recv")  # fmt: skip
    return value


def equal_blocks(count: int, nranks: int) -> int:
    """The block length of an all-to-all over ``count`` elements: ``count`` must divide evenly."""
    if count % nranks:
        raise arg_error("sendbuf", f"{nranks} equal blocks, one per rank (a length that is a "
                        f"multiple of nranks, {nranks})", f"{count} elements")  # fmt: skip
    return count // nranks


def excluded_ranks(value: Any, rank: int, nranks: int) -> list[int]:
    """``exclude_ranks`` of a shrink: distinct int ranks, not this one, not all the others."""
    try:
        ranks = list(value)
    except TypeError:
        raise arg_error("exclude_ranks", "a sequence of int ranks", value, exc=TypeError) from None
    if not ranks:  # NCCL 2.28 refuses it (ncclInvalidArgument)
        raise arg_error("exclude_ranks", "at least one rank", value,
                        hint="to keep every rank, keep this communicator")  # fmt: skip
    for r in ranks:
        rank_arg("exclude_ranks", r, nranks)
    if len(set(ranks)) != len(ranks):
        raise arg_error("exclude_ranks", "distinct ranks", value)
    if rank in ranks:
        raise arg_error("exclude_ranks", f"ranks other than this one ({rank})", value,
                        hint="an excluded rank does not call shrink()")  # fmt: skip
    return ranks
