"""The one place that knows how ``cuda-bindings`` 12.x and 13.x differ, and what a feature needs.

cuda_core runs on ``cuda-bindings`` 12.9.3 or newer 12.x (extra ``cu12``) and on 13.x (extra
``cu13``) from one code base. Every module imports the driver bindings from here::

    from ._compat import driver

:data:`driver` is ``cuda.bindings.driver`` as documented for 13.x, on either major:

* **Calls whose Python form changed in 13.0** are offered in their 13.x form on 12.x too (same
  name, arguments and result tuple): ``cuCtxCreate`` (a ``CUctxCreateParams`` first),
  ``cuMemAdvise``/``cuMemPrefetchAsync`` (a ``CUmemLocation``; 12.x has it as ``_v2`` and the
  device-ordinal form), ``cuGraphAddNode``, ``cuGraphAddDependencies``,
  ``cuGraphRemoveDependencies``, ``cuStreamUpdateCaptureDependencies`` (an edge-data argument),
  ``cuStreamGetCaptureInfo``, ``cuGraphGetEdges``, ``cuGraphNodeGetDependencies``,
  ``cuGraphNodeGetDependentNodes`` (an edge-data item in the result) and ``cuMemcpyBatchAsync``
  (no ``failIdx`` in the result); ``cuDeviceGetUuid`` and ``cuEventElapsedTime`` are the
  ``_v2`` calls in 13.x, and so on 12.x (the latter where the driver has it, 12.8+). On 12.x
  they call the form every 12.x driver has where no edge data or NUMA location is given, else
  the ``_v2``/``_v4`` form, after checking the driver is new enough for it.
* **Calls newer than CUDA 12.0** (:data:`SINCE`: the CUDA version that introduced each one
  cuda_core uses, from the ``PFN_<name>_v<version>`` typedefs of ``cudaTypedefs.h``) check the
  driver's version on their first call; **calls only 13.x binds** raise on 12.x. Both raise
  :class:`NotImplementedError` (what NVIDIA's ``cuda.core`` raises for CUDA 13 features on its
  CUDA 12 build) naming the call, the version it needs and the installed one.
* **Enum members only 13.x has**: :data:`MANAGED_ALLOCATION` (``None`` on 12.x), and the
  device attributes CUDA 13.0 added (:func:`device_attributes` lists them as numbers on 12.x,
  ``_handles._driver.device_attribute`` reads them through the driver entry point).

Features check with :func:`require` (a clearer name than the call's) and probe with
:func:`has`; :func:`pairing` is the bindings/driver verdict ``python -m cuda_core`` prints.

What does not differ, so is not handled here: the native handle layer and the ctypes callers
resolve their driver entry points with ``cuGetProcAddress`` at the CUDA 12.0 ABI
(``_backend.ABI``), so they get the same function versions under either major (a CUDA 13
driver still serves them; ``cuGetProcAddress`` has the same Python form in both). NVRTC,
nvJitLink and libNVVM have the same bindings API in both; the libraries themselves follow the
extra (12.x or 13.x) and their versions are read at run time (``ProgramOptions`` checks options
against the NVRTC version). ``cuda.pathfinder`` loads NVRTC and nvJitLink of either major
(13.x first) under either bindings; :func:`foreign_compiler` is the rule for which ones are used.
``cuda.bindings.nvml`` exists from 12.9.6 and 13.2 (``system.CUDA_BINDINGS_NVML_IS_COMPATIBLE``;
:data:`NVML_BINDINGS` for the message).
"""

from __future__ import annotations

import re
import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import cuda.bindings
from cuda.bindings import driver as _drv

from ._errors import CUDADriverNotFoundError, CUDAError

__all__: list[str] = []  # private module

Version = tuple[int, int]


def parse_version(text: str) -> tuple[int, int, int]:
    """``"12.9.10"`` -> ``(12, 9, 10)``; a part's leading digits count, missing parts read as 0."""
    parts = []
    for p in str(text).split(".")[:3]:
        digits = re.match(r"\d*", p).group()  # type: ignore[union-attr]  # always matches
        parts.append(int(digits) if digits else 0)
    while len(parts) < 3:
        parts.append(0)
    return parts[0], parts[1], parts[2]


