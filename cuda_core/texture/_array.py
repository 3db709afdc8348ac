"""OpaqueArray: a CUDA array (``CUarray``) for textures and surfaces, and its copies.

A CUDA array has a driver-chosen layout and no device pointer: kernels read it through a
:class:`~cuda_core.texture.TextureObject` and write it through a
:class:`~cuda_core.texture.SurfaceObject`; data moves in and out by copy (``copy_from`` /
``copy_to``, ``cuMemcpy3DAsync``) from a :class:`~cuda_core.Buffer` or a host object.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Self

import numpy

from .. import _links
from .._compat import driver
from .._handles._owned import OwnedHandle
from .._memory import Buffer
from .._stream_ops import (
    capture_status,
    host_address,
    live_handle,
    on_stream,
    stream_context,
    sync_stream,
)
from .._utils import arg_error, handle_return
from ..typing import ArrayFormatType
from ._ref import Owner, destroy_array

__all__ = ["OpaqueArray", "OpaqueArrayOptions"]

_F = ArrayFormatType
_AD = driver.CUarray_format
CU_FORMAT = {
    _F.UINT8: _AD.CU_AD_FORMAT_UNSIGNED_INT8, _F.UINT16: _AD.CU_AD_FORMAT_UNSIGNED_INT16,
    _F.UINT32: _AD.CU_AD_FORMAT_UNSIGNED_INT32, _F.INT8: _AD.CU_AD_FORMAT_SIGNED_INT8,
    _F.INT16: _AD.CU_AD_FORMAT_SIGNED_INT16, _F.INT32: _AD.CU_AD_FORMAT_SIGNED_INT32,
    _F.FLOAT16: _AD.CU_AD_FORMAT_HALF, _F.FLOAT32: _AD.CU_AD_FORMAT_FLOAT,
}  # fmt: skip
FORMAT_SIZE = {
    _F.UINT8: 1,
    _F.INT8: 1,
    _F.UINT16: 2,
    _F.INT16: 2,
    _F.FLOAT16: 2,
    _F.UINT32: 4,
    _F.INT32: 4,
    _F.FLOAT32: 4,
}
_FORMAT_NAMES = "{" + ", ".join(repr(f.value) for f in _F) + "}"
SURFACE_LDST = int(driver.CUDA_ARRAY3D_SURFACE_LDST)
_MT = driver.CUmemorytype
_CAPTURE_NONE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def normalize_format(format: Any) -> ArrayFormatType:
    """An :class:`ArrayFormatType` from the enum, its string value, or an equivalent NumPy dtype."""
    if isinstance(format, ArrayFormatType):
        return format
    if isinstance(format, str):
        try:
            return ArrayFormatType(format)
        except ValueError:
            raise arg_error(
                "format", f"an ArrayFormatType or one of {_FORMAT_NAMES}", format
            ) from None
    try:
        dt = numpy.dtype(format)
    except TypeError:
        raise arg_error(
            "format", f"an ArrayFormatType, one of {_FORMAT_NAMES} or a NumPy dtype", format
        ) from None
    if dt.isnative and dt.name in _F._value2member_map_:
        return ArrayFormatType(dt.name)
    raise arg_error(
        "format", f"a NumPy dtype with an ArrayFormatType equivalent ({_FORMAT_NAMES})", dt
    )


def check_channels(num_channels: Any) -> None:
    if isinstance(num_channels, bool) or num_channels not in (1, 2, 4):
        raise arg_error("num_channels", "1, 2 or 4", num_channels)


def check_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of 1-3 positive ints (width, height, depth)."""
    if not isinstance(shape, (tuple, list)):
        raise arg_error(
            "shape",
            "a tuple of ints (width,), (width, height) or (width, height, depth)",
            shape,
            exc=TypeError,
        )
    out = []
    for i, v in enumerate(shape):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise arg_error(f"shape[{i}]", "an int", v, exc=TypeError)
        if v.__index__() < 1:
            raise arg_error(f"shape[{i}]", ">= 1", v)
        out.append(v.__index__())
    if not 1 <= len(out) <= 3:
        raise arg_error("shape's rank", "1, 2 or 3", len(out))
    return tuple(out)


