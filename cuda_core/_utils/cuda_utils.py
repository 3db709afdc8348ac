"""``cuda.core._utils.cuda_utils``, at the path code written for ``cuda.core`` imports it from.

Not cuda_core's API, and not used by cuda_core itself (it uses :mod:`cuda_core._utils`): code
outside ``cuda.core`` imports these helpers from that private module (NVIDIA's test harness,
libraries built on ``cuda.core``, some through ``cuda.core.experimental._utils``), so a drop-in
offers them here, with ``cuda.core`` 1.2's signatures and behaviour:

* :func:`handle_return` ``(result, handle=None)`` checks a ``cuda.bindings`` result tuple: a
  failed driver or runtime status raises :class:`~cuda_core.CUDAError`, a failed NVRTC status
  :class:`~cuda_core.NVRTCError` (with the program's log when *handle* is given), each message
  beginning as ``cuda.core``'s (``"CUDA_ERROR_INVALID_VALUE: ..."``); a status of any other
  type raises ``RuntimeError``. On success it returns the payload (``None``, the one item, or
  the tuple of items).
* :func:`check_or_create_options`, :class:`ComputeCapability`, :class:`CUDAError` and
  :class:`NVRTCError` are cuda_core's own (the same objects it uses).
* :func:`cast_to_3_tuple` is cuda_core's check in ``cuda.core``'s form: its messages, what it
  accepts (``()``, ``bool``), ``ValueError`` for every refusal.
* :class:`~cuda_core.CUDAWarning`, which ``cuda.core`` 1.3 defines here, is cuda_core's own.
* :func:`is_sequence`, :func:`is_nested_sequence`, :func:`precondition`.
* ``driver``, ``nvrtc`` and ``runtime``: the ``cuda.bindings`` modules themselves.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from cuda.bindings import driver as driver
from cuda.bindings import nvrtc as nvrtc
from cuda.bindings import runtime as runtime

from .._errors import CUDAError as CUDAError
from .._errors import CUDAWarning as CUDAWarning
from .._errors import NVRTCError as NVRTCError
from . import ComputeCapability as ComputeCapability
from . import cast_to_3_tuple as _cast_to_3_tuple
from . import check_or_create_options as check_or_create_options
from . import handle_return as _payload
from . import make_error

__all__ = [
    "CUDAError",
    "CUDAWarning",
    "ComputeCapability",
    "NVRTCError",
    "cast_to_3_tuple",
    "check_or_create_options",
    "driver",
    "handle_return",
    "is_nested_sequence",
    "is_sequence",
    "nvrtc",
    "precondition",
    "runtime",
]

_DRIVER_OK = driver.CUresult.CUDA_SUCCESS
_RUNTIME_OK = runtime.cudaError_t.cudaSuccess
_NVRTC_OK = nvrtc.nvrtcResult.NVRTC_SUCCESS


def handle_return(result: tuple[Any, ...], handle: Any = None) -> Any:
    """Check a ``cuda.bindings`` result tuple as ``cuda.core`` does and return its payload.

    *handle*, an ``nvrtcProgram``, adds that program's log to an :class:`NVRTCError`.
    """
    status = result[0]
    if isinstance(status, driver.CUresult):
        if status != _DRIVER_OK:
            raise make_error(status, "")
    elif isinstance(status, runtime.cudaError_t):
        if status != _RUNTIME_OK:
            raise _runtime_error(status)
    elif isinstance(status, nvrtc.nvrtcResult):
        if status != _NVRTC_OK:
            raise _nvrtc_error(status, handle)
    else:
        raise RuntimeError(f"Unknown error type: {status}")
    return _payload(result)


def _runtime_error(status: Any) -> CUDAError:
    try:
        err, text = runtime.cudaGetErrorString(status)
        explanation = text.decode() if err == _RUNTIME_OK else ""
    except Exception:  # described by name only
        explanation = ""
    return CUDAError("", status.name, explanation, int(status))


def _nvrtc_error(status: Any, handle: Any) -> NVRTCError:
    err, text = nvrtc.nvrtcGetErrorString(status)
    explanation = text.decode() if err == _NVRTC_OK else ""
    log = _program_log(handle) if handle is not None else ""
    exc = NVRTCError("", status.name, explanation, int(status), log=log)
    # The message as cuda.core words it (the status as Python prints it first), so that code
    # matching its start keeps working; the attributes are cuda_core's.
    message = f"{status}: {explanation}"
    if handle is not None:
        message += f", compilation log:\n\n{log}"
    exc.args = (message,)
    return exc


def _program_log(handle: Any) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(handle)
    if err != _NVRTC_OK or size <= 1:
        return ""
    buf = b" " * size
    (err,) = nvrtc.nvrtcGetProgramLog(handle, buf)
    if err != _NVRTC_OK:
        return ""
    return buf.rstrip(b"\0").decode("utf-8", errors="backslashreplace")


def cast_to_3_tuple(label: str, cfg: Any) -> tuple[int, int, int]:
    """An int or a tuple of up to three ints (each >= 1) as a 3-tuple padded with 1, with
    ``cuda.core``'s messages (``ValueError``) and what it accepts (``()``, ``bool``)."""
    return _cast_to_3_tuple(label, cfg, strict=False)


def is_sequence(obj: object) -> bool:
    """Whether *obj* is a :class:`collections.abc.Sequence` (a list, tuple, range, str, ...)."""
    return isinstance(obj, Sequence)


def is_nested_sequence(obj: object) -> bool:
    """Whether *obj* is a sequence with at least one item that is a sequence itself."""
    return isinstance(obj, Sequence) and any(isinstance(item, Sequence) for item in obj)


def precondition(checker: Callable[..., None], what: str = "") -> Callable[..., Any]:
    """A decorator that calls ``checker(*args, **kwargs, what=what)`` before the function.

    The checker raises to refuse the call; the function's own result is returned otherwise.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            checker(*args, **kwargs, what=what)
            return fn(*args, **kwargs)

        return checked

    return decorate
