"""ManagedBuffer: a Buffer of managed (unified) memory with the advice API as properties."""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator, MutableSet
from typing import Any

from .. import _links
from .._compat import driver, driver_version_int, require_cuda13
from .._handles._backend import entry_point
from .._stream_ops import closed_error, on_stream, stream_context
from .._utils import arg_error, handle_return, raise_status
from ._buffer import Buffer
from ._copy import Host
from ._managed import ManagedMemoryResource

__all__ = ["ManagedBuffer"]

_ADV = driver.CUmem_advise
_RANGE = driver.CUmem_range_attribute
_LOC = driver.CUmemLocationType
_INT = 4  # the range attributes read here are 32-bit ints
_NONE = -2  # "no location" in the ACCESSED_BY array


def _open(buf: Buffer) -> int:
    ptr = buf._ptr
    if ptr is None:
        raise closed_error()
    return ptr


def _managed(buf: Buffer, what: str) -> int:
    """The address of ``buf``, checked to be managed memory (a ManagedBuffer may wrap any
    pointer: ``from_handle`` asks nothing), as cuda.core checks it when the operation runs."""
    ptr = _open(buf)
    err, managed = driver.cuPointerGetAttribute(
        driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr
    )
    if err == driver.CUresult.CUDA_SUCCESS and not managed:
        raise ValueError(
            f"{what} requires a managed-memory allocation: the memory at {ptr:#x} is not "
            "managed; allocate it with ManagedMemoryResource (or wrap a cuMemAllocManaged "
            "pointer)"
        )
    return ptr


def _spec(location: Any, what: str = "location") -> driver.CUmemLocation:
    """The CUmemLocation of a Device or a Host (``TypeError`` for anything else)."""
    Device = _links.Device

    if isinstance(location, Host):
        return location._location()
    if location == "host" or (type(location) is int and location == -1):
        return Host()._location()  # Buffer.prefetch's older spellings of the host
    if type(location) is int and location >= 0:
        location = Device(location)  # a device ordinal, as Buffer.prefetch takes
    if isinstance(location, Device):
        loc = driver.CUmemLocation()
        loc.type = _LOC.CU_MEM_LOCATION_TYPE_DEVICE
        loc.id = location.device_id
        return loc
    if location is None:
        raise ValueError(f"{what} is required (a Device or a Host)")
    raise arg_error(
        what,
        "a Device or a Host",
        location,
        exc=TypeError,
        lead=f"{what} must be a Device, Host, or None, got {type(location).__name__}",
    )


def _advise(buf: Buffer, advice: Any, location: Any) -> None:
    ptr = _managed(buf, "memory advice (read_mostly, preferred_location, accessed_by)")
    if location is None:
        # Advice that takes no location (read-mostly, unset preferred location): the driver
        # ignores it but refuses an invalid one, so name the buffer's device (or device 0).
        loc = driver.CUmemLocation()
        loc.type = _LOC.CU_MEM_LOCATION_TYPE_DEVICE
        loc.id = max(buf.device_id, 0)
    else:
        loc = _spec(location)
    if buf._size:
        handle_return(driver.cuMemAdvise(ptr, buf._size, advice, loc), "cuMemAdvise")


def _attr(buf: Buffer, attribute: Any, count: int = 1) -> Any:
    ptr = _open(buf)
    return handle_return(
        driver.cuMemRangeGetAttribute(_INT * count, attribute, ptr, buf._size),
        "cuMemRangeGetAttribute",
    )


_RANGE_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t
)
_range_fn: Any = None


def _range_int(buf: Buffer, attribute: Any) -> int:
    """One int attribute of the buffer's range through the driver entry point
    (``cuda.bindings``' wrapper refuses the location-type attributes of CUDA 12.2+)."""
    global _range_fn
    ptr = _open(buf)
    if _range_fn is None:
        addr = entry_point("cuMemRangeGetAttribute")
        if not addr:
            raise RuntimeError("the CUDA driver has no cuMemRangeGetAttribute entry point")
        _range_fn = _RANGE_PROTO(addr)
    out = ctypes.c_int(0)
    status = _range_fn(ctypes.addressof(out), ctypes.sizeof(out), int(attribute), ptr, buf._size)
    if status:
        raise_status(status, "cuMemRangeGetAttribute")
    return out.value


