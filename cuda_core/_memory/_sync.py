"""SynchronousMemoryResource: device memory from cuMemAlloc/cuMemFree (no memory pools)."""

from __future__ import annotations

from typing import Any

from .. import _links
from .._compat import driver
from .._handles._contexts import in_context
from .._utils import arg_error, handle_return, make_error
from ._buffer import Buffer
from ._resource import MemoryResource, check_size

__all__ = ["SynchronousMemoryResource"]


class _SyncResource(MemoryResource):
    """What the synchronous resources share: ``allocate`` through ``_alloc_fn``, free through
    ``_free_fn`` after synchronising the buffer's deallocation stream (if it has one).

    A subclass sets the two driver functions (and their names, for messages) and says which
    context an allocation (:meth:`_alloc_ctx`) and an explicit :meth:`deallocate`
    (:meth:`_dealloc_ctx`) run in.
    """

    _alloc_fn: Any
    _alloc_name: str
    _free_fn: Any
    _free_name: str

    def _alloc_ctx(self, s: Any) -> Any:
        raise NotImplementedError

    def _dealloc_ctx(self, s: Any) -> Any:
        raise NotImplementedError

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """Allocate ``size`` bytes (``cuMemAlloc``: device memory; ``cuMemAllocHost``: pinned host memory).

        Parameters
        ----------
        size : int
            Number of bytes (``>= 0``).
        stream : Stream, optional
            Becomes the buffer's deallocation stream (synchronised before the free).

        Returns
        -------
        Buffer

        Raises
        ------
        TypeError, ValueError
            Bad ``size`` or ``stream``.
        CUDAError
            No current context (call ``Device.set_current()``), or the driver cannot allocate
            (the message names the requested size).
        """
        s = None if stream is None else _links.as_stream(stream)
        size = check_size(size)
        ctx = self._alloc_ctx(s)
        if not size:
            return Buffer._owned(0, 0, self, s, self._gc_free)
        err, ptr = in_context(ctx, self._alloc_fn, size)
        if err:
            raise make_error(err, self._alloc_name, f"allocating {size} bytes failed")
        return Buffer._owned(int(ptr), size, self, s, self._gc_free)

    def _free(self, ptr: int, size: int, stream: Any, ctx: Any) -> None:
        if stream is not None and not stream._h.is_released:
            handle_return(driver.cuStreamSynchronize(stream.handle), "cuStreamSynchronize")
        handle_return(in_context(ctx, self._free_fn, ptr), self._free_name)

    def _gc_free(self, ptr: int, size: int, stream: Any) -> None:
        # The release function of this resource's buffers (the handle layer's Allocation calls
        # it at close() or collection).
        self._free(ptr, size, stream, self._dealloc_ctx(stream))

    def deallocate(self, ptr: int, size: int, *, stream: Any = None) -> None:
        """Free memory from :meth:`allocate` (after synchronising ``stream``, if given).

        Parameters
        ----------
        ptr : int
            The address.
        size : int
            The size that was allocated.
        stream : Stream, optional
            Synchronised before the free.

        Raises
        ------
        CUDAError
            The driver failed to free the memory.
        """
        s = None if stream is None else _links.as_stream(stream)
        self._free(int(ptr), size, s, self._dealloc_ctx(s))


class SynchronousMemoryResource(_SyncResource):
    """Device memory from ``cuMemAlloc``; allocation and free are synchronous.

    :func:`Device.memory_resource` uses it on devices without memory-pool support. ``stream``
    is optional: a buffer's deallocation stream, when it has one, is synchronised before the
    memory is freed with ``cuMemFree``. Work runs in the device's primary context (call
    ``Device.set_current()`` first).

    Parameters
    ----------
    device_id : Device or int
        The device whose memory is allocated.
    """

    _alloc_fn = staticmethod(driver.cuMemAlloc)
    _alloc_name = "cuMemAlloc"
    _free_fn = staticmethod(driver.cuMemFree)
    _free_name = "cuMemFree"

    def __init__(self, device_id: Any) -> None:
        Device = _links.Device

        if isinstance(device_id, bool) or not isinstance(device_id, (int, Device)):
            raise arg_error("device_id", "a Device or an int ordinal", device_id, exc=TypeError)
        self._dev_id = Device(device_id)._id

    def _alloc_ctx(self, s: Any) -> Any:
        return _links.Device(self._dev_id)._require_ctx("cuMemAlloc")

    def _dealloc_ctx(self, s: Any) -> Any:
        return _links.Device(self._dev_id)._ctx

    @property
    def is_device_accessible(self) -> bool:
        """``True``."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """``False``."""
        return False

    @property
    def device_id(self) -> int:
        """The device ordinal."""
        return self._dev_id

    def __repr__(self) -> str:
        return f"<SynchronousMemoryResource device={self._dev_id}>"