BINDINGS_TEXT = str(cuda.bindings.__version__)
"""The installed ``cuda-bindings`` version, e.g. ``"12.9.10"``."""
BINDINGS_VERSION = parse_version(BINDINGS_TEXT)
BINDINGS_MAJOR = BINDINGS_VERSION[0]
V13 = BINDINGS_MAJOR >= 13
"""Whether the installed bindings are 13.x (the 13.x forms are then the bindings' own)."""
LOWEST_BINDINGS: dict[int, tuple[int, int, int]] = {12: (12, 9, 3), 13: (13, 0, 0)}
"""The oldest ``cuda-bindings`` of each major cuda_core supports. 12.9.3 is the first 12.x that
loads NVRTC, nvJitLink and libNVVM from their wheels (through ``cuda.pathfinder``) with no
driver installed: 12.9.0 does not find the wheels, 12.9.1 and 12.9.2 need libcuda to load
nvJitLink and libNVVM, and 12.8 has no ``cuda.bindings.nvvm``."""
NVML_BINDINGS: dict[int, tuple[int, int, int]] = {12: (12, 9, 6), 13: (13, 2, 0)}
"""The first ``cuda-bindings`` of each major with the ``cuda.bindings.nvml`` module."""

if BINDINGS_MAJOR not in LOWEST_BINDINGS:
    raise ImportError(
        f"cuda_core needs cuda-bindings 12.x (12.9.3 or newer) or 13.x, not {BINDINGS_TEXT}; "
        'install one with pip install "cudacore[cu13]" (or "cudacore[cu12]" for a CUDA 12 driver)'
    )

# The CUDA version (major, minor) that introduced each driver call cuda_core uses that is newer
# than CUDA 12.0 (the oldest driver supported): the lowest PFN_<name>_v<version> typedef of
# cudaTypedefs.h (CUDA 13.0; cuDevSmResourceSplit from CUDA 13.1). Calls CUDA 13 introduced are
# bound only by cuda-bindings 13 (cuDevSmResourceSplit by 13.1). tests/test_compat.py checks
# the table against every call in the code base and, where the header is installed, against it.
SINCE: dict[str, Version] = {
    "cuGraphAddNode": (12, 2),
    "cuGraphNodeSetParams": (12, 2),
    "cuGraphConditionalHandleCreate": (12, 3),
    "cuKernelGetName": (12, 3),
    "cuStreamBeginCaptureToGraph": (12, 3),
    "cuCtxFromGreenCtx": (12, 4),
    "cuCtxGetDevResource": (12, 4),
    "cuDevResourceGenerateDesc": (12, 4),
    "cuDevSmResourceSplitByCount": (12, 4),
    "cuDeviceGetDevResource": (12, 4),
    "cuGreenCtxCreate": (12, 4),
    "cuGreenCtxDestroy": (12, 4),
    "cuGreenCtxGetDevResource": (12, 4),
    "cuKernelGetParamInfo": (12, 4),
    "cuLibraryEnumerateKernels": (12, 4),
    "cuLibraryGetKernelCount": (12, 4),
    "cuCheckpointProcessCheckpoint": (12, 8),
    "cuCheckpointProcessGetRestoreThreadId": (12, 8),
    "cuCheckpointProcessGetState": (12, 8),
    "cuCheckpointProcessLock": (12, 8),
    "cuCheckpointProcessRestore": (12, 8),
    "cuCheckpointProcessUnlock": (12, 8),
    "cuMemcpyBatchAsync": (12, 8),
    "cuStreamGetDevice": (12, 8),
    "cuTensorMapEncodeIm2colWide": (12, 8),
    "cuMemDiscardAndPrefetchBatchAsync": (13, 0),
    "cuMemDiscardBatchAsync": (13, 0),
    "cuMemGetDefaultMemPool": (13, 0),
    "cuMemGetMemPool": (13, 0),
    "cuMemPrefetchBatchAsync": (13, 0),
    "cuDevSmResourceSplit": (13, 1),
}

CUDA13 = (13, 0)
_BASELINE: Version = (12, 0)  # every driver cuda_core supports has what is older


def _text(v: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in v)


def install_hint(major: int = 13) -> str:
    """The command that installs cuda_core with the ``cuda-bindings`` of CUDA ``major``."""
    return f'pip install "cudacore[cu{major}]"'


