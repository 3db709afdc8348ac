"""Fast views of exact ``torch.Tensor`` and ``cupy.ndarray`` objects, without DLPack capsules.

:meth:`StridedMemoryView.from_dlpack` asks this module first when the producer's type is
exactly PyTorch's ``Tensor`` or CuPy's ``ndarray``. The metadata (pointer, shape, strides,
dtype, device) is read straight from the object's attributes (:func:`torch_fields`, the pure
backend's ``torch_view``; the native backend reads CUDA and host tensors through PyTorch's
DLPack C exchange API and falls back to it), which costs a fraction of the producer's
``__dlpack__``. Stream semantics stay those of DLPack: the producer's *current*
stream is ordered before the consumer stream ``stream_ptr`` with an event recorded on the
producer and waited on by the consumer, on the device (never a host synchronisation); ``-1``
opts out. One cached event per device serves every ordering: ``cuStreamWaitEvent`` captures the
event's state when it is called, so re-recording it later never affects an earlier wait.

Each ``*_view`` function returns ``None`` for anything unusual (a dtype or layout it does not
map, a conjugate/negative view, a device it does not know, a stream value DLPack treats
specially, a failed event record); the caller then takes the DLPack path, which produces the
producer's own result or error. Neither library is ever imported here: the classes are looked
up in ``sys.modules`` once a producer of an unseen type arrives.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy

from .._compat import driver
from .._handles._backend import backend
from .._handles._contexts import CtxScope
from .._handles._driver import ensure_driver
from .._handles._pure_interop import AMBIGUOUS
from .._utils import handle_return, raise_status
from . import _dlpack as _dl

__all__: list[str] = []  # private module

KIND_DLPACK = 0  # an ordinary DLPack producer (the backend's dlpack_view)
KIND_TORCH = 2  # exactly torch.Tensor
KIND_CUPY = 3  # exactly cupy.ndarray

_LEGACY_STREAM = 1  # DLPack's name for the legacy default stream (CU_STREAM_LEGACY)

# --------------------------------------------------------------------------------------------
# Device-side ordering with one cached event per device

_events: dict[int, tuple[Any, int]] = {}  # device ordinal -> (CUevent, its address)
_create_lock = threading.Lock()  # one event per device (backend.record_wait serialises its use)
_EV_FLAGS = driver.CUevent_flags.CU_EVENT_DISABLE_TIMING


def _device_event(device_id: int) -> tuple[Any, int]:
    with _create_lock:
        ev = _events.get(device_id)
        if ev is not None:
            return ev
        ensure_driver()
        dev = handle_return(driver.cuDeviceGet(device_id), "cuDeviceGet")
        # Retained for good: the cached event lives in this context until the process exits.
        ctx = handle_return(driver.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        with CtxScope(ctx, int(ctx)):
            event = handle_return(driver.cuEventCreate(_EV_FLAGS), "cuEventCreate")
        ev = _events[device_id] = (event, int(event))
        backend.set_order_event(device_id, ev[1])  # the native torch_view orders through it too
        return ev


def order_after(producer: int, consumer: int, device_id: int) -> bool:
    """Make ``consumer`` wait on the device for the work queued so far on ``producer``.

    Both are stream addresses, with ``1`` for the legacy default stream; ``producer`` belongs
    to device ``device_id``. Returns ``False``, having ordered nothing, when the event cannot
    be recorded there (the legacy stream of another device's context is current, say): the
    caller then lets the producer order its own work through DLPack.
    """
    ev = _events.get(device_id)
    if ev is None:
        ev = _device_event(device_id)
    if producer == _LEGACY_STREAM and backend.ctx_get_device() != device_id:
        return False  # the legacy stream would be another device's
    status = backend.record_wait(ev[1], producer, consumer)
    if status < 0:  # the record failed: nothing was ordered
        return False
    if status:
        raise_status(status, "cuStreamWaitEvent")
    return True


# --------------------------------------------------------------------------------------------
# Producer classification

_torch: dict[str, Any] = {}  # bound once: "dtypes", "complex", "strided", "raw_stream"
_cupy: dict[str, Any] = {}  # bound once: "dtypes", "stream_ptr"


def classify(tp: type) -> int:
    """The producer kind of the type ``tp`` (``KIND_TORCH``, ``KIND_CUPY`` or ``KIND_DLPACK``)."""
    torch = sys.modules.get("torch")
    if torch is not None and tp is getattr(torch, "Tensor", None) and _bind_torch(torch):
        return KIND_TORCH
    cupy = sys.modules.get("cupy")
    if cupy is not None and tp is getattr(cupy, "ndarray", None) and _bind_cupy(cupy):
        return KIND_CUPY
    return KIND_DLPACK


def _numpy_equivalent(name: str) -> numpy.dtype[Any] | None:
    """The NumPy dtype named ``name`` (ml_dtypes for the narrow floats) that DLPack can carry."""
    try:
        dt = numpy.dtype(name)
    except TypeError:
        ml = sys.modules.get("ml_dtypes")
        cls = getattr(ml, name, None) if ml is not None else None
        if cls is None:
            return None
        dt = numpy.dtype(cls)
    return dt if dt in _dl._NUMPY_TO_DL else None


_TORCH_DTYPE_NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128", "bfloat16",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
)  # fmt: skip


def _bind_torch(torch: Any) -> bool:
    if not _torch:
        try:
            dtypes = {}
            for name in _TORCH_DTYPE_NAMES:
                tdt = getattr(torch, name, None)
                ndt = _numpy_equivalent(name) if tdt is not None else None
                if ndt is not None:
                    dtypes[tdt] = _dl._pack_dtype(
                        *_dl.dtype_to_dlpack(ndt)
                    )  # the DLPack dtype word
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is None:  # a build without CUDA, or a torch that lacks the raw accessor

                def raw(device: int) -> int:
                    return int(torch.cuda.current_stream(device).cuda_stream)

            complex_types = frozenset(t for t in (torch.complex64, torch.complex128) if t in dtypes)
            _torch.update(
                dtypes=dtypes, complex=complex_types, strided=torch.strided, raw_stream=raw
            )
        except Exception:  # an unfamiliar torch: stay on DLPack
            return False
        # The native reader takes exact tensors through PyTorch's DLPack C exchange API
        # (DLPack >= 1.3; PyTorch publishes it on the type). Without it: the attribute reads.
        api = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
        _torch["native"] = api is not None and bool(backend.torch_setup(torch.Tensor, api))
    return True


def _bind_cupy(cupy: Any) -> bool:
    if not _cupy:
        try:
            stream_mod = cupy.cuda.stream
            ptr_of: Callable[[], int] | None = getattr(stream_mod, "get_current_stream_ptr", None)
            if ptr_of is None:

                def ptr_of() -> int:
                    return int(cupy.cuda.get_current_stream().ptr)

            names = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
                     "float16", "float32", "float64", "complex64", "complex128")  # fmt: skip
            _cupy.update(dtypes=frozenset(numpy.dtype(n) for n in names), stream_ptr=ptr_of)
        except Exception:
            return False
    return True


# --------------------------------------------------------------------------------------------
# The views. Each returns the view's fields, or None for the DLPack path.

_KDLCPU = _dl.kDLCPU
_KDLCUDA = _dl.kDLCUDA
_KDLCUDAHOST = _dl.kDLCUDAHost
_KDLCUDAMANAGED = _dl.kDLCUDAManaged

NEGATIVE_BIT = (
    "Can't view a tensor with the negative bit set (x.conj().imag, torch._neg_view): its values "
    "are the negation of its memory; call tensor.resolve_neg() first"
)

Fields = tuple[int, tuple[int, ...], tuple[int, ...] | None, Any, int, bool, int]
"""``(ptr, shape, strides_in_elements, dtype, device_id, is_device_accessible, dl_device_type)``;
``dtype`` is a DLPack dtype word (torch) or a NumPy dtype (CuPy)."""


def torch_fields(t: Any, stream_ptr: int | None) -> Fields | None:
    """Read an exact ``torch.Tensor`` through its attributes; order PyTorch's current stream
    before ``stream_ptr``. How a tensor is read wherever the backend's ``torch_view`` declines
    (always, on the pure backend)."""
    tt = _torch
    try:
        tdt = t.dtype
        dt = tt["dtypes"].get(tdt)
        if (
            dt is None
            or t.layout is not tt["strided"]
            or (tdt in tt["complex"] and t.is_conj())  # PyTorch's DLPack export refuses it
        ):
            return None
        if t.is_neg():  # PyTorch's DLPack export does not refuse it, and a view would be wrong
            raise BufferError(NEGATIVE_BIT)
        is_cuda = t.is_cuda
        if not is_cuda and not t.is_cpu:  # meta, xpu, mps, ...
            return None
        device_id = t.get_device() if is_cuda else -1
        ptr = t.data_ptr()
        shape = tuple(t.shape)
        strides = t.stride()
        if is_cuda:
            dev_type, accessible = _KDLCUDA, True
        else:  # pinned or not, as cuda.core 1.2 reports a CPU tensor
            dev_type, device_id, accessible = _KDLCPU, -1, False
    except RuntimeError:  # no storage (functorch wrappers, ...), no strides (nested)
        return None
    if dev_type == _KDLCUDA:
        if stream_ptr is None:
            raise BufferError(AMBIGUOUS)
        if stream_ptr != -1:
            consumer = _LEGACY_STREAM if stream_ptr == 0 else stream_ptr
            if consumer < -1 or consumer == 2:  # refused by PyTorch: let it say so
                return None
            producer = tt["raw_stream"](device_id) or _LEGACY_STREAM
            if producer != consumer and not order_after(producer, consumer, device_id):
                return None
    # Host memory: PyTorch orders nothing for CPU tensors.
    return ptr, shape, strides, dt, device_id, accessible, dev_type


def cupy_view(a: Any, stream_ptr: int | None) -> Fields | None:
    """Read an exact ``cupy.ndarray``; order CuPy's current stream before ``stream_ptr``."""
    dt = a.dtype
    if dt not in _cupy["dtypes"]:
        return None
    dev_type, dev_id = a.__dlpack_device__()
    if dev_type == _KDLCUDA:
        if stream_ptr is None:
            raise BufferError(AMBIGUOUS)
        accessible = True
        consumer = stream_ptr
    elif dev_type == _KDLCUDAMANAGED or dev_type == _KDLCUDAHOST:
        accessible = True
        consumer = _LEGACY_STREAM if stream_ptr is None else stream_ptr  # CuPy: None is legacy
    else:
        return None
    if consumer == 0:
        consumer = _LEGACY_STREAM
    if consumer != -1:
        if consumer < -1:
            return None  # CuPy refuses it: let it say so
        producer = _cupy["stream_ptr"]() or _LEGACY_STREAM
        if producer != consumer and not order_after(producer, consumer, dev_id):
            return None
    item = dt.itemsize
    strides = tuple(map(item.__rfloordiv__, a.strides))
    device_id = dev_id if dev_type != _KDLCUDAHOST else -1
    return a.data.ptr, a.shape, strides, dt, device_id, accessible, dev_type
