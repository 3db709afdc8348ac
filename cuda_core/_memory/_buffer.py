"""Buffer: a span of memory from a memory resource, freed stream-ordered and exactly once."""

from __future__ import annotations

from typing import Any, Self

from .. import _links
from .._errors import CUDAError
from .._handles._backend import backend
from .._handles._tokens import LAST_TOKEN as _LAST_TOKEN
from .._stream_ops import (
    UserFree,
    closed_error,
    copy_between,
    fill,
    host_address,
    host_copy,
    host_copy_fast,
    is_pool_allocation,
    pool_allocation,
)
from .._utils import TypeValueError, arg_error
from .._utils._renamed import getter_method
from ._buffer_export import BufferExport, query_pointer_attrs
from ._copy import copy_with_options
from ._resource import MemoryResource, check_ptr, check_size

__all__ = ["Buffer"]

_new = object.__new__
_adopt = backend.Allocation.adopt


class Buffer(BufferExport):
    """A span of memory allocated by a :class:`MemoryResource` (or wrapped by :meth:`from_handle`).

    Obtain one from :meth:`MemoryResource.allocate`, :meth:`Device.allocate` or
    :meth:`Buffer.from_handle`. An owning buffer gives its memory back exactly once: on
    :meth:`close`, on leaving a ``with`` block, or when garbage-collected (also on another
    thread). The free is stream-ordered on the deallocation stream: the stream passed to
    :meth:`close`, else the one set by :meth:`set_deallocation_stream`, else the allocation
    stream. Work queued on that stream before the free may still use the memory safely.

    The buffer exports itself through DLPack as a 1-D ``uint8`` tensor and copies to and from
    other buffers and host objects (NumPy arrays, ``bytearray``). After :meth:`close`, as in
    ``cuda.core``: :attr:`handle` and :attr:`size` are ``0``, :attr:`memory_resource` and
    :attr:`owner` are ``None``, :attr:`is_mapped` is ``False``; any other use raises
    ``RuntimeError``.
    """

    __slots__ = ("__weakref__", "_attrs", "_h", "_mr", "_owner", "_ptr", "_size")

    # ``_ptr`` is the address while the buffer is open and ``None`` once it is closed: the
    # closed state itself, so that nothing (the kernel-argument packer included) can pass on
    # a freed address. ``_owner`` and ``_attrs`` are left unset until needed (fewer writes on
    # the allocation hot path): read them with getattr or via _pointer_attrs.
    _ptr: int | None
    _size: int
    _mr: MemoryResource | None
    _owner: Any
    _h: Any  # the handle layer's Allocation of an owning buffer (it frees the memory), else None
    _attrs: tuple[int, bool, bool, bool]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "Buffer objects cannot be instantiated directly. Use MemoryResource.allocate(), "
            "Device.allocate() or Buffer.from_handle()"
        )

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def _owned(cls, ptr: int, size: int, mr: MemoryResource, stream: Any, free: Any) -> Self:
        """An owning buffer (used by resources): pool memory freed with ``cuMemFreeAsync`` on
        ``stream`` (``free`` is ``None``), or memory freed by ``free(ptr, size, stream)``."""
        self = _new(cls)
        self._ptr = ptr
        self._size = size
        self._mr = mr
        if not ptr:  # zero-size: nothing to give back
            self._h = None
        elif free is None:
            self._h = pool_allocation(ptr, size, stream)
        else:
            self._h = _adopt(ptr, size, free, stream, None)
        return self

    @classmethod
    def from_handle(
        cls,
        ptr: Any,
        size: int,
        mr: MemoryResource | None = None,
        owner: object | None = None,
        *,
        stream: Any = None,
    ) -> Buffer:
        """Wrap memory that was allocated elsewhere.

        Parameters
        ----------
        ptr : int or cuda.bindings.driver.CUdeviceptr
            The address of the memory: an ``int``, a NumPy integer (any integer with
            ``__index__``, as ``cuda.core`` takes) or a ``CUdeviceptr``.
        size : int
            Its size in bytes (an ``int`` or a NumPy integer).
        mr : MemoryResource, optional
            The resource that owns the memory: the buffer frees it through
            ``mr.deallocate(ptr, size, stream=...)`` on close or collection (stream: the one
            given to :meth:`close` or :meth:`set_deallocation_stream`, else ``stream``, else
            ``None``, which the resource resolves to its default).
        owner : object, optional
            An object kept alive while the buffer is open; the memory is never freed by the
            buffer. Use it to view memory that another object owns.
        stream : Stream, optional
            Keyword-only. The deallocation stream when ``mr`` owns the memory (see
            :meth:`set_deallocation_stream`); checked but unused by a non-owning buffer.

        Returns
        -------
        Buffer

        Raises
        ------
        ValueError
            Both ``mr`` and ``owner`` are given.
        OverflowError
            ``ptr`` or ``size`` is negative or not below ``2**64`` (also a ``ValueError``).
        TypeError
            ``ptr``, ``size``, ``mr`` or ``stream`` has the wrong type.
        """
        if mr is not None and owner is not None:
            raise TypeValueError(  # a TypeError in cuda.core
                "owner and memory resource cannot be both specified together: mr frees the "
                "memory, owner only keeps an object alive"
            )
        ptr = check_ptr(ptr)
        size = check_size(size)
        if mr is not None and not isinstance(mr, MemoryResource):
            raise arg_error("mr", "a MemoryResource or None", mr, exc=TypeError)
        s = None if stream is None else _links.as_stream(stream)
        if mr is not None:
            return cls._owned(ptr, size, mr, s, UserFree(mr))
        self = _new(cls)
        self._ptr = ptr
        self._size = size
        self._mr = None
        self._owner = owner
        self._h = None
        return self

    # -- lifetime -----------------------------------------------------------------------------

    def close(self, stream: Any = None) -> None:
        """Free the memory, stream-ordered; idempotent.

        Parameters
        ----------
        stream : Stream, optional
            The stream the free is ordered on. ``None``: the deallocation stream (see
            :meth:`set_deallocation_stream`; by default the allocation stream). Work queued
            on that stream before this call may still use the memory.

        Raises
        ------
        TypeError
            ``stream`` is not a stream.
        CUDAError
            The driver failed to free the memory.

        Notes
        -----
        A buffer made by ``from_handle(..., owner=...)`` or without ``mr`` frees nothing; it
        drops its reference to ``owner``.
        """
        h = self._h
        if stream is None and h is not None:  # the common case: an open owning buffer
            self._h = None
            self._ptr = None
            self._mr = None  # as cuda.core: a closed buffer reports no memory resource
            h.close()
            return
        if self._ptr is None:
            return
        if stream is not None and type(stream) is not _links.Stream:
            stream = _links.as_stream(stream)
        self._ptr = None
        self._mr = None  # as cuda.core: a closed buffer reports no memory resource
        if h is None:  # non-owning (or zero-size): nothing to free
            self._owner = None
            return
        self._h = None
        if stream is None:
            h.close()
        else:
            h.close(stream._h if is_pool_allocation(h) else stream)

    def set_deallocation_stream(self, stream: Any) -> None:
        """Order the eventual free (by :meth:`close` or collection) on ``stream``.

        Parameters
        ----------
        stream : Stream
            The new deallocation stream.

        Raises
        ------
        TypeError
            ``stream`` is not a stream.
        RuntimeError
            The buffer is closed.
        """
        if self._ptr is None:
            raise closed_error()
        s = _links.as_stream(stream)
        h = self._h
        if h is not None:
            h.set_stream(s._h if is_pool_allocation(h) else s)

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._ptr is None

    def __enter__(self) -> Buffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        # A buffer of an IPC-enabled pool (or of a mapping of one) travels as (its resource, its
        # descriptor): the receiving process maps the pool once (registered by uuid) and the
        # buffer in it. Unpickling maps memory: unpickle buffers from trusted peers only.
        return _links.ipc.reduce_buffer(self)  # type: ignore[no-any-return]

    # -- facts --------------------------------------------------------------------------------

    @property
    def handle(self) -> int:
        """The address of the memory (an ``int``); ``0`` once closed, as in ``cuda.core``."""
        ptr = self._ptr
        if ptr is None:
            return 0
        return ptr

    @property
    def size(self) -> int:
        """The size in bytes; ``0`` once closed, as in ``cuda.core``."""
        if self._ptr is None:
            return 0
        return self._size

    @property
    def memory_resource(self) -> MemoryResource | None:
        """The resource that owns the memory (``None`` for a non-owning buffer)."""
        return self._mr

    @property
    def owner(self) -> object | None:
        """The object kept alive by :meth:`from_handle` (``None`` otherwise or after close)."""
        return getattr(self, "_owner", None)

    @property
    def is_mapped(self) -> bool:
        """Whether the memory was mapped in from another process (:meth:`from_ipc_descriptor`)."""
        return getattr(self._mr, "_mapped", False) is True  # only pool resources map memory

    def _pointer_attrs(self) -> tuple[int, bool, bool, bool]:
        # (device_id, device accessible, host accessible, managed), cached: from the resource,
        # or, for memory without one, from the driver's pointer attributes.
        try:
            return self._attrs
        except AttributeError:
            pass
        ptr = self._ptr
        if ptr is None:
            raise closed_error()
        mr = self._mr
        if mr is not None:
            attrs = (mr.device_id, mr.is_device_accessible, mr.is_host_accessible, mr.is_managed)
        else:
            attrs = query_pointer_attrs(ptr)
        self._attrs = attrs
        return attrs

    @property
    def device_id(self) -> int:
        """The ordinal of the device the memory is on; ``-1`` for host memory."""
        if self._ptr is None:
            raise closed_error()
        mr = self._mr
        if mr is not None:
            return mr.device_id
        return self._pointer_attrs()[0]

    @property
    def is_device_accessible(self) -> bool:
        """Whether a kernel can access the memory."""
        if self._ptr is None:
            raise closed_error()
        mr = self._mr
        if mr is not None:
            return mr.is_device_accessible
        return self._pointer_attrs()[1]

    @property
    def is_host_accessible(self) -> bool:
        """Whether the host (CPU) can access the memory."""
        if self._ptr is None:
            raise closed_error()
        mr = self._mr
        if mr is not None:
            return mr.is_host_accessible
        return self._pointer_attrs()[2]

    @property
    def is_managed(self) -> bool:
        """Whether the memory is CUDA managed (unified) memory."""
        if self._ptr is None:
            raise closed_error()
        mr = self._mr
        if mr is not None:
            return mr.is_managed
        return self._pointer_attrs()[3]

    def __eq__(self, other: object) -> bool:
        # cuda.core 1.2: buffers are equal when their address and size are (a closed one is
        # (0, 0)); the hash follows, so it changes when the buffer is closed.
        if not isinstance(other, Buffer):
            return NotImplemented
        return self.handle == other.handle and self.size == other.size

    def __hash__(self) -> int:
        return hash((self.handle, self.size))

    def __repr__(self) -> str:
        ptr = self._ptr
        if ptr is None:
            return "<Buffer ptr=0x0 size=0>"  # cuda.core's repr of a closed buffer
        return f"<Buffer ptr=0x{ptr:x} size={self._size}>"

    # -- copies and fill ------------------------------------------------------------------------

    def copy_to(self, dst: Any = None, *, stream: Any, options: Any = None) -> Any:
        """Copy this buffer's bytes into ``dst``, ordered on ``stream``.

        Parameters
        ----------
        dst : Buffer or host object, optional
            A :class:`Buffer` of the same size, or a writable C-contiguous host object with
            the buffer protocol (NumPy array, ``bytearray``) of the same number of bytes.
            ``None``: a new buffer is allocated from this buffer's memory resource on
            ``stream``.
        stream : Stream
            Keyword-only. The stream the copy is ordered on.
        options : CopyOptions, optional
            Keyword-only. Transfer hints (:class:`~cuda_core.utils.CopyOptions`), for a copy
            between buffers; queued with ``cuMemcpyBatchAsync``, which refuses the legacy
            default stream and capturing streams (``TypeError``).

        Returns
        -------
        Buffer or host object
            ``dst`` (or the new buffer).

        Raises
        ------
        ValueError
            The sizes differ, or the host object is read-only or not contiguous.
        TypeError
            ``stream`` is not a stream, or ``dst`` is neither a Buffer nor a host buffer.
        RuntimeError
            Either buffer is closed.

        Notes
        -----
        A copy between buffers is asynchronous. A copy into a host object is complete when
        the call returns: the stream is synchronised (pageable memory must not be read before
        the copy lands).
        """
        ptr = self._ptr
        if ptr is None:
            raise closed_error()
        s = stream if type(stream) is _links.Stream else _links.as_stream(stream)
        if dst is None:
            if self._mr is None:
                raise ValueError(
                    "a destination buffer must be provided (this buffer does not have a "
                    "memory_resource): dst must be given, there is no memory resource to "
                    "allocate a copy from"
                )
            dst = self._mr.allocate(self._size, stream=s)
        if options is not None:
            copy_with_options(dst, self, s, options, "Buffer.copy_to")
            return dst
        tried = False
        if (
            dst.__class__ is Buffer
            and dst._size == self._size
            and dst._ptr is not None
            and s._h.address > _LAST_TOKEN
            and self._size
        ):
            # The common case in one call: a real stream carries its context.
            try:
                s._h.memcpy(dst._ptr, ptr, self._size)
                return dst
            except CUDAError:
                tried = True  # a peer copy, or an error reported with the stream's context current
        if isinstance(dst, Buffer):
            return copy_between(dst, self, s, tried)
        addr, n, keep = host_address(dst, "dst", True)
        if n != self._size:
            raise ValueError(
                f"dst must have the size of the source ({self._size} bytes) (got {n} bytes)"
            )
        if n and not host_copy_fast(addr, ptr, n, s):
            host_copy(self._pointer_attrs()[2], True, addr, ptr, n, s)
        del keep
        return dst

    def copy_from(self, src: Any, *, stream: Any, options: Any = None) -> None:
        """Copy ``src``'s bytes into this buffer, ordered on ``stream``.

        Parameters
        ----------
        src : Buffer or host object
            A :class:`Buffer` of the same size, or a C-contiguous host object with the buffer
            protocol (NumPy array, ``bytes``, ``bytearray``) of the same number of bytes.
        stream : Stream
            Keyword-only. The stream the copy is ordered on.
        options : CopyOptions, optional
            Keyword-only. Transfer hints, as in :meth:`copy_to`.

        Raises
        ------
        ValueError
            The sizes differ, or the host object is not contiguous.
        TypeError
            ``stream`` is not a stream, or ``src`` is neither a Buffer nor a host buffer.
        RuntimeError
            Either buffer is closed.

        Notes
        -----
        A copy from a buffer is asynchronous. A copy from a host object is complete when the
        call returns (the stream is synchronised), so the host object may be changed or freed
        right away.
        """
        ptr = self._ptr
        if ptr is None:
            raise closed_error()
        s = stream if type(stream) is _links.Stream else _links.as_stream(stream)
        if options is not None:
            copy_with_options(self, src, s, options, "Buffer.copy_from")
            return
        tried = False
        if (
            src.__class__ is Buffer
            and src._size == self._size
            and src._ptr is not None
            and s._h.address > _LAST_TOKEN
            and self._size
        ):
            # The common case in one call: a real stream carries its context.
            try:
                s._h.memcpy(ptr, src._ptr, self._size)
                return
            except CUDAError:
                tried = True  # a peer copy, or an error reported with the stream's context current
        if isinstance(src, Buffer):
            copy_between(self, src, s, tried)
            return
        addr, n, keep = host_address(src, "src", False)
        if n != self._size:
            raise ValueError(
                f"src must have the size of the destination ({self._size} bytes) (got {n} bytes)"
            )
        if n and not host_copy_fast(ptr, addr, n, s):
            host_copy(self._pointer_attrs()[2], False, ptr, addr, n, s)
        del keep

    def fill(self, value: Any, *, stream: Any) -> None:
        """Fill the buffer with a repeated 1-, 2- or 4-byte pattern, ordered on ``stream``.

        Parameters
        ----------
        value : int or buffer-protocol object
            An ``int`` in ``[0, 256)`` (a byte), or an object of 1, 2 or 4 bytes (``bytes``,
            ``numpy.uint16(7)``, ``numpy.float32(1.0)``, ...) whose bytes are repeated.
        stream : Stream
            Keyword-only. The stream the fill is ordered on.

        Raises
        ------
        ValueError
            The value is out of range, the pattern is not 1, 2 or 4 bytes, or the buffer's
            size is not a multiple of the pattern's.
        TypeError
            ``value`` or ``stream`` has the wrong type.
        RuntimeError
            The buffer is closed.
        """
        ptr = self._ptr
        if ptr is None:
            raise closed_error()
        fill(
            ptr,
            self._size,
            value,
            stream if type(stream) is _links.Stream else _links.as_stream(stream),
        )

    def prefetch(self, location: Any, *, stream: Any) -> None:
        """Migrate managed memory to a device or to the host ahead of use (``cuMemPrefetchAsync``).

        Parameters
        ----------
        location : Device, int or "host"
            The target device (or ordinal), or ``"host"`` / ``-1`` for host memory.
        stream : Stream
            Keyword-only. The stream the prefetch is ordered on.

        Raises
        ------
        ValueError
            The buffer is not managed memory.
        TypeError
            Bad ``location`` or ``stream``.
        RuntimeError
            The buffer is closed.
        """
        _links.prefetch(self, location, stream)

    # -- IPC --------------------------------------------------------------------------------------

    @property
    def ipc_descriptor(self) -> Any:
        """Describe this buffer for another process (its resource must be IPC-enabled).

        Returns
        -------
        IPCBufferDescriptor
            A small picklable object; pass it with the resource's allocation handle to
            :meth:`Buffer.from_ipc_descriptor` in the other process. A mapped buffer returns
            the descriptor it was mapped from.

        Raises
        ------
        RuntimeError
            The buffer is closed, or its resource is not an IPC-enabled pool.
        """
        return _links.ipc.export_buffer(self)  # type: ignore[no-any-return]

    get_ipc_descriptor = getter_method(
        "Buffer", "get_ipc_descriptor", "ipc_descriptor"
    )  # before cuda.core 1.0

    @classmethod
    def from_ipc_descriptor(cls, mr: Any, ipc_descriptor: Any, stream: Any = None) -> Buffer:
        """Map a buffer that another process shared.

        Parameters
        ----------
        mr : DeviceMemoryResource
            The resource made by :meth:`DeviceMemoryResource.from_allocation_handle` from the
            exporting pool's allocation handle.
        ipc_descriptor : IPCBufferDescriptor
            From :attr:`ipc_descriptor` in the exporting process. Its bytes come from that
            process: map descriptors from trusted peers only.
        stream : Stream, optional
            The deallocation stream of the mapping (``None``: the device's default stream);
            positional or keyword (``cuda.core`` 1.2 takes it as a keyword).

        Returns
        -------
        Buffer
            Owning the mapping: closing it unmaps the memory in this process (the exporter
            must not free the memory before every importer has closed its buffer).

        Raises
        ------
        TypeError
            Wrong argument types, or ``mr`` is not a mapped resource.
        ValueError
            The descriptor's size exceeds the allocation it names (nothing stays mapped).
        CUDAError
            The driver could not import the pointer (a descriptor of another pool).
        """
        return _links.ipc.import_buffer(mr, ipc_descriptor, stream)  # type: ignore[no-any-return]


_links.Buffer = Buffer  # buffers pass as kernel arguments (their pointer)
