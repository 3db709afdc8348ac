"""Versions and counts: the driver, NVML, and the libraries cuda_core compiles with."""

from __future__ import annotations

from typing import Any

from .._compat import BINDINGS_TEXT, driver, driver_version_int
from .._compile._libraries import is_missing_library, library_not_found
from .._errors import CUDADriverNotFoundError, CUDAError
from .._handles._driver import ensure_driver
from .._utils import handle_return, nvrtc_version
from ._nvml import CUDA_BINDINGS_NVML_IS_COMPATIBLE, call, nvml, text

__all__ = [
    "get_bindings_version",
    "get_driver_branch",
    "get_driver_version",
    "get_driver_version_full",
    "get_kernel_mode_driver_version",
    "get_num_devices",
    "get_nvjitlink_version",
    "get_nvml_version",
    "get_nvrtc_version",
    "get_nvvm_version",
    "get_process_name",
    "get_user_mode_driver_version",
]


def _version_tuple(value: Any) -> tuple[int, ...]:
    return tuple(int(p) for p in text(value).strip().split(".") if p.isdigit())


def _kernel_mode_version() -> tuple[int, ...]:
    return _version_tuple(call(nvml.system_get_driver_version))


def get_user_mode_driver_version() -> tuple[int, ...]:
    """The CUDA version the user-mode driver (libcuda) supports, as ``(major, minor)``.

    This is the version to compare with when checking CUDA compatibility, e.g. ``(13, 0)``.
    Needs libcuda but no GPU and no NVML.

    Returns
    -------
    tuple of int
        ``(major, minor)``.

    Raises
    ------
    CUDADriverNotFoundError
        libcuda is not installed.
    """
    return get_driver_version_full()[:2]


def get_kernel_mode_driver_version() -> tuple[int, ...]:
    """The kernel-mode driver's version as NVML reports it, e.g. ``(580, 65, 6)``.

    Usually ``(major, minor, patch)``; two numbers on WSL.

    Returns
    -------
    tuple of int
        The version numbers.

    Raises
    ------
    LibraryNotFoundError
        NVML is not installed (:class:`cuda_core.system.LibraryNotFoundError`, which is also a
        :class:`RuntimeError` and a :class:`~cuda_core.CUDADriverNotFoundError`).
    NvmlError
        NVML reported another error.
    RuntimeError
        The installed ``cuda-bindings`` has no usable NVML module (worded as in ``cuda.core``:
        ``"get_kernel_mode_driver_version requires NVML support"``).
    """
    if not CUDA_BINDINGS_NVML_IS_COMPATIBLE:
        raise RuntimeError(
            "get_kernel_mode_driver_version requires NVML support: cuda-bindings "
            f"{BINDINGS_TEXT} has no usable NVML module; get_driver_version() needs none"
        )
    return _kernel_mode_version()


def get_nvml_version() -> tuple[int, ...]:
    """The version of the NVML library, e.g. ``(13, 580, 65, 6)``.

    Returns
    -------
    tuple of int
        The version numbers.

    Raises
    ------
    LibraryNotFoundError
        NVML is not installed.
    """
    return _version_tuple(call(nvml.system_get_nvml_version))


def get_driver_branch() -> str:
    """The branch of the installed NVIDIA driver, e.g. ``"r580_00"``.

    Returns
    -------
    str
        The branch name as NVML reports it.

    Raises
    ------
    LibraryNotFoundError
        NVML is not installed.
    NvmlError
        NVML reported another error (e.g. ``FunctionNotFoundError`` on drivers before r570).
    """
    return text(call(nvml.system_get_driver_branch))


def get_process_name(pid: int) -> str:
    """The name of process ``pid``, as NVML reports it (e.g. its executable path).

    Parameters
    ----------
    pid : int
        The process id (> 0).

    Returns
    -------
    str
        The process name.

    Raises
    ------
    TypeError, ValueError
        ``pid`` is not a positive int.
    NotFoundError
        No process has this id.
    """
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise TypeError(f"pid must be an int (got {pid!r})")
    if pid <= 0:
        raise ValueError(f"pid must be > 0 (got {pid!r})")
    return text(call(nvml.system_get_process_name, pid))


