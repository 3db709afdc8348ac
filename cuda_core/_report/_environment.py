"""The environment report of ``python -m cuda_core`` and :func:`show_config`.

:func:`collect` gathers the facts into a dict of plain values (JSON-ready);
:func:`~cuda_core._report._text.format_report` sets it as the lines ``python -m cuda_core``
prints. Nothing here raises for a missing
driver, GPU, compiler library or framework: each is reported with what to do about it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import sys
import sysconfig
from typing import Any

from .. import system
from .._compat import BINDINGS_MAJOR, driver, driver_version_int, pairing
from .._compile._cache import FileStreamProgramCache, get_default_program_cache
from .._compile._cache_paths import default_cache_dir, disk_cache_dir
from .._compile._libraries import library_status, remedy
from .._compile._majors import mixed
from .._errors import CUDADriverNotFoundError, CUDAError
from .._handles import _backend
from .._utils import handle_return
from .._version import __version__
from . import _nvml as _nvml_report
from ._text import format_report

__all__ = ["is_available", "show_config"]

_FRAMEWORKS = (("numpy", "NumPy"), ("cupy", "CuPy"), ("torch", "PyTorch"))


def show_config(mode: str = "stdout") -> dict[str, Any] | None:
    """Print (or return) the environment cuda_core runs in, as ``python -m cuda_core`` reports it.

    The report names cuda_core, Python, ``cuda-bindings``, the handle-layer backend (native
    or pure Python, why, and the rebuild command where one helps), the NVIDIA driver and
    whether it suits the installed ``cuda-bindings`` (the pairing: the bindings' major version,
    the CUDA version the driver supports, and a verdict), every GPU with its key properties, what
    NVML says of each GPU (clocks, memory, power, temperature, NVLink) and the peer-to-peer
    matrix between the GPUs (or one line saying why NVML cannot be used), the
    NVRTC/nvJitLink/libNVVM versions (or the install command when one is missing), the compile
    cache's directory, entry count and size, and the NumPy, CuPy and PyTorch versions with
    whether their CUDA major version matches the driver's. It runs no self-check and creates
    no CUDA context. The name and ``mode`` follow ``numpy.show_config``.

    Parameters
    ----------
    mode : {"stdout", "dicts"}, optional
        ``"stdout"`` (the default) prints the report; ``"dicts"`` returns it as a dict of
        plain values (the same dict ``python -m cuda_core --json`` prints).

    Returns
    -------
    dict or None
        The report with ``mode="dicts"``; ``None`` otherwise.

    Raises
    ------
    ValueError
        ``mode`` is neither ``"stdout"`` nor ``"dicts"``.

    Examples
    --------
    >>> import cuda_core
    >>> cuda_core.show_config()  # doctest: +SKIP
    cuda_core 1.3.0 (/.../cuda_core)
    ...
    >>> cuda_core.show_config(mode="dicts")["backend"]["native"]  # doctest: +SKIP
    True
    """
    if mode not in ("stdout", "dicts"):
        raise ValueError(f'mode must be "stdout" or "dicts" (got {mode!r})')
    info = collect()
    if mode == "dicts":
        return info
    for line in format_report(info):
        print(line)
    return None


def is_available() -> bool:
    """Whether a GPU can be used: an NVIDIA driver is installed, suits the installed
    ``cuda-bindings`` (a driver for CUDA 13 under the 13.x bindings, for CUDA 12 or newer under
    the 12.x ones) and sees at least one GPU. Never raises.

    It initialises the driver (``cuInit``) but creates no context; like
    ``torch.cuda.is_available()``, it respects ``CUDA_VISIBLE_DEVICES``. Compiling needs no GPU:
    :class:`~cuda_core.Program` works where this is ``False``.

    Returns
    -------
    bool
        ``True`` when at least one GPU can be used; ``False`` otherwise (no driver, a driver
        older than the bindings need, no GPU visible, or any error asking).

    Examples
    --------
    >>> import cuda_core
    >>> if cuda_core.is_available():  # doctest: +SKIP
    ...     cuda_core.Device().set_current()
    """
    try:
        return driver_version_int() // 1000 >= BINDINGS_MAJOR and system.get_num_devices() > 0
    except Exception:  # no driver, or one that cannot answer: no GPU to use
        return False


# ---------------------------------------------------------------------------------------------
# Collecting.


def collect() -> dict[str, Any]:
    """Every fact of the report, as a dict of plain (JSON-ready) values."""

    info: dict[str, Any] = {
        "cuda_core": {
            "version": __version__,
            "path": os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        },
        "python": {
            "version": platform.python_version(),
            "executable": sys.executable,
            "machine": platform.machine(),
        },
        "cuda_bindings": system.get_bindings_version(),
        "cuda_pathfinder": _dist_version("cuda-pathfinder"),
        "backend": backend_status(),
    }
    info["driver"] = _driver()
    info["pairing"] = info["driver"].pop("pairing")
    info["gpus"] = _gpus(info["driver"]["device_count"])
    info["nvml"] = _nvml_report.collect()
    info["compilers"] = _compilers()
    info["cache"] = cache_status()
    info["frameworks"] = {
        name: _framework(name, info["driver"]["cuda_major"]) for name, _ in _FRAMEWORKS
    }
    info["mixed_majors"] = _mixed_majors()
    return info


def _mixed_majors() -> dict[str, Any] | None:
    """Both CUDA majors' compiler wheels beside one cuda-bindings, with the commands that keep
    each (:mod:`cuda_core._compile._majors`); ``None`` for an environment of one major."""
    mix = mixed()
    if mix is None:
        return None
    return {
        "bindings_major": mix.bindings_major,
        "other_major": mix.other_major,
        "harmful": mix.harmful,
        "wheels": {str(m): [list(w) for w in ws] for m, ws in mix.wheels.items()},
        "describe": mix.describe(),
        "remedy": mix.remedy(),
        "keep": {str(m): mix.keep(m) for m in (mix.bindings_major, mix.other_major)},
    }


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _compiler_present() -> str | None:
    """The C compiler a rebuild would use, or None."""
    cc = (sysconfig.get_config_var("CC") or "").split()
    for name in ([cc[0]] if cc else []) + ["cc", "gcc", "clang"]:
        path = shutil.which(name)
        if path:
            return path
    return None


def backend_status() -> dict[str, Any]:
    """The handle layer's backend: native or not, why, and the rebuild command where it helps."""

    reason = _backend.REASON
    if _backend.NATIVE:
        state = "on"
    elif reason.startswith("selected"):
        state = "selected"
    elif reason.startswith("ABI mismatch"):
        state = "ABI mismatch"
    else:
        state = "not built"
    compiler = _compiler_present()
    rebuild = None
    if state == "ABI mismatch" or (state == "not built" and compiler):
        rebuild = _backend.REBUILD_COMMAND
    return {
        "native": _backend.NATIVE,
        "state": state,
        "reason": reason,
        "compiler": compiler,
        "rebuild": rebuild,
    }


