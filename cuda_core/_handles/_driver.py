"""Driver start-up, once per process, and device attributes read through the driver.

:func:`ensure_driver` initialises libcuda and hands the chosen backend its entry points;
every path that reaches the driver without going through ``Device()`` calls it first.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from .._compat import driver
from .._errors import CUDADriverNotFoundError, CUDAError
from .._logging import logger as _log
from .._utils import handle_return, make_error, raise_status
from . import _backend
from ._contexts import context_handle

__all__: list[str] = []  # private module

_CUresult = driver.CUresult

_get_attribute_fn: list[Any] = []


def device_attribute(attribute: Any, device: int) -> int:
    """``cuDeviceGetAttribute``: the bindings' call for an enum member; for a plain ``int`` (an
    attribute the bindings lack) the driver entry point itself. A driver that does not know the
    attribute answers ``CUDA_ERROR_INVALID_VALUE``, raised as a :class:`~cuda_core.CUDAError`."""
    if type(attribute) is not int:
        return int(
            handle_return(
                driver.cuDeviceGetAttribute(attribute, driver.CUdevice(device)),
                "cuDeviceGetAttribute",
            )
        )
    if not _get_attribute_fn:
        addr = _backend.entry_point("cuDeviceGetAttribute")
        if not addr:
            raise RuntimeError("the CUDA driver has no cuDeviceGetAttribute entry point")
        proto = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int
        )
        _get_attribute_fn.append(proto(addr))
    value = ctypes.c_int(0)
    status = _get_attribute_fn[0](value, attribute, device)
    if status:
        raise_status(status, "cuDeviceGetAttribute")
    return int(value.value)


# ---------------------------------------------------------------------------------------------
# Driver start-up: once per process, and a clear error where there is no driver.

_driver_lock = threading.Lock()
_driver_ready = False
_driver_error: CUDAError | None = None


def ensure_driver() -> None:
    """Initialise the CUDA driver once; raise :class:`CUDADriverNotFoundError` without one."""
    if _driver_ready:
        return
    _init_driver()


def _init_driver() -> None:
    global _driver_ready, _driver_error
    with _driver_lock:
        if _driver_ready:
            return
        if _driver_error is not None:
            raise _driver_error
        try:
            result = driver.cuInit(0)
        except (RuntimeError, OSError) as exc:  # cuda.pathfinder's DynamicLibNotFoundError and kin
            _driver_error = CUDADriverNotFoundError(str(exc))
            _log.debug("no CUDA driver: %s", exc)
            raise _driver_error from None
        if result[0] == _CUresult.CUDA_ERROR_NO_DEVICE:
            _driver_error = make_error(result[0], "cuInit", "no CUDA-capable GPU was found")
            raise _driver_error
        handle_return(result, "cuInit")
        _backend.bind(make_error, context_handle)
        _driver_ready = True
        _log.debug(
            "CUDA driver initialised; handle layer bound (%s)",
            "native" if _backend.NATIVE else "pure Python",
        )


def driver_available() -> bool:
    """True when libcuda loads and initialises; never raises."""
    try:
        ensure_driver()
    except CUDAError:
        return False
    return True
