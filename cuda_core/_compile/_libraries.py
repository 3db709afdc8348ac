"""The compiler libraries' presence and versions, asked once per process.

Shared by the options (NVRTC version checks), the cache keys (compiler identity) and the
linker/program (backend choice); it imports nothing above ``_utils`` so each of them can
import it at module level.
"""

from __future__ import annotations

from typing import Any

from .._compat import BINDINGS_MAJOR, foreign_compiler, install_hint
from .._errors import CompilerLibraryNotFoundError, _LinkerNotFoundError
from .._logging import logger as _log
from .._utils import nvrtc_version, run_once
from ._majors import mixed

__all__: list[str] = []

# name -> (what it is, its file name without the major version)
_LIBRARIES = {
    "nvrtc": ("NVRTC (the CUDA C++ compiler)", "libnvrtc.so"),
    "nvjitlink": ("nvJitLink (the CUDA linker)", "libnvJitLink.so"),
    "nvvm": ("libNVVM (the NVVM IR compiler)", "libnvvm.so"),
}
_present: set[str] = set()


def remedy() -> str:
    """The command that installs the compiler libraries matching ``cuda-bindings``."""
    return install_hint(BINDINGS_MAJOR)


def is_missing_library(exc: BaseException) -> bool:
    """Whether *exc* says a shared library could not be found or loaded."""
    if isinstance(exc, (OSError, ImportError)):
        return True
    return any(c.__name__ == "DynamicLibNotFoundError" for c in type(exc).__mro__)


def _probe(lib: str) -> None:
    if lib == "nvrtc":
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    elif lib == "nvjitlink":
        from cuda.bindings import nvjitlink

        nvjitlink.version()
    else:
        from cuda.bindings import nvvm

        nvvm.version()


def _foreign(lib: str) -> str | None:
    """Why the loaded *lib* is of a CUDA major cuda_core does not use here (``None``: usable).

    libNVVM is not checked: its version is its IR version (2.0 under both majors)."""
    if lib == "nvrtc":
        major, minor = nvrtc_version()
    elif lib == "nvjitlink":
        from cuda.bindings import nvjitlink

        major, minor = (int(v) for v in nvjitlink.version())
    else:
        return None
    return foreign_compiler(f"{_LIBRARIES[lib][0].split(' (')[0]} {major}.{minor}", major)


def library_not_found(
    lib: str, needed_by: str, exc: BaseException | None = None
) -> CompilerLibraryNotFoundError:
    """The error for compiler library *lib* (``"nvrtc"``, ``"nvjitlink"``, ``"nvvm"``) missing."""
    what, soname = _LIBRARIES[lib]
    detail = str(exc).splitlines()[0] if exc is not None and str(exc) else ""
    mix = mixed()
    if mix is not None:  # the plain install is a no-op here: say what leaves one major
        return CompilerLibraryNotFoundError(
            what, f"{soname}.{BINDINGS_MAJOR}", needed_by, mix.remedy(), detail, mix.describe()
        )
    return CompilerLibraryNotFoundError(
        what, f"{soname}.{BINDINGS_MAJOR}", needed_by, remedy(), detail
    )


def linker_not_found(needed_by: str) -> CompilerLibraryNotFoundError:
    """No nvJitLink and no driver: the error is also a ``CUDADriverNotFoundError``."""
    what, soname = _LIBRARIES["nvjitlink"]
    return _LinkerNotFoundError(
        what,
        f"{soname}.{BINDINGS_MAJOR}",
        f"{needed_by} (its fallback, the NVIDIA driver's linker, is missing too)",
        remedy(),
    )


def require(lib: str, needed_by: str) -> None:
    """Load compiler library *lib* or raise :class:`CompilerLibraryNotFoundError` naming the fix.

    A set lookup once the library has loaded; *needed_by* says what needs it.
    """
    if lib in _present:
        return
    try:
        _probe(lib)
    except Exception as exc:
        if is_missing_library(exc):
            _log.debug("%s not found: %s", lib, exc)
            raise library_not_found(lib, needed_by, exc) from exc
        raise
    why = _foreign(lib)
    if why is not None:
        _log.debug("%s not used: %s", lib, why)
        raise library_not_found(lib, needed_by, RuntimeError(why))
    _present.add(lib)
    _log.debug("%s loaded", lib)


def library_status(lib: str) -> tuple[str | None, Any]:
    """``(version, None)`` when *lib* loads, else ``(None, the error naming the remedy)``."""
    try:
        require(lib, "compiling")
        if lib == "nvrtc":
            return ".".join(map(str, nvrtc_version_cached())), None
        if lib == "nvjitlink":
            from cuda.bindings import nvjitlink

            return ".".join(map(str, nvjitlink.version())), None
        from cuda.bindings import nvvm

        return ".".join(map(str, nvvm.version())), None
    except Exception as exc:  # reported, not raised
        return None, exc


@run_once
def nvrtc_version_cached() -> tuple[int, int]:
    """The (major, minor) version of NVRTC, asked once per process."""
    require("nvrtc", "Program.compile() of C++ code")
    return nvrtc_version()


@run_once
def nvjitlink_available() -> bool:
    """True when libnvJitLink loads."""
    try:
        # the probe itself: importing and calling nvJitLink is what may fail
        from cuda.bindings import nvjitlink

        nvjitlink.version()
        why = _foreign("nvjitlink")
        if why is not None:
            raise RuntimeError(why)
    except Exception as exc:
        _log.debug("nvJitLink not available (%s): the driver's linker will link", exc)
        return False
    _present.add("nvjitlink")
    return True


@run_once
def nvjitlink_version() -> tuple[int, int] | None:
    """The (major, minor) version of the nvJitLink that links here, or ``None`` without one."""
    if not nvjitlink_available():
        return None
    from cuda.bindings import nvjitlink

    major, minor = (int(v) for v in nvjitlink.version())
    return major, minor


def require_nvjitlink(minimum: tuple[int, int], feature: str) -> None:
    """Raise ``NotImplementedError`` naming *feature* and the nvJitLink version it needs where
    the installed nvJitLink is older than *minimum* (or missing)."""
    have = nvjitlink_version()
    if have is not None and have >= minimum:
        return
    need = f"{minimum[0]}.{minimum[1]}"
    found = (
        "no nvJitLink is installed"
        if have is None
        else f"nvJitLink {have[0]}.{have[1]} is installed"
    )
    raise NotImplementedError(
        f"{feature} requires nvJitLink {need} or newer ({found}); upgrade it: {remedy()}"
    )
