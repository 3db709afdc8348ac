"""The stream-ordered memory pool shared by the device, pinned and managed resources."""

from __future__ import annotations

from typing import Any

from .. import _links
from .._compat import driver
from .._errors import CUDAError, warn_release_failure
from .._handles._backend import backend
from .._handles._contexts import in_context
from .._handles._driver import ensure_driver
from .._handles._owned import OwnedHandle
from .._logging import logger as _log
from .._stream_ops import (
    capture_status,
    live_handle,
    stream_context,
)
from .._utils import check_int, handle_return, make_error
from . import _ipc_registry as _registry
from ._buffer import Buffer
from ._resource import MemoryResource, check_size

__all__ = ["MemoryPoolAttributes"]

_cuMemFreeAsync = driver.cuMemFreeAsync
_owned_buffer = Buffer._owned
_new = object.__new__
_pool_allocate = backend.pool_allocate
_PA = driver.CUmemPool_attribute
_CAPTURE_NONE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_CAPTURE_UNSUPPORTED = int(driver.CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)


def capture_refused(mr: Any) -> RuntimeError:
    """The error of a pool resource's ``allocate`` on a stream that is capturing a graph."""
    return RuntimeError(
        f"{type(mr).__name__} cannot perform memory operations on a capturing stream (consider using "
        "GraphMemoryResource). Its allocations would become part of the graph being captured: "
        "allocate inside a capture with GraphMemoryResource, or before begin_building()"
    )


def _pool_destroyer(owner: int) -> Any:
    """The destroy call of a pool's handle: for a device pool whose peer access the resource
    manages (``owner >= 0``), its access is cleared first (the driver may hand the handle out
    again with the old access), then the pool is destroyed."""

    def destroy(pool: Any) -> Any:
        if owner >= 0:
            revoke_peer_access(pool, owner)  # reports its own failure; the pool goes anyway
        return driver.cuMemPoolDestroy(pool)  # its status: checked by the OwnedHandle

    return destroy


def make_location(kind: int, ident: int) -> driver.CUmemLocation:
    loc = driver.CUmemLocation()
    loc.type = driver.CUmemLocationType(kind)
    loc.id = ident
    return loc


class MemoryPoolAttributes:
    """Live statistics and settings of a memory pool (``resource.attributes``).

    Every read queries the driver (``cuMemPoolGetAttribute``).
    """

    __slots__ = ("_mr",)

    def __init__(self, mr: _PoolResource) -> None:
        self._mr = mr

    def _get(self, attr: Any) -> int:
        pool = self._mr._live_pool()
        return int(handle_return(driver.cuMemPoolGetAttribute(pool, attr), "cuMemPoolGetAttribute"))

    @property
    def reuse_follow_event_dependencies(self) -> bool:
        """Whether freed memory is reused across streams ordered by events."""
        return bool(self._get(_PA.CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES))

    @property
    def reuse_allow_opportunistic(self) -> bool:
        """Whether freed memory is reused when the free is known to have completed."""
        return bool(self._get(_PA.CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC))

    @property
    def reuse_allow_internal_dependencies(self) -> bool:
        """Whether the driver may insert dependencies to reuse freed memory."""
        return bool(self._get(_PA.CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES))

    @property
    def release_threshold(self) -> int:
        """Bytes the pool keeps reserved at a synchronisation instead of releasing them.

        Settable (an int >= 0); raising it makes repeated allocations cheaper.
        """
        return self._get(_PA.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)

    @release_threshold.setter
    def release_threshold(self, value: int) -> None:
        v = check_int("release_threshold", value, minimum=0)
        pool = self._mr._live_pool()
        handle_return(
            driver.cuMemPoolSetAttribute(
                pool, _PA.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, driver.cuuint64_t(v)
            ),
            "cuMemPoolSetAttribute",
        )

    @property
    def reserved_mem_current(self) -> int:
        """Bytes of backing memory the pool currently holds."""
        return self._get(_PA.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)

    @property
    def reserved_mem_high(self) -> int:
        """High-water mark of :attr:`reserved_mem_current`."""
        return self._get(_PA.CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)

    @property
    def used_mem_current(self) -> int:
        """Bytes currently allocated to users from the pool."""
        return self._get(_PA.CU_MEMPOOL_ATTR_USED_MEM_CURRENT)

    @property
    def used_mem_high(self) -> int:
        """High-water mark of :attr:`used_mem_current`."""
        return self._get(_PA.CU_MEMPOOL_ATTR_USED_MEM_HIGH)

    def __repr__(self) -> str:
        try:
            return (
                f"<MemoryPoolAttributes reserved={self.reserved_mem_current} used={self.used_mem_current} "
                f"release_threshold={self.release_threshold}>"
            )
        except Exception:
            return "<MemoryPoolAttributes (unavailable)>"


