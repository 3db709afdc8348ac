"""Sharing pool memory between processes: allocation handles (fds), buffer descriptors, mapping
an exported pool and its buffers, and how resources and buffers pickle."""

from __future__ import annotations

import ctypes
import os
import threading
import uuid as uuid_mod
import weakref
from typing import Any

from .. import _links
from .._compat import driver
from .._errors import CUDAError
from .._handles._contexts import in_context
from .._handles._driver import ensure_driver
from .._handles._owned import OwnedHandle
from .._handles._tokens import LAST_TOKEN as _LAST_TOKEN
from .._stream_ops import closed_error, stream_context
from .._utils import arg_error, handle_return
from . import _ipc_registry as registry
from ._buffer import Buffer
from ._pool import _PoolResource, set_access

__all__ = ["IPCAllocationHandle", "IPCBufferDescriptor"]

_POSIX_FD = driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_EXPORT_BYTES = 64  # sizeof(CUmemPoolPtrExportData)
_PA = driver.CUpointer_attribute


class IPCAllocationHandle:
    """A memory pool's shareable handle: a POSIX file descriptor this object owns.

    Get one from :attr:`DeviceMemoryResource.allocation_handle`; give it to another process
    through ``multiprocessing`` (a ``Process`` argument, a ``Queue`` or a ``Pipe``: the
    descriptor is duplicated into the receiver, as for a socket) or send :attr:`handle` yourself
    (``multiprocessing.reduction.send_handle``) and wrap it there with :meth:`from_fd`. Plain
    :mod:`pickle` refuses it (a file descriptor means nothing in another process).
    ``close()`` closes the descriptor; so does garbage collection.
    """

    __slots__ = ("__weakref__", "_fd", "_fd_h", "_uuid")

    _fd: int
    _fd_h: OwnedHandle  # owns the descriptor (closed once: close() or collection)
    _uuid: uuid_mod.UUID | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "use DeviceMemoryResource.allocation_handle or IPCAllocationHandle.from_fd()"
        )

    @classmethod
    def from_fd(cls, fd: int) -> IPCAllocationHandle:
        """Take ownership of a file descriptor.

        Parameters
        ----------
        fd : int
            An open file descriptor of an exported pool.

        Returns
        -------
        IPCAllocationHandle

        Raises
        ------
        TypeError, ValueError
            ``fd`` is not a non-negative int.
        """
        if isinstance(fd, bool) or not isinstance(fd, int):
            raise arg_error("fd", "an int file descriptor", fd, exc=TypeError)
        if fd < 0:
            raise arg_error("fd", "a non-negative file descriptor", fd)
        self = object.__new__(cls)
        self._fd = fd
        self._fd_h = OwnedHandle("ipc file descriptor", fd, os.close)
        self._uuid = None
        return self

    @property
    def uuid(self) -> uuid_mod.UUID | None:
        """The :attr:`~DeviceMemoryResource.uuid` of the resource whose pool this handle exports
        (``None`` for a handle wrapped with :meth:`from_fd`)."""
        return self._uuid

    @property
    def handle(self) -> int:
        """The file descriptor; ``-1`` once closed, as in ``cuda.core``."""
        return self._fd

    def _live_fd(self) -> int:
        if self._fd < 0:
            raise RuntimeError("IPCAllocationHandle has been closed")
        return self._fd

    def __int__(self) -> int:
        if self._fd < 0:
            raise ValueError("IPCAllocationHandle has been closed; it has no file descriptor")
        return self._fd

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._fd < 0

    def close(self) -> None:
        """Close the file descriptor; idempotent."""
        if self._fd >= 0:
            self._fd = -1
            self._fd_h.release()

    def __enter__(self) -> IPCAllocationHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError(
            "an IPCAllocationHandle (a file descriptor) pickles only through multiprocessing "
            "(a Process argument, a Queue or a Pipe), which duplicates the descriptor into the "
            "receiver; otherwise send .handle with multiprocessing.reduction.send_handle()"
        )

    def __repr__(self) -> str:
        return f"<IPCAllocationHandle fd={self._fd}>"


def rebuild_allocation_handle(dup: Any, uuid: uuid_mod.UUID | None) -> IPCAllocationHandle:
    """Unpickle an allocation handle sent through multiprocessing (``dup``: its ``DupFd``)."""
    h = IPCAllocationHandle.from_fd(dup.detach())
    h._uuid = uuid
    return h


