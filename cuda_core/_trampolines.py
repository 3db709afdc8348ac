"""The host-callback table: Python callables the driver reaches through one trampoline.

The driver calls a C function with a ``void*``; we give it one of two ctypes trampolines and an
integer key into a table of ``(callable, args)``. A one-shot entry (``cuLaunchHostFunc`` on an
ordinary stream) is dropped when it has run. A kept entry (a callback inside a graph) runs on
every replay and is dropped when a CUDA user object owned by the graph is released, i.e. when
the driver lets go of the last graph (definition, clone, or executable graph) that can call it.
A replay that finds no entry does nothing: the driver never holds a pointer to a Python object.
What a released entry kept is dropped on the main thread (a pending call), never on the
driver's thread, where a finalizer could not call CUDA.

This module imports nothing above the error funnel, so both stream callbacks
(:mod:`cuda_core._host_callbacks`) and explicit graph host nodes can use it.
"""

from __future__ import annotations

import ctypes
import itertools
import sys
import threading
from collections.abc import Callable
from typing import Any

from ._compat import driver
from ._handles._backend import backend
from ._lifetime import immortal
from ._utils import arg_error, handle_return

__all__: list[str] = []  # private module

HostFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CFuncPtr = ctypes._CFuncPtr  # type: ignore[attr-defined]
CUHOSTFN_HINT = "declare it as ctypes.CFUNCTYPE(None, ctypes.c_void_p)"


class _HostCopyFn(HostFn):  # type: ignore[misc, valid-type]
    """A ``CUhostFn`` that copies ``nbytes`` from ``src`` to ``dst`` (host addresses), read from
    the record its ``user_data`` holds (:func:`cuda_core.pack_host_copy_args`).

    ``cuda.core`` 1.3's ``HOST_COPY_FN``: a ctypes function pointer declared
    ``ctypes.CFUNCTYPE(None, ctypes.c_void_p)``, for :func:`cuda_core.host_launch` and graph
    callbacks. Its body comes from the handle layer's backend: compiled code under the native
    backend (it never takes the GIL), a ctypes callback under the pure-Python one.
    """

    _flags_ = HostFn._flags_
    _restype_ = None
    _argtypes_ = (ctypes.c_void_p,)

    def __repr__(self) -> str:
        return f"<cuda_core.HOST_COPY_FN at {_address(self):#x}>"


HOST_COPY_FN = _HostCopyFn(backend.HOST_COPY_ADDRESS)
HOST_COPY_RECORD_SIZE = ctypes.sizeof(ctypes.c_void_p) * 2 + ctypes.sizeof(ctypes.c_size_t)
"""The size of the record ``HOST_COPY_FN`` reads (``struct.calcsize("@PPN")``)."""