# ---------------------------------------------------------------------------------------------
# The driver's version, read once (cuDriverGetVersion needs no cuInit).

_version_lock = threading.Lock()
_driver_version: list[int] = []


def driver_version_int() -> int:
    """The CUDA version the driver supports, as ``cuDriverGetVersion`` gives it (``13000``).

    Raises :class:`~cuda_core.CUDADriverNotFoundError` where libcuda cannot be loaded.
    """
    if _driver_version:
        return _driver_version[0]
    with _version_lock:
        if not _driver_version:
            try:
                result = _drv.cuDriverGetVersion()
            except (RuntimeError, OSError) as exc:  # libcuda could not be loaded
                raise CUDADriverNotFoundError(str(exc)) from None
            if result[0]:  # built here, not by _utils' error funnel, which imports this module
                raise CUDAError(
                    "cuDriverGetVersion", _drv.CUresult(result[0]).name, "", int(result[0])
                )
            _driver_version.append(int(result[1]))
    return _driver_version[0]


def driver_version() -> Version:
    """``(major, minor)`` of the CUDA version the driver supports, e.g. ``(13, 0)``."""
    v = driver_version_int()
    return v // 1000, (v % 1000) // 10


# ---------------------------------------------------------------------------------------------
# What a feature needs.


def missing(
    feature: str, *, bindings: Version | None = None, driver: Version | None = None
) -> str | None:
    """Why ``feature`` cannot run here (the sentence :func:`require` raises), or ``None``.

    ``bindings``: the ``cuda-bindings`` version it needs; ``driver``: the CUDA version the
    driver must support. The driver is asked only when the bindings suffice.
    """
    if bindings is not None and BINDINGS_VERSION[:2] < bindings:
        return (
            f"{feature} needs cuda-bindings {_text(bindings)} or newer (installed: {BINDINGS_TEXT}); "
            f"install it with {install_hint(max(bindings[0], BINDINGS_MAJOR))}"
        )
    if driver is not None and driver > _BASELINE:
        have = driver_version()
        if have < driver:
            return (
                f"{feature} needs an NVIDIA driver for CUDA {_text(driver)} or newer "
                f"(this one supports CUDA {_text(have)})"
            )
    return None


def require(
    feature: str,
    *,
    bindings: Version | None = None,
    driver: Version | None = None,
    exc: Callable[[str], Exception] = NotImplementedError,
) -> None:
    """Raise ``exc`` (default :class:`NotImplementedError`) when ``feature`` cannot run here.

    The message names the feature, the version it needs and the installed one, e.g.
    ``"ManagedMemoryResource needs cuda-bindings 13.0 or newer (installed: 12.9.10); install it
    with pip install "cudacore[cu13]""``.
    """
    why = missing(feature, bindings=bindings, driver=driver)
    if why is not None:
        raise exc(why)


def has(name: str) -> bool:
    """Whether driver call ``name`` can be made here: bound by the installed bindings and, for
    a call of :data:`SINCE`, supported by the driver (``False`` where no driver is found)."""
    if not hasattr(_drv, name):
        return False
    need = SINCE.get(name)
    if need is None or need <= _BASELINE:
        return True
    try:
        return driver_version() >= need
    except Exception:  # no driver, or it cannot say: the call cannot be made
        return False


# ---------------------------------------------------------------------------------------------
# The 13.x forms on 12.x (used only when the bindings are 12.x).

_LOC = _drv.CUmemLocationType
_CPU = int(getattr(_drv, "CU_DEVICE_CPU", -1))


def _legacy_device(location: Any) -> Any:
    """The device-ordinal form of a device or host ``CUmemLocation`` (12.x's first form), or
    ``None`` for a location only the ``_v2`` form takes (a host NUMA node)."""
    t = location.type
    if t == _LOC.CU_MEM_LOCATION_TYPE_DEVICE:
        return _drv.CUdevice(int(location.id))
    if t == _LOC.CU_MEM_LOCATION_TYPE_HOST:
        return _drv.CUdevice(_CPU)
    return None


def _need_driver(what: str, need: Version) -> None:
    require(what, driver=need)


