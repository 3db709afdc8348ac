"""Compiler-option values: their checks and normal forms, for ProgramOptions and LinkerOptions.

Lists of strings or ints, architecture names (``"sm_90"``, ``"90"``, ``"compute_90"``), counts,
the current device's architecture where ``arch`` is not given, macros, extra NVVM sources, the
NVRTC release each newer option needs, and what to say when a compiler refuses an ``arch``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cuda.bindings import nvrtc

from .._compat import driver
from .._errors import CUDAError
from .._handles._driver import driver_available, ensure_driver
from .._logging import logger as _log
from .._utils import arg_error, handle_return, run_once
from ._libraries import nvrtc_version_cached

__all__: list[str] = []  # private: the options classes of Program and Linker use these


def _as_list(name: str, value: Any, kinds: tuple[type, ...]) -> list[Any]:
    """``None`` -> []; a single item -> [item]; a list/tuple of items -> list (checked)."""
    if value is None:
        return []
    if isinstance(value, kinds) and not isinstance(value, bool):
        return [value]
    if isinstance(value, (list, tuple)):
        out = list(value)
        for v in out:
            if isinstance(v, bool) or not isinstance(v, kinds):
                names = " or ".join(k.__name__ for k in kinds)
                raise arg_error(name, f"a {names} or a sequence of them", value, exc=TypeError)
        return out
    names = " or ".join(k.__name__ for k in kinds)
    raise arg_error(name, f"a {names} or a sequence of them", value, exc=TypeError)


def normalize_arch(arch: Any) -> str:
    """Turn ``"sm_90"``, ``"90"``, ``"compute_90"``, ``"sm_90a"`` into a canonical arch string."""
    if isinstance(arch, int) and not isinstance(arch, bool):
        arch = str(arch)
    if not isinstance(arch, str) or not arch:
        raise arg_error("arch", 'a string such as "sm_90" or "90"', arch, exc=TypeError)
    a = arch.strip()
    if a[:1].isdigit():
        a = "sm_" + a
    head, _, num = a.partition("_")
    if head not in ("sm", "compute", "lto") or not num[:2].isdigit():
        raise arg_error("arch", 'of the form "sm_XX", "compute_XX" or "XX"', arch)
    return a


def check_counts(options: Any, names: Iterable[str]) -> None:
    """Check that the named fields are ``None`` or an int >= 0.

    A wrong type is a ``TypeError``; a negative int a ``ValueError``.
    """
    for f in names:
        v = getattr(options, f)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise arg_error(f, "a non-negative int or None", v, exc=TypeError)
        if v < 0:
            raise arg_error(f, "a non-negative int or None", v)


def device_arch(owner: str = "ProgramOptions") -> str:
    """The ``sm_XX`` arch of the current device (device 0 when no context is current).

    Raises a ``ValueError`` asking for an explicit ``arch`` where no driver or GPU is present;
    ``owner`` names the options class whose ``arch`` was not given.
    """
    try:
        ensure_driver()
        err, dev = driver.cuCtxGetDevice()
        if err != driver.CUresult.CUDA_SUCCESS:
            dev = handle_return(driver.cuDeviceGet(0), "cuDeviceGet")
        attr = driver.CUdevice_attribute
        major = handle_return(
            driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
            "cuDeviceGetAttribute",
        )
        minor = handle_return(
            driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
            "cuDeviceGetAttribute",
        )
    except CUDAError as exc:
        raise ValueError(
            f"{owner}.arch was not given and the current device's architecture cannot be "
            f'found ({exc.error_name}); pass arch="sm_XX" (for example arch="sm_90")'
        ) from exc
    return f"sm_{major}{minor}"


@run_once
def nvrtc_targets() -> tuple[str, tuple[int, ...]]:
    """The installed NVRTC's version and the architectures it compiles for, asked once per
    process: ``("13.5", (75, 80, ..., 121))``; ``("", ())`` where NVRTC is missing or cannot say."""
    try:
        version = ".".join(map(str, nvrtc_version_cached()))
        archs = handle_return(nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")
        return version, tuple(sorted(int(a) for a in archs))
    except Exception as exc:  # for an error message: never raises
        _log.debug("NVRTC's supported architectures are unknown: %s", exc)
        return "", ()


def gpu_arch() -> str | None:
    """The ``sm_XX`` of the current device (device 0 when no context is current) where a driver
    and a GPU are present, else ``None``; never raises (it serves error messages)."""
    if not driver_available():
        return None
    try:
        return device_arch()
    except Exception:
        return None


_ARCH_FLAG = re.compile(r"-arch=((sm|compute|lto)_(\d+)\w*)")


def arch_refusal(flags: Iterable[str], compiler: str, *, refused: bool) -> str:
    """Why ``compiler`` (``"NVRTC 13.5"``, ``"nvJitLink 13.5"``) failed on the ``-arch=`` in
    *flags*, naming the architectures NVRTC compiles for and, where a GPU is present, its own;
    ``""`` where the arch is not to blame.

    *refused*: the compiler's own report already blames the arch (NVRTC's log names
    ``--gpu-architecture``, nvJitLink says ``ERROR_UNSUPPORTED_ARCH``). Otherwise the arch is
    blamed where NVRTC does not list it. Never raises.
    """
    match = next((m for f in flags if (m := _ARCH_FLAG.fullmatch(f))), None)
    if match is None:
        return ""
    arch, prefix, number = match.groups()
    version, archs = nvrtc_targets()
    if not refused and (not archs or int(number) in archs):
        return ""
    text = f"arch {arch!r} is not supported by {compiler}"
    if archs:
        listing = ", ".join(f"{prefix}_{a}" for a in archs)
        if compiler.startswith("NVRTC"):
            text += f", which compiles for {listing}"
        else:
            text += f"; the installed NVRTC {version} compiles for {listing}"
    gpu = gpu_arch()
    if gpu is not None:
        text += f"; this GPU is {gpu}"
        if archs and int(gpu.partition("_")[2]) not in archs:
            text += f", which NVRTC {version} does not compile for either"
    return text


def _extra_sources(value: Any) -> list[tuple[str, bytes]]:
    """``extra_sources`` as ``[(name, bytes), ...]`` (checked; the messages are ``cuda.core``'s,
    then ours)."""
    if value is None:
        return []
    rule = "a sequence of (name, source) pairs, source being str, bytes or bytearray"
    if not isinstance(value, (list, tuple)):
        raise arg_error(
            "extra_sources",
            rule,
            value,
            exc=TypeError,
            lead="extra_sources must be a sequence of 2-tuples: ((name1, source1), (name2, "
            "source2), ...)",
        )
    out = []
    for i, item in enumerate(value):
        if not (isinstance(item, tuple) and len(item) == 2):
            lead = (
                f"Each extra module must be a 2-tuple (name, source), got "
                f"{type(item).__name__} at index {i}"
            )
            raise arg_error("extra_sources", rule, value, exc=TypeError, lead=lead)
        name, src = item
        if not isinstance(name, str):
            lead = f"Module name at index {i} must be a string, got {type(name).__name__}"
            raise arg_error("extra_sources", rule, value, exc=TypeError, lead=lead)
        if isinstance(src, str):
            src = src.encode()
        elif isinstance(src, (bytes, bytearray)):
            src = bytes(src)
        else:
            lead = (
                f"Module source at index {i} must be str (textual LLVM IR), bytes (textual LLVM "
                f"IR or bitcode), or bytearray, got {type(src).__name__}"
            )
            raise arg_error("extra_sources", rule, value, exc=TypeError, lead=lead)
        if not src:
            raise ValueError(
                f"Module source for {name!r} (index {i}) cannot be empty: libNVVM has nothing "
                "to compile in it"
            )
        out.append((name, src))
    return out


class DefineMacroError(TypeError, RuntimeError):
    """A malformed ``define_macro``: a TypeError here, a RuntimeError in cuda.core, so both."""


_MACRO_RULE = "a str, a (name, value) tuple or a list of them"
_ONE = "Union[str, tuple[str, str]]"


def _macro_error(lead: str, value: Any) -> DefineMacroError:
    return DefineMacroError(f"{lead}; define_macro must be {_MACRO_RULE} (got {value!r})")


def _macros(value: Any) -> list[str]:
    """``define_macro`` as ``NAME`` / ``NAME=VALUE`` strings; refusals worded as
    ``cuda.core``'s ("Expected define_macro tuple[str, str], got ...")."""
    if value is None:
        return []

    def one(m: Any, lead_any: str) -> str:
        if isinstance(m, str):
            return m
        if isinstance(m, tuple):
            if len(m) == 2 and all(isinstance(x, str) for x in m):
                return f"{m[0]}={m[1]}"
            raise _macro_error(f"Expected define_macro tuple[str, str], got {m}", value)
        raise _macro_error(f"Expected define_macro {lead_any}, got {m}", value)

    whole = f"{_ONE}, list[{_ONE}]"
    if isinstance(value, (str, tuple)):
        return [one(value, whole)]
    if not isinstance(value, list):
        raise _macro_error(f"Expected define_macro {whole}, got {value}", value)
    if any(isinstance(m, (list, tuple)) for m in value):  # a nested list: item by item
        return [one(m, _ONE) for m in value]
    if not all(isinstance(m, str) for m in value):
        raise _macro_error(f"Expected define_macro {whole}, got {value}", value)
    return list(value)


