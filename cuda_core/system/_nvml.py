"""The NVML funnel: lazy one-time start-up, the status-to-error table and :func:`call`.

Every NVML call of :mod:`cuda_core.system` goes through :func:`call`, which starts NVML once
per process (thread-safe, and again in a forked child), and rewords a failure as
``"<nvmlApi>: <NVML_ERROR_NAME>: <explanation>"`` while keeping the error class that
``cuda.bindings.nvml`` (and so ``cuda.core.system``) uses for that status.

The error classes are ``cuda.bindings.nvml``'s own, so ``except cuda.core.system.NotFoundError``
and ``except cuda.bindings.nvml.NotFoundError`` both catch what cuda_core raises. Where the
installed ``cuda-bindings`` has no NVML module, an equivalent hierarchy is defined here.
Importing this module never loads or starts NVML.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from .._compat import BINDINGS_MAJOR, BINDINGS_TEXT, NVML_BINDINGS, install_hint
from .._errors import CUDADriverNotFoundError

__all__: list[str] = []  # private module

try:
    from cuda.bindings import nvml as _nvml_mod
except ImportError:  # pragma: no cover - cuda-bindings without NVML (before 12.9.6 and 13.2)
    _nvml_mod = None


class _NoNvml:
    """Stands in for ``cuda.bindings.nvml`` where the bindings have none (12.9.0 to 12.9.5, 13.0,
    13.1): ``nvml.<function>`` is a stub, and :func:`call`, through which every NVML call goes,
    raises the error naming the bindings that have NVML before it would call one. Constants and
    classes (names not starting with a lowercase letter) are missing, so ``getattr`` defaults
    and ``hasattr`` checks see the bindings as they are."""

    def __getattr__(self, name: str) -> Any:
        if not name[:1].islower():
            raise AttributeError(name)

        def unavailable(*args: Any, **kwargs: Any) -> Any:
            ensure_nvml()  # raises: the bindings have no NVML module
            raise AssertionError("unreachable")  # pragma: no cover

        unavailable.__name__ = name
        return unavailable


nvml: Any = _nvml_mod if _nvml_mod is not None else _NoNvml()

# The NVML calls cuda_core.system makes; a cuda-bindings whose nvml module lacks one of them is
# too old to be used (cuda.core says so through CUDA_BINDINGS_NVML_IS_COMPATIBLE as well).
_REQUIRED = (
    "init_v2",
    "system_get_driver_version",
    "system_get_nvml_version",
    "device_get_count_v2",
    "device_get_handle_by_index_v2",
    "device_get_memory_info_v2",
    "device_get_pci_info_ext",
    "device_get_p2p_status",
    "system_event_set_create",
)
CUDA_BINDINGS_NVML_IS_COMPATIBLE: bool = _nvml_mod is not None and all(
    hasattr(_nvml_mod, name) for name in _REQUIRED
)

# (status code, NVML status name, error class name): the one table from which both the error
# classes and the status mapping come.
STATUS_TABLE: tuple[tuple[int, str, str], ...] = (
    (1, "NVML_ERROR_UNINITIALIZED", "UninitializedError"),
    (2, "NVML_ERROR_INVALID_ARGUMENT", "InvalidArgumentError"),
    (3, "NVML_ERROR_NOT_SUPPORTED", "NotSupportedError"),
    (4, "NVML_ERROR_NO_PERMISSION", "NoPermissionError"),
    (5, "NVML_ERROR_ALREADY_INITIALIZED", "AlreadyInitializedError"),
    (6, "NVML_ERROR_NOT_FOUND", "NotFoundError"),
    (7, "NVML_ERROR_INSUFFICIENT_SIZE", "InsufficientSizeError"),
    (8, "NVML_ERROR_INSUFFICIENT_POWER", "InsufficientPowerError"),
    (9, "NVML_ERROR_DRIVER_NOT_LOADED", "DriverNotLoadedError"),
    (10, "NVML_ERROR_TIMEOUT", "TimeoutError"),
    (11, "NVML_ERROR_IRQ_ISSUE", "IrqIssueError"),
    (12, "NVML_ERROR_LIBRARY_NOT_FOUND", "LibraryNotFoundError"),
    (13, "NVML_ERROR_FUNCTION_NOT_FOUND", "FunctionNotFoundError"),
    (14, "NVML_ERROR_CORRUPTED_INFOROM", "CorruptedInforomError"),
    (15, "NVML_ERROR_GPU_IS_LOST", "GpuIsLostError"),
    (16, "NVML_ERROR_RESET_REQUIRED", "ResetRequiredError"),
    (17, "NVML_ERROR_OPERATING_SYSTEM", "OperatingSystemError"),
    (18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "LibRmVersionMismatchError"),
    (19, "NVML_ERROR_IN_USE", "InUseError"),
    (20, "NVML_ERROR_MEMORY", "MemoryError"),
    (21, "NVML_ERROR_NO_DATA", "NoDataError"),
    (22, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "VgpuEccNotSupportedError"),
    (23, "NVML_ERROR_INSUFFICIENT_RESOURCES", "InsufficientResourcesError"),
    (24, "NVML_ERROR_FREQ_NOT_SUPPORTED", "FreqNotSupportedError"),
    (25, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "ArgumentVersionMismatchError"),
    (26, "NVML_ERROR_DEPRECATED", "DeprecatedError"),
    (27, "NVML_ERROR_NOT_READY", "NotReadyError"),
    (28, "NVML_ERROR_GPU_NOT_FOUND", "GpuNotFoundError"),
    (29, "NVML_ERROR_INVALID_STATE", "InvalidStateError"),
    (30, "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", "ResetTypeNotSupportedError"),
    (999, "NVML_ERROR_UNKNOWN", "UnknownError"),
)

if _nvml_mod is not None:
    NvmlError: type[Exception] = _nvml_mod.NvmlError
    ERROR_CLASSES: dict[str, type[Exception]] = {
        cls_name: getattr(_nvml_mod, cls_name) for _, _, cls_name in STATUS_TABLE
    }
else:  # pragma: no cover - same names, our own classes

    class _FallbackNvmlError(Exception):
        """An error reported by NVML (the NVIDIA Management Library)."""

    _FallbackNvmlError.__name__ = _FallbackNvmlError.__qualname__ = "NvmlError"
    NvmlError = _FallbackNvmlError
    ERROR_CLASSES = {
        cls_name: type(cls_name, (NvmlError,), {"__module__": __name__})
        for _, _, cls_name in STATUS_TABLE
    }

_BY_CODE: dict[int, tuple[str, type[Exception]]] = {
    code: (name, ERROR_CLASSES[cls_name]) for code, name, cls_name in STATUS_TABLE
}
_BY_CLASS: dict[type[Exception], tuple[int, str]] = {
    ERROR_CLASSES[cls_name]: (code, name) for code, name, cls_name in STATUS_TABLE
}

_EXPLANATIONS = {
    9: "the NVIDIA kernel driver is not loaded",
    12: "the NVML library (libnvidia-ml.so.1) was not found",
    15: "the GPU has fallen off the bus or is otherwise inaccessible",
    18: "the NVML library and the kernel driver versions differ (reboot or reload the driver)",
}


def nvml_api_name(fn_name: str) -> str:
    """``device_get_handle_by_index_v2`` -> ``nvmlDeviceGetHandleByIndex_v2``."""
    parts = fn_name.split("_")
    suffix = ""
    if len(parts) > 1 and parts[-1][:1] == "v" and parts[-1][1:].isdigit():
        suffix = "_" + parts.pop()
    return "nvml" + "".join(_NAME_WORDS.get(p) or p[:1].upper() + p[1:] for p in parts) + suffix


# Words NVML's C names spell other than capitalised (nvmlDeviceGetLastBBXFlushTime, ...).
_NAME_WORDS = {"bbx": "BBX", "rpm": "RPM", "nvlink": "NvLink", "uuid": "UUID"}


def make_error(status: int, api: str, explanation: str = "") -> Exception:
    """The NVML error for ``status``, as the class ``cuda.bindings.nvml`` uses for it.

    The message reads ``"<api>: <NVML_ERROR_NAME>: <explanation>"``; the error keeps ``.status``
    (the code), ``.name`` (the status name) and ``.api``. Building it loads no library.
    """
    code = int(status)
    name, cls = _BY_CODE.get(code, (f"NVML_ERROR_UNKNOWN_{code}", ERROR_CLASSES["UnknownError"]))
    if not explanation:
        explanation = _EXPLANATIONS.get(code, "")
    err = cls.__new__(cls)
    Exception.__init__(err, ": ".join(p for p in (api, name, explanation) if p))
    err.status = code  # type: ignore[attr-defined]
    err.name = name  # type: ignore[attr-defined]
    err.api = api  # type: ignore[attr-defined]
    return err


def raise_for_status(status: Any, api: str, explanation: str = "") -> None:
    """Raise the NVML error for a status NVML reported inside a result (nothing for success)."""
    code = int(status)
    if code != 0:
        raise make_error(code, api, explanation)


def text(value: Any) -> str:
    """An NVML string answer as ``str`` (some cuda-bindings versions give ``bytes``)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def status_of(error_class: type[Exception]) -> int:
    """The NVML status code whose error class is ``error_class`` (``KeyError`` if none)."""
    return _BY_CLASS[error_class][0]