class IPCBufferDescriptor:
    """A picklable description of one buffer of an IPC-enabled pool (64 opaque bytes + size).

    From :attr:`Buffer.ipc_descriptor`; mapped in another process by
    :meth:`Buffer.from_ipc_descriptor`. It carries no file descriptor and pickles anywhere.
    Its bytes come from the exporting process: map descriptors from trusted peers only (a
    ``size`` larger than the allocation it names is refused).
    """

    __slots__ = ("_payload", "_size")

    def __init__(self, payload: bytes, size: int) -> None:
        if not isinstance(payload, bytes) or len(payload) != _EXPORT_BYTES:
            raise arg_error("payload", f"{_EXPORT_BYTES} bytes", payload, exc=TypeError)
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise arg_error("size", "a non-negative int", size, exc=TypeError)
        self._payload = payload
        self._size = size

    @property
    def payload(self) -> bytes:
        """The driver's export data (``CUmemPoolPtrExportData``)."""
        return self._payload

    @property
    def size(self) -> int:
        """The buffer's size in bytes."""
        return self._size

    def __reduce__(self) -> Any:
        return (IPCBufferDescriptor, (self._payload, self._size))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IPCBufferDescriptor) and (self._payload, self._size) == (
            other._payload,
            other._size,
        )

    def __hash__(self) -> int:
        return hash((self._payload, self._size))

    def __repr__(self) -> str:
        return f"<IPCBufferDescriptor size={self._size}>"


# -- pools --------------------------------------------------------------------------------------


def export_pool(mr: Any) -> IPCAllocationHandle:
    """``mr.allocation_handle``: the exporter's handle (made once), or the one a mapping keeps."""
    mr._live_pool()
    if not mr._ipc_enabled:
        raise RuntimeError(
            "the memory resource is not IPC-enabled; create it with "
            f"{type(mr).__name__}Options(ipc_enabled=True)"
        )
    h = mr._alloc_handle
    if mr._mapped:
        if h is None or h.is_closed:
            raise RuntimeError(
                "the mapped memory resource's allocation handle was closed; it cannot be shared on"
            )
        return h  # type: ignore[no-any-return]
    if h is None or h.is_closed:
        fd = handle_return(
            driver.cuMemPoolExportToShareableHandle(mr._pool, _POSIX_FD, 0),
            "cuMemPoolExportToShareableHandle",
        )
        h = IPCAllocationHandle.from_fd(int(fd))
        h._uuid = mr._uuid
        mr._alloc_handle = h
    return h  # type: ignore[no-any-return]


def import_pool(cls: Any, device: Any, alloc_handle: Any) -> Any:
    """``cls.from_allocation_handle``: the resource registered under the handle's uuid, else a
    new mapping of the pool (``device``: the Device of a device pool, ``None`` for a host pool),
    registered under that uuid. The mapping keeps its own duplicate of the descriptor."""
    if isinstance(alloc_handle, IPCAllocationHandle):
        fd = alloc_handle._live_fd()
        key = alloc_handle.uuid
    elif isinstance(alloc_handle, int) and not isinstance(alloc_handle, bool) and alloc_handle >= 0:
        fd, key = alloc_handle, None
    else:
        raise arg_error(
            "alloc_handle",
            "an IPCAllocationHandle or a file descriptor",
            alloc_handle,
            exc=TypeError,
        )
    found = registry.find(key) if key is not None else None
    if found is not None:
        if not isinstance(found, cls):  # a TypeError in cuda.core, as here
            raise TypeError(
                f"Cannot convert {type(found).__name__} to {cls.__name__}: the pool of this "
                f"allocation handle is mapped in this process as a {type(found).__name__} "
                f"(use {type(found).__name__}.from_allocation_handle)"
            )
        return registry.find_registered(cls, key)
    ensure_driver()
    Device = _links.Device

    # In the device's primary context (it may not be current yet: a resource is unpickled
    # before the receiving code runs); a host pool uses the current device's.
    scope_dev = Device() if device is None else device
    scope_dev._primary_ctx()
    own = IPCAllocationHandle.from_fd(os.dup(fd))
    own._uuid = key
    try:
        with scope_dev._scope():
            pool = handle_return(
                driver.cuMemPoolImportFromShareableHandle(fd, _POSIX_FD, 0),
                "cuMemPoolImportFromShareableHandle",
            )
    except BaseException:
        own.close()
        raise
    mr = object.__new__(cls)
    if device is None:  # a host (pinned) pool: every device of this process may need access
        mr._numa_id = -1
        mr._init_pool(pool, True, -1, ipc=True, mapped=True)
        devices = list(range(handle_return(driver.cuDeviceGetCount(), "cuDeviceGetCount")))
    else:
        mr._init_pool(pool, True, device._id, ipc=True, mapped=True)
        devices = [device._id]
    mr._alloc_handle = own
    try:  # an imported pool may need access granted for this process's devices
        set_access(pool, devices)
    except CUDAError:
        pass  # the owning device always has access; nothing to grant
    if key is None:
        return mr
    found = registry.register(mr, key)
    if found is not mr:  # another thread mapped the same pool meanwhile
        mr.close()
    return found


