"""Host callbacks: run host code in stream order (``cuLaunchHostFunc``).

``host_launch`` (``cuda.core``'s name), ``GraphBuilder.callback`` and
``Stream.launch_host_func`` enqueue host work on a stream. A Python callable goes through one
ctypes trampoline: the callable and its arguments wait in a table under an integer key that
travels as the driver's ``userData``. A callback launched on an ordinary stream runs once and
its entry is dropped when it has run. A callback recorded while the stream is being captured
into a graph runs on every replay, so its entry lives as long as the graph: a CUDA user object
owned by the captured graph (and by every executable graph made from it, or updated from it)
drops the entry when the driver releases the last of them. A replay that finds no entry does
nothing: the table is looked up, never a raw pointer.

A ctypes function pointer declared ``CUhostFn`` goes to the driver as is, with its ``user_data``
(``HOST_COPY_FN``, a compiled host copy, among them; :func:`pack_host_copy_args` packs its
record). Captured, a user object owned by the graph keeps the ctypes object and any copied data
alive as long as the graph. On an ordinary stream nothing that needs the GIL is queued with it,
so compiled code runs without the GIL: an event recorded right behind the function tells when it
has run, and the ctypes object and the copy are released by the next host callback enqueued
from Python (or :func:`pending_callbacks`) once that event is complete. Destroying the stream
does not cancel queued work, so they are kept until then. Work that never runs (its context was
destroyed or reset first) is released as soon as the context is found gone, and so are
one-shot Python entries of that context: nothing waits in the tables for a call that cannot
come.

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
import struct
import threading
from collections.abc import Callable
from typing import Any

import numpy

from . import _links
from . import _trampolines as _table
from ._compat import driver
from ._errors import warn_release_failure
from ._handles import _backend
from ._handles._contexts import CtxScope
from ._handles._driver import ensure_driver
from ._stream_ops import closed_error, host_address, live_handle
from ._trampolines import HOST_COPY_FN as HOST_COPY_FN
from ._utils import arg_error, check_int, handle_return, raise_status

# Stream.launch_host_func and GraphBuilder.callback are public too.
__all__ = ["HOST_COPY_FN", "host_launch", "pack_host_copy_args"]

# CUresult cuLaunchHostFunc(CUstream, CUhostFn, void* userData) (CUDA 12.0 ABI). A CFUNCTYPE
# function releases the GIL during the call (PYFUNCTYPE would not).
_LaunchHostFunc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)

# The table and trampolines live in _trampolines (shared with explicit graph host nodes).
_once, _kept, _keys = _table._once, _table._kept, _table._keys
_RUN_ONCE, _RUN_KEPT, _DROP_KEPT = _table.RUN_ONCE, _table.RUN_KEPT, _table.DROP_KEPT
_ACTIVE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
_DISABLE_TIMING = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)
_RECORD = struct.Struct("@PPN")  # HOST_COPY_FN's record: uintptr_t dst, uintptr_t src, size_t n
_MAX_ADDRESS = (1 << (8 * ctypes.sizeof(ctypes.c_void_p))) - 1

_launch_fn: Any = None

# C host functions queued on ordinary streams: (event recorded behind the function, what it
# keeps alive, its context's address and id). One-shot Python entries: key -> (address, id).
_waiting: list[tuple[Any, Any, int, int]] = []
_once_ctx: dict[int, tuple[int, int]] = {}
_sweep_lock = threading.Lock()


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


def _ctx_id(address: int) -> int:
    """The driver's id of the context at ``address``; 0 when it was destroyed or reset."""
    err, ident = driver.cuCtxGetId(driver.CUcontext(address))
    return 0 if err else int(ident)


