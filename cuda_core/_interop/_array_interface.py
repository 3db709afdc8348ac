"""Readers of the CUDA Array Interface (v3) and the NumPy array interface.

:class:`~cuda_core.utils.StridedMemoryView` builds its views from the fields these functions
return: ``(ptr, shape, strides, dtype, device_id, is_device_accessible, readonly,
dl_device_type)``, with ``strides`` in elements (or ``None``) and ``dl_device_type`` a DLPack
device type. For the CUDA Array Interface, when the producer names a stream other than the
consumer's, the consumer stream waits on an event recorded on the producer stream (device-side
ordering, never a host synchronisation); ``stream_ptr=-1`` opts out.
"""

from __future__ import annotations

from typing import Any

import numpy

from .._compat import driver
from .._handles import _driver as _drv
from .._handles._backend import NATIVE, backend
from .._handles._contexts import CtxScope
from .._handles._driver import driver_available
from .._handles._tokens import LAST_TOKEN as _LAST_TOKEN
from .._utils import BufferAttributeError, BufferValueError, check_cleanup, handle_return
from . import _dlpack as _dl
from ._fast_arrays import AMBIGUOUS

__all__: list[str] = []  # private module

# (ptr, shape, strides in elements, dtype, device_id, is_device_accessible, readonly, DLPack device type)
Fields = tuple[int, tuple[int, ...], tuple[int, ...] | None, numpy.dtype[Any], int, bool, bool, int]

_KDLCPU = _dl.kDLCPU
_KDLCUDA = _dl.kDLCUDA
_typestr_dtypes: dict[str, numpy.dtype[Any]] = {}  # typestr -> dtype (bounded cache)
_ctx_get_device = backend.ctx_get_device


def read_cuda_array_interface(obj: Any, stream_ptr: int | None) -> Fields:
    """The view fields of ``obj.__cuda_array_interface__``, ordered on the consumer ``stream_ptr``."""
    try:
        iface = obj.__cuda_array_interface__
    except AttributeError:
        raise BufferAttributeError(
            f"'{type(obj).__name__}' object has no attribute '__cuda_array_interface__'"
        ) from None
    if stream_ptr is None:
        raise BufferError(AMBIGUOUS)
    ptr = iface["data"][0] or 0
    device_id = _pointer_device(ptr)
    producer = iface.get("stream")
    if stream_ptr != -1 and producer is not None and producer != stream_ptr:
        _order_streams(int(producer), int(stream_ptr), device_id)
    return _read_interface_dict(iface, device_id, True, _KDLCUDA)


def array_interface_view(cls: Any, obj: Any) -> Any:
    """``StridedMemoryView.from_array_interface(obj)``: a view of ``obj.__array_interface__``.

    Installed as that classmethod (its documentation is the method's); like it, the view is
    always a ``StridedMemoryView`` (``VIEW``), whatever ``cls``. ``device_id`` is what
    ``cuda.core`` gives such a view: the current context's device (-1 where there is none, or
    no driver: ``cuda.core`` raises there). The steps of :func:`_current_device` and
    :func:`_read_interface_dict` in one frame, in their order (the dtype aside, which both read
    through :func:`_iface_dtype`): every call saved is a frame.
    """
    try:
        iface = obj.__array_interface__
    except AttributeError:
        raise BufferAttributeError(
            f"'{type(obj).__name__}' object has no attribute '__array_interface__'"
        ) from None
    if _NATIVE:
        device_id = _ctx_get_device()
        if device_id < 0:
            device_id = -1 if device_id != _NOT_BOUND else _current_device()
    elif _drv._driver_ready:  # the pure backend, driver started: _current_device's last step
        err, ordinal = _cu_ctx_get_device()
        device_id = int(ordinal) if err == _SUCCESS else -1
    else:
        device_id = _current_device()
    get = iface.get
    if get("mask") is not None:
        raise BufferError("masked arrays are not supported")
    shape = iface["shape"]
    if type(shape) is not tuple:
        shape = tuple(shape)
    dt = _iface_dtype(iface, get("descr"))
    ptr, ro = iface["data"]
    offset = get("offset", 0)
    byte_strides = get("strides")
    strides = None
    if byte_strides is not None:
        strides = _element_strides(byte_strides, dt.itemsize)
    view = _new_view(VIEW)
    view.ptr = (ptr or 0) + offset
    view.shape = shape
    view._raw_strides = strides
    view._dtype = dt
    view.device_id = device_id
    view.is_device_accessible = False
    view.readonly = ro if ro is True or ro is False else bool(ro)
    view._dl_device_type = _KDLCPU
    view.exporting_obj = obj
    view._capsule = None
    return view


_NOT_BOUND = -int(driver.CUresult.CUDA_ERROR_NOT_INITIALIZED)
_NATIVE = NATIVE
_SUCCESS = driver.CUresult.CUDA_SUCCESS
_cu_ctx_get_device = driver.cuCtxGetDevice
_new_view = backend.ViewInfo.__new__
VIEW: Any = None  # StridedMemoryView, set once that class exists


