"""ExternalMemory: memory another API (Vulkan, a video decoder, another process) exported as a
file descriptor, imported into CUDA and mapped as buffers and mipmapped arrays.

``cuImportExternalMemory`` imports the memory once (:meth:`ExternalMemory.from_fd`);
:meth:`~ExternalMemory.map_buffer` (``cuExternalMemoryGetMappedBuffer``) and
:meth:`~ExternalMemory.map_mipmapped_array` (``cuExternalMemoryGetMappedMipmappedArray``) map
parts of it. The handles live in the handle layer (:mod:`cuda_core._handles._external`): every
mapping holds the import, so mappings are released before the import, whatever order the
Python objects go in.
"""

from __future__ import annotations

from typing import Any, Self

from .. import _links
from .._handles import _external as _ext
from .._handles._owned import OwnedHandle
from .._memory import Buffer
from .._utils import arg_error, check_int
from ..texture._array import array_descriptor, options_of
from ..texture._mipmapped_array import MipmappedArray, MipmappedArrayOptions

__all__ = ["ExternalMemory"]


def device_of(device: Any, api: str) -> tuple[int, Any]:
    """``(ordinal, CUcontext)`` of ``device`` (a Device, an ordinal, or ``None``: the current
    device), whose primary context must be set up (``Device.set_current()``)."""
    Device = _links.Device
    if device is None:
        dev = Device()
    elif isinstance(device, bool) or not isinstance(device, (int, Device)):
        raise arg_error("device", "a Device, an int ordinal or None", device, exc=TypeError)
    else:
        dev = Device(device)
    return dev._id, dev._require_ctx(api)


class Imported:
    """What ExternalMemory and ExternalSemaphore share: the import's handle, its device and
    context, ``close()`` (drops this object's reference; the handle layer destroys the import
    once nothing holds it), ``with``, :attr:`is_closed`, :attr:`handle` and :attr:`device`."""

    __slots__ = ("__weakref__", "_ctx", "_device_id", "_ref")

    _ref: OwnedHandle | None
    _ctx: Any
    _device_id: int

    def close(self) -> None:
        """Drop this object's reference to the import; idempotent (see the class for when the
        import is destroyed)."""
        self._ref = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._ref is None

    @property
    def handle(self) -> int:
        """The driver handle's address (``0`` once closed)."""
        r = self._ref
        return 0 if r is None or r.value is None else int(r.value)

    @property
    def device(self) -> Any:
        """The :class:`~cuda_core.Device` it was imported into."""
        return _links.Device(self._device_id)


