"""Where the native backend's method entries replace Python methods: one place, run once.

A method entry (:mod:`cuda_core._handles._protocol_entries`, ``_csrc/entry*.c``) runs the
common case of one method in C and hands every other call to the Python function it replaces.
:func:`install` puts them on their classes. The package ``__init__`` calls it once every module
is loaded, so that each class an entry reads (a stream's, an event's, a buffer's, a resource's)
is complete, and no module patches a class of another. On the pure backend it does nothing.
"""

from __future__ import annotations

import functools
from typing import Any

from .._compat import driver
from ._backend import backend

__all__: list[str] = []  # private module

_INTERPROCESS = int(driver.CUevent_flags.CU_EVENT_INTERPROCESS)


def _replace(cls: type, name: str, make: Any) -> None:
    """``cls.name`` becomes ``make(python_function)``, wrapped to look like that function
    (name, docstring, ``__wrapped__``: what ``help()`` and Sphinx read)."""
    python = cls.__dict__.get(name)
    if python is None:  # inherited: the entry's fallback is the function the class inherits
        python = getattr(cls, name)
    setattr(cls, name, functools.update_wrapper(make(python), python))


def _slot(cls: type, name: str) -> Any:
    """The member descriptor of slot ``name`` of ``cls``, from the class that declares it."""
    return next(c.__dict__[name] for c in cls.__mro__ if name in c.__dict__)


def install(*, Stream: type, Event: type, Buffer: type, DeviceMemoryResource: type) -> None:
    """Install the method entries on these classes (the native backend only)."""
    if not hasattr(backend, "RecordEntry"):
        return
    nb: Any = backend
    stream_h = _slot(Stream, "_h")
    ev_h, ev_flags = _slot(Event, "_h"), _slot(Event, "_flags")
    buf_h, ptr, size, mr = (_slot(Buffer, n) for n in ("_h", "_ptr", "_size", "_mr"))
    pool = _slot(DeviceMemoryResource, "_alloc_pool")

    def record(py: Any) -> Any:  # of an Event of the exact class, not IPC
        return nb.RecordEntry(py, Stream, stream_h, Event, ev_h, ev_flags, _INTERPROCESS)

    def copy(to: bool) -> Any:  # between two open buffers on a stream of its own
        return lambda py: nb.CopyEntry(py, Buffer, ptr, size, Stream, stream_h, to)

    def allocate(py: Any) -> Any:  # allocate(size, stream=s) from the resource's pool
        return nb.AllocEntry(
            py, DeviceMemoryResource, pool, Stream, stream_h, Buffer, buf_h, ptr, size, mr
        )

    def close(py: Any) -> Any:  # close() of a buffer that owns a pool allocation
        return nb.CloseEntry(py, Buffer, buf_h, ptr, mr)

    _replace(Stream, "record", record)
    _replace(Stream, "sync", lambda py: nb.SyncEntry(py, Stream, stream_h))
    _replace(Buffer, "copy_from", copy(False))
    _replace(Buffer, "copy_to", copy(True))
    _replace(DeviceMemoryResource, "allocate", allocate)
    _replace(Buffer, "close", close)
