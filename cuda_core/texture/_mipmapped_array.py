"""MipmappedArray: a CUDA mipmapped array (``CUmipmappedArray``) and its levels."""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import _links
from .._compat import driver
from .._errors import invalid_value
from .._handles._owned import OwnedHandle
from .._utils import arg_error, check_int, handle_return
from ._array import (
    ArrayStorage,
    OpaqueArray,
    array_descriptor,
    check_channels,
    check_shape,
    normalize_format,
    options_of,
)
from ._ref import destroy_mipmapped_array

__all__ = ["MipmappedArray", "MipmappedArrayOptions"]


@dataclasses.dataclass
class MipmappedArrayOptions:
    """Options of :meth:`Device.create_mipmapped_array <cuda_core.Device.create_mipmapped_array>`.

    Attributes
    ----------
    shape : tuple of int
        Level 0's ``(width,)``, ``(width, height)`` or ``(width, height, depth)``.
    format : ArrayFormatType, str or numpy.dtype
        Channel format.
    num_channels : int
        1, 2 or 4.
    num_levels : int
        Number of levels, >= 1 and at most ``floor(log2(max(shape))) + 1``.
    is_surface_load_store : bool
        Allocate with ``CUDA_ARRAY3D_SURFACE_LDST`` so each level can back a surface.
    """

    shape: tuple[int, ...]
    format: object
    num_channels: int
    num_levels: int
    is_surface_load_store: bool = False

    def __post_init__(self) -> None:
        self.shape = check_shape(self.shape)
        self.format = normalize_format(self.format)
        check_channels(self.num_channels)
        n: Any = self.num_levels
        if isinstance(n, float) and n.is_integer():
            self.num_levels = int(n)
        self.num_levels = check_int("num_levels", self.num_levels, 1)


class MipmappedArray(ArrayStorage):
    """A mipmapped CUDA array: level 0 of :attr:`shape` and each level half the size of the last.

    Made by :meth:`Device.create_mipmapped_array <cuda_core.Device.create_mipmapped_array>`;
    sampled through a :class:`TextureObject` (:meth:`ResourceDescriptor.from_mipmapped_array`).
    :meth:`get_level` returns a level as an :class:`OpaqueArray` (to copy to or bind as a
    surface) that keeps this array's storage alive. ``cuMipmappedArrayDestroy`` runs once this
    object and every level and texture on it are closed or collected.
    """

    __slots__ = ("_num_levels",)
    _num_levels: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "MipmappedArray cannot be instantiated directly; use Device.create_mipmapped_array()"
        )

    def get_level(self, level: int) -> OpaqueArray:
        """Level ``level`` (in ``[0, num_levels)``) as a non-owning :class:`OpaqueArray`."""
        ref = self._live()
        lv = check_int("level", level, 0)
        if lv >= self._num_levels:
            raise arg_error("level", f"in [0, {self._num_levels})", level)
        with self.device._scope():
            arr = handle_return(
                driver.cuMipmappedArrayGetLevel(driver.CUmipmappedArray(ref.value), lv),
                "cuMipmappedArrayGetLevel",
            )
        shape = tuple(max(1, n >> lv) for n in self._shape)
        level_ref = OwnedHandle("array", int(arr), None, (ref,))
        return OpaqueArray._make(
            level_ref, shape, self._format, self._num_channels, self._surface, self.device
        )

    @property
    def shape(self) -> tuple[int, ...]:
        """Level 0's shape, in elements."""
        return self._shape

    @property
    def num_levels(self) -> int:
        """Number of mip levels."""
        return self._num_levels

    @property
    def is_surface_load_store(self) -> bool:
        """Whether the levels can back a :class:`SurfaceObject`."""
        return self._surface

    def __repr__(self) -> str:
        state = "closed" if self._ref is None else f"handle=0x{self.handle:x}"
        return (
            f"MipmappedArray(shape={self._shape}, format={self._format.value!r}, "
            f"num_channels={self._num_channels}, num_levels={self._num_levels}, {state})"
        )


def _create_mipmapped_array(device: Any, options: Any) -> MipmappedArray:
    """Allocate a :class:`MipmappedArray` (``cuMipmappedArrayCreate``) in the current context."""
    o = options_of(MipmappedArrayOptions, options)
    most = max(o.shape).bit_length()
    if o.num_levels > most:
        raise invalid_value(
            "cuMipmappedArrayCreate",
            f"num_levels must be at most {most} for shape {o.shape} "
            f"(floor(log2({max(o.shape)})) + 1) (got {o.num_levels})",
        )
    desc = array_descriptor(o.shape, o.format, o.num_channels, bool(o.is_surface_load_store))
    h = handle_return(driver.cuMipmappedArrayCreate(desc, o.num_levels), "cuMipmappedArrayCreate")
    ref = OwnedHandle("mipmapped array", int(h), destroy_mipmapped_array, at_exit=False)
    self = MipmappedArray._make(
        ref, o.shape, o.format, o.num_channels, bool(o.is_surface_load_store), device
    )
    self._num_levels = o.num_levels
    return self


_links.textures.create_mipmapped_array = (
    _create_mipmapped_array  # Device.create_mipmapped_array makes one
)
