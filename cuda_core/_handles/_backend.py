"""Which backend of the handle layer runs: the native one or the pure-Python one, chosen once.

``CUDA_CORE_NO_FASTPATH`` is read before anything is imported: set to anything but empty,
``0``, ``false`` or ``no``, it selects the pure-Python backend (:mod:`cuda_core._handles._pure`)
without loading the native module. Otherwise the native module (``cuda_core._native``, built
from ``cuda_core/_handles/_csrc`` at install where a C compiler is present) is used when it imports and
its ``ABI_VERSION`` equals :data:`cuda_core._handles._protocol.ABI_VERSION`; a module of another version (a stale build left
in the tree) is not used, and one warning names the rebuild command.

``backend`` is the chosen module, typed as the protocol (:class:`~._protocol.Backend`), so mypy
checks every caller; :data:`NATIVE` says which one it is and :data:`REASON` why.
:func:`bind` hands the backend the driver's entry points once the driver is initialised.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, cast

from .._compat import driver
from .._logging import logger as _log
from ._protocol import ABI_VERSION, Backend, NativeBackend

__all__: list[str] = []  # private module

REBUILD_COMMAND = "pip install -e . (or python setup.py build_ext --inplace in a checkout)"


def _switched_off() -> bool:
    value = os.environ.get("CUDA_CORE_NO_FASTPATH", "0")
    return value.strip().lower() not in ("", "0", "false", "no")


def _select() -> tuple[Any, bool, str]:
    from . import _pure as _handles

    if _switched_off():
        return _handles, False, "switched off (CUDA_CORE_NO_FASTPATH is set)"
    try:
        from .. import _native  # type: ignore[attr-defined]  # the optional C extension
    except ImportError as exc:
        return _handles, False, f"not built ({exc})"
    version = getattr(_native, "ABI_VERSION", None)
    if version != ABI_VERSION:
        warnings.warn(
            f"cuda_core: the compiled accelerator in {getattr(_native, '__file__', '?')} has ABI version "
            f"{version}, this cuda_core needs {ABI_VERSION}; running on pure Python. "
            f"Rebuild it: {REBUILD_COMMAND}",
            RuntimeWarning,
            stacklevel=2,
        )
        return (
            _handles,
            False,
            f"ABI mismatch (built {version}, needs {ABI_VERSION}); rebuild: {REBUILD_COMMAND}",
        )
    return _native, True, "on"


_module, NATIVE, REASON = _select()
backend: Backend = cast(Backend, _module)
"""The handle layer's backend module (its protocol: :mod:`cuda_core._handles._protocol`)."""
del _module
if NATIVE:
    _log.debug(
        "handle layer: native backend (%s)", getattr(backend, "__file__", "cuda_core._native")
    )
else:
    _log.debug("handle layer: pure Python backend, falling back from native: %s", REASON)


def per_thread_default_stream() -> bool:
    """Whether ``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM`` asks for per-thread default stream
    semantics (any value but empty, ``0``, ``false`` or ``no``), as ``cuda.bindings`` reads it."""
    value = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0")
    return value.strip().lower() not in ("", "0", "false", "no")


# The ABI every entry point is resolved at: the signatures the native code and ctypes callers use.
ABI = 12000
_entry_points: dict[tuple[str, int], int] = {}
_get_proc_address = driver.cuGetProcAddress
# Entry points that take a stream: resolved with per-thread default stream semantics when asked.
_TAKES_STREAM = frozenset(
    {
        "cuStreamCreate", "cuStreamCreateWithPriority", "cuStreamDestroy", "cuStreamQuery", "cuStreamIsCapturing",
        "cuStreamSynchronize", "cuStreamWaitEvent", "cuEventRecord", "cuLaunchKernelEx",
        "cuMemAllocFromPoolAsync", "cuMemFreeAsync", "cuMemcpyAsync", "cuLaunchHostFunc",
    }
)  # fmt: skip


def entry_point(name: str, stream_semantics: bool | None = None) -> int:
    """The address of driver function ``name`` (CUDA 12.0 ABI) from ``cuGetProcAddress``, or 0.

    The one place where driver entry points are resolved. With ``stream_semantics`` (default:
    whether ``name`` takes a stream), per-thread default stream semantics are honoured as
    ``cuda.bindings`` honours them. Addresses found are cached; 0 (no driver, an error, a
    symbol the driver lacks) is not, so a later call can succeed once the driver loads.
    """
    if stream_semantics is None:
        stream_semantics = name in _TAKES_STREAM
    flags = driver.CUdriverProcAddress_flags
    flag = int(
        flags.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
        if stream_semantics and per_thread_default_stream()
        else flags.CU_GET_PROC_ADDRESS_DEFAULT
    )
    key = (name, flag)
    addr = _entry_points.get(key)
    if addr:
        return addr
    try:
        err, pfn, status = _get_proc_address(name.encode(), ABI, flag)
    except Exception:  # no driver, or an old or broken cuda.bindings: callers fall back
        return 0
    ok = driver.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SUCCESS
    if err != driver.CUresult.CUDA_SUCCESS or status != ok:
        return 0
    addr = int(pfn or 0)
    if addr:
        _entry_points[key] = addr
    return addr


def bind(make_error: Any) -> None:
    """Hand the backend its entry points and the error funnel (called by ``ensure_driver``).

    Raises ``RuntimeError`` naming them when the driver lacks an entry point the native
    backend needs (all exist since CUDA 12.0, the oldest driver cuda_core supports).
    """
    if NATIVE:
        native = cast(NativeBackend, backend)
        table = {name: entry_point(name) for name in native.entry_point_names()}
        missing = sorted(name for name, addr in table.items() if not addr)
        if missing:
            raise RuntimeError(
                f"the CUDA driver lacks {', '.join(missing)}; cuda_core needs a CUDA 12.0 or newer "
                "driver (or run with CUDA_CORE_NO_FASTPATH=1)"
            )
        native.bind(table, make_error)
        return
    backend.bind({"cuLaunchKernelEx": entry_point("cuLaunchKernelEx")}, make_error)