_once: dict[int, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
_kept: dict[int, tuple[Callable[..., Any], tuple[Any, ...]]] = {}
_keys = itertools.count(1)
_lock = threading.Lock()


def _invoke(entry: tuple[Callable[..., Any], tuple[Any, ...]] | None) -> None:
    if entry is None:
        return
    fn, args = entry
    try:
        fn(*args)
    except BaseException as exc:
        # Re-raised into ctypes, which hands it to sys.unraisablehook; the driver never sees it.
        exc.add_note(f"(raised by the host callback {fn!r}; cuda_core reports it and carries on)")
        raise


@immortal
@HostFn
def _run_once(key: int | None) -> None:
    with _lock:
        entry = _once.pop(key or 0, None)
    _invoke(entry)


@immortal
@HostFn
def _run_kept(key: int | None) -> None:
    _invoke(_kept.get(key or 0))


def _drop_kept_body(key: int | None) -> None:
    # The driver runs this (a user object's destructor), on a thread of its own or inside the
    # call that released the graph: the entry's objects are handed to the main thread, so no
    # finalizer (a Buffer's free, say) runs here, where CUDA calls are not allowed.
    with _lock:
        entry = _kept.pop(key or 0, None)
        if entry is not None:
            _released.append(entry)
    _queue_drain()


_DROP_KEPT_CODE = _drop_kept_body.__code__
_drop_kept = immortal(HostFn(_drop_kept_body))


# What the driver (or a graph collected on another thread) let go of, dropped by _drain on the
# main thread through Py_AddPendingCall. When CPython's pending-call queue is full, the next
# entry here (a new callback or graph hold) asks again.
_released: list[Any] = []
_drain_queued = False
_refused = 0  # times CPython's queue was full when asked (read by tests: refused_drains())
_PendingFn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_add_pending_call = ctypes.pythonapi.Py_AddPendingCall
_add_pending_call.argtypes = (_PendingFn, ctypes.c_void_p)
_add_pending_call.restype = ctypes.c_int


@immortal
@_PendingFn
def _drain(_: int | None) -> int:
    global _drain_queued
    if _inside_drop_kept():
        # The driver ran the destructor on the main thread itself (cuGraphDestroy there) and
        # CPython runs pending calls inside it: a free here would get
        # CUDA_ERROR_NOT_PERMITTED. Asked again, it runs once the driver has returned.
        if _add_pending_call(_drain, None) != 0:
            with _lock:
                _drain_queued = False
        return 0
    with _lock:
        batch = _released[:]
        _released.clear()
        _drain_queued = False
    del batch  # the finalizers run here, on the main thread
    return 0


def _inside_drop_kept() -> bool:
    """Whether this thread is inside :func:`_drop_kept`, which the driver called."""
    frame: Any = sys._getframe()
    while frame is not None:
        if frame.f_code is _DROP_KEPT_CODE:
            return True
        frame = frame.f_back
    return False


def _queue_drain() -> None:
    """Ask CPython to run :func:`_drain` on the main thread, unless asked already."""
    global _drain_queued, _refused
    with _lock:
        if _drain_queued or not _released:
            return
        _drain_queued = True
    if _add_pending_call(_drain, None) != 0:  # the queue is full: a later entry asks again
        with _lock:
            _drain_queued = False
            _refused += 1


def release_on_main_thread(obj: Any) -> None:
    """Drop ``obj`` (the Python references a collected graph held) on the main thread: at once
    when called there, else through the pending call."""
    if threading.get_ident() == _MAIN:
        return
    with _lock:
        _released.append(obj)
    _queue_drain()


_MAIN = threading.main_thread().ident


def _address(cfn: Any) -> int:
    return ctypes.cast(cfn, ctypes.c_void_p).value or 0


# The trampolines are immortal: the driver may call them until the process ends.
RUN_ONCE = _address(_run_once)
RUN_KEPT = _address(_run_kept)
DROP_KEPT = driver.CUhostFn(_address(_drop_kept))
_NO_SYNC = driver.CUuserObject_flags.CU_USER_OBJECT_NO_DESTRUCTOR_SYNC
_MOVE = driver.CUuserObjectRetain_flags.CU_GRAPH_USER_OBJECT_MOVE


def new_key() -> int:
    """A fresh table key (never reused in this process)."""
    return next(_keys)


def add_once(key: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    with _lock:
        _once[key] = (fn, args)


def pop_once(key: int) -> None:
    with _lock:
        _once.pop(key, None)


def keep_in_graph(graph: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[int, Any]:
    """Add a kept entry whose lifetime is the graph's; return ``(key, CUuserObject)``.

    The graph takes over the user object's only reference. More graphs (a graph that embeds a
    clone of this one) may retain the returned user object with :func:`retain_in_graph`; the
    entry is dropped when the last of them releases it.
    """
    key, obj = new_user_object(fn, args)
    handle_return(driver.cuGraphRetainUserObject(graph, obj, 1, _MOVE), "cuGraphRetainUserObject")
    return key, obj


def retain_in_graph(graph: Any, obj: Any) -> None:
    """Make ``graph`` hold one more reference to the user object ``obj``."""
    handle_return(driver.cuGraphRetainUserObject(graph, obj, 1, 0), "cuGraphRetainUserObject")


def pending_callbacks() -> tuple[int, int]:
    """``(one-shot entries waiting to run, entries held by graphs)``, for tests."""
    return len(_once), len(_kept)


def refused_drains() -> int:
    """How many times a hand-over to the main thread found CPython's pending-call queue full,
    for tests (a release counts once its attempt has ended, not when its entry leaves the table)."""
    return _refused


def new_user_object(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[int, Any]:
    """A kept entry and a user object whose one reference the caller owns (release it with
    ``cuUserObjectRelease``); the entry is dropped when the last reference goes."""
    if _released and not _drain_queued:
        _queue_drain()  # an earlier release found CPython's pending-call queue full
    key = new_key()
    with _lock:
        _kept[key] = (fn, args)
    try:
        obj = handle_return(
            driver.cuUserObjectCreate(key, DROP_KEPT, 1, _NO_SYNC), "cuUserObjectCreate"
        )
    except BaseException:
        with _lock:
            _kept.pop(key, None)
        raise
    return key, obj


def _check_copy_record(user_data: Any) -> None:
    """``HOST_COPY_FN`` reads a record: refuse ``user_data`` that cannot be one (ValueError)."""
    if isinstance(user_data, int) and not isinstance(user_data, bool):
        if user_data:
            return
    elif user_data is not None:
        try:
            size = memoryview(user_data).nbytes
        except TypeError:
            return  # not bytes-like: the general check below refuses it (TypeError)
        if size == HOST_COPY_RECORD_SIZE:
            return
    raise arg_error(
        "user_data",
        f"a record packed by pack_host_copy_args() ({HOST_COPY_RECORD_SIZE} bytes) or the "
        "address of one, for HOST_COPY_FN",
        user_data,
        "pack it with pack_host_copy_args(dst, src, nbytes)",
    )


def host_callback(fn: Any, user_data: Any) -> tuple[Callable[[], Any] | None, int, int, Any]:
    """Check a host callback as ``cuda.core`` 1.2 takes it (stream capture, graph host nodes).

    Returns ``(python callable or None, C function address, userData, object to retain)``:

    * a Python callable takes no arguments; ``user_data`` must be ``None`` (``ValueError``
      otherwise). The caller routes it through a trampoline and a table key.
    * a ctypes function pointer declared ``CFUNCTYPE(None, c_void_p)`` goes to the driver as is,
      with ``user_data`` an ``int`` address (the caller keeps it valid), or bytes-like data
      copied into a buffer that the returned object keeps alive (with the function pointer).
      :data:`HOST_COPY_FN` needs a packed record (bytes-like of :data:`HOST_COPY_RECORD_SIZE`
      bytes, or a non-zero address): ``ValueError`` otherwise.
    """
    if isinstance(fn, _CFuncPtr):
        restype = getattr(fn, "restype", None)
        argtypes = tuple(getattr(fn, "argtypes", None) or ())
        if restype is not None or argtypes != (ctypes.c_void_p,):
            raise arg_error(
                "fn",
                "a ctypes function pointer matching CUhostFn, void (*)(void*)",
                fn,
                f"{CUHOSTFN_HINT} (declared restype={restype!r}, argtypes={argtypes!r})",
                TypeError,
            )
        addr = _address(fn)
        if addr == backend.HOST_COPY_ADDRESS:
            _check_copy_record(user_data)
        if user_data is None:
            return None, addr, 0, fn
        if isinstance(user_data, int) and not isinstance(user_data, bool):
            return None, addr, user_data, fn
        try:
            data = bytes(memoryview(user_data).cast("B"))
        except TypeError:
            raise arg_error(
                "user_data", "None, an int address or a bytes-like object", user_data, exc=TypeError
            ) from None
        copy = ctypes.create_string_buffer(data, max(len(data), 1))
        return None, addr, ctypes.addressof(copy), (fn, copy)
    if not callable(fn):
        raise arg_error(
            "fn",
            "a callable or a ctypes CUhostFn function pointer",
            fn,
            exc=TypeError,
            lead=f"callback must be callable, got {type(fn).__name__}",
        )
    if user_data is not None:
        raise arg_error(
            "user_data",
            "None for a Python callable",
            user_data,
            "bind state with a closure or functools.partial",
            lead="host callback user_data is only supported with ctypes function pointers",
        )
    return fn, 0, 0, None
