"""TextureObject: a bindless texture (``CUtexObject``), its ResourceDescriptor and options."""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import _links
from .._compat import driver
from .._errors import invalid_value
from .._handles._owned import OwnedHandle
from .._memory import Buffer
from .._utils import arg_error, check_int, check_or_create_options, handle_return
from ..typing import AddressModeType, ArrayFormatType, FilterModeType, ReadModeType
from ._array import CU_FORMAT, FORMAT_SIZE, OpaqueArray, check_channels, normalize_format
from ._mipmapped_array import MipmappedArray
from ._ref import Owner, destroy_texture

__all__ = ["ResourceDescriptor", "TextureObject", "TextureObjectOptions"]

_ADDRESS = {
    AddressModeType.WRAP: driver.CUaddress_mode.CU_TR_ADDRESS_MODE_WRAP,
    AddressModeType.CLAMP: driver.CUaddress_mode.CU_TR_ADDRESS_MODE_CLAMP,
    AddressModeType.MIRROR: driver.CUaddress_mode.CU_TR_ADDRESS_MODE_MIRROR,
    AddressModeType.BORDER: driver.CUaddress_mode.CU_TR_ADDRESS_MODE_BORDER,
}
_FILTER = {
    FilterModeType.POINT: driver.CUfilter_mode.CU_TR_FILTER_MODE_POINT,
    FilterModeType.LINEAR: driver.CUfilter_mode.CU_TR_FILTER_MODE_LINEAR,
}
_READ_AS_INTEGER = int(driver.CU_TRSF_READ_AS_INTEGER)
_NORMALIZED_COORDINATES = int(driver.CU_TRSF_NORMALIZED_COORDINATES)
_SRGB = int(driver.CU_TRSF_SRGB)
_DISABLE_TRILINEAR = int(driver.CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION)
_SEAMLESS_CUBEMAP = int(getattr(driver, "CU_TRSF_SEAMLESS_CUBEMAP", 0x40))
_FLOAT_FORMATS = frozenset({ArrayFormatType.FLOAT16, ArrayFormatType.FLOAT32})
_RT = driver.CUresourcetype


def _enum(name: str, value: Any, enum_type: Any) -> Any:
    if isinstance(value, enum_type):
        return value
    try:
        return enum_type(value)
    except ValueError:
        names = "{" + ", ".join(repr(m.value) for m in enum_type) + "}"
        raise arg_error(name, f"a {enum_type.__name__} or one of {names}", value) from None


def _address_modes(address_mode: Any) -> tuple[AddressModeType, AddressModeType, AddressModeType]:
    """Three address modes (x, y, z) from one mode or a tuple of 1-3 (the rest: CLAMP)."""
    if isinstance(address_mode, (tuple, list)):
        if not 1 <= len(address_mode) <= 3:
            raise arg_error("address_mode", "one mode or a tuple of 1 to 3 modes", address_mode)
        modes = [_enum("address_mode", m, AddressModeType) for m in address_mode]
    else:
        modes = [_enum("address_mode", address_mode, AddressModeType)] * 3
    modes += [AddressModeType.CLAMP] * (3 - len(modes))
    return modes[0], modes[1], modes[2]