def _sweep() -> None:
    """Release what C host functions kept alive once they have run (their event is complete),
    and everything queued in a context that is gone (its work will never run)."""
    if not (_waiting or _once_ctx):
        return
    with _sweep_lock:
        alive: dict[int, int] = {}

        def gone(address: int, ident: int) -> bool:
            if address not in alive:
                alive[address] = _ctx_id(address)
            return alive[address] != ident

        kept, done = [], []
        for entry in _waiting:
            event, _, address, ident = entry
            try:
                finished = gone(address, ident) or event.query()
            except Exception as exc:  # the event is unusable (a sticky error): let them go
                warn_release_failure("what a host function keeps, behind event", event.address, exc)
                finished = True
            if finished:
                done.append(event)
            else:
                kept.append(entry)
        _waiting[:] = kept
        for event in done:  # back to its context's pool (forgotten where the context is gone)
            try:
                event.release()
            except Exception as exc:
                warn_release_failure("the event behind a host function", event.address, exc)
        once = _table._once
        for key, (address, ident) in list(_once_ctx.items()):
            if key not in once:
                del _once_ctx[key]  # it ran
            elif gone(address, ident):
                _table.pop_once(key)
                del _once_ctx[key]


def pending_callbacks() -> tuple[int, int]:
    """``(host callbacks queued on streams that have not run, entries held by graphs)``, after
    releasing what finished or can never run; for tests."""
    _sweep()
    with _sweep_lock:
        return len(_table._once) + len(_waiting), len(_table._kept)


def enqueue_host_callback(stream: Any, fn: Any, user_data: Any) -> None:
    """Enqueue ``fn`` on the :class:`Stream` ``stream`` as ``cuda.core`` takes host callbacks:
    a Python callable without arguments, or a ctypes ``CUhostFn`` pointer with ``user_data``
    (see :func:`host_launch`). Used by :func:`host_launch` and ``GraphBuilder.callback``."""
    py_fn, addr, ud, keep = _table.host_callback(fn, user_data)
    _sweep()
    if py_fn is not None:
        _in_scope(stream, _enqueue, live_handle(stream), py_fn, (), stream)
    else:
        _in_scope(stream, _enqueue_pointer, live_handle(stream), addr, ud, keep, stream)


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
    _sweep()
    _in_scope(stream, _enqueue, live_handle(stream), fn, args, stream)


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


def _context(s: Any) -> Any:
    """The ContextHandle of the context the stream's work runs in, or ``None`` (a default-stream
    token while no context is current: the driver then refuses the launch)."""
    h = s._h
    return h.ctx if h.ctx is not None else h.context()


def _enqueue(handle: Any, fn: Callable[..., Any], args: tuple[Any, ...], s: Any) -> None:
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
    ctxh = _context(s)
    if ctxh is not None:  # should the context die first, the sweep drops the entry
        with _sweep_lock:
            if key in _table._once:
                _once_ctx[key] = (ctxh.address, _ctx_id(ctxh.address))


def _nothing(*_: Any) -> None:
    """The entry that only keeps objects alive (a C host function and its copied data)."""


def _enqueue_pointer(handle: Any, addr: int, user_data: int, keep: Any, s: Any) -> None:
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
    # Nothing that needs the GIL is queued behind the function: an event recorded right behind
    # it says when it has run, and a later sweep releases ``keep`` (see the module's docstring).
    ctxh = _context(s)
    event = ctxh.create_event(_DISABLE_TIMING) if ctxh is not None else None
    rc = launch(raw, addr, user_data or None)
    if rc:
        raise_status(rc, "cuLaunchHostFunc")
    assert event is not None  # the launch succeeded, so a context is known
    try:
        event.record(s._h)
    except Exception:
        # The function is queued but cannot be watched: wait for it, then let ``keep`` go.
        event.release()
        s._h.sync()
        return
    with _sweep_lock:
        _waiting.append((event, keep, ctxh.address, _ctx_id(ctxh.address)))


