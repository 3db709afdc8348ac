"""DeviceMemoryResource: stream-ordered device memory from a CUDA memory pool."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._compat import driver
from .._utils import arg_error, check_or_create_options, ensure_driver, handle_return
from ._pool import (
    _PoolResource,
    check_bool,
    check_max_size,
    create_pool,
    device_count,
    set_access,
)
from ._resource import MemoryResource

__all__ = ["DeviceMemoryResource", "DeviceMemoryResourceOptions"]

_LOC_DEVICE = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)
_PINNED = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
_MAX_THRESHOLD = (1 << 64) - 1


@dataclass
class DeviceMemoryResourceOptions:
    """Options of a :class:`DeviceMemoryResource` that owns a new pool.

    Attributes
    ----------
    ipc_enabled : bool
        Create a pool whose allocations can be shared with other processes (POSIX file
        descriptors, Linux). Default ``False``.
    max_size : int
        Maximum size of the pool in bytes; ``0`` (default) lets the driver choose.
    """

    ipc_enabled: bool = False
    max_size: int = 0

    def __post_init__(self) -> None:
        self.ipc_enabled = check_bool("ipc_enabled", self.ipc_enabled)
        self.max_size = check_max_size(self.max_size)


def _device_of(device_id: Any) -> Any:
    from .._device import Device

    if isinstance(device_id, bool) or not (isinstance(device_id, (int, Device))):
        raise arg_error("device_id", "a Device or an int ordinal", device_id, exc=TypeError)
    return Device(device_id)


class DeviceMemoryResource(_PoolResource):
    """Stream-ordered device memory from a CUDA memory pool (``cuMemAllocFromPoolAsync``).

    Parameters
    ----------
    device_id : Device or int
        The device whose memory is allocated.
    options : DeviceMemoryResourceOptions or dict, optional
        ``None`` (default): use the device's current memory pool (not owned; closing the
        resource leaves the pool alone). If that pool's release threshold is 0 (the driver's
        default, which hands freed memory back to the system at every synchronisation), it is
        raised to the maximum, so that memory freed to the pool is reused cheaply (as
        ``cuda.core`` and CuPy do); set ``attributes.release_threshold`` to change it.
        Given: create a new pool owned by the resource and destroyed by :meth:`close` (after
        its last buffer is freed).

    Raises
    ------
    TypeError, ValueError
        Bad ``device_id`` or options.
    CUDAError
        The driver cannot create or query the pool.

    Notes
    -----
    Buffers are freed stream-ordered on their deallocation stream. An IPC-enabled resource
    shares its pool through :meth:`get_allocation_handle` (a file descriptor); another process
    maps it with :meth:`from_allocation_handle` and then maps single buffers with
    :meth:`Buffer.from_ipc_descriptor`.

    Examples
    --------
    >>> mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(max_size=1 << 30))
    >>> buf = mr.allocate(1 << 20, stream=s)
    >>> buf.close()
    """

    def __init__(self, device_id: Any, options: DeviceMemoryResourceOptions | dict | None = None) -> None:
        dev = _device_of(device_id)
        self._device = dev
        self._peers: tuple[int, ...] = ()
        if options is None:
            ensure_driver()
            pool = handle_return(driver.cuDeviceGetMemPool(dev._cu_device), "cuDeviceGetMemPool")
            self._init_pool(pool, False, dev._id)
            attrs = self.attributes
            if attrs.release_threshold == 0:
                attrs.release_threshold = _MAX_THRESHOLD
            return
        opts = check_or_create_options(DeviceMemoryResourceOptions, options, "options")
        pool = create_pool(_PINNED, _LOC_DEVICE, dev._id, opts.max_size, opts.ipc_enabled)
        self._init_pool(pool, True, dev._id, ipc=opts.ipc_enabled)

    @property
    def is_device_accessible(self) -> bool:
        """``True``: the memory is device memory."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """``False``: the host cannot access device memory directly."""
        return False

    @property
    def device(self) -> Any:
        """The :class:`Device` the memory belongs to."""
        return self._device

    # -- peer access ----------------------------------------------------------------------------

    @property
    def peer_accessible_by(self) -> tuple[int, ...]:
        """Ordinals of other devices granted read-write access to this pool's memory.

        Set it to an iterable of :class:`Device` or ordinals; devices added get access,
        devices removed lose it (``cuMemPoolSetAccess``). The owning device is ignored.
        """
        return self._peers

    @peer_accessible_by.setter
    def peer_accessible_by(self, devices: Iterable[Any]) -> None:
        pool = self._live_pool()
        wanted = set()
        n = device_count()
        for d in devices:
            i = int(d)
            if isinstance(d, bool) or not 0 <= i < n:
                raise arg_error("peer_accessible_by", f"devices or ordinals in [0, {n})", d)
            if i != self._dev_id:
                wanted.add(i)
        current = set(self._peers)
        set_access(pool, sorted(wanted - current), readwrite=True)
        set_access(pool, sorted(current - wanted), readwrite=False)
        self._peers = tuple(sorted(wanted))

    # -- IPC ------------------------------------------------------------------------------------

    def get_allocation_handle(self) -> Any:
        """The pool's shareable handle (a POSIX file descriptor wrapped in an IPCAllocationHandle).

        Returns
        -------
        IPCAllocationHandle
            Owned by the resource (closed by :meth:`close`); it pickles through
            ``multiprocessing`` (the file descriptor is duplicated into the receiver).

        Raises
        ------
        RuntimeError
            The pool is not IPC-enabled, or the resource is closed.
        """
        from ._ipc import export_pool

        return export_pool(self)

    @property
    def allocation_handle(self) -> Any:
        """The same as :meth:`get_allocation_handle`."""
        return self.get_allocation_handle()

    @classmethod
    def from_allocation_handle(cls, device_id: Any, alloc_handle: Any) -> DeviceMemoryResource:
        """Map a pool exported by another process.

        Parameters
        ----------
        device_id : Device or int
            The device (in this process) the pool's memory is on.
        alloc_handle : IPCAllocationHandle or int
            The exporter's allocation handle, or a file descriptor received by other means
            (the caller keeps ownership of a plain descriptor).

        Returns
        -------
        DeviceMemoryResource
            A mapped resource: it cannot allocate; it maps buffers with
            :meth:`Buffer.from_ipc_descriptor`.

        Raises
        ------
        TypeError
            ``alloc_handle`` is neither a handle nor an int.
        CUDAError
            The driver cannot import the pool.
        """
        from ._ipc import import_pool

        return import_pool(cls, _device_of(device_id), alloc_handle)  # type: ignore[no-any-return]

    def __reduce__(self) -> Any:
        from ._ipc import reduce_resource

        return reduce_resource(self, self._dev_id)

    def __repr__(self) -> str:
        kind = "mapped" if self._mapped else ("owned pool" if self._owned else "current pool")
        return f"<DeviceMemoryResource device={self._dev_id} {kind}{' ipc' if self._ipc_enabled else ''}>"


def default_memory_resource(device: Any) -> MemoryResource:
    """The memory resource a :class:`Device` starts with.

    A :class:`DeviceMemoryResource` over the device's current pool, or a
    :class:`SynchronousMemoryResource` (``cuMemAlloc``/``cuMemFree``) where the device has no
    memory-pool support (``CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`` is 0).

    Parameters
    ----------
    device : Device
        The device.

    Returns
    -------
    MemoryResource
    """
    ensure_driver()
    supported = handle_return(
        driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device._cu_device
        ),
        "cuDeviceGetAttribute",
    )
    if supported:
        return DeviceMemoryResource(device)
    from ._sync import SynchronousMemoryResource

    return SynchronousMemoryResource(device)