def _ctx_create(ctxCreateParams: Any, flags: Any, dev: Any) -> Any:
    if ctxCreateParams is None:
        return _drv.cuCtxCreate(flags, dev)
    _need_driver("cuCtxCreate with CUctxCreateParams", (12, 5))
    return _drv.cuCtxCreate_v4(ctxCreateParams, flags, dev)


def _mem_advise(devPtr: Any, count: Any, advice: Any, location: Any) -> Any:
    dev = _legacy_device(location)
    if dev is not None:
        return _drv.cuMemAdvise(devPtr, count, advice, dev)
    _need_driver("cuMemAdvise to a host NUMA node", (12, 2))
    return _drv.cuMemAdvise_v2(devPtr, count, advice, location)


def _mem_prefetch(devPtr: Any, count: Any, location: Any, flags: Any, hStream: Any) -> Any:
    dev = _legacy_device(location)
    if dev is not None and not int(flags):
        return _drv.cuMemPrefetchAsync(devPtr, count, dev, hStream)
    _need_driver("cuMemPrefetchAsync to a host NUMA node or with flags", (12, 2))
    return _drv.cuMemPrefetchAsync_v2(devPtr, count, location, flags, hStream)


def _edge_data(api: str) -> None:
    _need_driver(f"{api} with edge data", (12, 3))


def _graph_add_node(
    hGraph: Any, dependencies: Any, dependencyData: Any, numDependencies: Any, nodeParams: Any
) -> Any:
    if dependencyData is None:
        return _drv.cuGraphAddNode(hGraph, dependencies, numDependencies, nodeParams)
    _edge_data("cuGraphAddNode")
    return _drv.cuGraphAddNode_v2(hGraph, dependencies, dependencyData, numDependencies, nodeParams)


def _edges_call(name: str) -> Callable[..., Any]:
    """The 13.x form of ``name`` (``cuGraphAddDependencies``/``cuGraphRemoveDependencies``)."""

    def call(hGraph: Any, from_: Any, to: Any, edgeData: Any, numDependencies: Any) -> Any:
        if edgeData is None:
            return getattr(_drv, name)(hGraph, from_, to, numDependencies)
        _edge_data(name)
        return getattr(_drv, f"{name}_v2")(hGraph, from_, to, edgeData, numDependencies)

    return call


_graph_add_deps = _edges_call("cuGraphAddDependencies")
_graph_remove_deps = _edges_call("cuGraphRemoveDependencies")


def _update_capture_deps(
    hStream: Any, dependencies: Any, dependencyData: Any, numDependencies: Any, flags: Any
) -> Any:
    if dependencyData is None:
        return _drv.cuStreamUpdateCaptureDependencies(hStream, dependencies, numDependencies, flags)
    _edge_data("cuStreamUpdateCaptureDependencies")
    return _drv.cuStreamUpdateCaptureDependencies_v2(
        hStream, dependencies, dependencyData, numDependencies, flags
    )


def _no_edge_data(result: tuple[Any, ...]) -> tuple[Any, ...]:
    """A 12.x result with 13.x's edge-data item (``None``: no edge data) before the count."""
    return (*result[:-1], None, result[-1])


def _capture_info(hStream: Any) -> Any:
    return _no_edge_data(_drv.cuStreamGetCaptureInfo(hStream))


def _graph_edges(hGraph: Any, numEdges: int = 0) -> Any:
    return _no_edge_data(_drv.cuGraphGetEdges(hGraph, numEdges))


def _node_deps(hNode: Any, numDependencies: int = 0) -> Any:
    return _no_edge_data(_drv.cuGraphNodeGetDependencies(hNode, numDependencies))


def _node_dependents(hNode: Any, numDependentNodes: int = 0) -> Any:
    return _no_edge_data(_drv.cuGraphNodeGetDependentNodes(hNode, numDependentNodes))


def _memcpy_batch(*args: Any) -> Any:
    return (_drv.cuMemcpyBatchAsync(*args)[0],)  # 12.x adds failIdx


def _device_uuid(dev: Any) -> Any:
    return _drv.cuDeviceGetUuid_v2(dev)  # what 13.x's cuDeviceGetUuid is (MIG UUIDs in MIG mode)


