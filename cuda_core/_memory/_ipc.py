"""Sharing pool memory between processes: allocation handles (fds) and buffer descriptors."""

from __future__ import annotations

import ctypes
import os
import threading
import uuid as uuid_mod
import weakref
from typing import Any

from .._compat import driver
from .._errors import CUDAError
from .._utils import arg_error, ensure_driver, handle_return
from ._buffer import Buffer
from ._buffer_support import stream_context
from ._pool import set_access

__all__ = ["IPCAllocationHandle", "IPCBufferDescriptor"]

_POSIX_FD = driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_EXPORT_BYTES = 64  # sizeof(CUmemPoolPtrExportData)


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class IPCAllocationHandle:
    """A memory pool's shareable handle: a POSIX file descriptor this object owns.

    Get one from :meth:`DeviceMemoryResource.get_allocation_handle`; give it to another process
    through ``multiprocessing`` (pickling duplicates the descriptor into the receiver, as for
    a socket) or send :attr:`handle` yourself (``socket`` ``SCM_RIGHTS``,
    ``multiprocessing.reduction.send_handle``) and wrap it there with :meth:`from_fd`.
    ``close()`` closes the descriptor; so does garbage collection.
    """

    __slots__ = ("__weakref__", "_fd", "_fin", "_uuid")

    _fd: int
    _fin: weakref.finalize
    _uuid: uuid_mod.UUID | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("use DeviceMemoryResource.get_allocation_handle() or IPCAllocationHandle.from_fd()")

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
        self._fin = weakref.finalize(self, _close_fd, fd)
        self._uuid = None
        return self

    @property
    def uuid(self) -> uuid_mod.UUID | None:
        """The :attr:`~DeviceMemoryResource.uuid` of the resource whose pool this handle exports
        (``None`` for a handle wrapped with :meth:`from_fd`)."""
        return self._uuid

    @property
    def handle(self) -> int:
        """The file descriptor."""
        if self._fd < 0:
            raise RuntimeError("the IPCAllocationHandle is closed")
        return self._fd

    def __int__(self) -> int:
        return self.handle

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._fd < 0

    def close(self) -> None:
        """Close the file descriptor; idempotent."""
        if self._fd >= 0:
            self._fd = -1
            self._fin()

    def __enter__(self) -> IPCAllocationHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        from multiprocessing import reduction

        return (_rebuild_handle, (reduction.DupFd(self.handle), self._uuid))

    def __repr__(self) -> str:
        return f"<IPCAllocationHandle fd={self._fd}>"


def _rebuild_handle(dup: Any, uuid: uuid_mod.UUID | None = None) -> IPCAllocationHandle:
    h = IPCAllocationHandle.from_fd(dup.detach())
    h._uuid = uuid
    return h


# -- the registry of shared resources, by uuid ----------------------------------------------------
# An IPC-enabled resource gets a uuid when it is made; pickling it sends its allocation handle
# and uuid, and the receiving process maps the pool once and registers the mapping under that
# uuid, so that every later resource or buffer pickled from the same exporter finds it.
# Mapped resources are held for the life of the process (or until closed); exporting ones are
# held weakly (they are found when something is unpickled in their own process).
_registry: dict[uuid_mod.UUID, Any] = {}
_exporters: weakref.WeakValueDictionary[uuid_mod.UUID, Any] = weakref.WeakValueDictionary()
_registry_lock = threading.Lock()


def new_exporter(mr: Any) -> uuid_mod.UUID:
    """A fresh uuid for an IPC-enabled resource that exports its pool, and its registration."""
    key = uuid_mod.uuid4()
    _exporters[key] = mr
    return key


def register(mr: Any, key: Any) -> Any:
    """``mr.register(key)``: the mapped resource registered under ``key`` (``mr`` if none was)."""
    if not isinstance(key, uuid_mod.UUID):
        raise arg_error("uuid", "a uuid.UUID", key, exc=TypeError)
    if not mr._mapped:
        raise RuntimeError(
            "only a mapped resource (from from_allocation_handle()) is registered; an exporting "
            "resource is found by its own uuid already"
        )
    with _registry_lock:
        found = _registry.get(key)
        if found is not None and found._pool is not None:
            return found
        _registry[key] = mr
        mr._uuid = key
    return mr


def from_registry(key: Any) -> Any:
    """The resource registered (mapped here) or exporting under ``key``; ``RuntimeError`` if none."""
    if not isinstance(key, uuid_mod.UUID):
        raise arg_error("uuid", "a uuid.UUID", key, exc=TypeError)
    with _registry_lock:
        found = _registry.get(key)
        if found is None or found._pool is None:
            found = _exporters.get(key)
    if found is None or found._pool is None:
        raise RuntimeError(f"no open memory resource is registered under {key}")
    return found


def rebuild_resource(cls: Any, key: uuid_mod.UUID, handle: IPCAllocationHandle, *args: Any) -> Any:
    """Unpickle a shared resource: the one registered under ``key``, or a new mapping of the
    pool behind ``handle`` (``cls.from_allocation_handle(*args, handle)``), registered."""
    try:
        try:
            return from_registry(key)
        except RuntimeError:
            return cls.from_allocation_handle(*args, handle).register(key)
    finally:
        handle.close()  # the pool is imported (or was already): the received descriptor is spent


def reduce_resource(mr: Any, *args: Any) -> Any:
    """``__reduce__`` of an exporting IPC-enabled pool resource (``args``: what its
    ``from_allocation_handle`` takes before the handle)."""
    if mr._uuid is None or mr._mapped:
        raise TypeError(
            f"only an IPC-enabled {type(mr).__name__} that exports its pool can be pickled "
            "(a mapped one is sent by its exporter)"
        )
    return (rebuild_resource, (type(mr), mr._uuid, export_pool(mr), *args))