_LibraryNotFound: Any = ERROR_CLASSES["LibraryNotFoundError"]


# CUDADriverNotFoundError is already cuda.pathfinder's DynamicLibNotFoundError (a RuntimeError)
class NvmlLibraryNotFoundError(_LibraryNotFound, CUDADriverNotFoundError):
    """NVML (``libnvidia-ml.so.1``, part of the NVIDIA driver) could not be loaded.

    It is a :class:`cuda_core.system.LibraryNotFoundError` (so an ``NvmlError``), a
    :class:`~cuda_core.CUDADriverNotFoundError`, and the :class:`RuntimeError` (cuda.pathfinder's
    ``DynamicLibNotFoundError``) that ``cuda.core.system`` lets through in this case.
    """

    def __init__(self, detail: str = "") -> None:
        CUDADriverNotFoundError.__init__(self, detail)
        self.api = "nvmlInit_v2"
        self.name = self.error_name = "NVML_ERROR_LIBRARY_NOT_FOUND"
        self.status = self.code = 12
        self.explanation = (
            "NVML (libnvidia-ml.so.1, installed with the NVIDIA driver) was not found on this "
            "machine, so cuda_core.system cannot query GPUs"
            + (f" (loader said: {detail})" if detail else "")
        )
        self.args = (self._format(),)

    def __reduce__(self) -> tuple[Any, ...]:
        return CUDADriverNotFoundError.__reduce__(self)