class _PoolResource(MemoryResource):
    """Shared implementation of the pool-backed resources (not public)."""

    # _alloc_pool (the pool's address while it can allocate; 0 when closed or mapped) is a slot:
    # the native allocate entry reads it through its member descriptor (see
    # _handles/_method_entries.py). Every other attribute lives in the instance __dict__.
    __slots__ = ("__dict__", "_alloc_pool")

    _pool: Any
    _pool_int: int
    _owned: bool
    _mapped: bool
    _ipc_enabled: bool
    _dev_id: int
    _pool_h: OwnedHandle | None  # owns the pool (None: a pool cuda_core does not own)
    _alloc_handle: Any
    _uuid: Any  # uuid.UUID of an IPC-enabled resource (see uuid), else None

    def _init_pool(
        self,
        pool: Any,
        owned: bool,
        dev_id: int,
        *,
        ipc: bool = False,
        mapped: bool = False,
        peers: bool = False,
    ) -> None:
        self._pool = pool
        self._pool_int = int(pool) if pool is not None else 0
        self._owned = owned
        self._mapped = mapped
        self._ipc_enabled = ipc
        self._dev_id = dev_id
        self._alloc_handle = None
        self._alloc_pool = 0 if mapped else self._pool_int
        self._uuid = None
        if ipc and not mapped:
            self._uuid = _registry.new_exporter(self)
        if owned:
            # ``peers``: a device pool whose peer access the resource manages is cleared before
            # it is destroyed (the driver may hand the handle out again with the old access).
            destroy = _pool_destroyer(dev_id if peers and not mapped else -1)
            self._pool_h = OwnedHandle("memory pool", pool, destroy, at_exit=False)
        else:
            self._pool_h = None
        if ipc and not mapped:
            # cuMemPoolExportPointer (Buffer.ipc_descriptor) fails with
            # CUDA_ERROR_INVALID_VALUE until the pool itself has been exported once.
            export_pool = _links.ipc.export_pool  # _ipc builds on pools: a link, set by it
            try:
                export_pool(self)
            except BaseException:
                self.close()
                raise

    # -- sharing between processes ------------------------------------------------------------

    @property
    def uuid(self) -> Any:
        """A ``uuid.UUID`` naming an IPC-enabled resource across processes (a mapping has its
        exporter's); ``None`` otherwise.

        Sending an IPC-enabled resource through ``multiprocessing`` sends its allocation handle
        and uuid: the receiver maps the pool once and registers the mapping under the uuid. Plain
        :mod:`pickle` sends the uuid alone, which the receiver looks up (:meth:`from_registry`);
        buffers find their resource the same way.
        """
        return self._uuid

    def register(self, uuid: Any) -> Any:
        """Register this mapped resource under ``uuid`` (its exporter's :attr:`uuid`).

        An exporting resource is found by its own uuid already: registering it under that uuid
        returns it.

        Returns
        -------
        MemoryResource
            The resource registered under ``uuid``: this one, or the mapping of the same pool
            registered before.

        Raises
        ------
        TypeError
            ``uuid`` is not a ``uuid.UUID``.
        RuntimeError
            The resource is closed, not IPC-enabled, or registered under another uuid.
        """
        return _registry.register(self, uuid)

    @classmethod
    def from_registry(cls, uuid: Any) -> Any:
        """The open resource of this class registered (or exporting) in this process under ``uuid``.

        Raises
        ------
        TypeError
            ``uuid`` is not a ``uuid.UUID``.
        RuntimeError
            No open resource is registered under ``uuid``, or it is of another class.
        """
        return _registry.find_registered(cls, uuid)

    def _live_pool(self) -> Any:
        pool = self._pool
        if pool is None:
            raise RuntimeError(f"{type(self).__name__} has been closed")
        return pool

    # -- allocation ---------------------------------------------------------------------------

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """Allocate ``size`` bytes from the pool, ordered on ``stream``.

        Parameters
        ----------
        size : int
            Number of bytes (``>= 0``).
        stream : Stream
            Keyword-only and required: the allocation is ordered on it and it becomes the
            buffer's deallocation stream. Pass ``device.default_stream`` for the default stream.

        Returns
        -------
        Buffer

        Raises
        ------
        TypeError
            ``stream`` is not a stream, ``size`` is not an int, or the resource is a mapped
            (imported) one, which cannot allocate (as in ``cuda.core``).
        ValueError
            ``size`` is negative.
        RuntimeError
            The resource is closed.
        CUDAError
            The pool cannot provide the memory (the message names the requested size).
        """
        s = stream if type(stream) is _links.Stream else _links.as_stream(stream)
        pool = self._alloc_pool
        h = s._h
        if type(size) is int and size > 0 and pool and not h.is_released:
            # The hot path: the stream's handle carries its context (a borrowed stream's is
            # found once; a default-stream token names the current context's).
            ctx = h.ctx
            try:
                a = _pool_allocate(pool, size, h, ctx if ctx is not None else h.context())
            except CUDAError as exc:
                if exc.api == "cuStreamIsCapturing" and exc.code == _CAPTURE_UNSUPPORTED:
                    raise capture_refused(self) from None
                raise make_error(exc.code, exc.api, f"allocating {size} bytes failed") from None
            buf = _new(Buffer)
            buf._h = a
            buf._ptr = a.ptr
            buf._size = size
            buf._mr = self
            return buf
        return self._allocate_slow(size, s)

    def _allocate_slow(self, size: Any, s: Any) -> Buffer:
        # Everything but the hot path: size checks, a closed stream, a closed or mapped resource.
        if type(size) is not int or size < 0:
            size = check_size(size)
        pool = self._pool
        if pool is None or self._mapped:
            self._live_pool()
            # cuda.core's exact message (code compares it whole); the hint goes in a note
            err = TypeError("Cannot allocate from a mapped IPC-enabled memory resource")
            err.add_note(
                "A mapped (imported) resource only maps buffers shared with "
                "Buffer.from_ipc_descriptor(); allocate in the exporting process."
            )
            raise err
        live_handle(s)
        if not size:
            if capture_status(s) != _CAPTURE_NONE:  # refused as any other size is (as in cuda.core)
                raise capture_refused(self)
            return _owned_buffer(0, 0, self, s, None)
        return self.allocate(size, stream=s)

    def _default_stream(self) -> Any:
        Device = _links.Device

        dev = Device(self._dev_id if self._dev_id >= 0 else None)
        dev._primary_ctx()
        return dev.default_stream

    def _free(self, ptr: Any, size: int, stream: Any, ctx: Any) -> None:
        # An explicit deallocate(); ``ptr`` is an int or a CUdeviceptr.
        if stream is None:
            stream = self._default_stream()
            ctx = stream_context(stream)
        sh = stream._h
        # A deallocation stream closed since: free on the legacy default stream (0) of the
        # buffer's context (ordered after the work of every blocking stream).
        h = 0 if sh.is_released else sh.address
        handle_return(in_context(ctx, _cuMemFreeAsync, ptr, h), "cuMemFreeAsync")

    def deallocate(self, ptr: int, size: int, *, stream: Any = None) -> None:
        """Free memory from :meth:`allocate`, ordered on ``stream``.

        Parameters
        ----------
        ptr : int
            The address.
        size : int
            The size that was allocated (unused by pools).
        stream : Stream, optional
            The stream the free is ordered on; ``None``: the device's default stream.

        Raises
        ------
        TypeError
            ``stream`` is not a stream.
        CUDAError
            The driver failed to free the memory.
        """
        if stream is None:
            self._free(int(ptr), size, None, None)
            return
        s = _links.as_stream(stream)
        self._free(int(ptr), size, s, stream_context(s))

    # -- facts ----------------------------------------------------------------------------------

    @property
    def handle(self) -> driver.CUmemoryPool:
        """The driver handle of the pool (``CUmemoryPool``); ``CUmemoryPool(0)`` once closed, as
        in ``cuda.core``."""
        pool = self._pool
        return driver.CUmemoryPool(0) if pool is None else pool

    @property
    def is_handle_owned(self) -> bool:
        """Whether this resource created (and will destroy) its pool."""
        return self._owned

    @property
    def is_ipc_enabled(self) -> bool:
        """Whether the pool can be shared with other processes."""
        return self._ipc_enabled

    @property
    def is_mapped(self) -> bool:
        """Whether this resource maps a pool imported from another process."""
        return self._mapped

    @property
    def device_id(self) -> int:
        """The device ordinal of the pool's memory (``-1`` for host memory)."""
        return self._dev_id

    @property
    def attributes(self) -> MemoryPoolAttributes:
        """Live pool statistics and settings (reserved and used memory, release threshold).

        Raises ``RuntimeError`` once the resource is closed, as in ``cuda.core``.
        """
        self._live_pool()
        return MemoryPoolAttributes(self)

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._pool is None

    def close(self) -> None:
        """Destroy an owned pool (deferred by the driver until its buffers are freed); idempotent.

        A resource over a device's current pool does not own it: closing only detaches it.
        """
        if self._pool is None:
            return
        h = self._alloc_handle
        if h is not None:
            self._alloc_handle = None
            h.close()
        if self._mapped and self._uuid is not None:
            _registry.unregister(self)
        h = self._pool_h
        self._pool = None
        self._alloc_pool = 0
        if h is not None:
            self._pool_h = None
            h.release()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_pool(
    alloc_type: Any, loc_type: int, loc_id: int, max_size: int, ipc: bool
) -> driver.CUmemoryPool:
    """``cuMemPoolCreate`` with the given location and options."""
    ensure_driver()
    props = driver.CUmemPoolProps()
    props.allocType = alloc_type
    props.location = make_location(loc_type, loc_id)
    props.maxSize = max_size
    if ipc:
        props.handleTypes = (
            driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        )
    else:
        props.handleTypes = driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
    pool = handle_return(driver.cuMemPoolCreate(props), "cuMemPoolCreate")
    _log.debug(
        "memory pool 0x%x created (location type %d, id %d, ipc %s)",
        int(pool),
        loc_type,
        loc_id,
        ipc,
    )
    return pool


