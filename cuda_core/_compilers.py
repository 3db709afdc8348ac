"""The compiler libraries' presence and versions, asked once per process.

Shared by the options (NVRTC version checks), the cache keys (compiler identity) and the
linker/program (backend choice); it imports nothing above ``_utils`` so each of them can
import it at module level.
"""

from __future__ import annotations

from ._utils import nvrtc_version, run_once

__all__: list[str] = []


@run_once
def nvrtc_version_cached() -> tuple[int, int]:
    """The (major, minor) version of NVRTC, asked once per process."""
    return nvrtc_version()


@run_once
def nvjitlink_available() -> bool:
    """True when libnvJitLink loads."""
    try:
        # the probe itself: importing and calling nvJitLink is what may fail
        from cuda.bindings import nvjitlink

        nvjitlink.version()
    except Exception:
        return False
    return True