def _elapsed_time(hStart: Any, hEnd: Any) -> Any:
    # 13.x's cuEventElapsedTime is 12.8's _v2 (the same times; it does not report errors of
    # pending work). Chosen on the first call, when the driver can be asked.
    try:
        v2 = driver_version() >= (12, 8)
    except CUDADriverNotFoundError:
        v2 = False
    fn = _drv.cuEventElapsedTime_v2 if v2 else _drv.cuEventElapsedTime
    vars(_module)["cuEventElapsedTime"] = fn  # later look-ups get the call itself
    return fn(hStart, hEnd)


_SHIMS: dict[str, Callable[..., Any]] = {
    "cuCtxCreate": _ctx_create,
    "cuMemAdvise": _mem_advise,
    "cuMemPrefetchAsync": _mem_prefetch,
    "cuGraphAddNode": _graph_add_node,
    "cuGraphAddDependencies": _graph_add_deps,
    "cuGraphRemoveDependencies": _graph_remove_deps,
    "cuStreamUpdateCaptureDependencies": _update_capture_deps,
    "cuStreamGetCaptureInfo": _capture_info,
    "cuGraphGetEdges": _graph_edges,
    "cuGraphNodeGetDependencies": _node_deps,
    "cuGraphNodeGetDependentNodes": _node_dependents,
    "cuMemcpyBatchAsync": _memcpy_batch,
    "cuDeviceGetUuid": _device_uuid,
    "cuEventElapsedTime": _elapsed_time,
}
"""The 13.x form of each call whose Python form changed in 13.0, written for 12.x."""
for _name, _fn in _SHIMS.items():
    _fn.__name__ = _fn.__qualname__ = _name  # call() and handle_return name the API after it
del _name, _fn


# ---------------------------------------------------------------------------------------------
# The driver module as cuda_core sees it.


def _named(fn: Callable[..., Any], name: str, doc: str | None) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name  # call() and handle_return name the API after it
    fn.__doc__ = doc
    return fn


def _unbound(name: str, need: Version) -> Callable[..., Any]:
    """A stand-in for a call the installed bindings do not bind: raises when called."""

    def call(*args: Any, **kwargs: Any) -> Any:
        require(name, bindings=need)
        raise NotImplementedError(
            f"{name} is not bound by cuda-bindings {BINDINGS_TEXT}"
        )  # pragma: no cover

    return _named(call, name, f"{name}: needs cuda-bindings {_text(need)} or newer.")


def _gated(
    module: types.ModuleType, name: str, fn: Callable[..., Any], need: Version
) -> Callable[..., Any]:
    """``fn``, checking on its first call that the driver supports CUDA ``need``."""
    checked: list[bool] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not checked:
            require(name, driver=need)
            checked.append(True)
            setattr(module, name, fn)  # later look-ups get the call itself
        return fn(*args, **kwargs)

    return _named(call, name, getattr(fn, "__doc__", None))


def _look_up(name: str) -> Any:
    """The module ``__getattr__`` (PEP 562) of :data:`driver`: resolves ``name`` on its first
    look-up and keeps it as an attribute, so later look-ups cost what any module's do."""
    if name.startswith("__"):
        return getattr(_drv, name)
    shim = None if V13 else _SHIMS.get(name)
    value = shim if shim is not None else getattr(_drv, name, None)
    need = SINCE.get(name)
    if value is None:
        if need is None:
            raise AttributeError(f"cuda.bindings.driver {BINDINGS_TEXT} has no attribute {name!r}")
        value = _unbound(name, need)
    elif need is not None and need > _BASELINE and callable(value):
        value = _gated(_module, name, value, need)
    setattr(_module, name, value)
    return value


_module = types.ModuleType(
    "cuda_core._compat.driver", "cuda.bindings.driver in its 13.x form (see cuda_core._compat)."
)
_module.__getattr__ = _look_up  # type: ignore[method-assign]

if TYPE_CHECKING:
    from cuda.bindings import driver as driver
else:
    driver = _module

MANAGED_ALLOCATION: Any = getattr(_drv.CUmemAllocationType, "CU_MEM_ALLOCATION_TYPE_MANAGED", None)
"""``CU_MEM_ALLOCATION_TYPE_MANAGED`` (13.x), or ``None`` where the bindings lack it (12.x)."""

