"""The abstract :class:`MemoryResource` and the context helpers every resource shares."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from .. import _links
from .._compat import driver
from .._handles._contexts import in_context as in_context
from .._utils import TypeValueError, ValueOverflowError, arg_error

if TYPE_CHECKING:
    from ._buffer import Buffer

__all__ = ["MemoryResource"]


_SIZE_T_END = 2**64


def check_size(size: Any) -> int:
    """Validate an allocation size: a non-negative integer below ``2**64`` (a ``size_t``, as
    cuda.core converts it), an ``int`` or a NumPy integer, not a ``bool``."""
    if type(size) is int and 0 <= size < _SIZE_T_END:
        return size
    if type(size) is not int:
        if isinstance(size, bool) or not hasattr(type(size), "__index__"):
            raise arg_error("size", "a non-negative integer", size, exc=TypeError)
        v = int(size.__index__())
        if 0 <= v < _SIZE_T_END:
            return v
    # cuda.core: OverflowError (a size_t conversion); ours is a ValueError too
    raise arg_error("size", "a non-negative integer below 2**64", size, exc=ValueOverflowError)


def check_ptr(ptr: Any) -> int:
    """A device address as ``Buffer.from_handle`` takes it: an ``int``, a NumPy integer (any
    object with ``__index__``, as ``int(ptr)`` reads it in cuda.core) or a ``CUdeviceptr``;
    from 0 to ``2**64 - 1``. Not a ``bool``, a float or a string."""
    if type(ptr) is int:
        v = ptr
    elif isinstance(ptr, driver.CUdeviceptr):
        v = int(ptr)
    elif isinstance(ptr, bool) or not hasattr(type(ptr), "__index__"):
        raise arg_error(
            "ptr", "an int address (a NumPy integer too) or a CUdeviceptr", ptr, exc=TypeValueError
        )
    else:
        v = int(ptr.__index__())
    if not 0 <= v < _SIZE_T_END:
        # cuda.core: OverflowError (a uintptr_t conversion); ours is a ValueError too
        raise arg_error("ptr", "an address from 0 to 2**64 - 1", ptr, exc=ValueOverflowError)
    return v


class MemoryResource(abc.ABC):
    """Abstract base class of every memory resource.

    A memory resource hands out :class:`Buffer` objects from :meth:`allocate` and takes their
    memory back in :meth:`deallocate`. Subclass it in Python to plug your own allocator into
    :attr:`Device.memory_resource` and everything that allocates through it: implement
    :meth:`allocate` (usually returning ``Buffer.from_handle(ptr, size, mr=self)``),
    :meth:`deallocate` and the three properties.

    Examples
    --------
    >>> class CountingResource(MemoryResource):          # doctest: +SKIP
    ...     def __init__(self, inner):
    ...         self.inner, self.count = inner, 0
    ...     def allocate(self, size, *, stream=None):
    ...         self.count += 1
    ...         ptr = self.inner.allocate(size, stream=stream)
    ...         ...
    """

    __slots__ = ("__weakref__",)

    @abc.abstractmethod
    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """Allocate a buffer of ``size`` bytes.

        Parameters
        ----------
        size : int
            Number of bytes (``>= 0``).
        stream : Stream, optional
            The stream the allocation is ordered on; it also becomes the buffer's
            deallocation stream. Whether it may be omitted is up to the resource (the
            stream-ordered pools require it; synchronous resources ignore it).

        Returns
        -------
        Buffer
            A buffer owned by this resource.

        Raises
        ------
        TypeError, ValueError
            For a bad ``size`` or ``stream``.
        CUDAError
            When the driver cannot allocate (the message names the requested size).
        """

    @abc.abstractmethod
    def deallocate(self, ptr: int, size: int, *, stream: Any = None) -> None:
        """Give back memory obtained from :meth:`allocate`.

        Parameters
        ----------
        ptr : int
            The address :meth:`allocate` returned.
        size : int
            The size that was allocated.
        stream : Stream, optional
            The stream the free is ordered on (stream-ordered resources); ``None`` means
            the resource's default (documented by each resource).

        Raises
        ------
        CUDAError
            When the driver reports a failure.
        """

    @property
    @abc.abstractmethod
    def is_device_accessible(self) -> bool:
        """True when the memory can be accessed from the device."""

    @property
    @abc.abstractmethod
    def is_host_accessible(self) -> bool:
        """True when the memory can be accessed from the host."""

    @property
    @abc.abstractmethod
    def device_id(self) -> int:
        """The ordinal of the device the memory belongs to, ``-1`` for host-only memory."""

    @property
    def is_managed(self) -> bool:
        """True when the memory is CUDA managed (unified) memory; ``False`` by default."""
        return False


_links.MemoryResource = MemoryResource  # Device.memory_resource checks what it is given
