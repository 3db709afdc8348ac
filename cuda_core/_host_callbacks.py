"""Host callbacks: run host code in stream order (``cuLaunchHostFunc``).

``host_launch`` (``cuda.core``'s name), ``GraphBuilder.callback`` and
``Stream.launch_host_func`` enqueue host work on a stream. A Python callable goes through one
ctypes trampoline: the callable and its arguments wait in a table under an integer key that
travels as the driver's ``userData``. A callback launched on an ordinary stream runs once and
its entry is dropped when it has run. A callback recorded while the stream is being captured
into a graph runs on every replay, so its entry lives as long as the graph: a CUDA user object
owned by the captured graph (and by every executable graph made from it, or updated from it)
drops the entry when the driver releases the last of them. A replay that finds no entry does
nothing: the table is looked up, never a raw pointer. A ctypes function pointer declared
``CUhostFn`` goes to the driver as is, with its ``user_data``; a table entry keeps the ctypes
object (and copied data) alive until it has run, or as long as the graph.

``cuLaunchHostFunc`` is called through ctypes at the driver entry point that
``cuda_core._handles._backend.entry_point`` resolves (per-thread default stream semantics honoured, as for
every stream call). ``cuda.bindings``' own ``cuLaunchHostFunc`` is not used: it wraps the pair
in a heap block that its wrapper frees after the first call, so a captured callback crashes on
the second replay of its graph (NVIDIA/cuda-python#790).

The callable runs on a driver thread and must not call CUDA (the driver may refuse or
deadlock). An exception it raises is reported through :func:`sys.unraisablehook` (by default
printed to stderr with its traceback); it never propagates into the driver.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from . import _links
from . import _trampolines as _table
from ._compat import driver
from ._handles import _backend
from ._handles._contexts import CtxScope
from ._handles._driver import ensure_driver
from ._stream_ops import live_handle
from ._utils import arg_error, handle_return, raise_status

__all__ = ["host_launch"]  # Stream.launch_host_func and GraphBuilder.callback are public too

# CUresult cuLaunchHostFunc(CUstream, CUhostFn, void* userData) (CUDA 12.0 ABI). A CFUNCTYPE
# function releases the GIL during the call (PYFUNCTYPE would not).
_LaunchHostFunc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)

# The table and trampolines live in _trampolines (shared with explicit graph host nodes).
_once, _kept, _keys = _table._once, _table._kept, _table._keys
_RUN_ONCE, _RUN_KEPT, _DROP_KEPT = _table.RUN_ONCE, _table.RUN_KEPT, _table.DROP_KEPT
_ACTIVE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
pending_callbacks = _table.pending_callbacks

_launch_fn: Any = None


def _launch_host_func_c() -> Any:
    """The driver's ``cuLaunchHostFunc`` as a ctypes function (resolved once; the GIL is
    released during the call)."""
    global _launch_fn
    if _launch_fn is None:
        ensure_driver()
        addr = _backend.entry_point("cuLaunchHostFunc")
        if not addr:
            raise RuntimeError(
                "the CUDA driver has no cuLaunchHostFunc entry point (CUDA 12.0 ABI)"
            )
        _launch_fn = _LaunchHostFunc(addr)
    return _launch_fn


def enqueue_host_callback(stream: Any, fn: Any, user_data: Any) -> None:
    """Enqueue ``fn`` on the :class:`Stream` ``stream`` as ``cuda.core`` takes host callbacks:
    a Python callable without arguments, or a ctypes ``CUhostFn`` pointer with ``user_data``
    (see :func:`host_launch`). Used by :func:`host_launch` and ``GraphBuilder.callback``."""
    py_fn, addr, ud, keep = _table.host_callback(fn, user_data)
    if py_fn is not None:
        _in_scope(stream, _enqueue, live_handle(stream), py_fn, ())
    else:
        _in_scope(stream, _enqueue_pointer, live_handle(stream), addr, ud, keep)


def launch_host_func(stream: Any, fn: Callable[..., Any], *args: Any) -> None:
    """Enqueue ``fn(*args)`` on ``stream``, to run on the host after the stream's preceding work.

    Parameters
    ----------
    stream : Stream or GraphBuilder or IsStreamType
        Where to enqueue. While the stream is being captured, the call is recorded into the
        graph and runs on every replay; the callable stays alive as long as the graph does.
    fn : callable
        Runs on a driver thread; it must not call CUDA. Exceptions are reported through
        :func:`sys.unraisablehook` and do not stop the stream.
    *args
        Passed to ``fn``; kept alive until it has run (or as long as the graph).

    Raises
    ------
    TypeError
        ``fn`` is not callable.
    CUDAError
        The driver refused the call.
    """
    if not callable(fn):
        raise arg_error("fn", "callable", fn, exc=TypeError)
    _in_scope(stream, _enqueue, live_handle(stream), fn, args)


def _in_scope(s: Any, work: Callable[..., None], *args: Any) -> None:
    """Run ``work(*args)`` with the stream's context current, where its handle knows it (an
    owned stream, a device's default stream); a bare default-stream token uses the current one."""
    ctxh = s._h.ctx
    if ctxh is not None:
        with CtxScope(driver.CUcontext(ctxh.address), ctxh.address):
            work(*args)
    else:
        work(*args)