class ResourceDescriptor:
    """What a :class:`TextureObject` (or :class:`SurfaceObject`) reads: build with a ``from_*``.

    - :meth:`from_opaque_array`: an :class:`OpaqueArray` (textures and surfaces).
    - :meth:`from_mipmapped_array`: a :class:`MipmappedArray` (textures).
    - :meth:`from_linear`: a :class:`~cuda_core.Buffer` read as a typed 1-D array (textures;
      no filtering, addressing or normalized coordinates).
    - :meth:`from_pitch2d`: a :class:`~cuda_core.Buffer` read as a row-pitched 2-D image.

    The descriptor holds its source; a texture made from it keeps the source's storage alive.
    """

    __slots__ = (
        "_format",
        "_height",
        "_kind",
        "_num_channels",
        "_pitch_bytes",
        "_size_bytes",
        "_source",
        "_width",
    )
    _kind: str
    _source: Any
    _format: ArrayFormatType | None
    _num_channels: int | None
    _size_bytes: int | None
    _width: int | None
    _height: int | None
    _pitch_bytes: int | None

    def __init__(self) -> None:
        raise RuntimeError(
            "ResourceDescriptor cannot be instantiated directly; use ResourceDescriptor.from_*()"
        )

    @classmethod
    def _new(cls, kind: str, source: Any, **fields: Any) -> ResourceDescriptor:
        self = object.__new__(cls)
        self._kind, self._source = kind, source
        for name in ("format", "num_channels", "size_bytes", "width", "height", "pitch_bytes"):
            setattr(self, f"_{name}", fields.get(name))
        return self

    @classmethod
    def from_opaque_array(cls, array: OpaqueArray) -> ResourceDescriptor:
        """A resource backed by ``array``."""
        if not isinstance(array, OpaqueArray):
            raise arg_error("array", "an OpaqueArray", type(array).__name__, exc=TypeError)
        return cls._new("opaque_array", array)

    @classmethod
    def from_mipmapped_array(cls, mipmapped_array: MipmappedArray) -> ResourceDescriptor:
        """A resource backed by ``mipmapped_array`` (textures only: a surface takes one level)."""
        if not isinstance(mipmapped_array, MipmappedArray):
            raise arg_error(
                "mipmapped_array", "a MipmappedArray", type(mipmapped_array).__name__, exc=TypeError
            )
        return cls._new("mipmapped_array", mipmapped_array)

    @classmethod
    def from_linear(
        cls, buffer: Buffer, *, format: Any, num_channels: int, size_bytes: int | None = None
    ) -> ResourceDescriptor:
        """A typed 1-D fetch of ``buffer`` (``tex1Dfetch``); ``size_bytes`` defaults to its size.

        The buffer must stay open while textures made from this descriptor are used.
        """
        if not isinstance(buffer, Buffer):
            raise arg_error("buffer", "a Buffer", type(buffer).__name__, exc=TypeError)
        fmt = normalize_format(format)
        check_channels(num_channels)
        n = buffer.size if size_bytes is None else check_int("size_bytes", size_bytes, 1)
        if n > buffer.size:
            raise arg_error("size_bytes", f"at most the buffer's size ({buffer.size})", n)
        if n % (FORMAT_SIZE[fmt] * num_channels):
            raise arg_error(
                "size_bytes",
                f"a multiple of the element size ({FORMAT_SIZE[fmt] * num_channels})",
                n,
            )
        return cls._new("linear", buffer, format=fmt, num_channels=num_channels, size_bytes=n)

    @classmethod
    def from_pitch2d(
        cls,
        buffer: Buffer,
        *,
        format: Any,
        num_channels: int,
        width: int,
        height: int,
        pitch_bytes: int,
    ) -> ResourceDescriptor:
        """``buffer`` read as a ``width`` x ``height`` image whose rows are ``pitch_bytes`` apart
        (a multiple of the device's ``texture_pitch_alignment``)."""
        if not isinstance(buffer, Buffer):
            raise arg_error("buffer", "a Buffer", type(buffer).__name__, exc=TypeError)
        fmt = normalize_format(format)
        check_channels(num_channels)
        w = check_int("width", width, 1)
        h = check_int("height", height, 1)
        p = check_int("pitch_bytes", pitch_bytes, 1)
        if p < w * FORMAT_SIZE[fmt] * num_channels:
            raise arg_error(
                "pitch_bytes",
                f"at least width * element size ({w * FORMAT_SIZE[fmt] * num_channels})",
                p,
            )
        if p * (h - 1) + w * FORMAT_SIZE[fmt] * num_channels > buffer.size:
            raise arg_error(
                "buffer", "at least pitch_bytes * (height - 1) + row bytes", f"{buffer.size} bytes"
            )
        return cls._new(
            "pitch2d",
            buffer,
            format=fmt,
            num_channels=num_channels,
            width=w,
            height=h,
            pitch_bytes=p,
        )

    @property
    def kind(self) -> str:
        """``"opaque_array"``, ``"mipmapped_array"``, ``"linear"`` or ``"pitch2d"``."""
        return self._kind

    @property
    def source(self) -> Any:
        """The array, mipmapped array or buffer this resource reads."""
        return self._source

    @property
    def format(self) -> ArrayFormatType | None:
        """The channel format (``None`` for array-backed resources: the array's applies)."""
        return self._format

    @property
    def num_channels(self) -> int | None:
        """Channels per element (``None`` for array-backed resources)."""
        return self._num_channels

    @property
    def size_bytes(self) -> int | None:
        """Bytes bound by a linear resource (``None`` for other kinds)."""
        return self._size_bytes

    @property
    def width(self) -> int | None:
        """Width of a pitch2d resource, in elements (``None`` for other kinds)."""
        return self._width

    @property
    def height(self) -> int | None:
        """Height of a pitch2d resource, in rows (``None`` for other kinds)."""
        return self._height

    @property
    def pitch_bytes(self) -> int | None:
        """Row pitch of a pitch2d resource, in bytes (``None`` for other kinds)."""
        return self._pitch_bytes

    def _driver_desc(self) -> tuple[driver.CUDA_RESOURCE_DESC, Any, ArrayFormatType]:
        """(the ``CUDA_RESOURCE_DESC``, what a texture on it must keep alive, its format)."""
        d = driver.CUDA_RESOURCE_DESC()
        src = self._source
        if self._kind in ("opaque_array", "mipmapped_array"):
            ref = src._ref
            if ref is None:
                raise RuntimeError(
                    f"{type(src).__name__} has been closed: the resource's memory is gone"
                )
            if self._kind == "opaque_array":
                d.resType = _RT.CU_RESOURCE_TYPE_ARRAY
                d.res.array.hArray = driver.CUarray(ref.value)
            else:
                d.resType = _RT.CU_RESOURCE_TYPE_MIPMAPPED_ARRAY
                d.res.mipmap.hMipmappedArray = driver.CUmipmappedArray(ref.value)
            return d, ref, src.format
        if src._ptr is None:
            raise RuntimeError("Buffer has been closed: the resource's memory is gone")
        fmt = self._format
        assert fmt is not None  # set by from_linear / from_pitch2d
        if self._kind == "linear":
            d.resType = _RT.CU_RESOURCE_TYPE_LINEAR
            lin = d.res.linear
            lin.devPtr, lin.format, lin.numChannels = (
                driver.CUdeviceptr(int(src._ptr)),
                CU_FORMAT[fmt],
                self._num_channels,
            )
            lin.sizeInBytes = self._size_bytes
        else:
            d.resType = _RT.CU_RESOURCE_TYPE_PITCH2D
            p2 = d.res.pitch2D
            p2.devPtr, p2.format, p2.numChannels = (
                driver.CUdeviceptr(int(src._ptr)),
                CU_FORMAT[fmt],
                self._num_channels,
            )
            p2.width, p2.height, p2.pitchInBytes = self._width, self._height, self._pitch_bytes
        return d, src, fmt

    def __repr__(self) -> str:
        return f"ResourceDescriptor(kind={self._kind!r}, source={self._source!r})"