# -- buffers ------------------------------------------------------------------------------------

# The descriptor each mapped buffer was imported from (what its ipc_descriptor returns, so that
# a mapped buffer can be passed on).
_imported: weakref.WeakKeyDictionary[Buffer, IPCBufferDescriptor] = weakref.WeakKeyDictionary()


def export_buffer(buf: Buffer) -> IPCBufferDescriptor:
    """``buf.ipc_descriptor``: its export data, or the descriptor a mapped buffer came from."""
    if buf._ptr is None:
        raise closed_error()
    mr = buf._mr
    if mr is None or not getattr(mr, "_ipc_enabled", False):
        raise RuntimeError(
            "only buffers allocated from an IPC-enabled DeviceMemoryResource or PinnedMemoryResource "
            "can be shared (options with ipc_enabled=True)"
        )
    if mr._mapped:  # type: ignore[attr-defined]
        desc = _imported.get(buf)
        if desc is None:
            raise RuntimeError(
                "this buffer of a mapped resource was not mapped from a descriptor; it cannot be shared on"
            )
        return desc
    data = handle_return(driver.cuMemPoolExportPointer(buf._ptr), "cuMemPoolExportPointer")
    return IPCBufferDescriptor(ctypes.string_at(data.getPtr(), _EXPORT_BYTES), buf._size)


class _SharedImport:
    """The free function of the buffers that map one imported pointer: the pointer is freed
    (``cuMemFreeAsync``, on the closing buffer's stream) when the last of them closes. The
    driver maps a pointer once per process (a second ``cuMemPoolImportPointer`` of it fails or
    returns the same address), so importing one descriptor twice shares the mapping, as in
    ``cuda.core``."""

    __slots__ = ("__weakref__", "count", "ctx", "key", "ptr")

    def __init__(self, key: tuple[int, bytes], ptr: int, ctx: Any) -> None:
        self.key = key  # (pool, the export data of the descriptor it was imported from)
        self.ptr = ptr
        self.ctx = ctx  # the context it was imported in
        self.count = 1

    def __call__(self, ptr: int, size: int, stream: Any) -> None:
        with _imports_lock:
            self.count -= 1
            if self.count:
                return
            if _imports.get(self.key) is self:
                del _imports[self.key]
        # A default-stream token means "the current context's": the import's context then.
        token = stream is None or stream._h.address <= _LAST_TOKEN
        ctx = self.ctx if token else stream_context(stream)
        h = driver.CUstream(0) if stream is None else stream.handle
        handle_return(in_context(ctx, driver.cuMemFreeAsync, ptr, h), "cuMemFreeAsync")


_imports: dict[tuple[int, bytes], _SharedImport] = {}  # (pool, export data) -> live mapping
_imports_lock = threading.Lock()


def import_buffer(mr: Any, desc: Any, stream: Any) -> Buffer:
    """``Buffer.from_ipc_descriptor``: map the buffer, owned by the returned Buffer."""
    if not isinstance(
        desc, IPCBufferDescriptor
    ):  # first, in cuda.core's words (its argument check)
        raise TypeError(
            f"Argument 'ipc_descriptor' has incorrect type (expected IPCBufferDescriptor, got "
            f"{type(desc).__name__}); get one from Buffer.ipc_descriptor in the exporting process"
        )
    if not isinstance(mr, _PoolResource) or not mr.is_mapped:
        raise arg_error(
            "mr",
            "a mapped resource (from DeviceMemoryResource/PinnedMemoryResource.from_allocation_handle())",
            mr,
            exc=TypeError,
        )
    pool = mr._live_pool()
    s = mr._default_stream() if stream is None else _links.as_stream(stream)
    data = driver.CUmemPoolPtrExportData()
    ctypes.memmove(data.getPtr(), desc.payload, _EXPORT_BYTES)
    ctx = stream_context(s)
    with _imports_lock:
        shared = _imports.get((int(pool), desc.payload))
        if shared is not None:
            shared.count += 1
    if shared is not None:
        return Buffer._owned(shared.ptr, desc.size, mr, s, shared)
    ptr = int(
        handle_return(
            in_context(ctx, driver.cuMemPoolImportPointer, pool, data), "cuMemPoolImportPointer"
        )
    )
    shared = _SharedImport((int(pool), desc.payload), ptr, ctx)
    with _imports_lock:
        _imports[shared.key] = shared
    buf = Buffer._owned(ptr, desc.size, mr, s, shared)
    try:
        available = _extent(ptr, ctx)
        if available is not None and desc.size > available:
            raise arg_error(
                "ipc_descriptor.size",
                f"at most the mapped allocation extent ({available} bytes)",
                desc.size,
                "the descriptor's size exceeds the allocation it names",
            )
    except BaseException:
        buf.close()  # unmap what was mapped
        raise
    _imported[buf] = desc
    return buf