def array_descriptor(
    shape: tuple[int, ...], format: ArrayFormatType, num_channels: int, surface: bool
) -> driver.CUDA_ARRAY3D_DESCRIPTOR:
    d = driver.CUDA_ARRAY3D_DESCRIPTOR()
    d.Width = shape[0]
    d.Height = shape[1] if len(shape) > 1 else 0
    d.Depth = shape[2] if len(shape) > 2 else 0
    d.Format = CU_FORMAT[format]
    d.NumChannels = int(num_channels)
    d.Flags = SURFACE_LDST if surface else 0
    return d


def options_of(cls: type, options: Any) -> Any:
    if isinstance(options, cls):
        return options
    if isinstance(options, dict):
        return cls(**options)
    raise arg_error("options", f"a {cls.__name__} or a dict", options, exc=TypeError)


@dataclasses.dataclass
class OpaqueArrayOptions:
    """Options of :meth:`Device.create_opaque_array <cuda_core.Device.create_opaque_array>`.

    Attributes
    ----------
    shape : tuple of int
        ``(width,)``, ``(width, height)`` or ``(width, height, depth)``, in elements.
    format : ArrayFormatType, str or numpy.dtype
        Element (channel) format: ``"uint8"``, ``"int16"``, ``"float32"``, ``numpy.float16``...
    num_channels : int
        Channels per element: 1, 2 or 4.
    is_surface_load_store : bool
        Allocate with ``CUDA_ARRAY3D_SURFACE_LDST`` so a :class:`SurfaceObject` can write it.

    Raises
    ------
    TypeError, ValueError
        A field is of the wrong type or out of range.
    """

    shape: tuple[int, ...]
    format: object
    num_channels: int
    is_surface_load_store: bool = False

    def __post_init__(self) -> None:
        self.shape = check_shape(self.shape)
        self.format = normalize_format(self.format)
        check_channels(self.num_channels)


class ArrayStorage(Owner):
    """What OpaqueArray and MipmappedArray share: the element layout and its making."""

    __slots__ = ("_format", "_num_channels", "_shape", "_surface")
    _format: ArrayFormatType
    _shape: tuple[int, ...]
    _num_channels: int
    _surface: bool

    @classmethod
    def _make(
        cls,
        ref: OwnedHandle,
        shape: tuple[int, ...],
        format: ArrayFormatType,
        num_channels: int,
        surface: bool,
        device: Any,
    ) -> Self:
        self = object.__new__(cls)
        self._ref, self._shape, self._format, self._num_channels = ref, shape, format, num_channels
        self._surface, self._device_id = bool(surface), -1 if device is None else device._id
        return self

    @property
    def format(self) -> ArrayFormatType:
        """The channel format."""
        return self._format

    @property
    def num_channels(self) -> int:
        """Channels per element (1, 2 or 4)."""
        return self._num_channels


