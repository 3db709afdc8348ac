"""The hottest driver calls, through the optional compiled accelerator or cuda.bindings.

Each function returns the raw status as an ``int`` (``0`` is success) and never raises for a
driver error: callers turn a non-zero status into an exception with ``handle_return``. Handles
travel as integers (addresses).

Where ``cuda_core._fastpath`` was built (a C compiler at install time), the calls go straight
to the driver entry points that :func:`bind` resolves through ``cuda.bindings``'
``cuGetProcAddress``; otherwise, or with ``CUDA_CORE_NO_FASTPATH=1`` in the environment, the same
functions call ``cuda.bindings``. Both paths are covered by the GPU tier.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from cuda.bindings import driver

__all__: list[str] = []  # private module

_c: Any
try:
    from . import _fastpath as _c
except ImportError:  # built without a C compiler: the cuda.bindings path below
    _c = None
if os.environ.get("CUDA_CORE_NO_FASTPATH", "0").lower() not in ("", "0", "false", "no"):
    _c = None

ENABLED = _c is not None
"""Whether the compiled accelerator is in use."""


def compiled() -> Any:
    """The compiled accelerator module, or ``None`` (not built, or switched off)."""
    return _c

_CUevent = driver.CUevent
_CUstream = driver.CUstream
_NOT_READY = int(driver.CUresult.CUDA_ERROR_NOT_READY)


def per_thread_default_stream() -> bool:
    """Whether ``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM`` asks for per-thread default stream
    semantics (any value but empty, ``0``, ``false`` or ``no``), as ``cuda.bindings`` reads it."""
    value = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0")
    return value.strip().lower() not in ("", "0", "false", "no")


# The ABI every entry point is resolved at: the signatures _fastpath.c and the ctypes callers use.
ABI = 12000
_get_proc_address = driver.cuGetProcAddress
_entry_points: dict[tuple[str, int], int] = {}


def entry_point(name: str, stream_semantics: bool = True) -> int:
    """The address of driver function ``name`` (CUDA 12.0 ABI) from ``cuGetProcAddress``, or 0.

    The one place where driver entry points are resolved (the compiled accelerator, the
    launcher's ``ctypes`` path and host callbacks all use it). With ``stream_semantics`` (a
    function that takes a stream), per-thread default stream semantics are honoured as
    ``cuda.bindings`` honours them (:func:`per_thread_default_stream`). Addresses found are
    cached; 0 (no driver, an error, a symbol the driver lacks) is not, so a later call can
    succeed once the driver loads.
    """
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
    if err != driver.CUresult.CUDA_SUCCESS or status != driver.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SUCCESS:
        return 0
    addr = int(pfn or 0)
    if addr:
        _entry_points[key] = addr
    return addr


def bind() -> None:
    """Resolve the entry points once the driver is initialised (called by ``ensure_driver``)."""
    global ENABLED, ctx_get_device, event_record, event_query, stream_query, launch_ex
    global mem_alloc_async, mem_free_async, memcpy_async, stream_sync, own, current_device, record_wait
    if _c is None:
        return
    table = {}
    # The CUDA 12.0 ABI of each symbol: its signature is the one _fastpath.c calls.
    for name, takes_stream in (
        ("cuCtxGetDevice", False),
        ("cuEventRecord", True),
        ("cuEventQuery", False),
        ("cuStreamQuery", True),
        ("cuLaunchKernelEx", True),
        ("cuMemAllocFromPoolAsync", True),
        ("cuMemFreeAsync", True),
        ("cuMemcpyAsync", True),
        ("cuStreamSynchronize", True),
        ("cuEventDestroy", False),
        ("cuStreamDestroy", False),
        ("cuStreamWaitEvent", True),
    ):
        pfn = entry_point(name, takes_stream)
        if not pfn:
            ENABLED = False  # keep the cuda.bindings path
            return
        table[name] = pfn
    _c.set_entry_points(table)
    ctx_get_device = _c.ctx_get_device
    event_record = _c.event_record
    event_query = _c.event_query
    stream_query = _c.stream_query
    launch_ex = _c.launch_ex
    mem_alloc_async = _c.mem_alloc_async
    mem_free_async = _c.mem_free_async
    memcpy_async = _c.memcpy_async
    stream_sync = _c.stream_sync
    own = _c.Owned
    current_device = _c.current_device
    record_wait = _c.record_wait
    ENABLED = True


# ---------------------------------------------------------------------------------------------
# The cuda.bindings path (also what runs before bind()).


def _py_ctx_get_device() -> int:
    """The current context's device ordinal (>= 0), or ``-status`` when there is none."""
    err, dev = driver.cuCtxGetDevice()
    return -int(err) if err else int(dev)