def _extent(ptr: int, ctx: Any) -> int | None:
    """Bytes from ``ptr`` to the end of the allocation that holds it; ``None`` where the driver
    gives no range holding ``ptr`` (an imported pinned-host pool pointer on driver 580 reads a
    range that does not contain it: seen on an H100)."""
    start = handle_return(
        in_context(
            ctx, driver.cuPointerGetAttribute, _PA.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr
        ),
        "cuPointerGetAttribute",
    )
    size = handle_return(
        in_context(ctx, driver.cuPointerGetAttribute, _PA.CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr),
        "cuPointerGetAttribute",
    )
    start, size = int(start), int(size)
    if not start <= ptr < start + size:
        return None
    return start + size - ptr


# -- pickling -----------------------------------------------------------------------------------
# Plain pickle sends a resource by its uuid (found again with from_registry in the receiver);
# multiprocessing sends it with its allocation handle (the reducer registered in
# cuda_core._mp_reduction), so the receiver maps the pool once and registers the mapping. A
# Buffer travels as (its resource, its descriptor) either way.


def reduce_resource(mr: Any) -> Any:
    """``__reduce__`` of an IPC-enabled pool resource: by uuid."""
    if mr._uuid is None:
        raise TypeError(
            f"only an IPC-enabled {type(mr).__name__} (or a mapping of one) can be pickled; create it "
            f"with {type(mr).__name__}Options(ipc_enabled=True)"
        )
    return (registry.find_registered, (type(mr), mr._uuid))


def reduce_resource_for_process(mr: Any) -> Any:
    """The multiprocessing reducer of an IPC-enabled pool resource: with its allocation handle."""
    reduce_resource(mr)  # the TypeError of a resource that is not IPC-enabled
    return (rebuild_resource, (type(mr), mr._uuid, export_pool(mr), mr._dev_id))


def rebuild_resource(cls: Any, key: uuid_mod.UUID, handle: IPCAllocationHandle, dev_id: int) -> Any:
    """Unpickle a resource sent through multiprocessing: the one registered under ``key``, or a
    new mapping of the pool behind ``handle`` (on device ``dev_id``; ``-1``: a host pool).

    ``handle`` is not closed here: pickle hands the same object to every argument that named
    it (``Process(args=(mr.allocation_handle, mr))``), so the receiver may still use it; its
    descriptor is closed when it is collected (the mapping keeps its own duplicate)."""
    if registry.find(key) is not None:
        return registry.find_registered(cls, key)
    Device = _links.Device
    return import_pool(cls, Device(dev_id) if dev_id >= 0 else None, handle)


def reduce_buffer(buf: Buffer) -> Any:
    """``Buffer.__reduce__``: (its resource, its descriptor), for an open buffer of an
    IPC-enabled pool or of a mapping of one."""
    mr = buf._mr
    if buf._ptr is None or getattr(mr, "_uuid", None) is None:
        raise TypeError(
            "only an open Buffer of an IPC-enabled pool (or of a registered mapping of one) can be "
            "pickled (it is mapped in the receiving process); share other memory with "
            "ipc_descriptor/from_ipc_descriptor()"
        )
    return (rebuild_buffer, (mr, export_buffer(buf)))


def rebuild_buffer(mr: Any, desc: IPCBufferDescriptor) -> Buffer:
    """Unpickle a shared buffer: map it through the (unpickled) resource ``mr``."""
    if not mr._mapped:
        raise RuntimeError(
            "a pickled Buffer is mapped in another process; in the exporting process, use the "
            "buffer itself"
        )
    Device = _links.Device

    # In the resource's device context: unpickling may run before the receiver made one current.
    dev = Device(mr._dev_id if mr._dev_id >= 0 else None)
    dev._primary_ctx()
    with dev._scope():
        return import_buffer(mr, desc, None)


# Buffer and pool resources call these (IPC builds on them, so they cannot import it).
_links.ipc.reduce_buffer = reduce_buffer
_links.ipc.export_buffer = export_buffer
_links.ipc.import_buffer = import_buffer
_links.ipc.export_pool = export_pool
