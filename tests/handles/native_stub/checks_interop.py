"""Checks of the PyTorch reader (``torch_view``) on host tensors, without PyTorch: a type whose
DLPack C exchange table (the capsule PyTorch publishes) describes NumPy arrays."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from stub_env import N, check, count


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device_type", ctypes.c_int32),
        ("device_id", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


FromObject = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
WorkStream = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)
)


class ExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("prev_api", ctypes.c_void_p),
        ("allocator", ctypes.c_void_p),
        ("from_py_object", ctypes.c_void_p),
        ("to_py_object", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", FromObject),
        ("current_work_stream", WorkStream),
    ]


class HostTensor:
    """A CPU tensor as the exchange table describes it: a NumPy float32 array."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.shape = (ctypes.c_int64 * array.ndim)(*array.shape)
        self.strides = (ctypes.c_int64 * array.ndim)(*(s // 4 for s in array.strides))

    def is_neg(self) -> bool:
        return False

    def is_conj(self) -> bool:
        return False


def _describe(obj: Any, out: Any) -> int:
    a = obj.array
    out[0] = DLTensor(a.ctypes.data, 1, 0, a.ndim, 2, 32, 1, obj.shape, obj.strides, 0)
    return 0


def _no_stream(device_type: int, device_id: int, out: Any) -> int:
    out[0] = None
    return 0


_KEEP = [FromObject(_describe), WorkStream(_no_stream)]
_TABLE = ExchangeAPI(1, 3, None, None, None, None, *_KEEP)


def _capsule() -> Any:
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(_TABLE), b"dlpack_exchange_api", None)


@check
def torch_host_tensors() -> None:
    assert N.torch_setup(HostTensor, _capsule()) is True
    t = HostTensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    for stream_ptr in (-1, 0, 12345):  # host memory: no stream is ordered, whichever is given
        v = N.torch_view(N.ViewInfo, t, stream_ptr)
        assert (v.ptr, v.shape, v.strides) == (t.array.ctypes.data, (2, 3), (3, 1))
        # CPU memory, as cuda.core 1.2 reports a CPU tensor (pinned ones too)
        assert (v.device_id, v.is_device_accessible, v._dl_device_type) == (-1, False, 1)
        assert v.exporting_obj is t  # a view keeps what it was made from
    assert count("cuStreamWaitEvent") == 0 and count("cuEventRecord") == 0
    assert count("cuCtxGetDevice") == 0


class NegativeTensor(HostTensor):
    """A tensor the reader declines (PyTorch's negative bit): the Python reader decides."""

    def is_neg(self) -> bool:
        return True


@check
def view_entry_reads_torch_tensors() -> None:
    # from_dlpack's C entry: a type classified as torch goes to the reader with no Python
    # frame; what the reader declines, and every other kind, goes to the fallback.
    calls: list[tuple[Any, ...]] = []

    def fallback(*args: Any, **kwargs: Any) -> str:
        calls.append(args + tuple(kwargs.items()))
        return "fallback"

    kinds = {HostTensor: 2, NegativeTensor: 2, bytes: 3}
    entry = N.ViewEntry(fallback, kinds, 0, 2)
    assert N.torch_setup(HostTensor, _capsule()) is True
    t = HostTensor(np.arange(3, dtype=np.float32))
    v = entry(N.ViewInfo, t, -1)
    assert type(v) is N.ViewInfo and (v.ptr, v.shape) == (t.array.ctypes.data, (3,))
    assert entry(N.ViewInfo, t, stream_ptr=-1).shape == (3,)  # the keyword form too
    assert calls == []
    neg = NegativeTensor(np.arange(2, dtype=np.float32))
    assert N.torch_setup(NegativeTensor, _capsule()) is True  # the reader's exact type
    assert entry(N.ViewInfo, neg, -1) == "fallback"
    assert entry(N.ViewInfo, b"x", -1) == "fallback"  # a kind read by neither reader
    assert entry(N.ViewInfo, t, None) == "fallback"  # no stream address: Python decides
    assert calls == [(N.ViewInfo, neg, -1), (N.ViewInfo, b"x", -1), (N.ViewInfo, t, None)]