def _py_current_device(tls: Any) -> Any:
    """Always ``None``: ``Device()`` then takes its general path (see ``current_device``)."""
    return None


def _py_event_record(event: int, stream: int) -> int:
    """``cuEventRecord(event, stream)``; returns the status."""
    return int(driver.cuEventRecord(_CUevent(event), _CUstream(stream))[0])


_order_lock = threading.Lock()


def _py_record_wait(event: int, producer: int, consumer: int) -> int:
    """``cuEventRecord(event, producer)`` then ``cuStreamWaitEvent(consumer, event, 0)``, one
    pair at a time (the event is shared): 0, or ``-status`` when the record failed (nothing
    ordered), ``+status`` when the wait failed."""
    with _order_lock:
        err = int(driver.cuEventRecord(_CUevent(event), _CUstream(producer))[0])
        if err:
            return -err
        return int(driver.cuStreamWaitEvent(_CUstream(consumer), _CUevent(event), 0)[0])


def _py_torch_view(cls: type, tensor: Any, stream_ptr: Any) -> Any:
    """Always ``None``: the Python path reads the tensor (see ``torch_view``)."""
    return None


def _py_dlpack_view(cls: type, obj: Any, stream_ptr: Any, rules: Any, dtypes: Any, max_version: Any) -> Any:
    """Always ``None``: the Python path asks the producer (see ``dlpack_view``)."""
    return None


def _py_copy_buffers(dst: Any, src: Any, stream: Any) -> int:
    """Always 1: the caller takes its general path (see ``copy_buffers``)."""
    return 1


def _py_event_query(event: int) -> int:
    """``cuEventQuery(event)``: 0 when done, ``CUDA_ERROR_NOT_READY`` while pending."""
    return int(driver.cuEventQuery(_CUevent(event))[0])


def _py_stream_query(stream: int) -> int:
    """``cuStreamQuery(stream)``: 0 when idle, ``CUDA_ERROR_NOT_READY`` while busy."""
    return int(driver.cuStreamQuery(_CUstream(stream))[0])


def _py_mem_alloc_async(size: int, pool: int, stream: int) -> int:
    """``cuMemAllocFromPoolAsync``: the device pointer (> 0), or ``-status``."""
    err, ptr = driver.cuMemAllocFromPoolAsync(size, driver.CUmemoryPool(pool), _CUstream(stream))
    return -int(err) if err else int(ptr)


def _py_mem_free_async(ptr: int, stream: int) -> int:
    """``cuMemFreeAsync(ptr, stream)``; returns the status."""
    return int(driver.cuMemFreeAsync(ptr, _CUstream(stream))[0])


def _py_memcpy_async(dst: int, src: int, nbytes: int, stream: int) -> int:
    """``cuMemcpyAsync`` (unified addressing, any direction); returns the status."""
    return int(driver.cuMemcpyAsync(dst, src, nbytes, _CUstream(stream))[0])


def _py_stream_sync(stream: int) -> int:
    """``cuStreamSynchronize(stream)``; returns the status."""
    return int(driver.cuStreamSynchronize(_CUstream(stream))[0])


def _text_signature(name: str, method: Callable[..., Any]) -> str:
    """``method``'s docstring headed by the text signature a compiled method carries (names,
    defaults and ``*``; no annotations), so that ``inspect`` and the docs see the same API."""
    sig = inspect.signature(method)
    sig = sig.replace(
        parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()], return_annotation=sig.empty
    )
    text = str(sig).replace("(self", "($self", 1)
    return f"{name}{text}\n--\n\n{inspect.getdoc(method) or ''}"