# The device attributes CUDA 13.0 added (cuda.h), which cuda-bindings 12.x has no member for.
_DEVICE_ATTRIBUTES_13 = {
    "CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED": 144,
    "CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED": 145,
    "CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED": 146,
    "CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED": 147,
}


def device_attributes() -> list[tuple[str, Any]]:
    """``(name, attribute)`` of every ``CU_DEVICE_ATTRIBUTE_X`` but ``MAX``: the bindings' enum
    members, and on 12.x the ones CUDA 13.0 added as plain ``int`` (read them with
    ``_handles._driver.device_attribute``)."""
    out = [(a.name, a) for a in _drv.CUdevice_attribute if a.name != "CU_DEVICE_ATTRIBUTE_MAX"]
    have = {name for name, _ in out}
    out += [(name, number) for name, number in _DEVICE_ATTRIBUTES_13.items() if name not in have]
    return out


def require_cuda13(feature: str, exc: Callable[[str], Exception] = NotImplementedError) -> None:
    """:func:`require` for a feature of CUDA 13: ``cuda-bindings`` 13 and a CUDA 13 driver."""
    require(feature, bindings=CUDA13, driver=CUDA13, exc=exc)


def foreign_compiler(what: str, major: int) -> str | None:
    """Why a compiler library (``what``: ``"NVRTC 13.0"``) of CUDA ``major`` is not used with the
    installed bindings, or ``None`` when it is.

    One of a newer major than the bindings' is refused: its output (PTX ISA, cubin) needs a
    driver of that major, which the bindings' major does not promise, and ``cuda.pathfinder``
    may load it where both majors' wheels are installed. An older one is used (a newer driver
    loads its output).
    """
    if major > BINDINGS_MAJOR:
        return (
            f"found {what}, of CUDA {major}, which cuda_core does not use with cuda-bindings "
            f"{BINDINGS_MAJOR}.x: its output needs a CUDA {major} driver"
        )
    return None


# ---------------------------------------------------------------------------------------------
# The pairing python -m cuda_core reports.


def pairing(driver_cuda: Version | None) -> dict[str, Any]:
    """The installed bindings against the driver (``driver_cuda``: ``(major, minor)`` of the
    CUDA version it supports, ``None`` without a usable driver), as plain values.

    Keys: ``bindings`` (version text), ``bindings_major``, ``extra`` (``"cu12"``/``"cu13"``),
    ``driver_cuda`` (``"13.0"`` or ``None``), ``compatible`` (``True``, ``False`` or ``None``
    when unknown) and ``verdict`` (one sentence).
    """
    major = BINDINGS_MAJOR
    out: dict[str, Any] = {
        "bindings": BINDINGS_TEXT,
        "bindings_major": major,
        "extra": f"cu{major}",
        "driver_cuda": None if driver_cuda is None else _text(driver_cuda),
        "compatible": None,
        "verdict": "",
    }
    lowest = LOWEST_BINDINGS[major]
    if BINDINGS_VERSION < lowest:
        out["compatible"] = False
        out["verdict"] = (
            f"UNSUPPORTED: cuda_core needs cuda-bindings {_text(lowest)} or newer of the {major}.x line "
            f"(installed: {BINDINGS_TEXT}); {install_hint(major)}"
        )
    elif driver_cuda is None:
        out["verdict"] = (
            f"unknown (no usable driver); cuda-bindings {major}.x needs a driver for CUDA {major}.0 or newer"
        )
    elif driver_cuda[0] >= major:
        out["compatible"] = True
        out["verdict"] = (
            f"compatible (cuda-bindings {major}.x on a driver for CUDA {out['driver_cuda']})"
        )
        if driver_cuda[0] > major:
            out["verdict"] += (
                f"; the features of CUDA {driver_cuda[0]} (managed memory pools, batched prefetch and "
                f"discard, ...) need cuda-bindings {driver_cuda[0]}: {install_hint(driver_cuda[0])}"
            )
    else:
        out["compatible"] = False
        out["verdict"] = (
            f"INCOMPATIBLE: cuda-bindings {major}.x needs a driver for CUDA {major}.0 or newer, this one "
            f"supports CUDA {out['driver_cuda']}; update the driver, or {install_hint(driver_cuda[0])}"
        )
    return out
