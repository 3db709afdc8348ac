"""The handle layer's method entries, in code: C callables that replace a Python function.

Part of the protocol (:mod:`cuda_core._handles._protocol` re-exports each class and lists them
on ``NativeBackend``; a change bumps ``ABI_VERSION`` there). Only the native backend has them
(``_csrc/entry*.c``). Each runs the common case of one Python function in C and hands every
other call, with the same arguments, to that function (its ``fallback``), which owns the
checks, the slow paths and the messages: the two give the same results and errors. Each reads
the slots of the objects it is called with only through the member descriptors it was given,
and has a ``__dict__`` (for ``functools.update_wrapper``). The method entries are method
descriptors, as Python functions are (``obj.method(...)`` makes no bound method);
:mod:`cuda_core._handles._method_entries` installs them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__: list[str] = []  # private module


class ViewEntry(Protocol):
    """``from_dlpack(cls, obj, stream_ptr)`` in C: where ``stream_ptr`` is an ``int`` and
    ``kinds`` (a dict of producer type -> kind) gives ``dlpack_kind`` for ``type(obj)``, it
    returns :meth:`Backend.dlpack_view`'s view; for ``torch_kind``, :meth:`Backend.torch_view`'s
    view where that reader does not decline; anything else goes to ``fallback`` with the same
    arguments. It has a ``__dict__`` (for ``functools.update_wrapper``)."""

    def __init__(
        self,
        fallback: Callable[..., Any],
        kinds: dict[type, int],
        dlpack_kind: int,
        torch_kind: int,
        /,
    ) -> None: ...

    def __call__(self, cls: type, obj: Any, stream_ptr: Any = None, /) -> Any: ...


class ClassMethod(Protocol):
    """A ``classmethod`` subclass, for the hot class methods (``from_dlpack``): read from a
    class (or an instance, as its class), it gives ``func`` bound to that class, keeping the
    method it made for the last class and giving it again (``classmethod`` makes and frees one
    per read; a bound method never changes). Everything else is ``classmethod``'s
    (``__func__``, ``__wrapped__``, ``__doc__``); ``func`` must be callable."""

    def __init__(self, func: Callable[..., Any], /) -> None: ...

    @property
    def __func__(self) -> Callable[..., Any]: ...

    def __get__(self, obj: Any, cls: type | None = None, /) -> Callable[..., Any]: ...


class RecordEntry(Protocol):
    """``Stream.record`` in C, an instance method (a method descriptor, as a function is):
    ``stream.record(event)`` with ``stream`` of exactly ``stream_type`` and ``event`` of exactly
    ``event_type`` whose flags (``flags_slot``) hold no bit of ``refused`` records the event's
    handle (``event_slot``) on the stream's (``stream_slot``) and returns the event; anything
    else goes to ``fallback`` with the same arguments. It has a ``__dict__``."""

    def __init__(
        self,
        fallback: Callable[..., Any],
        stream_type: type,
        stream_slot: Any,
        event_type: type,
        event_slot: Any,
        flags_slot: Any,
        refused: int,
        /,
    ) -> None: ...

    def __call__(self, stream: Any, event: Any = None, options: Any = None, /) -> Any: ...


class SyncEntry(Protocol):
    """``Stream.sync`` in C, an instance method, as RecordEntry: ``stream.sync()``, with
    ``stream`` of exactly ``stream_type`` whose ``stream_slot`` holds a
    :class:`~cuda_core._handles._protocol.StreamHandle`, is that handle's ``sync()``; anything
    else goes to ``fallback`` with the same arguments."""

    def __init__(
        self, fallback: Callable[..., Any], stream_type: type, stream_slot: Any, /
    ) -> None: ...

    def __call__(self, stream: Any, /, *args: Any, **kwargs: Any) -> Any: ...


class CopyEntry(Protocol):
    """``Buffer.copy_from`` (``copy_to`` if ``to``) in C, an instance method, as RecordEntry:
    ``buf.copy_from(other, stream=s)``, both buffers of exactly ``buffer_type``, open and of one
    size above zero, on an open stream of its own, queues ``cuMemcpyAsync``; anything else, and
    a copy the driver refuses, goes to ``fallback`` with the same arguments."""

    def __init__(
        self,
        fallback: Callable[..., Any],
        buffer_type: type,
        ptr_slot: Any,
        size_slot: Any,
        stream_type: type,
        stream_slot: Any,
        to: bool,
        /,
    ) -> None: ...

    def __call__(self, buf: Any, other: Any = None, /, **kwargs: Any) -> Any: ...


class AllocEntry(Protocol):
    """``DeviceMemoryResource.allocate`` in C, an instance method, as RecordEntry:
    ``mr.allocate(size, stream=s)``, with ``mr`` of exactly ``resource_type`` whose
    ``pool_slot`` holds a nonzero pool address, ``size`` an ``int`` above zero and ``s`` of
    exactly ``stream_type`` whose handle (``stream_slot``) is open and knows its context,
    allocates from the pool on ``s`` and returns a new ``buffer_type`` holding the
    :class:`~cuda_core._handles._protocol.Allocation`, its address, ``size`` and ``mr`` in
    ``h_slot``, ``ptr_slot``, ``size_slot`` and ``mr_slot``; anything else, and an allocation
    the driver refuses, goes to ``fallback`` with the same arguments."""

    def __init__(
        self,
        fallback: Callable[..., Any],
        resource_type: type,
        pool_slot: Any,
        stream_type: type,
        stream_slot: Any,
        buffer_type: type,
        h_slot: Any,
        ptr_slot: Any,
        size_slot: Any,
        mr_slot: Any,
        /,
    ) -> None: ...

    def __call__(self, mr: Any, size: Any = None, /, **kwargs: Any) -> Any: ...


class CloseEntry(Protocol):
    """``Buffer.close`` in C, an instance method: ``buf.close()``, with ``buf`` of exactly
    ``buffer_type`` whose ``h_slot`` holds an
    :class:`~cuda_core._handles._protocol.Allocation`, sets ``h_slot``, ``ptr_slot`` and
    ``mr_slot`` to ``None``, then closes the allocation (its error, if any, propagates); anything
    else goes to ``fallback`` with the same arguments."""

    def __init__(
        self,
        fallback: Callable[..., Any],
        buffer_type: type,
        h_slot: Any,
        ptr_slot: Any,
        mr_slot: Any,
        /,
    ) -> None: ...

    def __call__(self, buf: Any, /, *args: Any, **kwargs: Any) -> Any: ...
