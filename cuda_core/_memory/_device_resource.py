"""DeviceMemoryResource: stream-ordered device memory from a CUDA memory pool."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import _links
from .._compat import driver
from .._handles._driver import ensure_driver
from .._utils import arg_error, check_or_create_options, handle_return
from .._utils._renamed import getter_method
from ._ipc import export_pool, import_pool, reduce_resource
from ._peer import PeerAccessibleBySetProxy, replace_peer_access
from ._pool import _PoolResource, check_bool, check_max_size, create_pool
from ._resource import MemoryResource
from ._sync import SynchronousMemoryResource

__all__ = ["DeviceMemoryResource", "DeviceMemoryResourceOptions"]

_LOC_DEVICE = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)
_PINNED = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
_MAX_THRESHOLD = (1 << 64) - 1
_RELAXED = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED


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


class _RelaxedCapture:
    """``with _RelaxedCapture():`` runs the block with this thread's stream-capture interaction
    mode relaxed (``cuThreadExchangeStreamCaptureMode``), then puts the thread's mode back."""

    __slots__ = ("_old",)

    def __enter__(self) -> None:
        self._old = handle_return(
            driver.cuThreadExchangeStreamCaptureMode(_RELAXED), "cuThreadExchangeStreamCaptureMode"
        )

    def __exit__(self, *exc: object) -> None:
        handle_return(
            driver.cuThreadExchangeStreamCaptureMode(self._old), "cuThreadExchangeStreamCaptureMode"
        )


def _device_of(device_id: Any) -> Any:
    Device = _links.Device

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
    shares its pool through :attr:`allocation_handle` (a file descriptor); another process
    maps it with :meth:`from_allocation_handle` and then maps single buffers with
    :meth:`Buffer.from_ipc_descriptor`. With ``multiprocessing`` (spawn), send the resource
    and its buffers themselves: the receiver maps them (see :doc:`/ipc`).

    Examples
    --------
    >>> mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(max_size=1 << 30))
    >>> buf = mr.allocate(1 << 20, stream=s)
    >>> buf.close()
    """

    def __init__(
        self, device_id: Any, options: DeviceMemoryResourceOptions | dict | None = None
    ) -> None:
        dev = _device_of(device_id)
        if options is None:
            ensure_driver()
            pool = handle_return(driver.cuDeviceGetMemPool(dev._cu_device), "cuDeviceGetMemPool")
            self._init_pool(pool, False, dev._id)
            # The pool attribute calls are ones the driver refuses while this thread takes part
            # in a "global" or "thread_local" capture (it would invalidate the capture): they
            # run in relaxed mode, and the thread's own mode is restored after.
            with _RelaxedCapture():
                attrs = self.attributes
                if attrs.release_threshold == 0:
                    attrs.release_threshold = _MAX_THRESHOLD
            return
        opts = check_or_create_options(DeviceMemoryResourceOptions, options, "options")
        pool = create_pool(_PINNED, _LOC_DEVICE, dev._id, opts.max_size, opts.ipc_enabled)
        self._init_pool(pool, True, dev._id, ipc=opts.ipc_enabled, peers=True)

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
        return _links.Device(self._dev_id)

    # -- peer access ----------------------------------------------------------------------------

    @property
    def peer_accessible_by(self) -> PeerAccessibleBySetProxy:
        """The other devices whose kernels and copies can read and write this pool's memory.

        A live set-like view of :class:`Device` objects (see
        :class:`~cuda_core._memory._peer.PeerAccessibleBySetProxy`): every read asks the driver
        (``cuMemPoolGetAccess``), so all resources over the same pool agree; ``add``,
        ``discard``, ``update``, ``clear`` and ``|=``/``-=``/``&=``/``^=`` change it with one
        ``cuMemPoolSetAccess`` each. Elements may be given as Devices or ordinals; the owning
        device is never listed and is ignored when given. Access covers every allocation of
        the pool, past and future.

        Assign an iterable of Devices or ordinals to grant exactly those devices access (and
        revoke it from the others) in one driver call; assign ``[]`` to revoke all.

        Raises
        ------
        ValueError
            A device cannot reach this device's memory (``Device(i).can_access_peer(owner)``
            is false), or an ordinal is out of range.
        TypeError
            The value assigned is not an iterable of Devices or ordinals.
        RuntimeError
            The resource is closed.

        Examples
        --------
        >>> mr = DeviceMemoryResource(0)
        >>> mr.peer_accessible_by = [1]          # device 1 may use device 0's pool
        >>> Device(1) in mr.peer_accessible_by and 1 in mr.peer_accessible_by
        True
        >>> mr.peer_accessible_by.discard(1)     # or: mr.peer_accessible_by = []
        """
        return PeerAccessibleBySetProxy(self)

    @peer_accessible_by.setter
    def peer_accessible_by(self, devices: Iterable[Any]) -> None:
        replace_peer_access(self, devices)

    # -- IPC ------------------------------------------------------------------------------------

    @property
    def allocation_handle(self) -> Any:
        """The pool's shareable handle (a POSIX file descriptor wrapped in an IPCAllocationHandle).

        Returns
        -------
        IPCAllocationHandle
            Owned by the resource (closed by :meth:`close`; do not close it yourself). It pickles
            through ``multiprocessing`` (the descriptor is duplicated into the receiver). A
            mapped resource returns the duplicate it keeps, so that it can be passed on.

        Raises
        ------
        RuntimeError
            The pool is not IPC-enabled, or the resource is closed.
        """

        return export_pool(self)

    get_allocation_handle = getter_method(
        "DeviceMemoryResource", "get_allocation_handle", "allocation_handle"
    )  # before cuda.core 1.0

    @classmethod
    def from_allocation_handle(cls, device_id: Any, alloc_handle: Any) -> DeviceMemoryResource:
        """Map a pool exported by another process.

        Parameters
        ----------
        device_id : Device or int
            The device (in this process) the pool's memory is on.
        alloc_handle : IPCAllocationHandle or int
            The exporter's allocation handle, or a file descriptor received by other means.
            The caller keeps ownership of either: the mapping keeps a duplicate.

        Returns
        -------
        DeviceMemoryResource
            A mapped resource: it cannot allocate; it maps buffers with
            :meth:`Buffer.from_ipc_descriptor`. A handle that carries a :attr:`uuid` (one sent
            through ``multiprocessing``) registers the mapping under it; a resource registered
            under that uuid already is returned instead (the pool is mapped once per process).

        Raises
        ------
        TypeError
            ``alloc_handle`` is neither a handle nor an int.
        RuntimeError
            ``alloc_handle`` is closed, or its uuid names a resource of another class.
        CUDAError
            The driver cannot import the pool.
        """

        return import_pool(cls, _device_of(device_id), alloc_handle)  # type: ignore[no-any-return]

    def __reduce__(self) -> Any:
        # Plain pickle: by uuid (multiprocessing sends the allocation handle: _mp_reduction).

        return reduce_resource(self)

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

    return SynchronousMemoryResource(device)


_links.default_memory_resource = default_memory_resource  # Device.memory_resource
