"""PinnedMemoryResource: stream-ordered page-locked host memory from a host memory pool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import _links
from .._compat import driver, require_cuda13
from .._errors import CUDAError
from .._utils import arg_error, check_int, check_or_create_options, handle_return
from .._utils._renamed import getter_method
from ._ipc import export_pool, import_pool, reduce_resource
from ._pool import (
    _PoolResource,
    check_bool,
    check_max_size,
    create_pool,
    current_pool,
    device_count,
    lacking_access,
    set_access,
)

__all__ = ["PinnedMemoryResource", "PinnedMemoryResourceOptions"]

_LOC_HOST = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST)
_LOC_HOST_NUMA = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_HOST_NUMA)
_PINNED = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED


@dataclass
class PinnedMemoryResourceOptions:
    """Options of a :class:`PinnedMemoryResource` that owns a new pool.

    Attributes
    ----------
    ipc_enabled : bool
        Create a pool shareable with other processes (needs a NUMA placement). Default ``False``.
    max_size : int
        Maximum size of the pool in bytes; ``0`` (default) lets the driver choose.
    numa_id : int, optional
        Host NUMA node of the memory. ``None``: OS placement (``CU_MEM_LOCATION_TYPE_HOST``),
        or, with ``ipc_enabled``, the NUMA node of the current device.
    """

    ipc_enabled: bool = False
    max_size: int = 0
    numa_id: int | None = None

    def __post_init__(self) -> None:
        self.ipc_enabled = check_bool("ipc_enabled", self.ipc_enabled)
        self.max_size = check_max_size(self.max_size)
        if self.numa_id is not None:
            self.numa_id = check_int("numa_id", self.numa_id, minimum=0)


_FEATURE = "PinnedMemoryResource (pinned host memory pools)"


class PinnedMemoryResource(_PoolResource):
    """Page-locked (pinned) host memory from a stream-ordered host memory pool.

    The memory is accessible from the host and from every device; copies between it and
    device memory are truly asynchronous. ``device_id`` is ``-1``.

    Parameters
    ----------
    options : PinnedMemoryResourceOptions or dict, optional
        ``None`` (default): the driver's current pinned host pool (not owned). Given: a new
        pool owned by the resource.

    Raises
    ------
    NotImplementedError
        ``cuda-bindings`` 12.x or a driver older than CUDA 13: pinned host memory pools are a
        CUDA 13 feature here, as in ``cuda.core`` (use :class:`LegacyPinnedMemoryResource`).
    CUDAError
        The driver has no host memory pools or cannot create one.
    """

    def __init__(self, options: PinnedMemoryResourceOptions | dict | None = None) -> None:
        self._numa_id = -1
        if options is not None:
            options = check_or_create_options(PinnedMemoryResourceOptions, options, "options")
        # Under cuda-bindings 12.9 on a CUDA 13 driver, allocating from a host pool this makes
        # crashed the process at times (SIGFPE/SIGSEGV in the driver), so it is refused there.
        require_cuda13(_FEATURE)
        if options is None:
            try:
                pool = current_pool(_PINNED, _LOC_HOST, 0)
                owned = False
            except CUDAError:  # no default host pool on this driver: own one
                pool = create_pool(_PINNED, _LOC_HOST, 0, 0, False)
                owned = True
            self._init_pool(pool, owned, -1)
        else:
            opts = options
            loc_type, loc_id = _LOC_HOST, 0
            numa = opts.numa_id
            if numa is None and opts.ipc_enabled:
                numa = _current_device_numa_id()
            if numa is not None:
                loc_type, loc_id = _LOC_HOST_NUMA, numa
                self._numa_id = numa
            pool = create_pool(_PINNED, loc_type, loc_id, opts.max_size, opts.ipc_enabled)
            self._init_pool(pool, True, -1, ipc=opts.ipc_enabled)
        # Let every device reach the memory (kernels and copies). Access is granted only where
        # it is missing, so that making a resource over the shared current pool never remaps
        # memory that the pool already holds for other users.
        try:
            set_access(self._pool, lacking_access(self._pool, list(range(device_count()))))
        except CUDAError:
            if self._owned:
                raise
            # The driver's own host pool may refuse changes; it is device-accessible already.

    # -- IPC ------------------------------------------------------------------------------------

    @property
    def allocation_handle(self) -> Any:
        """The pool's shareable handle (an :class:`IPCAllocationHandle` owned by the resource).

        A mapped resource returns the duplicate it keeps, so that it can be passed on.

        Raises
        ------
        RuntimeError
            The pool is not IPC-enabled (``PinnedMemoryResourceOptions(ipc_enabled=True)``),
            or the resource is closed.
        """

        return export_pool(self)

    get_allocation_handle = getter_method(
        "PinnedMemoryResource", "get_allocation_handle", "allocation_handle"
    )  # before cuda.core 1.0

    @classmethod
    def from_allocation_handle(cls, alloc_handle: Any) -> PinnedMemoryResource:
        """Map a pinned host pool exported by another process.

        Parameters
        ----------
        alloc_handle : IPCAllocationHandle or int
            The exporter's allocation handle, or a file descriptor received by other means.
            The caller keeps ownership of either: the mapping keeps a duplicate.

        Returns
        -------
        PinnedMemoryResource
            A mapped resource: it cannot allocate; it maps buffers with
            :meth:`Buffer.from_ipc_descriptor`. As for
            :meth:`DeviceMemoryResource.from_allocation_handle`, a handle with a uuid registers
            the mapping (or finds the one registered).
        """

        return import_pool(cls, None, alloc_handle)  # type: ignore[no-any-return]

    def __reduce__(self) -> Any:
        # Plain pickle: by uuid (multiprocessing sends the allocation handle: _mp_reduction).

        return reduce_resource(self)

    @property
    def numa_id(self) -> int:
        """The host NUMA node the pool places its memory on, or ``-1`` for OS placement."""
        return self._numa_id

    @property
    def is_device_accessible(self) -> bool:
        """``True``: devices can access pinned host memory."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """``True``: the memory is host memory."""
        return True

    def __repr__(self) -> str:
        kind = "mapped" if self._mapped else ("owned pool" if self._owned else "current pool")
        return f"<PinnedMemoryResource {kind}{' ipc' if self._ipc_enabled else ''}>"


def _current_device_numa_id() -> int:
    Device = _links.Device

    dev = Device()
    numa = handle_return(
        driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev._cu_device
        ),
        "cuDeviceGetAttribute",
    )
    if numa < 0:
        raise arg_error(
            "numa_id",
            "given for an IPC-enabled pool on this system (the device has no host NUMA node)",
            None,
        )
    return int(numa)