def _current_device() -> int:
    """The current context's device ordinal; -1 without one (or without a driver)."""
    if NATIVE:  # asked in C; -status where there is no current context
        dev = _ctx_get_device()
        if dev >= 0 or dev != _NOT_BOUND:
            return max(dev, -1)
    if not driver_available():  # (native: a driver cuda_core has not bound yet)
        return -1
    err, ordinal = driver.cuCtxGetDevice()
    return int(ordinal) if err == driver.CUresult.CUDA_SUCCESS else -1


def _iface_dtype(iface: dict[str, Any], descr: Any) -> numpy.dtype[Any]:
    """The dtype an array interface describes: its ``descr`` where that is structured, else its
    ``typestr``."""
    if descr and (len(descr) > 1 or descr[0][0]):  # a structured dtype
        return numpy.dtype(descr)
    typestr = iface["typestr"]
    dt = _typestr_dtypes.get(typestr)
    return dt if dt is not None else _typestr_dtype(typestr)


def _typestr_dtype(typestr: str) -> numpy.dtype[Any]:
    dt = _typestr_dtypes.get(typestr)
    if dt is None:
        dt = numpy.dtype(typestr)
        if len(_typestr_dtypes) < 256:
            _typestr_dtypes[typestr] = dt
    return dt


def _read_interface_dict(
    iface: dict[str, Any], device_id: int, accessible: bool, dev_type: int
) -> Fields:
    get = iface.get
    if get("mask") is not None:
        raise BufferError("masked arrays are not supported")
    shape = tuple(iface["shape"])
    dt = _iface_dtype(iface, get("descr"))
    ptr, ro = iface["data"]
    offset = get("offset", 0) if dev_type == _KDLCPU else 0
    byte_strides = get("strides")
    strides = None
    if byte_strides is not None:
        strides = _element_strides(byte_strides, dt.itemsize)
    return ((ptr or 0) + offset, shape, strides, dt, device_id, accessible, bool(ro), dev_type)


def _element_strides(byte_strides: Any, item: int) -> tuple[int, ...]:
    """``byte_strides`` in elements of ``item`` bytes; a stride that is not a multiple is refused."""
    if any(map(item.__rmod__, byte_strides)):
        raise BufferValueError(
            f"strides must be divisible by itemsize: the strides {tuple(byte_strides)} "
            f"(bytes) are not multiples of the item size {item}"
        )
    return tuple(map(item.__rfloordiv__, byte_strides))


_ATTR_ORDINAL = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL


def _pointer_device(ptr: int) -> int:
    """The ordinal of the device owning ``ptr`` (the current device for a null pointer)."""
    if ptr:
        return int(
            handle_return(driver.cuPointerGetAttribute(_ATTR_ORDINAL, ptr), "cuPointerGetAttribute")
        )
    err, dev = driver.cuCtxGetDevice()
    return int(dev) if err == driver.CUresult.CUDA_SUCCESS else 0


_EV_FLAGS = driver.CUevent_flags.CU_EVENT_DISABLE_TIMING


def _order_streams(producer: int, consumer: int, device_id: int) -> None:
    """Make ``consumer`` wait, on the device, for the work queued so far on ``producer``.

    The event is made in the producer stream's context (``cuEventRecord`` refuses an event of
    another context): a real stream's own, whatever context is current (the producer may be a
    stream of a device that is not current); for a default-stream token, the current context,
    or the device's primary context when none is current."""
    if producer > _LAST_TOKEN:
        ctx = handle_return(driver.cuStreamGetCtx(driver.CUstream(producer)), "cuStreamGetCtx")
        with CtxScope(ctx, int(ctx)):
            _record_and_wait(producer, consumer)
        return
    ctx = handle_return(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx):
        _record_and_wait(producer, consumer)
        return
    dev = handle_return(driver.cuDeviceGet(device_id), "cuDeviceGet")
    primary = handle_return(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    try:
        with CtxScope(primary, int(primary)):
            _record_and_wait(producer, consumer)
    finally:
        check_cleanup(
            driver.cuDevicePrimaryCtxRelease(dev),
            "cuDevicePrimaryCtxRelease",
            "a primary context",
            primary,
        )


def _record_and_wait(producer: int, consumer: int) -> None:
    """With the producer's context current: an event recorded on ``producer``, waited for by
    ``consumer``, then destroyed (the wait keeps what it needs)."""
    ev = handle_return(driver.cuEventCreate(_EV_FLAGS), "cuEventCreate")
    try:
        handle_return(driver.cuEventRecord(ev, driver.CUstream(producer)), "cuEventRecord")
        handle_return(
            driver.cuStreamWaitEvent(driver.CUstream(consumer), ev, 0), "cuStreamWaitEvent"
        )
    finally:  # released once the wait no longer needs it
        check_cleanup(driver.cuEventDestroy(ev), "cuEventDestroy", "an ordering event", ev)
