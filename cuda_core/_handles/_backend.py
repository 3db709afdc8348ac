"""Which backend of the handle layer runs: the native one or the pure-Python one, chosen once.

``CUDA_CORE_BACKEND`` is read before anything is imported:

* unset or empty: the native module (``cuda_core._handles._native``, built from
  ``cuda_core/_handles/_csrc`` at install where a C compiler is present) where it imports and its
  ``ABI_VERSION`` equals :data:`cuda_core._handles._protocol.ABI_VERSION`; else pure Python
  (:mod:`cuda_core._handles._pure`), quietly where it was not built, with one warning naming the
  rebuild command where it is stale (a build of another version left in the tree);
* ``python``: the pure-Python backend, without loading the native module;
* ``native``: the native module; where it is not built or stale, pure Python with a
  ``RuntimeWarning`` that says why and names the rebuild command;
* anything else: ``ValueError`` at import, naming the accepted values (as Python itself
  refuses a bad ``PYTHONMALLOC``): a misspelt choice never runs silently on the other backend.

Values are case-insensitive and stripped. The former switch ``CUDA_CORE_NO_FASTPATH`` (any value
but empty, ``0``, ``false`` or ``no``) still selects pure Python, with a ``DeprecationWarning``
naming ``CUDA_CORE_BACKEND=python``; where both are set, ``CUDA_CORE_BACKEND`` wins.

``backend`` is the chosen module, typed as the protocol (:class:`~._protocol.Backend`), so mypy
checks every caller; :data:`NATIVE` says which one it is and :data:`REASON` why. :func:`bind`
hands the backend the driver's entry points once the driver is initialised.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, cast

from .._compat import driver
from .._errors import CUDAWarning
from .._logging import logger as _log
from ._protocol import ABI_VERSION, Backend, NativeBackend

__all__: list[str] = []  # private module

REBUILD_COMMAND = "pip install -e . (or python setup.py build_ext --inplace in a checkout)"
ENV = "CUDA_CORE_BACKEND"
"""The variable that chooses the backend."""
CHOICES = ("python", "native")
"""The values :data:`ENV` accepts (besides unset or empty: native where built)."""
_DEPRECATED_ENV = "CUDA_CORE_NO_FASTPATH"


def requested() -> str:
    """The backend asked for: ``"python"``, ``"native"``, or ``""`` (unset: native where built).

    Reads :data:`ENV`, then the deprecated ``CUDA_CORE_NO_FASTPATH`` (which warns when it takes
    effect). Raises ``ValueError`` for a value of :data:`ENV` outside :data:`CHOICES`.
    """
    value = os.environ.get(ENV, "").strip().lower()
    if value and value not in CHOICES:
        raise ValueError(
            f"{ENV} must be one of {', '.join(CHOICES)} or unset (got {os.environ[ENV]!r}); "
            f"unset it to use the native backend where it is built"
        )
    old = os.environ.get(_DEPRECATED_ENV, "").strip().lower()
    if old not in ("", "0", "false", "no"):
        warnings.warn(
            f"{_DEPRECATED_ENV} is deprecated: set {ENV}=python instead"
            + (f" ({ENV}={value} is set and wins)" if value else ""),
            DeprecationWarning,
            stacklevel=2,
        )
        if not value:
            return "python"
    return value


def _select() -> tuple[Any, bool, str]:
    from . import _pure

    choice = requested()
    if choice == "python":
        if os.environ.get(ENV, "").strip():
            return _pure, False, f"selected ({ENV}=python)"
        return _pure, False, f"selected ({_DEPRECATED_ENV} is set; deprecated, use {ENV}=python)"
    asked = f"{ENV}=native is set, but " if choice == "native" else ""
    try:
        from . import _native  # type: ignore[attr-defined]  # the optional C extension
    except ImportError as exc:
        if asked:
            warnings.warn(
                f"cuda_core: {asked}the native backend (cuda_core._handles._native) is not built ({exc}); "
                f"running on pure Python. Build it: {REBUILD_COMMAND}",
                RuntimeWarning,
                stacklevel=2,
            )
        return _pure, False, f"not built ({exc})"
    version = getattr(_native, "ABI_VERSION", None)
    if version != ABI_VERSION:
        warnings.warn(
            f"cuda_core: {asked}the native backend in {getattr(_native, '__file__', '?')} has ABI "
            f"version {version}, this cuda_core needs {ABI_VERSION}; running on pure Python. "
            f"Rebuild it: {REBUILD_COMMAND}",
            RuntimeWarning,
            stacklevel=2,
        )
        return (
            _pure,
            False,
            f"ABI mismatch (built {version}, needs {ABI_VERSION}); rebuild: {REBUILD_COMMAND}",
        )
    return _native, True, "on"


_module, NATIVE, REASON = _select()
backend: Backend = cast(Backend, _module)
"""The handle layer's backend module (its protocol: :mod:`cuda_core._handles._protocol`)."""
del _module
if NATIVE:  # its finalizers report failed releases as cuda_core's warning category
    cast(NativeBackend, backend).set_warning_category(CUDAWarning)
if NATIVE:
    _log.debug(
        "handle layer: native backend (%s)",
        getattr(backend, "__file__", "cuda_core._handles._native"),
    )
else:
    _log.debug("handle layer: pure Python backend: %s", REASON)


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
        "cuStreamSynchronize", "cuStreamWaitEvent", "cuStreamGetCtx", "cuEventRecord", "cuLaunchKernelEx",
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


def bind(make_error: Any, context_of: Any) -> None:
    """Hand the backend its entry points, the error funnel and the context registry
    (``context_of(address) -> ContextHandle``; called by ``ensure_driver``).

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
                f"driver (or run with {ENV}=python)"
            )
        native.bind(table, make_error, context_of)
        return
    backend.bind({"cuLaunchKernelEx": entry_point("cuLaunchKernelEx")}, make_error, context_of)
