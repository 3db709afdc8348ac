"""Finding nccl4py and the NCCL library, once, and saying what is missing when they are not there.

nccl4py (``pip install nccl4py``, import names ``nccl.core`` and ``nccl.bindings``) loads
``libnccl.so.2`` through ``cuda.pathfinder`` on first use: from the ``nvidia-nccl-cu13``/
``-cu12`` wheel in site-packages (the one PyTorch uses, where PyTorch is installed), else the
system's library path. :func:`load` makes that first use happen here, so a missing library is
reported as :class:`NCCLNotFoundError` naming the remedy instead of failing later in a
collective.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from ._errors import NCCLNotFoundError

__all__ = ["is_available", "library_info"]

_loaded: tuple[ModuleType, ModuleType] | None = None


def load() -> tuple[ModuleType, ModuleType]:
    """``(nccl.core, nccl.bindings.nccl)`` with ``libnccl.so.2`` loaded, or :class:`NCCLNotFoundError`."""
    global _loaded
    if _loaded is not None:
        return _loaded
    try:
        import nccl.core as core
        from nccl.bindings import nccl as bindings
    except ImportError as exc:
        raise NCCLNotFoundError(
            "nccl4py (NVIDIA's Python bindings for NCCL)", "nccl4py", str(exc)
        ) from None
    try:
        bindings.get_version()  # loads libnccl.so.2 (cuda.pathfinder raises a RuntimeError if absent)
    except Exception as exc:
        raise NCCLNotFoundError("the NCCL library", "libnccl.so.2", str(exc)) from None
    _loaded = (core, bindings)
    return _loaded


def is_available() -> bool:
    """Whether nccl4py and the NCCL library can be loaded (no GPU needed to answer).

    Returns
    -------
    bool
        ``False`` where :func:`library_info` would raise :class:`NCCLNotFoundError`.
    """
    try:
        load()
    except NCCLNotFoundError:
        return False
    return True


def _version_text(code: int) -> str:
    # NCCL packs X.Y.Z as X*10000 + Y*100 + Z (X*1000 + Y*100 + Z before 2.9)
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def library_info() -> dict[str, Any]:
    """Which nccl4py and which NCCL library this process uses.

    Returns
    -------
    dict
        ``{"nccl4py": "0.6.0", "version": "2.28.9", "path": "/.../libnccl.so.2"}``; ``path`` is
        ``None`` when nccl4py cannot tell.

    Raises
    ------
    NCCLNotFoundError
        nccl4py or ``libnccl.so.2`` is missing.

    Examples
    --------
    >>> from cuda_core import nccl
    >>> nccl.library_info()["version"]  # doctest: +SKIP
    '2.28.9'
    """
    core, bindings = load()
    try:
        path = bindings.get_library_path() or None
    except Exception:  # an nccl4py without the query
        path = None
    return {
        "nccl4py": str(getattr(core, "__version__", "?")),
        "version": _version_text(int(bindings.get_version())),
        "path": str(path) if path else None,
    }
