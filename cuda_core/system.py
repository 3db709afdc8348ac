"""Facts about the CUDA installation: driver, devices and library versions.

The names follow NVIDIA's ``cuda.core.system`` (:func:`get_driver_version`,
:func:`get_driver_version_full`, :func:`get_num_devices`), plus the versions of the libraries
cuda_core compiles with (:func:`get_nvrtc_version`, :func:`get_nvjitlink_version`,
:func:`get_nvvm_version`) and of ``cuda-bindings`` (:func:`get_bindings_version`).

Importing this module needs no driver. The library versions need no driver either; the
driver and device facts raise :class:`~cuda_core.CUDADriverNotFoundError` where the NVIDIA
driver (libcuda) is missing.

For code written against ``cuda.core.experimental``'s ``system`` object, the attributes
``system.driver_version``, ``system.num_devices`` and ``system.devices`` also work.

Examples
--------
>>> from cuda_core import system
>>> system.get_nvrtc_version()  # doctest: +SKIP
(13, 0)
"""

from __future__ import annotations

from typing import Any

from cuda.bindings import driver

from ._errors import CUDADriverNotFoundError, CUDAError
from ._utils import ensure_driver, handle_return, nvrtc_version

__all__ = [
    "get_bindings_version",
    "get_driver_version",
    "get_driver_version_full",
    "get_num_devices",
    "get_nvjitlink_version",
    "get_nvrtc_version",
    "get_nvvm_version",
]


def _driver_version_int() -> int:
    # cuDriverGetVersion needs no cuInit, so it answers even where no GPU is usable.
    try:
        result = driver.cuDriverGetVersion()
    except (RuntimeError, OSError) as exc:  # libcuda could not be loaded
        raise CUDADriverNotFoundError(str(exc)) from None
    return int(handle_return(result, "cuDriverGetVersion"))


def _kernel_mode_version() -> tuple[int, ...]:
    try:
        from cuda.bindings import nvml
    except ImportError as exc:  # pragma: no cover - cuda-bindings without NVML
        raise CUDAError(
            "nvmlSystemGetDriverVersion",
            "NVML_ERROR_LIBRARY_NOT_FOUND",
            f"the kernel-mode driver version needs NVML, which cuda-bindings lacks ({exc})",
        ) from None
    try:
        nvml.init_v2()
        try:
            text = nvml.system_get_driver_version()
        finally:
            nvml.shutdown()
    except (RuntimeError, OSError) as exc:
        if type(exc).__name__ == "DynamicLibNotFoundError" or isinstance(exc, OSError):
            raise CUDADriverNotFoundError(str(exc)) from None
        raise CUDAError("nvmlSystemGetDriverVersion", type(exc).__name__, str(exc)) from None
    if isinstance(text, bytes):
        text = text.decode()
    return tuple(int(p) for p in str(text).split(".") if p.isdigit())


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
    v = _driver_version_int()
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
    tuple of (int, int)
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


def get_nvrtc_version() -> tuple[int, int]:
    """The ``(major, minor)`` version of the NVRTC library cuda_core compiles with.

    Needs no driver or GPU.

    Returns
    -------
    tuple of (int, int)
        Major and minor version, e.g. ``(13, 0)``.

    Raises
    ------
    CUDAError
        NVRTC reported an error.
    RuntimeError
        The NVRTC library could not be found (install ``cudacore[cu13]``).
    """
    return _major_minor(nvrtc_version())


def get_nvjitlink_version() -> tuple[int, int]:
    """The ``(major, minor)`` version of the nvJitLink library used by :class:`~cuda_core.Linker`.

    Needs no driver or GPU.

    Returns
    -------
    tuple of (int, int)
        Major and minor version.

    Raises
    ------
    RuntimeError
        nvJitLink could not be found (install ``cudacore[cu13]``).
    """
    from cuda.bindings import nvjitlink

    return _major_minor(nvjitlink.version())


def get_nvvm_version() -> tuple[int, int]:
    """The ``(major, minor)`` version of libNVVM (used for ``code_type="nvvm"`` programs).

    Needs no driver or GPU.

    Returns
    -------
    tuple of (int, int)
        Major and minor version.

    Raises
    ------
    RuntimeError
        libNVVM could not be found (install ``cudacore[cu13]``).
    """
    from cuda.bindings import nvvm

    return _major_minor(nvvm.version())


def get_bindings_version() -> str:
    """The version of the installed ``cuda-bindings`` package, e.g. ``"13.0.1"``.

    Needs no driver or GPU.

    Returns
    -------
    str
        The package version.
    """
    import cuda.bindings

    return str(cuda.bindings.__version__)


def __getattr__(name: str) -> Any:
    # cuda.core.experimental's ``system`` was an object with these properties.
    if name == "driver_version":
        return get_driver_version()
    if name == "num_devices":
        return get_num_devices()
    if name == "devices":
        from ._device import Device

        return tuple(Device(i) for i in range(get_num_devices()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