class OpaqueArray(ArrayStorage):
    """A CUDA array (``CUarray``): texture/surface storage with a driver-chosen layout.

    Made by :meth:`Device.create_opaque_array <cuda_core.Device.create_opaque_array>` (owned:
    destroyed with ``cuArrayDestroy`` once it and every texture or surface on it are closed or
    collected) or :meth:`MipmappedArray.get_level` (a level: borrowed from its mipmapped array,
    which it keeps alive). It has no device pointer, so no DLPack or
    ``__cuda_array_interface__``: move data with :meth:`copy_from` / :meth:`copy_to`.
    """

    __slots__ = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "OpaqueArray cannot be instantiated directly; use Device.create_opaque_array()"
        )

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape in elements, ``(width,)``, ``(width, height)`` or ``(width, height, depth)``."""
        return self._shape

    @property
    def element_bytes(self) -> int:
        """Bytes per element (format size times channels)."""
        return FORMAT_SIZE[self._format] * self._num_channels

    @property
    def size_bytes(self) -> int:
        """Bytes of the whole array (``prod(shape) * element_bytes``): what a copy moves."""
        return math.prod(self._shape) * self.element_bytes

    @property
    def is_surface_load_store(self) -> bool:
        """Whether a :class:`SurfaceObject` can be made on this array."""
        return self._surface

    def _extent_bytes(self) -> tuple[int, int, int]:
        s = self._shape
        return s[0] * self.element_bytes, (s[1] if len(s) > 1 else 1), (s[2] if len(s) > 2 else 1)

    def copy_from(self, src: Any, *, stream: Any) -> None:
        """Copy a whole array's worth of bytes from ``src`` into this array, ordered on ``stream``.

        Parameters
        ----------
        src : Buffer or host object
            A :class:`~cuda_core.Buffer` or a C-contiguous host object with the buffer protocol
            (NumPy array, ``bytes``) of at least :attr:`size_bytes` bytes, laid out row-major
            (x fastest, then y, then z; channels interleaved).
        stream : Stream or GraphBuilder
            Keyword-only. The stream the copy is ordered on.

        Raises
        ------
        ValueError
            ``src`` is too small or not contiguous.
        RuntimeError
            The array or the buffer is closed.

        Notes
        -----
        A copy from a Buffer is asynchronous; a copy from a host object is complete when the
        call returns (the stream is synchronised, unless it is capturing a graph).
        """
        self._copy(src, stream, to_array=True)

    def copy_to(self, dst: Any, *, stream: Any) -> Any:
        """Copy this array's bytes into ``dst``, ordered on ``stream``; returns ``dst``.

        ``dst`` is a :class:`~cuda_core.Buffer` or a writable C-contiguous host object of at
        least :attr:`size_bytes` bytes. A copy into a host object is complete when the call
        returns (see :meth:`copy_from`).
        """
        self._copy(dst, stream, to_array=False)
        return dst

    def _copy(self, other: Any, stream: Any, to_array: bool) -> None:
        ref = self._live()
        name = "src" if to_array else "dst"
        if isinstance(other, Buffer):
            if other._ptr is None:
                raise RuntimeError("Buffer has been closed; it cannot be used after close()")
            addr, n, host = int(other._ptr), int(other._size), False
        else:
            addr, n, _keep = host_address(other, name, writable=not to_array)
            host = True
        if n < self.size_bytes:
            raise arg_error(
                name, f"at least the array's size_bytes ({self.size_bytes} bytes)", f"{n} bytes"
            )
        s = _links.as_stream(stream)
        wbytes, height, depth = self._extent_bytes()
        p = driver.CUDA_MEMCPY3D()
        p.WidthInBytes, p.Height, p.Depth = wbytes, height, depth
        mt = _MT.CU_MEMORYTYPE_HOST if host else _MT.CU_MEMORYTYPE_UNIFIED
        if to_array:
            p.srcMemoryType, p.srcPitch, p.srcHeight = mt, wbytes, height
            if host:
                p.srcHost = addr
            else:
                p.srcDevice = driver.CUdeviceptr(addr)
            p.dstMemoryType, p.dstArray = _MT.CU_MEMORYTYPE_ARRAY, driver.CUarray(ref.value)
        else:
            p.dstMemoryType, p.dstPitch, p.dstHeight = mt, wbytes, height
            if host:
                p.dstHost = addr
            else:
                p.dstDevice = driver.CUdeviceptr(addr)
            p.srcMemoryType, p.srcArray = _MT.CU_MEMORYTYPE_ARRAY, driver.CUarray(ref.value)
        h = live_handle(s)
        ctx = stream_context(s)
        handle_return(on_stream(s, ctx, driver.cuMemcpy3DAsync, p, h), "cuMemcpy3DAsync")
        if host:
            if capture_status(s, ctx) == _CAPTURE_NONE:
                sync_stream(s, ctx)

    def __repr__(self) -> str:
        state = "closed" if self._ref is None else f"handle=0x{self.handle:x}"
        return (
            f"OpaqueArray(shape={self._shape}, format={self._format.value!r}, "
            f"num_channels={self._num_channels}, {state})"
        )


def _create_opaque_array(device: Any, options: Any) -> OpaqueArray:
    """Allocate an :class:`OpaqueArray` (``cuArray3DCreate``) in the current context."""
    o = options_of(OpaqueArrayOptions, options)
    desc = array_descriptor(o.shape, o.format, o.num_channels, bool(o.is_surface_load_store))
    arr = handle_return(driver.cuArray3DCreate(desc), "cuArray3DCreate")
    ref = OwnedHandle("array", int(arr), destroy_array, at_exit=False)
    return OpaqueArray._make(
        ref, o.shape, o.format, o.num_channels, bool(o.is_surface_load_store), device
    )


_links.textures.create_opaque_array = _create_opaque_array  # Device.create_opaque_array makes one