# ---------------------------------------------------------------------------------------------
# Start-up: once per process, thread-safe; a missing library is remembered (it will not appear).

_lock = threading.Lock()
_ready_pid = 0
_missing: Exception | None = None


def ensure_nvml() -> None:
    """Start NVML once in this process; raise the NVML error class when it cannot start."""
    if _ready_pid == os.getpid():
        return
    _start()


def _start() -> None:
    global _ready_pid, _missing
    with _lock:
        if _ready_pid == os.getpid():
            return
        if _missing is not None:
            raise _missing
        if not CUDA_BINDINGS_NVML_IS_COMPATIBLE:
            _missing = make_error(
                13,
                "nvmlInit_v2",
                f"cuda-bindings {BINDINGS_TEXT} has no usable NVML module; install cuda-bindings "
                f"{'.'.join(map(str, NVML_BINDINGS[BINDINGS_MAJOR]))} or newer "
                f"({install_hint(BINDINGS_MAJOR)} brings one)",
            )
            raise _missing
        try:
            nvml.init_v2()
        except NvmlError as exc:
            code, _ = _BY_CLASS.get(type(exc), (999, ""))
            if code == 12:
                _missing = NvmlLibraryNotFoundError(str(exc))
                raise _missing from None
            raise make_error(code, "nvmlInit_v2") from None
        except (RuntimeError, OSError) as exc:  # the loader: no libnvidia-ml.so.1
            _missing = NvmlLibraryNotFoundError(str(exc))
            raise _missing from None
        _ready_pid = os.getpid()


def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call an NVML binding after starting NVML, rewording its error (the one funnel)."""
    if _ready_pid != os.getpid():
        _start()
    try:
        return fn(*args)
    except NvmlError as exc:
        code = getattr(exc, "status", None)
        if not isinstance(code, int):
            code = _BY_CLASS.get(type(exc), (999, ""))[0]
        explanation = _EXPLANATIONS.get(code) or str(exc)
        raise make_error(code, nvml_api_name(fn.__name__), explanation) from None