def get_driver_version_full(kernel_mode: bool = False) -> tuple[int, ...]:
    """The version of the installed NVIDIA driver, in full.

    Parameters
    ----------
    kernel_mode : bool, optional
        ``False`` (default): the CUDA version the user-mode driver supports, as
        ``(major, minor, patch)``, e.g. ``(13, 0, 0)``. ``True``: the kernel-mode driver's own
        version as reported by NVML, e.g. ``(580, 65, 6)``.

    Returns
    -------
    tuple of int
        The version numbers.

    Raises
    ------
    CUDADriverNotFoundError
        The NVIDIA driver (libcuda, or NVML for ``kernel_mode=True``) is not installed.
    CUDAError
        The driver or NVML reported an error.
    """
    if kernel_mode:
        return _kernel_mode_version()
    v = driver_version_int()
    return (v // 1000, (v % 1000) // 10, v % 10)


def get_driver_version(kernel_mode: bool = False) -> tuple[int, int]:
    """The ``(major, minor)`` version of the installed NVIDIA driver.

    Parameters
    ----------
    kernel_mode : bool, optional
        ``False`` (default): the CUDA version the driver supports, e.g. ``(13, 0)``.
        ``True``: the kernel-mode driver version, e.g. ``(580, 65)``.

    Returns
    -------
    tuple of int
        Major and minor version.

    Raises
    ------
    CUDADriverNotFoundError
        The NVIDIA driver is not installed.
    CUDAError
        The driver reported an error.
    """
    full = get_driver_version_full(kernel_mode)
    return (full[0], full[1] if len(full) > 1 else 0)


def get_num_devices() -> int:
    """The number of CUDA devices visible to this process.

    A machine whose driver is installed but which has no usable GPU gives ``0``.

    Returns
    -------
    int
        The device count (respects ``CUDA_VISIBLE_DEVICES``).

    Raises
    ------
    CUDADriverNotFoundError
        The NVIDIA driver (libcuda) is not installed.
    CUDAError
        The driver reported an error other than "no device".
    """
    try:
        ensure_driver()
    except CUDADriverNotFoundError:
        raise
    except CUDAError as exc:
        if exc.name == "CUDA_ERROR_NO_DEVICE":
            return 0
        raise
    return int(handle_return(driver.cuDeviceGetCount(), "cuDeviceGetCount"))


def _major_minor(version: Any) -> tuple[int, int]:
    major, minor = version
    return (int(major), int(minor))


def _library_version(lib: str, ask: Any) -> tuple[int, int]:
    """``ask()``'s version of compiler library ``lib``; a library that is not installed raises
    :class:`~cuda_core.CompilerLibraryNotFoundError` (a ``RuntimeError``, as before) naming the
    install command, as compiling does."""
    try:
        return _major_minor(ask())
    except Exception as exc:
        if is_missing_library(exc):
            raise library_not_found(lib, f"system.get_{lib}_version()", exc) from exc
        raise


def get_nvrtc_version() -> tuple[int, int]:
    """The ``(major, minor)`` version of the NVRTC library cuda_core compiles with.

    Needs no driver or GPU.

    Returns
    -------
    tuple of int
        Major and minor version, e.g. ``(13, 0)``.

    Raises
    ------
    CUDAError
        NVRTC reported an error.
    RuntimeError
        The NVRTC library could not be found: a
        :class:`~cuda_core.CompilerLibraryNotFoundError` naming the install command.
    """
    return _library_version("nvrtc", nvrtc_version)


def get_nvjitlink_version() -> tuple[int, int]:
    """The ``(major, minor)`` version of the nvJitLink library used by :class:`~cuda_core.Linker`.

    Needs no driver or GPU.

    Returns
    -------
    tuple of int
        Major and minor version.

    Raises
    ------
    RuntimeError
        nvJitLink could not be found: a :class:`~cuda_core.CompilerLibraryNotFoundError`
        naming the install command.
    """

    def ask() -> Any:
        from cuda.bindings import nvjitlink

        return nvjitlink.version()

    return _library_version("nvjitlink", ask)


def get_nvvm_version() -> tuple[int, int]:
    """The ``(major, minor)`` version of libNVVM (used for ``code_type="nvvm"`` programs).

    Needs no driver or GPU.

    Returns
    -------
    tuple of int
        Major and minor version.

    Raises
    ------
    RuntimeError
        libNVVM could not be found: a :class:`~cuda_core.CompilerLibraryNotFoundError` naming
        the install command.
    """

    def ask() -> Any:
        from cuda.bindings import nvvm

        return nvvm.version()

    return _library_version("nvvm", ask)


def get_bindings_version() -> str:
    """The version of the installed ``cuda-bindings`` package, e.g. ``"13.0.1"``.

    Needs no driver or GPU.

    Returns
    -------
    str
        The package version.
    """
    return BINDINGS_TEXT