@dataclasses.dataclass
class TextureObjectOptions:
    """How a :class:`TextureObject` samples (``CUDA_TEXTURE_DESC``).

    Attributes
    ----------
    address_mode : AddressModeType, str or tuple
        Out-of-range coordinates: one mode for every axis or a tuple of 1-3 (x, y, z);
        default ``CLAMP``. The hardware applies ``WRAP`` and ``MIRROR`` to normalized
        coordinates only (with texel coordinates they act as ``CLAMP``).
    filter_mode : FilterModeType or str
        ``POINT`` (nearest texel, default) or ``LINEAR`` (needs a float format or
        ``read_mode=NORMALIZED_FLOAT``).
    read_mode : ReadModeType or str
        ``ELEMENT_TYPE`` (default) or ``NORMALIZED_FLOAT`` (8/16-bit integers read as [0, 1]
        or [-1, 1]).
    normalized_coords : bool
        Coordinates in [0, 1) instead of texels.
    srgb, disable_trilinear_optimization, seamless_cubemap : bool
        The ``CU_TRSF_*`` flags of the same names.
    max_anisotropy : int
        0 disables anisotropic filtering.
    mipmap_filter_mode : FilterModeType or str
        Filtering between mip levels.
    mipmap_level_bias, min_mipmap_level_clamp, max_mipmap_level_clamp : float
        Mip level selection.
    border_color : tuple of float, optional
        The colour of ``BORDER`` addressing, four floats (default zeros).
    """

    address_mode: AddressModeType | str | tuple[AddressModeType | str, ...] = AddressModeType.CLAMP
    filter_mode: FilterModeType | str = FilterModeType.POINT
    read_mode: ReadModeType | str = ReadModeType.ELEMENT_TYPE
    normalized_coords: bool = False
    srgb: bool = False
    disable_trilinear_optimization: bool = False
    seamless_cubemap: bool = False
    max_anisotropy: int = 0
    mipmap_filter_mode: FilterModeType | str = FilterModeType.POINT
    mipmap_level_bias: float = 0.0
    min_mipmap_level_clamp: float = 0.0
    max_mipmap_level_clamp: float = 0.0
    border_color: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        self.filter_mode = _enum("filter_mode", self.filter_mode, FilterModeType)
        self.read_mode = _enum("read_mode", self.read_mode, ReadModeType)
        self.mipmap_filter_mode = _enum(
            "mipmap_filter_mode", self.mipmap_filter_mode, FilterModeType
        )

    def _driver_desc(self, fmt: ArrayFormatType, kind: str) -> driver.CUDA_TEXTURE_DESC:
        t = driver.CUDA_TEXTURE_DESC()
        modes = _address_modes(self.address_mode)
        filt, read = FilterModeType(self.filter_mode), ReadModeType(self.read_mode)
        if (
            read == ReadModeType.NORMALIZED_FLOAT
            and fmt not in _FLOAT_FORMATS
            and FORMAT_SIZE[fmt] == 4
        ):
            raise invalid_value(
                "cuTexObjectCreate",
                f"read_mode='normalized_float' needs an 8- or 16-bit integer "
                f"or a float format (got format {fmt.value!r}); use read_mode='element_type'",
            )
        if (
            filt == FilterModeType.LINEAR
            and fmt not in _FLOAT_FORMATS
            and read == ReadModeType.ELEMENT_TYPE
        ):
            raise invalid_value(
                "cuTexObjectCreate",
                f"filter_mode='linear' returns floats, so it needs a "
                f"float16/float32 format or read_mode='normalized_float' (got format "
                f"{fmt.value!r} read as 'element_type')",
            )
        max_aniso = check_int("max_anisotropy", self.max_anisotropy, 0, 16)
        if kind == "linear":  # a typed fetch: no addressing, filtering or normalized coordinates
            modes, filt = (AddressModeType.CLAMP,) * 3, FilterModeType.POINT
        t.addressMode = [_ADDRESS[m] for m in modes]
        t.filterMode = _FILTER[filt]
        t.mipmapFilterMode = _FILTER[FilterModeType(self.mipmap_filter_mode)]
        flags = _READ_AS_INTEGER if read == ReadModeType.ELEMENT_TYPE else 0
        if self.normalized_coords and kind != "linear":
            flags |= _NORMALIZED_COORDINATES
        flags |= (_SRGB if self.srgb else 0) | (
            _DISABLE_TRILINEAR if self.disable_trilinear_optimization else 0
        )
        flags |= _SEAMLESS_CUBEMAP if self.seamless_cubemap else 0
        t.flags = flags
        t.maxAnisotropy = max_aniso
        t.mipmapLevelBias = float(self.mipmap_level_bias)
        t.minMipmapLevelClamp = float(self.min_mipmap_level_clamp)
        t.maxMipmapLevelClamp = float(self.max_mipmap_level_clamp)
        if self.border_color is not None:
            bc = [float(c) for c in self.border_color]
            if len(bc) != 4:
                raise arg_error("border_color", "4 floats (r, g, b, a)", self.border_color)
            t.borderColor = bc
        return t