class ExternalMemory(Imported):
    """Memory exported by another API, imported into CUDA (``CUexternalMemory``).

    Made by :meth:`from_fd`; not constructed directly. Map parts of it with :meth:`map_buffer`
    (a :class:`~cuda_core.Buffer`) or :meth:`map_mipmapped_array` (a
    :class:`~cuda_core.texture.MipmappedArray` for the texture API). An extension of cuda_core:
    NVIDIA's ``cuda.core`` has no counterpart.

    Lifetime: every mapping keeps the import alive. :meth:`close` (or leaving ``with``) drops
    this object's reference; ``cuDestroyExternalMemory`` runs once the object and every buffer
    and array mapped from it are closed or collected, always after their own release
    (``cuMemFree``, ``cuMipmappedArrayDestroy``). A failure then is a
    :class:`~cuda_core.CUDAWarning`.

    Examples
    --------
    >>> fd = vk_get_memory_fd(vk_memory)                       # doctest: +SKIP
    >>> with ExternalMemory.from_fd(fd, size) as mem:           # CUDA now owns fd
    ...     with mem.map_buffer(0, size) as buf:
    ...         launch(s, config, kernel, buf, n)
    """

    __slots__ = ("_handle_type", "_size")

    _size: int
    _handle_type: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "ExternalMemory cannot be instantiated directly. Use ExternalMemory.from_fd()"
        )

    @classmethod
    def from_fd(
        cls,
        fd: int,
        size: int,
        *,
        device: Any = None,
        handle_type: str = "opaque_fd",
        dedicated: bool = False,
    ) -> ExternalMemory:
        """Import ``size`` bytes of memory exported as the file descriptor ``fd``.

        On success ``fd`` is consumed, as CUDA consumes an imported descriptor: it is closed
        (the import keeps a duplicate until it is destroyed), and the caller must neither use
        nor close it (``os.dup`` it first to keep a copy). On failure nothing was taken:
        ``fd`` is still open and the caller's to close, even where the driver closes a
        descriptor it refuses (the driver is handed a duplicate).

        Parameters
        ----------
        fd : int
            An open file descriptor, e.g. from ``vkGetMemoryFdKHR``
            (``VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT``) or
            ``cuMemExportToShareableHandle``.
        size : int
            The size of the exported allocation in bytes (``> 0``), as the exporter allocated
            it (Vulkan: ``VkMemoryAllocateInfo.allocationSize``).
        device : Device or int, optional
            The device to import into (its primary context must be set up with
            ``Device.set_current()``); default: the current device.
        handle_type : str
            ``"opaque_fd"`` (``CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD``), or ``"dmabuf_fd"``
            (``CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD``: a Linux dma-buf, where the driver
            supports it and cuda-bindings 13 binds it).
        dedicated : bool
            The exporter made a dedicated allocation (Vulkan: ``VkMemoryDedicatedAllocateInfo``;
            sets ``CUDA_EXTERNAL_MEMORY_DEDICATED``).

        Returns
        -------
        ExternalMemory

        Raises
        ------
        TypeError
            ``fd`` or ``size`` is not an integer, ``device`` not a Device or an ordinal.
        ValueError
            ``fd`` is negative or not open, ``size`` is not positive, or ``handle_type`` is
            unknown (or not bound by the installed cuda-bindings); ``fd`` stays the caller's.
        CUDAError
            The driver refused the import (a descriptor of another kind or another device, a
            size larger than the exported allocation, no context); ``fd`` stays the caller's.
        """
        n = _ext.check_fd(fd)
        nbytes = check_int("size", size, 1)
        ht = _ext.MEMORY_HANDLE_TYPES.get(handle_type) if isinstance(handle_type, str) else None
        if ht is None:
            known = ", ".join(repr(k) for k in sorted(_ext.MEMORY_HANDLE_TYPES))
            hint = "" if "dmabuf_fd" in _ext.MEMORY_HANDLE_TYPES else (
                "'dmabuf_fd' needs cuda-bindings 13 (CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD)"
            )  # fmt: skip
            raise arg_error("handle_type", f"one of {known}", handle_type, hint)
        device_id, ctx = device_of(device, "cuImportExternalMemory")
        ref = _ext.import_memory(ctx, n, nbytes, ht, bool(dedicated))
        self = object.__new__(cls)
        self._ref, self._ctx, self._device_id, self._size = ref, ctx, device_id, nbytes
        self._handle_type = handle_type
        return self

    # -- mappings -----------------------------------------------------------------------------

    def _live(self) -> OwnedHandle:
        r = self._ref
        if r is None:
            raise RuntimeError("ExternalMemory has been closed; it cannot be used after close()")
        return r

    def _check_range(self, offset: Any, size: Any) -> tuple[int, int]:
        off = check_int("offset", offset, 0)
        n = check_int("size", size, 1)
        if off + n > self._size:
            raise arg_error(
                "offset + size",
                f"at most the imported size, {self._size} bytes",
                off + n,
                f"offset={off}, size={n}",
            )
        return off, n

    def map_buffer(self, offset: int = 0, size: int | None = None) -> Buffer:
        """Map ``size`` bytes at ``offset`` of the import as a :class:`~cuda_core.Buffer`.

        The buffer keeps the import alive. Closing it (or collecting it) frees the mapping
        with ``cuMemFree``, after synchronising its deallocation stream when it has one
        (:meth:`Buffer.set_deallocation_stream` or ``close(stream=...)``).

        Parameters
        ----------
        offset : int
            Byte offset into the import (``>= 0``). Vulkan and CUDA both want it aligned as
            the exporter's memory requirements say.
        size : int, optional
            Bytes to map (``> 0``); default: the rest of the import.

        Raises
        ------
        ValueError
            ``offset + size`` exceeds the imported size (checked before the driver).
        RuntimeError
            The import was closed.
        """
        ref = self._live()
        off, n = self._check_range(offset, self._size - int(offset) if size is None else size)
        ptr = _ext.map_buffer(ref, self._ctx, off, n)
        free = _ext.MappedFree(ref, self._ctx)
        return Buffer._owned(ptr, n, None, None, free)  # type: ignore[arg-type]

    def map_mipmapped_array(
        self, options: MipmappedArrayOptions | dict[str, Any], offset: int = 0
    ) -> MipmappedArray:
        """Map the import's memory at ``offset`` as a mipmapped CUDA array of ``options``.

        Sample it through a :class:`~cuda_core.texture.TextureObject`
        (:meth:`ResourceDescriptor.from_mipmapped_array
        <cuda_core.texture.ResourceDescriptor.from_mipmapped_array>`), or read a level with
        :meth:`MipmappedArray.get_level <cuda_core.texture.MipmappedArray.get_level>`. The
        layout must be the one the exporter used (Vulkan: an image with optimal tiling whose
        format, extent and mip levels match). The array keeps the import alive; it is
        destroyed (``cuMipmappedArrayDestroy``) once it and every texture or level on it are
        closed or collected.

        Parameters
        ----------
        options : MipmappedArrayOptions or dict
            Shape, format, channels, levels and surface use.
        offset : int
            Byte offset into the import (``>= 0``).

        Raises
        ------
        ValueError
            Bad options or offset (``offset`` at or past the imported size).
        CUDAError
            The driver refused the layout.
        """
        ref = self._live()
        o = options_of(MipmappedArrayOptions, options)
        off = check_int("offset", offset, 0)
        if off >= self._size:
            raise arg_error("offset", f"less than the imported size, {self._size} bytes", offset)
        surface = bool(o.is_surface_load_store)
        desc = array_descriptor(o.shape, o.format, o.num_channels, surface)
        h = _ext.map_mipmapped_array(ref, self._ctx, off, desc, o.num_levels)
        arr = MipmappedArray._make(
            h, o.shape, o.format, o.num_channels, surface, _links.Device(self._device_id)
        )
        arr._num_levels = o.num_levels
        return arr

    # -- facts --------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """The imported size in bytes."""
        return self._size

    @property
    def handle_type(self) -> str:
        """``"opaque_fd"`` or ``"dmabuf_fd"``."""
        return self._handle_type

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else f"handle=0x{self.handle:x}"
        return (
            f"<ExternalMemory size={self._size} handle_type={self._handle_type!r} "
            f"device={self._device_id} {state}>"
        )
