"""ManagedMemoryResource: stream-ordered managed (unified) memory, and prefetching."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _links
from .._compat import MANAGED_ALLOCATION, driver, require_cuda13
from .._errors import CUDAError
from .._handles._contexts import in_context
from .._stream_ops import closed_error, live_handle, stream_context
from .._utils import arg_error, check_int, check_or_create_options, handle_return
from ._buffer import Buffer
from ._pool import _PoolResource, create_pool, current_pool, make_location

__all__ = ["ManagedMemoryResource", "ManagedMemoryResourceOptions"]

_LOC_NONE = 0  # CU_MEM_LOCATION_TYPE_NONE (named INVALID in the bindings)
_LOC_DEVICE = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)
_LOC_HOST = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST)
_LOC_HOST_NUMA = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST_NUMA)
_MANAGED = MANAGED_ALLOCATION  # None with cuda-bindings 12.x
_FEATURE = "ManagedMemoryResource (managed memory pools)"
_LOCATION_TYPES = {"device": _LOC_DEVICE, "host": _LOC_HOST, "host_numa": _LOC_HOST_NUMA}
_PREFERRED = {
    _LOC_DEVICE: lambda i: ("device", i),
    _LOC_HOST: lambda i: ("host", None),
    _LOC_HOST_NUMA: lambda i: ("host_numa", i),
}


@dataclass
class ManagedMemoryResourceOptions:
    """Options of a :class:`ManagedMemoryResource` that owns a new pool.

    Attributes
    ----------
    preferred_location : int, optional
        With ``preferred_location_type=None``: a device ordinal, ``-1`` for the host, or
        ``None`` for no preference. Otherwise the device ordinal (``"device"``) or NUMA node
        (``"host_numa"``); ``None`` for ``"host"``.
    preferred_location_type : {"device", "host", "host_numa"}, optional
        How ``preferred_location`` is read (default ``None``: the rule above).
    """

    preferred_location: int | None = None
    preferred_location_type: str | None = None

    def __post_init__(self) -> None:
        t = self.preferred_location_type
        if t is not None and t not in _LOCATION_TYPES:
            raise arg_error("preferred_location_type", "None, 'device', 'host' or 'host_numa'", t)
        if self.preferred_location is not None:
            lo = -1 if t is None else 0
            self.preferred_location = check_int(
                "preferred_location", self.preferred_location, minimum=lo
            )
        if t == "host" and self.preferred_location is not None:
            raise arg_error(
                "preferred_location",
                "None when preferred_location_type is 'host'",
                self.preferred_location,
            )
        if t in ("device", "host_numa") and self.preferred_location is None:
            raise arg_error(
                "preferred_location", f"an int when preferred_location_type is {t!r}", None
            )

    def _location(self) -> tuple[int, int]:
        t, loc = self.preferred_location_type, self.preferred_location
        if t is None:
            if loc is None:
                return _LOC_NONE, 0
            return (_LOC_HOST, 0) if loc == -1 else (_LOC_DEVICE, loc)
        return _LOCATION_TYPES[t], 0 if loc is None else loc


class ManagedMemoryResource(_PoolResource):
    """Managed (unified) memory from a stream-ordered managed memory pool (CUDA 13+ driver).

    The memory is accessible from the host and from devices and migrates on demand;
    :meth:`Buffer.prefetch` moves it ahead of use. ``device_id`` is the preferred device, or
    ``-1`` when none is set.

    Parameters
    ----------
    options : ManagedMemoryResourceOptions or dict, optional
        ``None`` (default): the driver's current managed pool (not owned). Given: a new pool
        owned by the resource, with the preferred location from the options.

    Raises
    ------
    NotImplementedError
        ``cuda-bindings`` 12.x or a driver older than CUDA 13 (no managed memory pools).
    CUDAError
        The driver cannot create the pool.
    """

    def __init__(self, options: ManagedMemoryResourceOptions | dict | None = None) -> None:
        Device = _links.Device

        if options is None:
            require_cuda13(_FEATURE)
            try:
                pool = current_pool(_MANAGED, _LOC_NONE, 0)
            except CUDAError:  # no current managed pool: the default one
                loc = make_location(_LOC_NONE, 0)
                pool = handle_return(
                    driver.cuMemGetDefaultMemPool(loc, _MANAGED), "cuMemGetDefaultMemPool"
                )
            self._preferred: tuple[str, int | None] | None = None
            self._init_pool(pool, False, Device()._id)
            return
        opts = check_or_create_options(ManagedMemoryResourceOptions, options, "options")
        loc_type, loc_id = opts._location()
        require_cuda13(_FEATURE)
        pool = create_pool(_MANAGED, loc_type, loc_id, 0, False)
        self._preferred = _PREFERRED[loc_type](loc_id) if loc_type in _PREFERRED else None
        self._init_pool(pool, True, loc_id if loc_type == _LOC_DEVICE else Device()._id)

    # ManagedBuffer (set by _managed_buffer, which imports this module: no import cycle).
    _buffer_cls: type = Buffer

    @property
    def device_id(self) -> int:
        """The preferred device ordinal, or ``-1`` when the preferred location is not a device
        (none set: the driver decides), as in ``cuda.core``."""
        p = self._preferred
        return p[1] if p is not None and p[0] == "device" and p[1] is not None else -1

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """Allocate ``size`` bytes of managed memory from the pool, ordered on ``stream``.

        Parameters
        ----------
        size : int
            Number of bytes (``>= 0``).
        stream : Stream
            Keyword-only and required: the allocation is ordered on it and it becomes the
            buffer's deallocation stream.

        Returns
        -------
        ManagedBuffer
            A :class:`Buffer` with the managed-memory advice API.

        Raises
        ------
        TypeError, ValueError, RuntimeError, CUDAError
            As :meth:`DeviceMemoryResource.allocate`.
        """
        buf = _PoolResource.allocate(self, size, stream=stream)
        buf.__class__ = self._buffer_cls  # the same layout (no slots of its own)
        return buf

    @property
    def preferred_location(self) -> tuple[str, int | None] | None:
        """The preferred location of the pool's memory, from the options.

        ``None``: no preference (the driver decides; also for the driver's current pool);
        else ``("device", ordinal)``, ``("host", None)`` or ``("host_numa", node)``.
        """
        return self._preferred

    @property
    def is_device_accessible(self) -> bool:
        """``True``."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """``True``."""
        return True

    @property
    def is_managed(self) -> bool:
        """``True``: the memory is managed memory."""
        return True

    def __repr__(self) -> str:
        return f"<ManagedMemoryResource {'owned pool' if self._owned else 'current pool'}>"


def prefetch(buf: Buffer, location: Any, stream: Any) -> None:
    """Prefetch managed memory to a device or to the host (``cuMemPrefetchAsync``)."""
    Device = _links.Device

    ptr = buf._ptr
    if ptr is None:
        raise closed_error()
    s = _links.as_stream(stream)
    if not buf.is_managed:
        raise ValueError(
            "Buffer.prefetch() requires a managed-memory allocation: prefetch needs managed "
            "memory (a buffer from ManagedMemoryResource)"
        )
    if location == "host" or (type(location) is int and location == -1):
        loc = make_location(_LOC_HOST, 0)
    elif isinstance(location, Device) or (
        isinstance(location, int) and not isinstance(location, bool)
    ):
        loc = make_location(_LOC_DEVICE, Device(location)._id)
    else:
        raise arg_error(
            "location", "a Device, a device ordinal, -1 or 'host'", location, exc=TypeError
        )
    if buf._size:
        handle_return(
            in_context(
                stream_context(s), driver.cuMemPrefetchAsync, ptr, buf._size, loc, 0, live_handle(s)
            ),
            "cuMemPrefetchAsync",
        )


_links.prefetch = prefetch  # Buffer.prefetch (managed memory builds on buffers)