def _driver() -> dict[str, Any]:
    out: dict[str, Any] = {
        "found": False, "cuda_version": None, "cuda_major": None, "kernel_mode_version": None,
        "device_count": 0, "error": None, "bindings_compatible": None, "verdict": "", "pairing": None,
    }  # fmt: skip
    cuda: tuple[int, int] | None = None
    try:
        major, minor, *_ = system.get_driver_version_full()
        cuda = (major, minor)
        out.update(found=True, cuda_version=f"{major}.{minor}", cuda_major=major)
        try:
            out["kernel_mode_version"] = ".".join(
                str(p) for p in system.get_driver_version_full(kernel_mode=True)
            )
        except CUDAError:
            pass
        out["device_count"] = system.get_num_devices()
    except CUDADriverNotFoundError as exc:
        out["error"] = f"no NVIDIA driver found ({exc.explanation})"
    except CUDAError as exc:
        out.update(found=True, error=f"present, but {exc}")
    pair = pairing(cuda)
    out.update(pairing=pair, bindings_compatible=pair["compatible"], verdict=pair["verdict"])
    return out


def _gpus(count: int) -> list[dict[str, Any]]:
    attr = driver.CUdevice_attribute
    gpus = []
    for ordinal in range(count):
        try:
            dev = handle_return(driver.cuDeviceGet(ordinal), "cuDeviceGet")

            def get(a: Any, dev: Any = dev) -> int:
                return int(
                    handle_return(driver.cuDeviceGetAttribute(a, dev), "cuDeviceGetAttribute")
                )

            raw = handle_return(driver.cuDeviceGetName(256, dev), "cuDeviceGetName")
            bus = handle_return(driver.cuDeviceGetPCIBusId(32, dev), "cuDeviceGetPCIBusId")
            gpus.append({
                "ordinal": ordinal,
                "name": raw.split(b"\0", 1)[0].decode(errors="replace"),
                "compute_capability": f"{get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)}."
                                      f"{get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)}",
                "memory_bytes": int(handle_return(driver.cuDeviceTotalMem(dev), "cuDeviceTotalMem")),
                "multiprocessors": get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                "pci_bus_id": bus.split(b"\0", 1)[0].decode(errors="replace") if isinstance(bus, bytes) else str(bus),
            })  # fmt: skip
        except Exception as exc:  # one broken device is reported, not fatal
            gpus.append({"ordinal": ordinal, "error": f"{type(exc).__name__}: {exc}"})
    return gpus