def current_pool(alloc_type: Any, loc_type: int, loc_id: int) -> driver.CUmemoryPool:
    """``cuMemGetMemPool``: the pool currently used for the location and allocation type."""
    ensure_driver()
    return handle_return(
        driver.cuMemGetMemPool(make_location(loc_type, loc_id), alloc_type), "cuMemGetMemPool"
    )


_RW = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_NO_ACCESS = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_NONE
_LOC_DEVICE = int(driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE)


def has_access(pool: Any, device_id: int) -> bool:
    """Whether device ``device_id`` can read and write the pool's memory (``cuMemPoolGetAccess``)."""
    err, flags = driver.cuMemPoolGetAccess(pool, make_location(_LOC_DEVICE, device_id))
    if err:
        raise make_error(
            err, "cuMemPoolGetAccess", f"querying device {device_id}'s access to a memory pool"
        )
    return flags == _RW


def lacking_access(pool: Any, device_ids: list[int]) -> list[int]:
    """The devices of ``device_ids`` that cannot yet read and write the pool's memory."""
    out = []
    for d in device_ids:
        err, flags = driver.cuMemPoolGetAccess(pool, make_location(_LOC_DEVICE, d))
        if err or flags != _RW:
            out.append(d)
    return out


def set_access(
    pool: Any,
    device_ids: list[int],
    readwrite: bool = True,
    revoke: list[int] | tuple[int, ...] = (),
) -> None:
    """Grant (``readwrite``) or revoke access to a pool from the devices ``device_ids``, and
    revoke it from the devices ``revoke``: one ``cuMemPoolSetAccess`` for all of them (the
    driver updates the mappings of every allocation at once)."""
    grant = _RW if readwrite else _NO_ACCESS
    descs = []
    for flags, ids in ((grant, device_ids), (_NO_ACCESS, revoke)):
        for d in ids:
            desc = driver.CUmemAccessDesc()
            desc.location = make_location(_LOC_DEVICE, d)
            desc.flags = flags
            descs.append(desc)
    if descs:
        handle_return(driver.cuMemPoolSetAccess(pool, descs, len(descs)), "cuMemPoolSetAccess")