def _location(buf: Buffer, type_attribute: Any, id_attribute: Any) -> Any:
    """A location range attribute (its ``_TYPE`` and ``_ID`` pair, CUDA 12.2+) as a Device, a
    Host, or ``None`` (no location, or pages that do not agree)."""
    Device = _links.Device

    kind = _range_int(buf, type_attribute)
    if kind == int(_LOC.CU_MEM_LOCATION_TYPE_DEVICE):
        return Device(_range_int(buf, id_attribute))
    if kind == int(_LOC.CU_MEM_LOCATION_TYPE_HOST):
        return Host()
    if kind == int(_LOC.CU_MEM_LOCATION_TYPE_HOST_NUMA):
        return Host(numa_id=_range_int(buf, id_attribute))
    if kind == int(_LOC.CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT):
        return Host.numa_current()
    return None


_TYPED_LOCATIONS = 12020  # the driver release with the _TYPE/_ID range attributes


def _accessed_by(buf: Buffer) -> list[Any]:
    Device = _links.Device

    n = int(handle_return(driver.cuDeviceGetCount(), "cuDeviceGetCount")) + 1
    raw = _attr(buf, _RANGE.CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, n)
    values = raw if isinstance(raw, (list, tuple)) else [raw]
    return [Host() if v == -1 else Device(int(v)) for v in values if v != _NONE]


def _check_accessor(location: Any) -> None:
    if isinstance(location, Host) and (location.numa_id is not None or location.is_numa_current):
        kind = "host_numa_current" if location.is_numa_current else "host_numa"
        raise ValueError(
            f"accessed_by does not support location_type={kind!r}: it takes Devices and "
            "Host(), not a NUMA-specific Host"
        )


class AccessedBySetProxy(MutableSet):  # type: ignore[type-arg]
    """The live set of locations with ``set_accessed_by`` advice on a :class:`ManagedBuffer`.

    Reading asks the driver (``cuMemRangeGetAttribute``); ``add``/``discard`` give advice
    (``cuMemAdvise``). Nothing is cached.
    """

    __slots__ = ("_buf",)

    def __init__(self, buf: ManagedBuffer) -> None:
        self._buf = buf

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        return set(it)

    def __contains__(self, location: object) -> bool:
        Device = _links.Device

        return isinstance(location, (Device, Host)) and location in _accessed_by(self._buf)

    def __iter__(self) -> Iterator[Any]:
        return iter(_accessed_by(self._buf))

    def __len__(self) -> int:
        return len(_accessed_by(self._buf))

    def add(self, location: Any) -> None:
        """Advise that ``location`` (a Device or ``Host()``) accesses the memory."""
        _spec(location)
        _check_accessor(location)
        _advise(self._buf, _ADV.CU_MEM_ADVISE_SET_ACCESSED_BY, location)

    def discard(self, location: Any) -> None:
        """Withdraw the advice for ``location`` (nothing for anything not in the set)."""
        Device = _links.Device

        if not isinstance(location, (Device, Host)):
            return
        if isinstance(location, Host) and (
            location.numa_id is not None or location.is_numa_current
        ):
            return
        _advise(self._buf, _ADV.CU_MEM_ADVISE_UNSET_ACCESSED_BY, location)

    def __repr__(self) -> str:
        return f"AccessedBySetProxy({set(_accessed_by(self._buf))!r})"