def _compilers() -> dict[str, Any]:
    out = {}
    for lib in ("nvrtc", "nvjitlink", "nvvm"):
        version, err = library_status(lib)
        entry: dict[str, Any] = {"version": version, "error": None, "remedy": None}
        if err is not None:
            said = getattr(err, "detail", None)
            entry["error"] = (
                f"loader said: {said}"
                if said
                else f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            )
            entry["remedy"] = getattr(err, "remedy", None) or remedy()
        out[lib] = entry
    return out


def cache_status() -> dict[str, Any]:
    """The default compile cache's directory (``None`` when off), entry count and size in bytes."""

    path = disk_cache_dir()
    out: dict[str, Any] = {
        "enabled": path is not None,
        "path": path or default_cache_dir(),
        "entries": 0,
        "bytes": 0,
    }
    for size in _entry_sizes(out["path"]):
        out["entries"] += 1
        out["bytes"] += size
    return out


def _entry_sizes(path: str) -> list[int]:
    # The layout of FileStreamProgramCache: <path>/entries/<2 hex>/<rest>; read without creating it.
    sizes: list[int] = []
    entries = os.path.join(path, "entries")
    if not os.path.isdir(entries):
        return sizes
    for sub in os.scandir(entries):
        if not sub.is_dir(follow_symlinks=False):
            continue
        for e in os.scandir(sub.path):
            if e.is_file(follow_symlinks=False) and not e.name.startswith(".tmp-"):
                try:
                    sizes.append(e.stat().st_size)
                except OSError:
                    continue
    return sizes


def clear_cache() -> dict[str, Any]:
    """Remove every entry of the default compile cache on disk; return the status before."""

    before = cache_status()
    if before["enabled"] and os.path.isdir(before["path"]):
        FileStreamProgramCache(before["path"]).clear()
    get_default_program_cache().clear(disk=False)
    return before


def _import_framework(name: str) -> Any:
    """NumPy, CuPy or PyTorch, imported (each by its own import statement)."""
    if name == "numpy":
        import numpy as mod
    elif name == "cupy":
        import cupy as mod  # type: ignore[import-not-found, no-redef]
    elif name == "torch":
        import torch as mod  # type: ignore[import-not-found, no-redef]
    else:
        raise ValueError(f"not a framework the report knows: {name!r}")
    return mod


def _framework(name: str, driver_major: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"installed": False, "version": None, "cuda": None, "cuda_major": None,
                           "matches_driver": None, "note": ""}  # fmt: skip
    if importlib.util.find_spec(name) is None:
        return out
    try:
        mod = _import_framework(name)
    except Exception as exc:  # installed but broken: say so
        out.update(installed=True, note=f"import failed: {type(exc).__name__}: {exc}")
        return out
    out.update(installed=True, version=str(getattr(mod, "__version__", "?")))
    if name == "numpy":
        out["note"] = "host arrays only"
        return out
    cuda = _framework_cuda(name, mod)
    out["cuda"] = cuda
    if cuda is None:
        out["note"] = "built without CUDA" if name == "torch" else "its CUDA version cannot be told"
        return out
    major = int(cuda.split(".")[0])
    out["cuda_major"] = major
    if driver_major is None:
        out["note"] = "no driver to compare with"
    elif major == driver_major:
        out.update(matches_driver=True, note=f"matches the driver (CUDA {driver_major})")
    elif major < driver_major:
        out.update(
            matches_driver=False, note=f"older than the driver's CUDA {driver_major}; runs on it"
        )
    else:
        out.update(matches_driver=False, note=f"NEEDS A NEWER DRIVER: it is built for CUDA {major}, "
                                              f"the driver supports CUDA {driver_major}")  # fmt: skip
    return out


def _framework_cuda(name: str, mod: Any) -> str | None:
    """The CUDA version a framework was built for, without creating a context."""
    if name == "torch":
        version = getattr(getattr(mod, "version", None), "cuda", None)
        return str(version) if version else None
    # CuPy: the wheel's name says it (cupy-cuda12x); else ask its runtime.
    try:
        for dist in importlib.metadata.packages_distributions().get("cupy", []):
            m = re.search(r"cuda(\d+)", dist)
            if m:
                return m.group(1)
    except Exception:  # metadata is a hint, not a requirement
        pass
    try:
        v = int(mod.cuda.runtime.runtimeGetVersion())
        return f"{v // 1000}.{v % 1000 // 10}"
    except Exception:  # no CUDA runtime to ask
        return None