def rebuild_buffer(mr: Any, desc: IPCBufferDescriptor) -> Buffer:
    """Unpickle a shared buffer: map it through the (unpickled) resource ``mr``."""
    if not mr._mapped:
        raise RuntimeError(
            "a pickled Buffer is mapped in another process; in the exporting process, use the "
            "buffer itself"
        )
    from .._device import Device

    # In the resource's device context: unpickling may run before the receiver made one current.
    dev = Device(mr._dev_id if mr._dev_id >= 0 else None)
    dev._primary_ctx()
    with dev._scope():
        return import_buffer(mr, desc, None)


class IPCBufferDescriptor:
    """A picklable description of one buffer of an IPC-enabled pool (64 opaque bytes + size).

    From :meth:`Buffer.get_ipc_descriptor`; mapped in another process by
    :meth:`Buffer.from_ipc_descriptor`. It carries no file descriptor and pickles anywhere.
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
        return isinstance(other, IPCBufferDescriptor) and (self._payload, self._size) == (other._payload, other._size)

    def __hash__(self) -> int:
        return hash((self._payload, self._size))

    def __repr__(self) -> str:
        return f"<IPCBufferDescriptor size={self._size}>"


def export_pool(mr: Any) -> IPCAllocationHandle:
    pool = mr._live_pool()
    if not mr._ipc_enabled or mr._mapped:
        raise RuntimeError(
            "the memory resource is not IPC-enabled; create it with "
            "DeviceMemoryResourceOptions(ipc_enabled=True)"
        )
    h = mr._alloc_handle
    if h is None or h.is_closed:
        fd = handle_return(driver.cuMemPoolExportToShareableHandle(pool, _POSIX_FD, 0), "cuMemPoolExportToShareableHandle")
        h = IPCAllocationHandle.from_fd(int(fd))
        h._uuid = mr._uuid
        mr._alloc_handle = h
    return h  # type: ignore[no-any-return]


def import_pool(cls: Any, device: Any, alloc_handle: Any) -> Any:
    if isinstance(alloc_handle, IPCAllocationHandle):
        fd = alloc_handle.handle
    elif isinstance(alloc_handle, int) and not isinstance(alloc_handle, bool) and alloc_handle >= 0:
        fd = alloc_handle
    else:
        raise arg_error("alloc_handle", "an IPCAllocationHandle or a file descriptor", alloc_handle, exc=TypeError)
    ensure_driver()
    from .._device import Device

    # In the device's primary context (it may not be current yet: a resource is unpickled
    # before the receiving code runs); a host pool uses the current device's.
    scope_dev = Device() if device is None else device
    scope_dev._primary_ctx()
    with scope_dev._scope():
        pool = handle_return(
            driver.cuMemPoolImportFromShareableHandle(fd, _POSIX_FD, 0), "cuMemPoolImportFromShareableHandle"
        )
    mr = object.__new__(cls)
    if device is None:  # a host (pinned) pool: every device of this process may need access
        mr._numa_id = -1
        mr._init_pool(pool, True, -1, ipc=True, mapped=True)
        devices = list(range(handle_return(driver.cuDeviceGetCount(), "cuDeviceGetCount")))
    else:
        mr._device = device
        mr._peers = ()
        mr._init_pool(pool, True, device._id, ipc=True, mapped=True)
        devices = [device._id]
    try:  # an imported pool may need access granted for this process's devices
        set_access(pool, devices)
    except CUDAError:
        pass  # the owning device always has access; nothing to grant
    return mr


def export_buffer(buf: Buffer) -> IPCBufferDescriptor:
    mr = buf._mr
    if mr is None or not getattr(mr, "_ipc_enabled", False) or getattr(mr, "_mapped", True):
        raise RuntimeError(
            "only buffers allocated from an IPC-enabled DeviceMemoryResource or PinnedMemoryResource "
            "can be shared (options with ipc_enabled=True)"
        )
    data = handle_return(driver.cuMemPoolExportPointer(buf._ptr), "cuMemPoolExportPointer")
    return IPCBufferDescriptor(ctypes.string_at(data.getPtr(), _EXPORT_BYTES), buf._size)


def import_buffer(mr: Any, desc: Any, stream: Any) -> Buffer:
    from .. import _stream as _stream_mod
    from ._pool import _PoolResource

    if not isinstance(mr, _PoolResource) or not mr.is_mapped:
        raise arg_error(
            "mr",
            "a mapped resource (from DeviceMemoryResource/PinnedMemoryResource.from_allocation_handle())",
            mr,
            exc=TypeError,
        )
    if not isinstance(desc, IPCBufferDescriptor):
        raise arg_error("ipc_descriptor", "an IPCBufferDescriptor", desc, exc=TypeError)
    pool = mr._live_pool()
    s = mr._default_stream() if stream is None else _stream_mod.as_stream(stream)
    data = driver.CUmemPoolPtrExportData()
    ctypes.memmove(data.getPtr(), desc.payload, _EXPORT_BYTES)
    ctx = stream_context(s)
    ptr = handle_return(_import_pointer(ctx, pool, data), "cuMemPoolImportPointer")
    return Buffer._owned(int(ptr), desc.size, mr, s, None)


def _import_pointer(ctx: Any, pool: Any, data: Any) -> Any:
    from ._resource import in_context

    return in_context(ctx, driver.cuMemPoolImportPointer, pool, data)