def revoke_peer_access(pool: Any, owner: int) -> None:
    """Revoke every other device's access to a device pool that is about to be destroyed, so
    that a pool the driver makes later with the same handle does not start out shared; never
    raises (a finalizer calls it): a failure is a :class:`~cuda_core.CUDAWarning`.

    Only a pool with no memory in use is changed: the driver destroys a pool only once its
    last allocation is freed, and a buffer still open (or a free still queued) may be in use
    by a peer. One request per device: the driver checks a request as a whole and refuses all
    of it for one device it cannot change.
    """
    try:
        used = handle_return(
            driver.cuMemPoolGetAttribute(pool, _PA.CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
            "cuMemPoolGetAttribute",
        )
        if int(used):
            return
        count = handle_return(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        for d in range(int(count)):
            if d == owner:
                continue
            err, flags = driver.cuMemPoolGetAccess(pool, make_location(_LOC_DEVICE, d))
            if not err and flags != _NO_ACCESS:  # (a device that cannot be asked has none)
                desc = driver.CUmemAccessDesc()
                desc.location = make_location(_LOC_DEVICE, d)
                desc.flags = _NO_ACCESS
                handle_return(driver.cuMemPoolSetAccess(pool, [desc], 1), "cuMemPoolSetAccess")
    except Exception as exc:  # a CUDAWarning (silent for the driver shutting down), never raised
        warn_release_failure("the peer access of a memory pool", pool, exc)


def check_max_size(value: Any) -> int:
    return check_int("max_size", value, minimum=0)


def check_bool(name: str, value: Any) -> bool:
    """An on/off option: any truth value (``1``, ``numpy.True_``, ``None`` -> ``False``), as in cuda.core."""
    return bool(value)


def device_count() -> int:
    return _links.device_count()
