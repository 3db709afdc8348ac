"""Where the default compile cache lives on disk, from the environment.

Read by the cache (its disk layer), by the cache keys (the compiler stamp files kept next
to it) and by the options (NVRTC's bundled headers), so all agree on one rule: ``CUDA_CORE_CACHE=0`` turns the disk layer off,
``CUDA_CORE_CACHE_DIR`` moves it, else ``$XDG_CACHE_HOME/cuda_core/programs``.
"""

from __future__ import annotations

import os

__all__: list[str] = []


def _xdg_root() -> str:
    """``$XDG_CACHE_HOME/cuda_core`` (``~/.cache/cuda_core`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cuda_core")


def default_cache_dir() -> str:
    """``$CUDA_CORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/cuda_core/programs`` (``~/.cache``)."""
    d = os.environ.get("CUDA_CORE_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    return os.path.join(_xdg_root(), "programs")


def bundled_headers_dir() -> str:
    """Where NVRTC installs its bundled CUDA/CCCL headers for ``use_bundled_headers``.

    ``$CUDA_CORE_CACHE_DIR/nvrtc-bundled-headers`` when that is set, else
    ``$XDG_CACHE_HOME/cuda_core/nvrtc-bundled-headers`` (``~/.cache`` by default).
    """
    base = os.environ.get("CUDA_CORE_CACHE_DIR") or _xdg_root()
    return os.path.join(base, "nvrtc-bundled-headers")


def disk_cache_dir() -> str | None:
    """The default cache's directory (absolute), or ``None`` when ``CUDA_CORE_CACHE`` is off."""
    if (os.environ.get("CUDA_CORE_CACHE") or "1").strip().lower() in ("0", "false", "off", "no"):
        return None
    return os.path.abspath(default_cache_dir())


def stamp_dir() -> str | None:
    """The directory of the compiler stamp files (``None`` when the disk cache is off)."""
    d = disk_cache_dir()
    return os.path.join(d, "toolchain") if d is not None else None