def stream_methods(stream_cls: type, event_cls: type) -> tuple[Any, Any]:
    """What to install as ``Stream.record`` and ``Stream.sync``: compiled methods
    (``_fastpath.make_stream_methods``) that record an exact ``Event`` on an exact open
    ``Stream`` and synchronise an exact open ``Stream`` themselves and hand every other call to
    the Python methods (which have the full behaviour); or the Python methods themselves without
    the accelerator. The compiled methods keep the Python methods' docstrings and signatures."""
    record, sync = stream_cls.record, stream_cls.sync  # type: ignore[attr-defined]
    if _c is None:
        return record, sync
    return _c.make_stream_methods(  # type: ignore[no-any-return]
        stream_cls, event_cls, record, sync, _text_signature("record", record), _text_signature("sync", sync)
    )


def buffer_methods(
    resource_cls: type, buffer_cls: type, stream_cls: type, pool_free_cls: type, gc_free: Callable[..., Any]
) -> tuple[Any, Any]:
    """What to install as ``resource_cls.allocate`` and ``Buffer.close``: compiled methods
    (``_fastpath.make_buffer_methods``) that run the Python methods' hot paths (a pool
    allocation on an open stream, and its close) and hand every other call to the Python
    methods; or the Python methods themselves without the accelerator."""
    allocate, close = resource_cls.allocate, buffer_cls.close  # type: ignore[attr-defined]
    if _c is None:
        return allocate, close
    return _c.make_buffer_methods(  # type: ignore[no-any-return]
        resource_cls, buffer_cls, stream_cls, pool_free_cls, gc_free, allocate, close,
        _text_signature("allocate", allocate), _text_signature("close", close),
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Pooled event and stream handles.

EVENT, STREAM = 0, 1
"""The ``kind`` of a pooled handle for :func:`own`."""

_query = {EVENT: "cuEventQuery", STREAM: "cuStreamQuery"}
_destroy = {EVENT: "cuEventDestroy", STREAM: "cuStreamDestroy"}


class Releaser(Protocol):
    """What :func:`own` returns: ``release()`` gives the handle back once (``True`` when it did
    so now); ``release(False)`` vouches that the handle has no pending work (an event never
    recorded), so it is pooled without asking the driver; ``pending`` says whether the release
    is still to happen."""

    def release(self, check: bool = True) -> bool: ...

    @property
    def pending(self) -> bool: ...


def _py_release_pooled(kind: int, entry: tuple[Any, int], pool: list[Any] | None, cap: int) -> None:
    handle, address = entry
    if pool is not None and len(pool) < cap and (stream_query if kind else event_query)(address) == 0:
        pool.append(entry)  # idle: the next create reuses it with no driver call
        return
    name = _destroy[kind]
    (err,) = getattr(driver, name)(handle)
    if err:
        raise RuntimeError(f"{name} failed with status {int(err)}")


def _py_own(owner: object, kind: int, entry: tuple[Any, int], pool: list[Any] | None, cap: int) -> Releaser:
    """The pure-Python :func:`own`: a ``_lifetime`` token on *owner*."""
    from ._lifetime import track

    return track(owner, _py_release_pooled, kind, entry, pool, cap)


own: Callable[[object, int, tuple[Any, int], list[Any] | None, int], Releaser] = _py_own
"""``own(owner, kind, entry, pool, cap)``: take charge of the event (``kind`` :data:`EVENT`) or
stream (:data:`STREAM`) handle in ``entry``, a ``(handle, address)`` tuple, for *owner*. The
handle is given back once, at ``release()`` or when *owner* is collected: appended to ``pool``
(a list, or ``None`` for no pooling) when that holds fewer than ``cap`` entries and the
handle's work has completed, else destroyed. Releasing never raises (a failure is a
``ResourceWarning``) and does nothing while the interpreter shuts down. The compiled
``_fastpath.Owned`` (bound by :func:`bind`) is a holder that *owner* keeps in a slot and that
releases when it is deallocated with *owner*: no weak reference or registry entry; the
pure-Python path uses ``_lifetime.track``."""

# ---------------------------------------------------------------------------------------------
# Deferred calls (no driver involved: usable before bind()).


class Deferrable(Protocol):
    """What :func:`defer` returns: ``release()`` makes the call now unless it already ran
    (``True`` when made here); ``cancel()`` takes the entry ``(fn, *args)`` back uncalled
    (``None`` when it already ran or was taken); ``pending`` says whether the call is due."""

    def release(self) -> bool: ...

    def cancel(self) -> tuple[Any, ...] | None: ...

    @property
    def pending(self) -> bool: ...


def _py_defer(owner: object, fn: Callable[..., Any], *args: Any) -> Deferrable:
    """The pure-Python :func:`defer`: ``_lifetime.track``."""
    from ._lifetime import track

    return track(owner, fn, *args)


defer: Callable[..., Deferrable] = _c.Deferred if _c is not None else _py_defer
"""``defer(owner, fn, *args)``: ``_lifetime.track``'s contract (``fn(*args)`` runs once: at
``release()`` or when *owner* is collected; never raises; skipped at interpreter exit), for an
owner that keeps the result in a slot. The compiled ``_fastpath.Deferred`` is a holder that is
deallocated with *owner* and makes the call then: no weak reference or registry entry."""

ctx_get_device: Callable[[], int] = _py_ctx_get_device
current_device: Callable[[Any], Any] = _py_current_device
"""``current_device(tls)``: ``tls.devices[ordinal]`` for the current context's device, or
``None`` (no current context, not bound yet, no such entry): ``Device()``'s cache hit in one
compiled call."""
event_record: Callable[[int, int], int] = _py_event_record
event_query: Callable[[int], int] = _py_event_query
record_wait: Callable[[int, int, int], int] = _py_record_wait
copy_buffers: Callable[[Any, Any, Any], int] = getattr(_c, "copy_buffers", _py_copy_buffers)
torch_view: Callable[[type, Any, Any], Any] = getattr(_c, "torch_view", _py_torch_view)
dlpack_view: Callable[..., Any] = getattr(_c, "dlpack_view", _py_dlpack_view)
"""``dlpack_view(StridedMemoryView, obj, stream_ptr, rules, dtypes, max_version)``: the view of a
DLPack producer (device query, stream rule, ``__dlpack__``, capsule read) in one compiled call;
``None`` for anything unusual (the Python path handles it and raises what must be raised)."""
"""``torch_view(StridedMemoryView, tensor, stream_ptr)``: the view of an exact CUDA
``torch.Tensor`` with PyTorch's current stream ordered before ``stream_ptr``, in one compiled
call once the PyTorch shim is set up and checked (``_array_bridge``); ``None`` for anything
else (the Python path handles it and raises what must be raised)."""
"""``copy_buffers(dst, src, stream)``: 0 when the copy between two open Buffers of one size
on an open real Stream was queued (compiled, one call); otherwise non-zero and nothing queued:
the caller takes its general path."""
stream_query: Callable[[int], int] = _py_stream_query
mem_alloc_async: Callable[[int, int, int], int] = _py_mem_alloc_async
mem_free_async: Callable[[int, int], int] = _py_mem_free_async
memcpy_async: Callable[[int, int, int, int], int] = _py_memcpy_async
stream_sync: Callable[[int], int] = _py_stream_sync
types_match: Callable[[tuple[Any, ...], tuple[type, ...]], bool] | None = getattr(_c, "types_match", None)
"""``types_match(args, types) -> bool``: ``len(args) == len(types)`` and ``type(args[i]) is
types[i]`` for every ``i``, at C speed (no driver involved), where the accelerator has it; else
``None`` (the launcher then compares ``list(map(type, args))``)."""
launch_ex: Callable[[int, int, int], int] | None = None
"""``launch_ex(config_address, function, params_address) -> status`` once bound, else ``None``
(the launcher then calls ``entry_point("cuLaunchKernelEx")`` through ``ctypes``)."""