class ManagedBuffer(Buffer):
    """A :class:`Buffer` of managed (unified) memory, with memory advice as properties.

    :meth:`ManagedMemoryResource.allocate` returns one; ``ManagedBuffer.from_handle`` (see
    :meth:`Buffer.from_handle`) wraps another managed allocation. Advice applies to the whole buffer (``cuMemAdvise``) and is
    read back from the driver (``cuMemRangeGetAttribute``) at every access.

    Examples
    --------
    >>> buf = ManagedMemoryResource().allocate(1 << 20, stream=s)   # doctest: +SKIP
    >>> buf.read_mostly = True                                      # doctest: +SKIP
    >>> buf.preferred_location = Device(0)                          # doctest: +SKIP
    >>> buf.accessed_by.add(Host())                                 # doctest: +SKIP
    >>> buf.prefetch(Device(0), stream=s)                           # doctest: +SKIP
    """

    __slots__ = ()

    @property
    def read_mostly(self) -> bool:
        """Whether ``set_read_mostly`` advice applies (settable)."""
        return int(_attr(self, _RANGE.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY)) != 0

    @read_mostly.setter
    def read_mostly(self, value: bool) -> None:
        advice = (
            _ADV.CU_MEM_ADVISE_SET_READ_MOSTLY if value else _ADV.CU_MEM_ADVISE_UNSET_READ_MOSTLY
        )
        _advise(self, advice, None)

    @property
    def preferred_location(self) -> Any:
        """The ``set_preferred_location`` target: a Device, a Host, or ``None`` (settable;
        ``None`` withdraws the advice)."""
        return _location(
            self,
            _RANGE.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
            _RANGE.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID,
        )

    @preferred_location.setter
    def preferred_location(self, value: Any) -> None:
        if value is None:
            _advise(self, _ADV.CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, None)
        else:
            _advise(self, _ADV.CU_MEM_ADVISE_SET_PREFERRED_LOCATION, value)

    @property
    def last_prefetch_location(self) -> Any:
        """The target of the most recent explicit prefetch of the buffer's pages (read-only).

        A :class:`Device`, a :class:`Host` (with its NUMA node where one was named), or ``None``
        when some page was never prefetched or the pages were last prefetched to different
        places (``cuda.core`` 1.3).

        This is the requested target, not where the pages are now nor whether the asynchronous
        prefetch has finished. Asked of the driver at each read (``cuMemRangeGetAttribute``;
        drivers older than CUDA 12.2 know no NUMA node: the host is then ``Host()``).

        Raises
        ------
        RuntimeError
            The buffer is closed.
        """
        _open(self)
        if driver_version_int() >= _TYPED_LOCATIONS:
            return _location(
                self,
                _RANGE.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
                _RANGE.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID,
            )
        # An older driver knows a device ordinal, -1 for the host, -2 for none.
        ordinal = _range_int(self, _RANGE.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION)
        if ordinal == -1:
            return Host()
        return _links.Device(ordinal) if ordinal >= 0 else None

    @property
    def accessed_by(self) -> AccessedBySetProxy:
        """The live set of Devices (and ``Host()``) advised to access the memory; assign an
        iterable to replace it."""
        _open(self)
        return AccessedBySetProxy(self)

    @accessed_by.setter
    def accessed_by(self, locations: Iterable[Any]) -> None:
        _open(self)
        target = set()
        for loc in locations:  # check them all before advising anything
            _spec(loc, "accessed_by entries")
            _check_accessor(loc)
            target.add(loc)
        current = set(_accessed_by(self))
        for loc in current - target:
            _advise(self, _ADV.CU_MEM_ADVISE_UNSET_ACCESSED_BY, loc)
        for loc in target - current:
            _advise(self, _ADV.CU_MEM_ADVISE_SET_ACCESSED_BY, loc)

    def prefetch(self, location: Any, *, stream: Any) -> None:
        """Migrate the memory to ``location`` ahead of use, ordered on ``stream``
        (``cuMemPrefetchAsync``).

        Parameters
        ----------
        location : Device or Host
            The target.
        stream : Stream or GraphBuilder
            Keyword-only.

        Raises
        ------
        TypeError, ValueError
            Bad ``location`` or ``stream``.
        RuntimeError
            The buffer is closed.
        """
        loc = _spec(location)
        s = _links.as_stream(stream)
        ptr = _managed(self, "ManagedBuffer.prefetch()")
        if self._size:
            r = on_stream(
                s, stream_context(s), driver.cuMemPrefetchAsync, ptr, self._size, loc, 0, s.handle
            )
            handle_return(r, "cuMemPrefetchAsync")

    def discard(self, *, stream: Any) -> None:
        """Discard the contents, ordered on ``stream`` (CUDA 13, ``cuMemDiscardBatchAsync``):
        later reads see indeterminate values until the memory is written or prefetched.

        Raises :class:`NotImplementedError` with ``cuda-bindings`` 12.x or a driver older than
        CUDA 13."""
        s = _links.as_stream(stream)
        ptr = _managed(self, "ManagedBuffer.discard()")
        require_cuda13("ManagedBuffer.discard")
        if self._size:
            r = on_stream(
                s,
                stream_context(s),
                driver.cuMemDiscardBatchAsync,
                [driver.CUdeviceptr(ptr)],
                [self._size],
                1,
                0,
                s.handle,
            )
            handle_return(r, "cuMemDiscardBatchAsync")

    def discard_prefetch(self, location: Any, *, stream: Any) -> None:
        """Discard the contents and populate the pages at ``location`` without moving data,
        ordered on ``stream`` (CUDA 13, ``cuMemDiscardAndPrefetchBatchAsync``).

        Raises :class:`NotImplementedError` with ``cuda-bindings`` 12.x or a driver older than
        CUDA 13."""
        loc = _spec(location)
        s = _links.as_stream(stream)
        ptr = _managed(self, "ManagedBuffer.discard_prefetch()")
        require_cuda13("ManagedBuffer.discard_prefetch")
        if self._size:
            fn = driver.cuMemDiscardAndPrefetchBatchAsync
            r = on_stream(
                s,
                stream_context(s),
                fn,
                [driver.CUdeviceptr(ptr)],
                [self._size],
                1,
                [loc],
                [0],
                1,
                0,
                s.handle,
            )
            handle_return(r, "cuMemDiscardAndPrefetchBatchAsync")


ManagedMemoryResource._buffer_cls = ManagedBuffer