class TextureObject(Owner):
    """A bindless texture (``CUtexObject``) for sampled reads in kernels.

    Made by :meth:`Device.create_texture_object <cuda_core.Device.create_texture_object>`;
    pass :attr:`handle` (a 64-bit ``cudaTextureObject_t``) to the kernel. It keeps its
    resource's storage alive; ``cuTexObjectDestroy`` runs once it is closed or collected.
    """

    __slots__ = ("_options", "_resource")
    _options: TextureObjectOptions
    _resource: ResourceDescriptor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "TextureObject cannot be instantiated directly; use Device.create_texture_object()"
        )

    @property
    def resource(self) -> ResourceDescriptor:
        """The :class:`ResourceDescriptor` this texture reads."""
        return self._resource

    @property
    def options(self) -> TextureObjectOptions:
        """The :class:`TextureObjectOptions` it samples with."""
        return self._options

    def __repr__(self) -> str:
        state = "closed" if self._ref is None else f"handle=0x{self.handle:x}"
        return f"TextureObject(kind={self._resource.kind!r}, {state})"


def _create_texture_object(device: Any, resource: Any, options: Any) -> TextureObject:
    """Create a :class:`TextureObject` (``cuTexObjectCreate``) in the current context."""
    if not isinstance(resource, ResourceDescriptor):
        raise arg_error("resource", "a ResourceDescriptor", type(resource).__name__, exc=TypeError)
    opts = check_or_create_options(TextureObjectOptions, options, "options")
    res, keep, fmt = resource._driver_desc()
    tex = opts._driver_desc(fmt, resource.kind)
    h = handle_return(driver.cuTexObjectCreate(res, tex, None), "cuTexObjectCreate")
    self = object.__new__(TextureObject)
    self._ref = OwnedHandle("texture object", int(h), destroy_texture, (keep,), at_exit=False)
    self._resource, self._options, self._device_id = resource, opts, device._id
    return self


_links.textures.create_texture_object = (
    _create_texture_object  # Device.create_texture_object makes one
)