def _copy_end(value: Any, name: str, writable: bool) -> tuple[int, int | None]:
    """(address, size in bytes or ``None`` for a bare address) of one end of a host copy."""
    if isinstance(value, bool) or isinstance(value, (numpy.generic, ctypes._SimpleCData)):
        raise arg_error(
            name,
            "an int address, a Buffer or a buffer-protocol object",
            value,
            "a NumPy or ctypes scalar is not an address: pass int(value)",
            TypeError,
        )
    if isinstance(value, int):
        if not 0 <= value <= _MAX_ADDRESS:
            raise arg_error(name, f"an address in [0, {_MAX_ADDRESS:#x}]", value)
        return value, None
    if isinstance(value, _links.Buffer):
        if value.is_closed:
            raise closed_error()
        if not value.is_host_accessible:
            raise arg_error(
                name,
                "host-accessible (the copy runs on the host)",
                value,
                "use pinned or managed memory, or copy with Buffer.copy_to/copy_from",
            )
        return int(value.handle), int(value.size)
    address, size, _ = host_address(value, name, writable)
    return address, size


def pack_host_copy_args(dst: Any, src: Any, nbytes: int) -> bytes:
    """Pack the arguments of :data:`HOST_COPY_FN` into ``user_data`` bytes.

    ``cuda.core`` 1.3's ``pack_host_copy_args``. The record is three native-width fields in
    this order, without padding: ``uintptr_t dst, uintptr_t src, size_t nbytes`` (what
    ``struct.pack("@PPN", dst, src, nbytes)`` builds and ``struct.unpack("@PPN", record)``
    reads). Passed to :func:`host_launch` (or a graph callback) with :data:`HOST_COPY_FN`, the
    bytes are copied, so the record may be dropped at once; a record kept in memory of one's
    own may be passed by its ``int`` address instead.

    ``dst`` and ``src`` are not kept alive: keep both, unresized, until the copy has run.

    Parameters
    ----------
    dst : int or Buffer or buffer-protocol object
        Where to copy to: an ``int`` host address, a host-accessible :class:`Buffer` (pinned or
        managed), or a C-contiguous writable host object (``bytearray``, a NumPy array, ...).
    src : int or Buffer or buffer-protocol object
        Where to copy from, as ``dst`` (read-only objects such as ``bytes`` are fine).
    nbytes : int
        How many bytes to copy; 0 packs a copy that does nothing.

    Returns
    -------
    bytes
        The record, to pass as ``user_data``.

    Raises
    ------
    TypeError
        ``dst`` or ``src`` is neither an ``int``, a :class:`Buffer` nor a buffer-protocol
        object, or is a ``bool``, a NumPy scalar or a ctypes scalar (``ctypes.c_void_p``: pass
        its ``.value``); ``nbytes`` is not an integer.
    ValueError
        ``nbytes`` is negative or larger than ``dst`` or ``src`` (where their size is known);
        a :class:`Buffer` that is not host-accessible; an address that does not fit a pointer,
        or 0 with ``nbytes > 0``; a buffer-protocol object that is not C-contiguous, or a
        read-only one as ``dst``.
    RuntimeError
        A closed :class:`Buffer`.

    Examples
    --------
    >>> staging = LegacyPinnedMemoryResource().allocate(n)        # doctest: +SKIP
    >>> record = pack_host_copy_args(host_array, staging, n)       # doctest: +SKIP
    >>> host_launch(s, HOST_COPY_FN, user_data=record)            # doctest: +SKIP
    """
    n = check_int("nbytes", nbytes, minimum=0)
    d, d_size = _copy_end(dst, "dst", True)
    s_, s_size = _copy_end(src, "src", False)
    for name, address, size in (("dst", d, d_size), ("src", s_, s_size)):
        if size is not None and n > size:
            raise arg_error(
                "nbytes", f"at most the size of {name} ({size} bytes)", nbytes, exc=ValueError
            )
        if n and not address:
            raise arg_error(name, "a non-zero address when nbytes > 0", address)
    if n > _MAX_ADDRESS:
        raise arg_error("nbytes", f"at most {_MAX_ADDRESS:#x}", nbytes)
    return _RECORD.pack(d, s_, n)


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
