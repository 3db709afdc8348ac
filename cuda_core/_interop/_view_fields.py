"""The fields of a StridedMemoryView: filled from a reader's tuple or from a Buffer and a layout.

Also the consumer-stream argument (``stream_ptr``) every view constructor reads.
"""

from __future__ import annotations

from typing import Any

import numpy

from .._handles._backend import backend
from .._utils import arg_error
from . import _dlpack as _dl
from ._view_ops import _c_strides

__all__: list[str] = []  # private: StridedMemoryView's constructors use these

# The backend's readers (see cuda_core/_handles/_pure.py): views are instances of its ViewInfo.
_new_view = backend.ViewInfo.__new__


def _view_of(cls: Any, fields: tuple[Any, ...], obj: Any) -> Any:
    """A view of ``obj`` from the fields a bridge reader found (``_fast_arrays``)."""
    view = _new_view(cls)
    view.ptr, view.shape, view._raw_strides, view._dtype, view.device_id, accessible, dev_type = (
        fields
    )
    view.is_device_accessible = accessible
    view.readonly = False
    view.exporting_obj = obj
    view._capsule = None
    view._dl_device_type = dev_type
    return view


_FIELDS = ("_capsule", "_dl_device_type", "_dtype", "_raw_strides", "device_id", "exporting_obj",
           "is_device_accessible", "ptr", "readonly", "shape")  # fmt: skip


def _stream_ptr(stream_ptr: Any) -> int | None:
    """The consumer stream address, read as cuda.core 1.2 reads ``stream_ptr``: ``None``, or any
    object ``int()`` takes through ``__index__``/``__int__`` (an int, a ``CUstream`` such as
    ``stream.handle``, a NumPy integer, a :class:`Stream`). Anything else is a ``TypeError``."""
    if stream_ptr is None or type(stream_ptr) is int:
        return stream_ptr
    tp = type(stream_ptr)
    if hasattr(tp, "__index__"):
        return int(stream_ptr.__index__())
    if hasattr(tp, "__int__"):
        return int(stream_ptr)
    raise arg_error(
        "stream_ptr",
        "a stream address (an int or a CUstream such as stream.handle), -1 or None",
        stream_ptr,
        exc=TypeError,
        lead=f"Argument 'stream_ptr' has incorrect type (expected int, got {tp.__name__})",
    )


def buffer_view(
    cls: Any,
    buffer: Any,
    shape: tuple[int, ...],
    strides: tuple[int, ...] | None,
    itemsize: int | None,
    dtype: Any,
    is_readonly: bool,
) -> Any:
    """A ``cls`` view of ``buffer`` with ``shape`` and ``strides`` (see
    :meth:`StridedMemoryView.from_buffer`, whose arguments these are, checked here)."""
    if itemsize is None and dtype is None:
        raise ValueError("Either itemsize or dtype must be specified: neither was given")
    dt = None if dtype is None else numpy.dtype(dtype)
    if itemsize is not None:
        if isinstance(itemsize, bool) or not isinstance(itemsize, int) or itemsize <= 0:
            raise arg_error(
                "itemsize", "a positive int", itemsize, lead="itemsize must be positive"
            )
        if dt is not None and dt.itemsize != itemsize:
            raise arg_error(
                "itemsize",
                f"dtype.itemsize ({dt.itemsize}) when both are given",
                itemsize,
                lead=f"itemsize ({itemsize}) does not match dtype.itemsize ({dt.itemsize})",
            )
    item = dt.itemsize if dt is not None else int(itemsize or 0)
    shape = tuple(shape)
    for n in shape:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise arg_error("shape", "a tuple of non-negative ints", shape)
    if strides is not None:
        strides = tuple(strides)
        if len(strides) != len(shape) or not all(isinstance(s, int) for s in strides):
            lead = (
                "Strides, if provided, must have the same length as shape. Shape has "
                f"{len(shape)} dimensions, but strides has {len(strides)} dimensions"
                if len(strides) != len(shape)
                else ""
            )
            raise arg_error("strides", f"None or a tuple of {len(shape)} ints", strides, lead=lead)
    count = 1
    for n in shape:
        count *= n
    # Like cuda.core: the extent is checked against buffers a memory resource allocated
    # (a wrapped foreign allocation may legitimately reach around its reported size).
    if count and buffer.memory_resource is not None:
        st = strides if strides is not None else _c_strides(shape)
        lo = sum(s * (n - 1) for n, s in zip(shape, st) if s < 0)
        hi = sum(s * (n - 1) for n, s in zip(shape, st) if s > 0)
        if lo < 0:
            raise arg_error(
                "strides",
                "non-negative for a view starting at the buffer's start",
                strides,
                lead="Allocation size for a layout that maps elements to negative memory "
                f"offsets is ambiguous. The layout's min_offset is {lo}",
            )
        need = (hi + 1) * item
        if need > buffer.size:
            raise arg_error(
                "shape",
                f"within the buffer's {buffer.size} bytes (this view needs {need})",
                shape,
                lead="Buffer size is too small for the layout. Expected at least "
                f"{need} bytes, got {buffer.size} bytes.",
            )
    view = _new_view(cls)
    view.ptr = int(buffer.handle)
    view.shape = shape
    view._raw_strides = strides
    view._dtype = dt
    view.device_id = buffer.device_id
    view.is_device_accessible = bool(buffer.is_device_accessible)
    view.readonly = bool(is_readonly)
    view.exporting_obj = buffer
    view._capsule = None
    try:
        view._dl_device_type = int(buffer.__dlpack_device__()[0])
    except Exception:
        view._dl_device_type = _dl.kDLCUDA if view.is_device_accessible else _dl.kDLCPU
    return view