class UnsupportedOptionError(CUDAError, ValueError):
    """An option the NVVM backend cannot take: the ``CUDAError`` cuda.core raises, and the
    ``ValueError`` cuda_core raised before."""


class NVRTCTooOldError(ValueError, RuntimeError):
    """An option this NVRTC is too old for: a ValueError here; cuda.core raises RuntimeError
    (for ``use_bundled_headers``, already when the options are made), so it is both."""


def _check_nvrtc_version(fields: list[str]) -> None:
    """Raise an error naming the options in ``fields`` this NVRTC is too old for."""
    if not fields:
        return
    have = nvrtc_version_cached()
    old = [f for f in fields if have < _NVRTC_MIN_VERSION[f]]
    if old:
        need = ", ".join(f"{f} (NVRTC {'.'.join(map(str, _NVRTC_MIN_VERSION[f]))}+)" for f in old)
        raise NVRTCTooOldError(
            f"option(s) {need} cannot be used with this NVRTC ({'.'.join(map(str, have))})"
        )


# The first NVRTC release that takes each option (an older one gets a ValueError naming it).
_NVRTC_MIN_VERSION = {
    "fdevice_time_trace": (12, 8),
    "device_float128": (12, 8),
    "frandom_seed": (12, 8),
    "ofast_compile": (12, 8),
    "pch": (12, 8),
    "create_pch": (12, 8),
    "use_pch": (12, 8),
    "pch_dir": (12, 8),
    "pch_verbose": (12, 8),
    "pch_messages": (12, 8),
    "instantiate_templates_in_pch": (12, 8),
    "no_cache": (12, 9),
    "numba_debug": (13, 1),
    "use_bundled_headers": (13, 3),
}
