"""The environment report of ``python -m cuda_core`` and :func:`show_config`.

:func:`collect` gathers the facts into a dict of plain values (JSON-ready); :func:`format_report`
turns it into the lines ``python -m cuda_core`` prints. Nothing here raises for a missing
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
from .._compat import driver, pairing
from .._compile._cache import FileStreamProgramCache, get_default_program_cache
from .._compile._cache_paths import default_cache_dir, disk_cache_dir
from .._compile._libraries import library_status, remedy
from .._errors import CUDADriverNotFoundError, CUDAError
from .._handles import _backend
from .._utils import handle_return
from .._version import __version__
from . import _nvml as _nvml_report

__all__ = ["show_config"]

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
    return info


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


# ---------------------------------------------------------------------------------------------
# Formatting.


def _size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)  # pragma: no cover


def format_report(info: dict[str, Any]) -> list[str]:
    """The lines of the text report for the dict :func:`collect` returns."""
    lines = [
        f"cuda_core {info['cuda_core']['version']} ({info['cuda_core']['path']})",
        f"Python {info['python']['version']} ({info['python']['executable']}, {info['python']['machine']})",
        f"cuda-bindings {info['cuda_bindings']} (CUDA {info['pairing']['bindings_major']}.x bindings, "
        f"extra {info['pairing']['extra']})",
        f"cuda-pathfinder {info['cuda_pathfinder'] or 'not installed'}",
    ]
    b = info["backend"]
    if b["native"]:
        lines.append("handle layer: native backend (cuda_core._handles._native)")
    else:
        line = f"handle layer: pure-Python backend ({b['reason']})"
        if b["rebuild"] and "rebuild:" not in b["reason"]:
            line += f"; rebuild: {b['rebuild']}"
        elif b["state"] == "not built" and not b["compiler"]:
            line += "; no C compiler found to build the native backend"
        lines.append(line)
    d = info["driver"]
    if d["cuda_version"] is not None:
        line = f"NVIDIA driver: supports CUDA {d['cuda_version']}"
        if d["kernel_mode_version"]:
            line += f" (driver {d['kernel_mode_version']})"
        lines.append(line)
    else:
        lines.append(f"NVIDIA driver: {d['error']}")
    lines.append(f"driver/bindings: {d['verdict']}")
    lines.append(f"GPUs: {d['device_count']}")
    for g in info["gpus"]:
        if "error" in g:
            lines.append(f"  [{g['ordinal']}] cannot be queried: {g['error']}")
            continue
        lines.append(
            f"  [{g['ordinal']}] {g['name']}, compute capability {g['compute_capability']}, "
            f"{g['memory_bytes'] / 2**30:.1f} GiB, {g['multiprocessors']} SMs, PCI {g['pci_bus_id']}"
        )
    lines.extend(_nvml_report.format_lines(info["nvml"]))
    names = {"nvrtc": "NVRTC", "nvjitlink": "nvJitLink", "nvvm": "libNVVM"}
    for lib, entry in info["compilers"].items():
        if entry["version"] is not None:
            lines.append(f"{names[lib]} {entry['version']}")
        else:
            lines.append(
                f"{names[lib]}: not found; install it with: {entry['remedy']} ({entry['error']})"
            )
    c = info["cache"]
    if c["enabled"]:
        lines.append(f"compile cache: {c['path']} ({c['entries']} entries, {_size(c['bytes'])})")
    else:
        lines.append("compile cache: on disk off (CUDA_CORE_CACHE=0); in memory only")
    for name, label in _FRAMEWORKS:
        f = info["frameworks"][name]
        if not f["installed"]:
            lines.append(f"{label}: not installed")
        elif f["version"] is None:
            lines.append(f"{label}: {f['note']}")
        else:
            cuda = f" for CUDA {f['cuda']}" if f["cuda"] else ""
            lines.append(f"{label} {f['version']}{cuda}" + (f": {f['note']}" if f["note"] else ""))
    return lines