def _capture_graph(handle: Any) -> Any:
    """The graph being captured on the stream ``handle``, or ``None`` when it is not capturing."""
    status = handle_return(driver.cuStreamIsCapturing(handle), "cuStreamIsCapturing")
    if status != _ACTIVE:
        return None
    return handle_return(driver.cuStreamGetCaptureInfo(handle), "cuStreamGetCaptureInfo")[2]


def _enqueue(handle: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    launch = _launch_host_func_c()
    graph = _capture_graph(handle)
    raw = int(handle) or None
    if graph is not None:
        # The graph owns the entry from here; the driver decides when to drop it.
        key, _ = _table.keep_in_graph(graph, fn, args)
        rc = launch(raw, _RUN_KEPT, key)
        if rc:
            raise_status(rc, "cuLaunchHostFunc")
        return
    key = _table.new_key()
    _table.add_once(key, fn, args)
    rc = launch(raw, _RUN_ONCE, key)
    if rc:
        _table.pop_once(key)
        raise_status(rc, "cuLaunchHostFunc")


def _nothing(*_: Any) -> None:
    """The entry that only keeps objects alive (a C host function and its copied data)."""


def _enqueue_pointer(handle: Any, addr: int, user_data: int, keep: Any) -> None:
    """Enqueue the C host function ``addr`` with ``user_data``, keeping ``keep`` (the ctypes
    function object and any copied data) alive until it has run, or as long as the graph."""
    launch = _launch_host_func_c()
    graph = _capture_graph(handle)
    raw = int(handle) or None
    if graph is not None:
        _table.keep_in_graph(graph, _nothing, (keep,))
        rc = launch(raw, addr, user_data or None)
        if rc:
            raise_status(rc, "cuLaunchHostFunc")
        return
    # A one-shot entry holds ``keep``; the trampoline queued right behind the function drops it
    # once the function has returned (host functions of a stream run in order).
    key = _table.new_key()
    _table.add_once(key, _nothing, (keep,))
    rc = launch(raw, addr, user_data or None)
    if rc:
        _table.pop_once(key)
        raise_status(rc, "cuLaunchHostFunc")
    rc = launch(raw, _RUN_ONCE, key)
    if rc:  # the function is queued: its data stays alive (the entry is left in the table)
        raise_status(rc, "cuLaunchHostFunc")


def host_launch(stream: Any, fn: Any, *, user_data: Any = None) -> None:
    """Enqueue a host function on ``stream``, to run once the work queued before it is done.

    ``cuda.core``'s ``host_launch``. The function runs on a driver thread; work queued on the
    stream after this call waits until it returns. This call returns once the function is
    queued: observe completion with :meth:`Stream.sync` or an :class:`Event` recorded after it.
    While the stream is captured (a :class:`~cuda_core.graph.GraphBuilder` is passed, or the
    stream is capturing), the function is recorded into the graph and runs on every replay.

    Parameters
    ----------
    stream : Stream or GraphBuilder or IsStreamType
        The stream that orders the call; a graph builder forwards to
        :meth:`GraphBuilder.callback <cuda_core.graph.GraphBuilder.callback>`.
    fn : callable or ctypes function pointer
        A Python callable taking no arguments (it runs with the GIL; bind state with a closure
        or ``functools.partial``), or a ctypes function pointer declared
        ``ctypes.CFUNCTYPE(None, ctypes.c_void_p)``, handed to the driver as is.
        Either is kept alive until it has run (as long as the graph, when captured). It must
        not call CUDA; an exception raised by a Python callable is reported through
        :func:`sys.unraisablehook`.
    user_data : int or bytes-like object, optional
        Only for a ctypes function pointer: an ``int`` is passed as the ``void*`` (keep what
        it points to valid until the function has run); bytes-like data is copied, and the
        copy lives until the function has run (as long as the graph, when captured).

    Raises
    ------
    TypeError
        ``stream`` is not a stream, ``fn`` is neither callable nor a ctypes function pointer
        declared as ``CUhostFn``, or ``user_data`` is of another type.
    ValueError
        ``user_data`` is given with a Python callable.
    RuntimeError
        A graph builder that is not building.
    CUDAError
        The driver refused the call.

    Examples
    --------
    >>> launch(s, config, kernel, buf)                     # doctest: +SKIP
    >>> host_launch(s, lambda: print("kernel done"))        # doctest: +SKIP
    >>> s.sync()                                            # doctest: +SKIP
    """
    builder = _links.GraphBuilder
    if builder is not None and isinstance(stream, builder):
        stream.callback(fn, user_data=user_data)
        return
    if stream is None:
        raise arg_error(
            "stream",
            "a Stream, a GraphBuilder or an object with __cuda_stream__",
            None,
            exc=TypeError,
        )
    enqueue_host_callback(_links.as_stream(stream, "stream"), fn, user_data)
