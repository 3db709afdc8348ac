"""The text of ``python -m cuda_core`` and :func:`cuda_core.show_config`: sections of aligned
facts, each ending in one line of verdict, within 100 columns.

:func:`format_report` sets the dict :func:`~cuda_core._report._environment.collect` returns as
the sections *Install*, *Driver and GPUs* and *Frameworks*; :func:`section_verdicts` judges
them (``False``: the setup is broken, and ``python -m cuda_core`` exits 1). A value too long for
its line wraps under itself; a command to run is set on lines of its own, continued with
``\\`` so that it pastes into a shell as it is.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from .._compat import install_hint
from . import _nvml as _nvml_report

__all__: list[str] = []

WIDTH = 100
_LABEL = 16  # the label column, after an indent of 2
_VALUE = 2 + _LABEL + 1  # where values start
_FRAMEWORKS = (("numpy", "NumPy"), ("cupy", "CuPy"), ("torch", "PyTorch"))


def wrap(text: str, indent: int, hang: int | None = None) -> list[str]:
    """``text`` in lines of at most :data:`WIDTH` columns, the first indented by ``indent``, the
    rest by ``hang`` (default: ``indent + 2``). A word longer than a line stays whole."""
    hang = indent + 2 if hang is None else hang
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=" " * indent,
        subsequent_indent=" " * hang,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [" " * indent]


def fact(label: str, value: str) -> list[str]:
    """``  label           value``, the value wrapped in its column."""
    lines = wrap(value, _VALUE, _VALUE)
    lines[0] = f"  {label:<{_LABEL}} " + lines[0][_VALUE:]
    return lines


def command(cmd: str, indent: int = _VALUE) -> list[str]:
    """A shell command on lines of their own, each but the last ending in `` \\``."""
    words = cmd.split(" ")
    lines: list[str] = []
    line = " " * indent
    for word in words:
        if line.strip() and len(line) + 1 + len(word) > WIDTH - 2:
            lines.append(line + " \\")
            line = " " * (indent + 4) + word
        else:
            line = f"{line} {word}" if line.strip() else line + word
    lines.append(line)
    return lines


def verdict(ok: bool | None, text: str) -> str:
    """The last line of a section: ``FAILED: ...`` where ``ok`` is ``False``."""
    line = f"  {'verdict':<{_LABEL}} " + (f"FAILED: {text}" if ok is False else text)
    return line if len(line) <= WIDTH else line[: WIDTH - 3] + "..."


# ---------------------------------------------------------------------------------------------
# The sections.


def _install(info: dict[str, Any]) -> tuple[list[str], bool | None, str]:
    py, pair, b = info["python"], info["pairing"], info["backend"]
    lines = fact("Python", f"{py['version']} ({py['machine']}) at {py['executable']}")
    lines += fact("cuda-bindings", f"{info['cuda_bindings']}: CUDA {pair['bindings_major']}.x")
    lines += fact("cuda-pathfinder", info["cuda_pathfinder"] or "not installed")
    if b["native"]:
        lines += fact("handle layer", "native backend")
    else:
        text = f"pure-Python backend: {b['reason']}"
        if b["rebuild"] and "rebuild:" not in b["reason"]:
            text += f"; rebuild: {b['rebuild']}"
        elif b["state"] == "not built" and not b["compiler"]:
            text += "; no C compiler found to build the native backend"
        lines += fact("handle layer", text)
    names = {"nvrtc": "NVRTC", "nvjitlink": "nvJitLink", "nvvm": "libNVVM"}
    comp = info["compilers"]
    for lib, entry in comp.items():
        missing = "not usable" if "does not use" in (entry["error"] or "") else "not found"
        lines += fact(names[lib], entry["version"] or f"{missing} ({entry['error']})")
    c = info["cache"]
    if c["enabled"]:
        cache = f"{c['path']}: {c['entries']} entries, {size(c['bytes'])}"
    else:
        cache = "in memory only (on disk off: CUDA_CORE_CACHE=0)"
    lines += fact("compile cache", cache)
    mix = info.get("mixed_majors")
    major = pair["bindings_major"]
    if pair["compatible"] is False and pair["verdict"].startswith("UNSUPPORTED"):
        lines += fact("to fix", "run:") + command(install_hint(major))
        return lines, False, f"cuda-bindings {info['cuda_bindings']} is too old for cuda_core"
    if mix is not None:
        lines += fact("CUDA majors", mix["describe"])
        a, other = major, mix["other_major"]
        lines += fact("keep CUDA " + str(a), "run:") + command(mix["keep"][str(a)])
        lines += fact(f"or CUDA {other}", f"(a driver for CUDA {other}.0 or newer) run:")
        lines += command(mix["keep"][str(other)])
        if mix["harmful"]:
            return (
                lines,
                False,
                f"CUDA {a} and {other} wheels mixed: compiling fails until one is left",
            )
    if comp["nvrtc"]["version"] is None:
        lines += fact("to compile", "run:") + command(
            comp["nvrtc"]["remedy"] or install_hint(major)
        )
        return lines, None, "base install: runs precompiled cubin and PTX, cannot compile"
    linker = "links" if comp["nvjitlink"]["version"] else "links with the driver's linker"
    text = f"compiles (NVRTC {comp['nvrtc']['version']}) and {linker}"
    if mix is not None:
        text += f"; the CUDA {mix['other_major']} wheels beside are not used"
    return lines, True, text


def _driver(info: dict[str, Any]) -> tuple[list[str], bool | None, str]:
    d, pair = info["driver"], info["pairing"]
    if d["cuda_version"] is not None:
        text = f"supports CUDA {d['cuda_version']}"
        if d["kernel_mode_version"]:
            text += f" (driver {d['kernel_mode_version']})"
    elif not d["found"]:
        said = re.search(r"loader said: (.*?)\)+$", d["error"] or "")
        text = "not found" + (f" (the loader said: {said.group(1)})" if said else "")
    else:
        text = d["error"]
    lines = fact("NVIDIA driver", text)
    lines += fact("driver/bindings", d["verdict"])
    lines += fact("GPUs", str(d["device_count"]))
    for g in info["gpus"]:
        if "error" in g:
            lines += wrap(f"[{g['ordinal']}] cannot be queried: {g['error']}", 4, 8)
            continue
        lines += wrap(
            f"[{g['ordinal']}] {g['name']}, compute capability {g['compute_capability']}, "
            f"{g['memory_bytes'] / 2**30:.1f} GiB, {g['multiprocessors']} SMs, "
            f"PCI {g['pci_bus_id']}",
            4,
            8,
        )
    nvml = _nvml_report.format_lines(info["nvml"])
    if info["nvml"]["available"]:
        lines += fact("NVML", nvml[0].removeprefix("NVML").strip())
    else:
        said = re.search(r"loader said: (.*?)\)+$", info["nvml"]["error"] or "")
        text = f"the loader said: {said.group(1)}" if said else info["nvml"]["error"]
        lines += fact("NVML", f"not available, so cuda_core.system cannot query GPUs ({text})")
    for line in nvml[1:]:
        lines += wrap(line.strip(), len(line) - len(line.lstrip()) + 2)
    n = d["device_count"]
    if not d["found"]:
        return (
            lines,
            None,
            "no driver: compiling works, running kernels needs an NVIDIA GPU and driver",
        )
    if d["error"] is not None:
        return lines, False, "the driver is installed but does not answer (see above)"
    if pair["compatible"] is False:
        return lines, False, f"this driver cannot run cuda-bindings {pair['bindings_major']}.x"
    if n == 0:
        return lines, None, "the driver sees no GPU (is CUDA_VISIBLE_DEVICES set?)"
    return lines, True, f"{n} GPU{'s' if n != 1 else ''} can be used"


def _frameworks(info: dict[str, Any]) -> tuple[list[str], bool | None, str]:
    lines: list[str] = []
    newer = []
    for name, label in _FRAMEWORKS:
        f = info["frameworks"][name]
        if not f["installed"]:
            lines += fact(label, "not installed")
            continue
        if f["version"] is None:
            lines += fact(label, f["note"])
            continue
        cuda = f" for CUDA {f['cuda']}" if f["cuda"] else ""
        lines += fact(label, f"{f['version']}{cuda}" + (f": {f['note']}" if f["note"] else ""))
        if f["note"].startswith("NEEDS A NEWER DRIVER"):
            newer.append(label)
    device = [lbl for n, lbl in _FRAMEWORKS[1:] if info["frameworks"][n]["cuda"]]
    if newer:
        return (
            lines,
            None,
            f"{' and '.join(newer)} need{'s' if len(newer) == 1 else ''} a newer driver",
        )
    if not device:
        major = info["pairing"]["bindings_major"]
        return lines, None, f"no device-array library: pip install cupy-cuda{major}x (or PyTorch)"
    return lines, True, f"{' and '.join(device)} can share device arrays with cuda_core"


_SECTIONS = (("Install", _install), ("Driver and GPUs", _driver), ("Frameworks", _frameworks))


def section_verdicts(info: dict[str, Any]) -> dict[str, tuple[bool | None, str]]:
    """Each section's ``(ok, verdict)``: ``ok`` is ``False`` where the setup is broken there,
    ``None`` where it works but lacks something the README calls optional."""
    return {title: fn(info)[1:] for title, fn in _SECTIONS}


def format_report(info: dict[str, Any]) -> list[str]:
    """The lines of the text report for the dict ``collect()`` returns."""
    lines = [f"cuda_core {info['cuda_core']['version']} at {info['cuda_core']['path']}"]
    for title, fn in _SECTIONS:
        body, ok, text = fn(info)
        lines += ["", title, *body, verdict(ok, text)]
    return lines


def size(n: float) -> str:
    """``n`` bytes as ``"512 bytes"``, ``"3.7 KiB"``, ..."""
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024:
            return f"{int(n)} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
