"""``cuda.core._utils.version`` for code written against ``cuda.core``: the versions of
``cuda-bindings`` and of the driver as ``(major, minor, patch)`` triples.

Kept for code outside ``cuda.core`` that imports them (NVIDIA's own tests gate on them), not
as ``cuda_core``'s API: :mod:`cuda_core.system` has the public version queries.
"""

from __future__ import annotations

from .._compat import BINDINGS_VERSION, driver_version_int

__all__ = ["binding_version", "driver_version"]


def binding_version() -> tuple[int, int, int]:
    """The ``cuda-bindings`` version as a ``(major, minor, patch)`` triple, e.g. ``(13, 3, 1)``."""
    return BINDINGS_VERSION


def driver_version() -> tuple[int, int, int]:
    """The CUDA version the driver supports as a ``(major, minor, patch)`` triple, e.g.
    ``(13, 0, 0)`` (``cuDriverGetVersion``; needs no context).

    Raises :class:`~cuda_core.CUDADriverNotFoundError` where the driver cannot be loaded.
    """
    v = driver_version_int()
    return v // 1000, (v % 1000) // 10, 0
