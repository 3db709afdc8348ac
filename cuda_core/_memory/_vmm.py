"""VirtualMemoryResource: memory from the CUDA virtual memory management (VMM) APIs.

An allocation is physical memory (``cuMemCreate``) mapped (``cuMemMap``) into a reserved range
of virtual addresses (``cuMemAddressReserve``) with access rights set per device
(``cuMemSetAccess``). :meth:`VirtualMemoryResource.modify_allocation` grows a mapping in place
where the addresses after it are free, else moves it to a larger range (the physical memory
is mapped at the new addresses, not copied).

Each buffer's pieces are kept by a ``_Mapping`` (``_vmm_mapping``), the buffer's release
function. The physical handles are released right after mapping, so unmapping gives the
memory back. The buffers are :class:`VirtualMemoryBuffer` (``cuda.core`` 1.3's class): their
``close()`` refuses a capturing stream, on which the synchronous unmap cannot run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import _links
from .._compat import CUDA13, MANAGED_ALLOCATION, driver, missing
from .._handles._contexts import in_context
from .._handles._tokens import LAST_TOKEN as _LAST_TOKEN
from .._utils import arg_error, check_int, check_or_create_options, handle_return, make_error
from ..typing import (
    VirtualMemoryAccessType,
    VirtualMemoryAllocationType,
    VirtualMemoryGranularityType,
    VirtualMemoryHandleType,
    VirtualMemoryLocationType,
)
from ._buffer import Buffer
from ._resource import MemoryResource, check_size
from ._vmm_mapping import _align_up, _Mapping, _Undo, _unmap, _unmapper, _wait

__all__ = ["VirtualMemoryBuffer", "VirtualMemoryResource", "VirtualMemoryResourceOptions"]

_L = driver.CUmemLocationType
_H = driver.CUmemAllocationHandleType
_G = driver.CUmemAllocationGranularity_flags
_A = driver.CUmemAccess_flags
_T = driver.CUmemAllocationType

_LOCATIONS = {
    VirtualMemoryLocationType.DEVICE: _L.CU_MEM_LOCATION_TYPE_DEVICE,
    VirtualMemoryLocationType.HOST: _L.CU_MEM_LOCATION_TYPE_HOST,
    VirtualMemoryLocationType.HOST_NUMA: _L.CU_MEM_LOCATION_TYPE_HOST_NUMA,
    VirtualMemoryLocationType.HOST_NUMA_CURRENT: _L.CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT,
}
_HOST_LOCATIONS = frozenset(_LOCATIONS) - {VirtualMemoryLocationType.DEVICE}
_HANDLES: dict[Any, Any] = {
    None: _H.CU_MEM_HANDLE_TYPE_NONE,
    VirtualMemoryHandleType.POSIX_FD: _H.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
    VirtualMemoryHandleType.WIN32_KMT: _H.CU_MEM_HANDLE_TYPE_WIN32_KMT,
    VirtualMemoryHandleType.FABRIC: _H.CU_MEM_HANDLE_TYPE_FABRIC,
}
_GRANULARITY = {
    VirtualMemoryGranularityType.MINIMUM: _G.CU_MEM_ALLOC_GRANULARITY_MINIMUM,
    VirtualMemoryGranularityType.RECOMMENDED: _G.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
}
_ACCESS: dict[Any, Any] = {
    None: None,
    VirtualMemoryAccessType.READ_WRITE: _A.CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    VirtualMemoryAccessType.READ: _A.CU_MEM_ACCESS_FLAGS_PROT_READ,
}
_ACTIVE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE
_ALLOCATION_TYPES: dict[Any, Any] = {
    VirtualMemoryAllocationType.PINNED: _T.CU_MEM_ALLOCATION_TYPE_PINNED
}
if MANAGED_ALLOCATION is not None:  # cuda-bindings 13+
    _ALLOCATION_TYPES[VirtualMemoryAllocationType.MANAGED] = MANAGED_ALLOCATION


def _enum(name: str, cls: Any, value: Any, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    try:
        return cls(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in cls)
        rule = f"one of {choices}" + (" or None" if allow_none else "")
        if value == "win32":
            raise NotImplementedError(
                "handle_type 'win32' is not supported; use 'win32_kmt' on Windows"
            ) from None
        raise arg_error(name, rule, value) from None


@dataclass
class VirtualMemoryResourceOptions:
    """How a :class:`VirtualMemoryResource` allocates (the CUDA VMM settings).

    String values are accepted for every enumeration (``"posix_fd"``, ``"device"``, ...) and
    stored as the :mod:`cuda_core.typing` members, which compare equal to their strings.

    Attributes
    ----------
    allocation_type : VirtualMemoryAllocationType or str
        ``"pinned"`` (default) or ``"managed"`` (CUDA 13+).
    location_type : VirtualMemoryLocationType or str
        Where the physical memory lives: ``"device"`` (default), ``"host"``, ``"host_numa"``,
        ``"host_numa_current"``.
    handle_type : VirtualMemoryHandleType or str or None
        The OS handle the physical memory can be exported as (for sharing with other
        processes): ``"posix_fd"`` (default), ``"win32_kmt"``, ``"fabric"``, or ``None``.
    granularity : VirtualMemoryGranularityType or str
        Sizes are rounded up to the ``"recommended"`` (default) or ``"minimum"`` granularity.
    gpu_direct_rdma : bool
        Ask for GPUDirect RDMA capable memory (default ``False``).
    addr_hint : int or None
        A virtual address to try to reserve at; ``0`` or ``None`` (default ``0``): anywhere.
    addr_align : int or None
        Alignment of the reserved addresses; ``None`` (default): the granularity.
    peers : iterable of int
        Other devices (ordinals) granted ``peer_access`` to the memory (default none).
    self_access : VirtualMemoryAccessType or str or None
        Access of the owning device: ``"rw"`` (default), ``"r"`` or ``None`` (none).
    peer_access : VirtualMemoryAccessType or str or None
        Access of the ``peers``: ``"rw"`` (default), ``"r"`` or ``None``.

    Raises
    ------
    ValueError
        An unknown enumeration value, a negative ``addr_hint``, or a non-positive
        ``addr_align``; ``"managed"`` with cuda-bindings older than 13.
    TypeError
        A field of the wrong type.
    NotImplementedError
        ``handle_type="win32"``.
    """

    allocation_type: VirtualMemoryAllocationType = VirtualMemoryAllocationType.PINNED
    location_type: VirtualMemoryLocationType = VirtualMemoryLocationType.DEVICE
    handle_type: VirtualMemoryHandleType = VirtualMemoryHandleType.POSIX_FD
    granularity: VirtualMemoryGranularityType = VirtualMemoryGranularityType.RECOMMENDED
    gpu_direct_rdma: bool = False
    addr_hint: int | None = 0
    addr_align: int | None = None
    peers: Iterable[int] = field(default_factory=tuple)
    self_access: VirtualMemoryAccessType = VirtualMemoryAccessType.READ_WRITE
    peer_access: VirtualMemoryAccessType = VirtualMemoryAccessType.READ_WRITE

    def __post_init__(self) -> None:
        self.allocation_type = _enum(
            "allocation_type", VirtualMemoryAllocationType, self.allocation_type
        )
        if self.allocation_type not in _ALLOCATION_TYPES:
            why = missing("allocation_type='managed'", bindings=CUDA13)
            raise arg_error(
                "allocation_type",
                "'pinned' with cuda-bindings 12.x",
                self.allocation_type,
                hint=why or "",
            )
        self.location_type = _enum("location_type", VirtualMemoryLocationType, self.location_type)
        self.handle_type = _enum(
            "handle_type", VirtualMemoryHandleType, self.handle_type, allow_none=True
        )
        self.granularity = _enum("granularity", VirtualMemoryGranularityType, self.granularity)
        self.self_access = _enum(
            "self_access", VirtualMemoryAccessType, self.self_access, allow_none=True
        )
        self.peer_access = _enum(
            "peer_access", VirtualMemoryAccessType, self.peer_access, allow_none=True
        )
        if not isinstance(self.gpu_direct_rdma, bool):
            raise arg_error("gpu_direct_rdma", "a bool", self.gpu_direct_rdma, exc=TypeError)
        if self.addr_hint is not None:
            self.addr_hint = check_int("addr_hint", self.addr_hint, minimum=0)
        if self.addr_align is not None:
            self.addr_align = check_int("addr_align", self.addr_align, minimum=1)
        if isinstance(self.peers, (str, bytes)) or not isinstance(self.peers, Iterable):
            raise arg_error("peers", "an iterable of device ordinals", self.peers, exc=TypeError)
        self.peers = tuple(
            check_int("peers", int(p) if hasattr(p, "device_id") else p, minimum=0)
            for p in self.peers
        )


class VirtualMemoryBuffer(Buffer):
    """A :class:`Buffer` of a :class:`VirtualMemoryResource` (``cuda.core`` 1.3's class).

    It owns its mapping: the physical memory, the reserved address ranges and the mappings
    between them, given back when the buffer is closed or collected (and only then).
    :meth:`VirtualMemoryResource.modify_allocation` grows it in place (see there).
    """

    __slots__ = ()

    def close(self, stream: Any = None) -> None:
        """Unmap the memory and free its address ranges; idempotent.

        Unmapping is synchronous: the deallocation stream (``stream`` when given, else the one
        recorded by :meth:`~Buffer.set_deallocation_stream` or the allocation; without one,
        the device's context) is synchronised first, so work queued on it may still use the
        memory. That cannot happen inside a stream capture: when that stream is not a default
        stream and is capturing, the call raises and the buffer stays open.

        Parameters
        ----------
        stream : Stream or GraphBuilder, optional
            Replaces the recorded deallocation stream, as for :meth:`Buffer.close`.

        Raises
        ------
        RuntimeError
            The deallocation stream is capturing (the buffer stays open).
        TypeError
            ``stream`` is not a stream.
        CUDAError
            The driver failed to synchronise, unmap or free.
        """
        if self._ptr is None:
            return
        h = self._h
        s = _links.as_stream(stream) if stream is not None else getattr(h, "stream", None)
        if s is not None and _capturing(s):
            raise RuntimeError(
                "cannot close a VirtualMemoryResource buffer on a capturing stream: virtual "
                "memory deallocation is synchronous and cannot be captured; end the capture "
                "first, or close it on another stream (close(stream=...))"
            )
        super().close(s if stream is not None else None)


def _capturing(s: Any) -> bool:
    """Whether the Stream ``s`` is a real stream (not a default-stream token) that is capturing."""
    h = s._h
    if h.is_released or h.address <= _LAST_TOKEN:
        return False
    status = handle_return(
        driver.cuStreamIsCapturing(driver.CUstream(h.address)), "cuStreamIsCapturing"
    )
    return bool(status == _ACTIVE)


class VirtualMemoryResource(MemoryResource):
    """Device (or host) memory from the CUDA virtual memory management APIs.

    Allocation is synchronous: ``cuMemCreate`` + ``cuMemAddressReserve`` + ``cuMemMap`` +
    ``cuMemSetAccess`` in the device's primary context (call ``Device.set_current()`` first),
    undone step by step when one fails. Sizes are rounded up to the allocation granularity and
    the returned buffer reports the rounded size. A buffer's memory is freed once (unmapped,
    and its address ranges freed) when it is closed or collected, after its deallocation stream
    (or, without one, the device) is synchronised.

    Parameters
    ----------
    device_id : Device or int
        The device whose memory is allocated (and whose context the calls run in).
    config : VirtualMemoryResourceOptions or dict, optional
        The VMM settings (default: pinned device memory, read-write, POSIX fd handles).

    Raises
    ------
    RuntimeError
        The device does not support virtual memory management, or GPUDirect RDMA was asked
        for and is not supported.

    Warnings
    --------
    A low-level resource: the pool resources cover common needs. Use it to grow an allocation
    without copying (:meth:`modify_allocation`) or to control mappings and access.

    Examples
    --------
    >>> mr = VirtualMemoryResource(dev, VirtualMemoryResourceOptions(handle_type=None))  # doctest: +SKIP
    >>> buf = mr.allocate(1 << 20)                                                        # doctest: +SKIP
    >>> buf = mr.modify_allocation(buf, 8 << 20)                                          # doctest: +SKIP
    """

    def __init__(
        self, device_id: Any, config: VirtualMemoryResourceOptions | dict | None = None
    ) -> None:
        Device = _links.Device

        if isinstance(device_id, bool) or not isinstance(device_id, (int, Device)):
            raise arg_error("device_id", "a Device or an int ordinal", device_id, exc=TypeError)
        dev = Device(device_id)
        self.config: VirtualMemoryResourceOptions = check_or_create_options(
            VirtualMemoryResourceOptions, config, "config"
        )
        self._dev = dev
        self.device: Any = None if self.config.location_type in _HOST_LOCATIONS else dev
        self._mappings: dict[int, _Mapping] = {}
        if self.device is not None and not dev.properties.virtual_memory_management_supported:
            raise RuntimeError(
                f"VirtualMemoryResource needs CUDA virtual memory management, which device {dev.device_id} lacks"
            )
        if (
            self.config.gpu_direct_rdma
            and self.device is not None
            and not dev.properties.gpu_direct_rdma_supported
        ):
            raise RuntimeError(
                f"GPUDirect RDMA is not supported on device {dev.device_id} (gpu_direct_rdma=True)"
            )

    # -- helpers ----------------------------------------------------------------------------------

    def _prop(self) -> Any:
        cfg = self.config
        prop = driver.CUmemAllocationProp()
        prop.type = _ALLOCATION_TYPES[cfg.allocation_type]
        prop.location.type = _LOCATIONS[cfg.location_type]
        loc = cfg.location_type
        prop.location.id = self._dev.device_id if loc == VirtualMemoryLocationType.DEVICE else 0
        prop.allocFlags.gpuDirectRDMACapable = 1 if cfg.gpu_direct_rdma else 0
        prop.requestedHandleTypes = _HANDLES[cfg.handle_type]
        return prop

    def _granularity(self, ctx: Any, prop: Any) -> int:
        flag = _GRANULARITY[self.config.granularity]
        return int(
            handle_return(
                in_context(ctx, driver.cuMemGetAllocationGranularity, prop, flag),
                "cuMemGetAllocationGranularity",
            )
        )

    def _access(self, prop: Any) -> list[Any]:
        cfg = self.config
        descs = []
        own = _ACCESS[cfg.self_access]
        if own is not None:
            d = driver.CUmemAccessDesc()
            d.location.type = prop.location.type
            d.location.id = prop.location.id
            d.flags = own
            descs.append(d)
        peer = _ACCESS[cfg.peer_access]
        if peer is not None:
            for dev_id in cfg.peers:
                d = driver.CUmemAccessDesc()
                d.location.type = _L.CU_MEM_LOCATION_TYPE_DEVICE
                d.location.id = int(dev_id)
                d.flags = peer
                descs.append(d)
        return descs

    def _set_access(self, ctx: Any, prop: Any, ptr: int, size: int) -> None:
        descs = self._access(prop)
        if descs and size:
            handle_return(
                in_context(ctx, driver.cuMemSetAccess, ptr, size, descs, len(descs)),
                "cuMemSetAccess",
            )

    def _create(self, ctx: Any, prop: Any, size: int) -> Any:
        err, handle = in_context(ctx, driver.cuMemCreate, size, prop, 0)
        if err:
            raise make_error(
                err,
                "cuMemCreate",
                f"creating {size} bytes ({self.config.location_type}, handle_type={self.config.handle_type}) failed; "
                "handle_type=None avoids exportable handles the device may not support",
            )
        return handle

    def _map_new(self, ctx: Any, prop: Any, ptr: int, size: int, undo: _Undo) -> None:
        """Create ``size`` bytes of physical memory and map them at ``ptr`` (the mapping keeps
        the memory; the handle is released at once)."""
        handle = self._create(ctx, prop, size)
        try:
            handle_return(in_context(ctx, driver.cuMemMap, ptr, size, 0, handle, 0), "cuMemMap")
        finally:
            handle_return(in_context(ctx, driver.cuMemRelease, handle), "cuMemRelease")
        undo.add("cuMemUnmap", _unmapper(ctx, ptr, size))

    def _reserve(self, ctx: Any, size: int, align: int, addr: int, undo: _Undo) -> int:
        ptr = int(
            handle_return(
                in_context(ctx, driver.cuMemAddressReserve, size, align, addr, 0),
                "cuMemAddressReserve",
            )
        )
        undo.add("cuMemAddressFree", lambda: in_context(ctx, driver.cuMemAddressFree, ptr, size))
        return ptr

    def _ctx(self) -> Any:
        return self._dev._require_ctx("VirtualMemoryResource")

    # -- allocation -------------------------------------------------------------------------------

    def allocate(self, size: int, *, stream: Any = None) -> VirtualMemoryBuffer:
        """Allocate at least ``size`` bytes (rounded up to the allocation granularity).

        Parameters
        ----------
        size : int
            Number of bytes (``>= 0``); the buffer's :attr:`~Buffer.size` is the rounded size.
        stream : Stream or GraphBuilder, optional
            Keyword-only. The allocation is synchronous; a given stream becomes the buffer's
            deallocation stream (synchronised before the memory is unmapped).

        Returns
        -------
        VirtualMemoryBuffer
            Owning the mapping.

        Raises
        ------
        TypeError, ValueError
            Bad ``size`` or ``stream``.
        CUDAError
            A driver call failed (every step taken so far is undone), or no context is current
            (call ``Device.set_current()``).
        """
        s = None if stream is None else _links.as_stream(stream)
        size = check_size(size)
        ctx = self._ctx()
        if not size:
            return VirtualMemoryBuffer._owned(0, 0, self, s, None)
        prop = self._prop()
        gran = self._granularity(ctx, prop)
        n = _align_up(size, gran)
        mapping = _Mapping(ctx, self._mappings)
        with _Undo() as undo:
            ptr = self._reserve(
                ctx, n, self.config.addr_align or gran, self.config.addr_hint or 0, undo
            )
            self._map_new(ctx, prop, ptr, n, undo)
            self._set_access(ctx, prop, ptr, n)
        mapping.ranges.append((ptr, n))
        mapping.chunks.append((ptr, n))
        self._mappings[ptr] = mapping
        return VirtualMemoryBuffer._owned(ptr, n, self, s, mapping)

    def modify_allocation(
        self, buf: Buffer, new_size: int, config: VirtualMemoryResourceOptions | dict | None = None
    ) -> Buffer:
        """Grow a buffer of this resource to ``new_size`` bytes, keeping its contents.

        The added physical memory is mapped right after the buffer's addresses when they are
        free (the address stays the same); otherwise the whole mapping moves to a new, larger
        address range (the physical memory is remapped, not copied; the device is synchronised
        before the old addresses are unmapped) and :attr:`~Buffer.handle` changes. Either way
        the same buffer object is returned, open, with ``size == new_size``. A ``new_size`` not
        above the current size changes nothing but the access rights.

        Parameters
        ----------
        buf : Buffer
            An open buffer from this resource's :meth:`allocate`.
        new_size : int
            The new size in bytes.
        config : VirtualMemoryResourceOptions or dict, optional
            New settings for this resource (kept for later allocations too) used for the new
            memory and the access rights.

        Returns
        -------
        Buffer
            ``buf``.

        Raises
        ------
        TypeError
            ``buf`` is not a Buffer.
        RuntimeError
            ``buf`` is closed.
        ValueError
            ``buf`` was not allocated by this resource.
        CUDAError
            A driver call failed; the buffer is left as it was.
        """
        if not isinstance(buf, Buffer):
            raise arg_error("buf", "a Buffer", buf, exc=TypeError)
        if buf.is_closed:
            raise RuntimeError("Buffer has been closed; it cannot be grown")
        new_size = check_size(new_size)
        mapping = self._mappings.get(buf.handle)
        if mapping is None or buf.memory_resource is not self:
            raise arg_error("buf", "a buffer allocated by this VirtualMemoryResource", buf)
        if config is not None:
            self.config = check_or_create_options(VirtualMemoryResourceOptions, config, "config")
        ctx = mapping.ctx
        prop = self._prop()
        gran = self._granularity(ctx, prop)
        mapped = mapping.mapped
        total = _align_up(new_size, gran)
        if total <= mapped:
            self._set_access(ctx, prop, mapping.base, mapped)
            if new_size > buf.size:
                buf._size = new_size
            return buf
        extra = total - mapped
        align = self.config.addr_align or gran
        base = mapping.base
        want = base + mapped
        err, got = in_context(ctx, driver.cuMemAddressReserve, extra, align, want, 0)
        if not err and int(got) == want:
            with _Undo() as undo:
                undo.add(
                    "cuMemAddressFree",
                    lambda: in_context(ctx, driver.cuMemAddressFree, want, extra),
                )
                self._map_new(ctx, prop, want, extra, undo)
                self._set_access(ctx, prop, want, extra)
            mapping.ranges.append((want, extra))
            mapping.chunks.append((want, extra))
        else:
            if not err and int(got):
                handle_return(
                    in_context(ctx, driver.cuMemAddressFree, got, extra), "cuMemAddressFree"
                )
            self._move(buf, mapping, prop, total, align)
        buf._size = new_size
        return buf

    def _move(self, buf: Buffer, mapping: _Mapping, prop: Any, total: int, align: int) -> None:
        # Map the old physical memory (and the new) at a larger range, then drop the old range.
        ctx = mapping.ctx
        mapped = mapping.mapped
        with _Undo() as undo:
            ptr = self._reserve(ctx, total, align, 0, undo)
            offset = 0
            for old, n in mapping.chunks:
                handle = handle_return(
                    in_context(ctx, driver.cuMemRetainAllocationHandle, old),
                    "cuMemRetainAllocationHandle",
                )
                try:
                    handle_return(
                        in_context(ctx, driver.cuMemMap, ptr + offset, n, 0, handle, 0), "cuMemMap"
                    )
                finally:
                    handle_return(in_context(ctx, driver.cuMemRelease, handle), "cuMemRelease")
                undo.add("cuMemUnmap", _unmapper(ctx, ptr + offset, n))
                offset += n
            self._map_new(ctx, prop, ptr + mapped, total - mapped, undo)
            self._set_access(ctx, prop, ptr, total)
        old_chunks, old_ranges = mapping.chunks, mapping.ranges
        self._mappings.pop(mapping.base, None)
        mapping.ranges = [(ptr, total)]
        mapping.chunks = [(ptr, mapped), (ptr + mapped, total - mapped)]
        self._mappings[ptr] = mapping
        buf._ptr = ptr
        _wait(ctx, None)
        _unmap(ctx, old_chunks, old_ranges)

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        """Unmap and free memory from :meth:`allocate` (once; a buffer closed later frees nothing).

        Parameters
        ----------
        ptr : int or cuda.bindings.driver.CUdeviceptr
            The buffer's address.
        size : int
            Its size (used only for memory this resource does not know).
        stream : Stream, optional
            Synchronised before the memory is unmapped; ``None``: the device is synchronised.

        Raises
        ------
        CUDAError
            The driver failed to unmap or free the range.
        """
        s = None if stream is None else _links.as_stream(stream)
        ptr = 0 if ptr is None else int(ptr)
        mapping = self._mappings.get(ptr)
        if mapping is not None:
            mapping.release(s)
            return
        ctx = self._ctx()
        _wait(ctx, s)
        _unmap(ctx, [(ptr, size)], [(ptr, size)])

    # -- facts ------------------------------------------------------------------------------------

    @property
    def is_device_accessible(self) -> bool:
        """Whether the memory is device memory (``location_type == "device"``)."""
        return self.config.location_type == VirtualMemoryLocationType.DEVICE

    @property
    def is_host_accessible(self) -> bool:
        """Whether the memory is host memory (a ``"host*"`` location type)."""
        return self.config.location_type in _HOST_LOCATIONS

    @property
    def device_id(self) -> int:
        """The device ordinal; ``-1`` for host memory."""
        return self.device.device_id if self.device is not None else -1

    def __repr__(self) -> str:
        return (
            f"<VirtualMemoryResource device={self.device_id} location={self.config.location_type}>"
        )
