"""Fast views of exact ``torch.Tensor`` and ``cupy.ndarray`` objects, without DLPack capsules.

:meth:`StridedMemoryView.from_dlpack` asks this module first when the producer's type is
exactly PyTorch's ``Tensor`` or CuPy's ``ndarray``. The metadata (pointer, shape, strides,
dtype, device) is read straight from the object's attributes, which costs a fraction of the
producer's ``__dlpack__``. Stream semantics stay those of DLPack: the producer's *current*
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
from cuda.bindings import driver

from . import _dlpack as _dl
from . import _fast
from ._utils import ensure_driver, handle_return, raise_status

__all__: list[str] = []  # private module

KIND_DLPACK = 0  # an ordinary DLPack producer
KIND_LEGACY = 1  # a DLPack producer whose __dlpack__ rejects max_version
KIND_TORCH = 2  # exactly torch.Tensor
KIND_CUPY = 3  # exactly cupy.ndarray

AMBIGUOUS = (
    "stream_ptr=None is ambiguous: pass the address of the consumer stream "
    "(e.g. int(stream.handle)), or -1 to opt out of stream ordering"
)
_LEGACY_STREAM = 1  # DLPack's name for the legacy default stream (CU_STREAM_LEGACY)

# --------------------------------------------------------------------------------------------
# Device-side ordering with one cached event per device

_events: dict[int, tuple[Any, int]] = {}  # device ordinal -> (CUevent, its address)
_create_lock = threading.Lock()  # one event per device (_fast.record_wait serialises its use)
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
        handle_return(driver.cuCtxPushCurrent(ctx), "cuCtxPushCurrent")
        try:
            event = handle_return(driver.cuEventCreate(_EV_FLAGS), "cuEventCreate")
        finally:
            driver.cuCtxPopCurrent()
        ev = _events[device_id] = (event, int(event))
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
    if producer == _LEGACY_STREAM and _fast.ctx_get_device() != device_id:
        return False  # the legacy stream would be another device's
    status = _fast.record_wait(ev[1], producer, consumer)
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
                    dtypes[tdt] = ndt
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is None:  # a build without CUDA, or a torch that lacks the raw accessor

                def raw(device: int) -> int:
                    return int(torch.cuda.current_stream(device).cuda_stream)

            _torch.update(
                dtypes=dtypes,
                complex=frozenset(t for t in (torch.complex64, torch.complex128) if t in dtypes),
                strided=torch.strided,
                raw_stream=raw,
            )
        except Exception:  # an unfamiliar torch: stay on DLPack
            return False
        try:
            _torch["aoti"] = _bind_torch_aoti(torch)
        except Exception:  # no shim, an unfamiliar layout: the attribute reads below
            _torch["aoti"] = None
    return True


def _torch_offset(version: str) -> int | None:
    """Where a Python tensor holds its ``at::Tensor`` after the object header, by PyTorch
    version: directly from 2.10, after an 8-byte ``MaybeOwned`` flag from 2.3 to 2.9."""
    try:
        major, minor = (int(x) for x in version.split("+")[0].split(".")[:2])
    except ValueError:
        return None
    if (major, minor) >= (2, 10):
        return 0
    if (major, minor) >= (2, 3):
        return 8
    return None


def _bind_torch_aoti(torch: Any) -> dict[str, Any] | None:
    """Set up ``_fastpath.torch_meta`` (PyTorch's stable C shim) and check it against PyTorch's
    own attributes on probe tensors; the codes it reports, or ``None`` to keep the attribute
    reads (no accelerator, no shim, an unknown version, any disagreement)."""
    import ctypes
    import os

    c = _fast.compiled()
    offset = _torch_offset(str(torch.__version__))
    if c is None or offset is None or not hasattr(c, "torch_meta"):
        return None
    libdir = os.path.join(os.path.dirname(torch.__file__), "lib")
    mode = os.RTLD_NOLOAD | os.RTLD_LAZY  # only libraries PyTorch has loaded already

    def lib(name: str) -> Any:
        try:
            return ctypes.CDLL(os.path.join(libdir, name), mode=mode)
        except OSError:
            return None

    cpu, cuda = lib("libtorch_cpu.so"), lib("libtorch_cuda.so")
    if cpu is None:
        return None

    def addr(library: Any, name: str) -> int:
        return ctypes.cast(getattr(library, name), ctypes.c_void_p).value or 0

    def code(name: str) -> int:
        return int(ctypes.CFUNCTYPE(ctypes.c_int32)(addr(cpu, name))())

    getters = ("data_ptr", "dim", "sizes", "strides", "dtype", "device_type", "device_index", "layout")
    table = {f"aoti_torch_get_{g}": addr(cpu, f"aoti_torch_get_{g}") for g in getters}
    if cuda is not None and hasattr(cuda, "aoti_torch_get_current_cuda_stream"):
        table["aoti_torch_get_current_cuda_stream"] = addr(cuda, "aoti_torch_get_current_cuda_stream")
    codes = {}
    for name in _TORCH_DTYPE_NAMES:
        tdt = getattr(torch, name, None)
        if tdt in _torch["dtypes"] and hasattr(cpu, f"aoti_torch_dtype_{name}"):
            codes[code(f"aoti_torch_dtype_{name}")] = _torch["dtypes"][tdt]
    cpu_code, cuda_code = code("aoti_torch_device_type_cpu"), code("aoti_torch_device_type_cuda")
    c.set_torch_entry_points(table, offset, code("aoti_torch_layout_strided"), cuda_code)
    # The probe: what the shim reads must be what PyTorch says, on a plain and a strided,
    # offset view; else switch it off.
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for t in (base, base[1:, ::2]):
        meta = c.torch_meta(t)
        expected = (t.data_ptr(), tuple(t.shape), t.stride(), cpu_code)
        if meta is None or (meta[0], meta[1], meta[2], meta[4]) != expected or codes.get(meta[3]) != numpy.float32:
            c.set_torch_entry_points(table, -1, 0, 0)
            return None
    checked: dict[int, bool] = {}

    def stream_ok(device_id: int) -> bool:
        """Whether the shim's current stream is PyTorch's: checked once per device, on the
        current stream and on a side stream made current (a non-zero handle)."""
        ok = checked.get(device_id)
        if ok is None:
            raw = _torch["raw_stream"]
            try:
                probe = torch.empty(1, device=f"cuda:{device_id}")
                ok = c.torch_meta(probe)[6] == raw(device_id)
                side = torch.cuda.Stream(device_id)
                with torch.cuda.stream(side):
                    ok = ok and c.torch_meta(probe)[6] == raw(device_id) == side.cuda_stream != 0
            except Exception:  # no CUDA in this torch, a shim error: read it the usual way
                ok = False
            checked[device_id] = ok
        return ok

    c.set_torch_view(codes, frozenset(k for k, v in codes.items() if v.kind == "c"), checked, _events)
    return {
        "meta": c.torch_meta,
        "codes": codes,
        "complex": frozenset(k for k, v in codes.items() if v.kind == "c"),
        "cpu": cpu_code,
        "cuda": cuda_code,
        "stream_ok": stream_ok,
        "streams_ok": checked,
    }


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

Fields = tuple[int, tuple[int, ...], tuple[int, ...] | None, Any, int, bool, int]
"""``(ptr, shape, strides_in_elements, numpy_dtype, device_id, is_device_accessible, dl_device_type)``"""


def torch_view(t: Any, stream_ptr: int | None) -> Fields | None:
    """Read an exact ``torch.Tensor``; order PyTorch's current stream before ``stream_ptr``."""
    tt = _torch
    aoti = tt["aoti"]
    meta = aoti["meta"](t) if aoti is not None else None
    producer = -1  # PyTorch's current stream, when the shim read it
    try:
        if meta is not None:
            # PyTorch's stable C shim read the fields (strided layout checked there).
            ptr, shape, strides, code, device_type, device_id, producer = meta
            dt = aoti["codes"].get(code)
            if dt is None or t.is_neg() or (code in aoti["complex"] and t.is_conj()):
                return None
            is_cuda = device_type == aoti["cuda"]
            if not is_cuda and device_type != aoti["cpu"]:
                return None
        else:
            tdt = t.dtype
            dt = tt["dtypes"].get(tdt)
            if dt is None or t.layout is not tt["strided"] or t.is_neg() or (tdt in tt["complex"] and t.is_conj()):
                return None
            is_cuda = t.is_cuda
            if not is_cuda and not t.is_cpu:  # meta, xpu, mps, ...
                return None
            device_id = t.get_device() if is_cuda else -1
            ptr = t.data_ptr()
            shape = tuple(t.shape)
            strides = t.stride()
        if is_cuda:
            dev_type, accessible = _KDLCUDA, True
        elif t.is_pinned():
            dev_type, device_id, accessible = _KDLCUDAHOST, -1, True
        else:
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
            if producer < 0 or not (aoti["streams_ok"].get(device_id) or aoti["stream_ok"](device_id)):
                producer = tt["raw_stream"](device_id)
            producer = producer or _LEGACY_STREAM
            if producer != consumer and not order_after(producer, consumer, device_id):
                return None
    # Host memory (pinned included): PyTorch orders nothing for CPU tensors.
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
