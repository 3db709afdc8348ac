"""TMA tensor maps: :class:`TensorMapDescriptor`, its options and the driver enumerations.

A tensor map is the 128-byte ``CUtensorMap`` the Tensor Memory Accelerator (sm_90+) reads to
move tiles between global and shared memory. It is created from a
:class:`~cuda_core.utils.StridedMemoryView` (:meth:`StridedMemoryView.as_tensor_map
<cuda_core.utils.StridedMemoryView.as_tensor_map>`) and passed to a kernel by value as a
``const __grid_constant__ CUtensorMap`` parameter.

Every rule the driver states for ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col`` that
can be checked from the view (rank, alignment, strides, box size, element strides, swizzle span)
is checked first, here and in :mod:`cuda_core._tensor_map_args`, so misuse raises a
``ValueError`` naming the argument instead of a bare ``CUDA_ERROR_INVALID_VALUE``. Shapes, boxes
and strides are given in the tensor's (row-major) order; the driver wants the innermost
dimension first, and the reversal happens before each driver call.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy

from . import _links
from ._compat import driver, require
from ._tensor_map_args import (
    _check_element_strides,
    _encode,
    _global_strides,
    _int_tuple,
    _require_enum,
    _u32,
    _u64,
    view_address_and_shape,
    view_byte_strides,
)
from ._tensor_map_args import tensor_map_bytes as tensor_map_bytes
from ._utils import arg_error, check_int

__all__ = ["TensorMapDescriptor", "TensorMapDescriptorOptions"]

_DT = driver.CUtensorMapDataType


class TensorMapDataType(enum.IntEnum):
    """Element type of a tensor map (``CUtensorMapDataType``)."""

    UINT8 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_UINT8)
    UINT16 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_UINT16)
    UINT32 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_UINT32)
    INT32 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_INT32)
    UINT64 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_UINT64)
    INT64 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_INT64)
    FLOAT16 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
    FLOAT32 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
    FLOAT64 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT64)
    BFLOAT16 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)
    FLOAT32_FTZ = int(_DT.CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ)
    TFLOAT32 = int(_DT.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32)
    TFLOAT32_FTZ = int(_DT.CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ)


class TensorMapInterleave(enum.IntEnum):
    """Interleaved layout of a tensor map (``CUtensorMapInterleave``)."""

    NONE = int(driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE)
    INTERLEAVE_16B = int(driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B)
    INTERLEAVE_32B = int(driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_32B)


class TensorMapSwizzle(enum.IntEnum):
    """Shared-memory swizzle of a tensor map (``CUtensorMapSwizzle``)."""

    NONE = int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE)
    SWIZZLE_32B = int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B)
    SWIZZLE_64B = int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B)
    SWIZZLE_128B = int(driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B)


class TensorMapL2Promotion(enum.IntEnum):
    """L2 promotion of a tensor map (``CUtensorMapL2promotion``)."""

    NONE = int(driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE)
    L2_64B = int(driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_64B)
    L2_128B = int(driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B)
    L2_256B = int(driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B)


class TensorMapOOBFill(enum.IntEnum):
    """What out-of-bounds elements read as (``CUtensorMapFloatOOBfill``)."""

    NONE = int(driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    NAN_REQUEST_ZERO_FMA = int(
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
    )


class TensorMapIm2ColWideMode(enum.IntEnum):
    """Mode of an im2col-wide tensor map (``CUtensorMapIm2ColWideMode``, CUDA 13+, sm_100+)."""

    W = 0
    W128 = 1


_T = TensorMapDataType
_SIZE = {
    _T.UINT8: 1, _T.UINT16: 2, _T.UINT32: 4, _T.INT32: 4, _T.UINT64: 8, _T.INT64: 8, _T.FLOAT16: 2,
    _T.FLOAT32: 4, _T.FLOAT64: 8, _T.BFLOAT16: 2, _T.FLOAT32_FTZ: 4, _T.TFLOAT32: 4, _T.TFLOAT32_FTZ: 4,
}  # fmt: skip
_FLOAT_TYPES = frozenset(
    {_T.FLOAT16, _T.FLOAT32, _T.FLOAT64, _T.BFLOAT16, _T.FLOAT32_FTZ, _T.TFLOAT32, _T.TFLOAT32_FTZ}
)
_BY_DTYPE = {
    "uint8": _T.UINT8, "uint16": _T.UINT16, "uint32": _T.UINT32, "int32": _T.INT32, "uint64": _T.UINT64,
    "int64": _T.INT64, "float16": _T.FLOAT16, "float32": _T.FLOAT32, "float64": _T.FLOAT64, "bfloat16": _T.BFLOAT16,
}  # fmt: skip
_SUPPORTED_DTYPES = ", ".join(_BY_DTYPE)
_SWIZZLE_SPAN = {
    TensorMapSwizzle.SWIZZLE_32B: 32,
    TensorMapSwizzle.SWIZZLE_64B: 64,
    TensorMapSwizzle.SWIZZLE_128B: 128,
}
# Range of an im2col pixel-box corner coordinate, by tensor rank (cuTensorMapEncodeIm2col).
_CORNER_BITS = {3: 16, 4: 8, 5: 4}
_KDLCUDA = 2


def _normalize_data_type(data_type: Any) -> Any:
    """``None``, a :class:`TensorMapDataType`, or a NumPy dtype (``"bfloat16"`` via ml_dtypes)."""
    if data_type is None or isinstance(data_type, TensorMapDataType):
        return data_type
    if isinstance(data_type, str) and data_type == "bfloat16":
        try:
            import ml_dtypes  # noqa: F401  (registers the bfloat16 dtype with NumPy)
        except ImportError:
            pass
    try:
        return numpy.dtype(data_type)
    except TypeError:
        raise arg_error(
            "data_type", "a NumPy dtype or a TensorMapDataType", data_type, exc=TypeError
        ) from None


def _tma_type(data_type: Any, view_dtype: Any) -> TensorMapDataType:
    """The TMA element type from an explicit ``data_type`` or the view's dtype."""
    if isinstance(data_type, TensorMapDataType):
        return data_type
    dt = data_type if data_type is not None else view_dtype
    if dt is None:
        raise ValueError("the tensor has no dtype; pass data_type= explicitly")
    dt = numpy.dtype(dt)
    t = _BY_DTYPE.get(dt.name) if dt.isnative or dt.itemsize == 1 else None
    if t is None:
        hint = (
            " (for int8/int16 data pass data_type=numpy.uint8/uint16: TMA copies bits)"
            if dt.kind == "i"
            else ""
        )
        raise arg_error(
            "the tensor's dtype", f"one of {_SUPPORTED_DTYPES}", str(dt), hint.strip(" ()")
        )
    return t


@dataclasses.dataclass
class TensorMapDescriptorOptions:
    """Options of a tiled tensor map (:meth:`StridedMemoryView.as_tensor_map
    <cuda_core.utils.StridedMemoryView.as_tensor_map>`).

    Attributes
    ----------
    box_dim : tuple of int
        The tile: elements per dimension, in the tensor's (row-major) order; each in [1, 256].
    element_strides : tuple of int, optional
        Traversal stride per dimension, each in [1, 8]; default all 1.
    data_type : numpy.dtype, str or TensorMapDataType, optional
        Element type override; default: the tensor's dtype.
    interleave : TensorMapInterleave
        Default ``NONE``.
    swizzle : TensorMapSwizzle
        Shared-memory swizzle; default ``NONE``.
    l2_promotion : TensorMapL2Promotion
        Default ``NONE``.
    oob_fill : TensorMapOOBFill
        Default ``NONE`` (out-of-bounds elements read as zero).

    Raises
    ------
    TypeError
        A field has the wrong type (values are checked against the tensor when the map is made).
    """

    box_dim: tuple[int, ...]
    element_strides: tuple[int, ...] | None = None
    data_type: object = None
    interleave: TensorMapInterleave = TensorMapInterleave.NONE
    swizzle: TensorMapSwizzle = TensorMapSwizzle.NONE
    l2_promotion: TensorMapL2Promotion = TensorMapL2Promotion.NONE
    oob_fill: TensorMapOOBFill = TensorMapOOBFill.NONE

    def __post_init__(self) -> None:
        self.box_dim = _int_tuple("box_dim", self.box_dim)
        if self.element_strides is not None:
            self.element_strides = _int_tuple("element_strides", self.element_strides)
        self.data_type = _normalize_data_type(self.data_type)
        _require_enum("interleave", self.interleave, TensorMapInterleave)
        _require_enum("swizzle", self.swizzle, TensorMapSwizzle)
        _require_enum("l2_promotion", self.l2_promotion, TensorMapL2Promotion)
        _require_enum("oob_fill", self.oob_fill, TensorMapOOBFill)


class _Layout:
    """What a tensor map needs from a view, checked: address, shape, byte strides, type."""

    __slots__ = ("byte_strides", "device_id", "dl_type", "dtype", "elem", "ptr", "shape", "source")

    def __init__(self, view: Any, data_type: Any, min_rank: int = 1) -> None:
        ptr, shape = view_address_and_shape(view, min_rank)
        self.dtype = _tma_type(data_type, view.dtype)
        self.elem = _SIZE[self.dtype]
        if view.dtype is not None and numpy.dtype(view.dtype).itemsize != self.elem:
            raise arg_error(
                "data_type",
                f"of the tensor's element size ({numpy.dtype(view.dtype).itemsize} bytes)",
                self.dtype.name,
            )
        byte_strides = view_byte_strides(view, shape, self.elem)
        self.ptr, self.shape, self.byte_strides = ptr, shape, byte_strides
        self.device_id = int(getattr(view, "device_id", 0) or 0)
        self.dl_type = getattr(view, "_dl_device_type", _KDLCUDA)
        self.source = getattr(view, "exporting_obj", None)


def _check_common(
    lay: _Layout, interleave: Any, swizzle: Any, l2: Any, oob: Any, inner_bytes: int
) -> None:
    _require_enum("interleave", interleave, TensorMapInterleave)
    _require_enum("swizzle", swizzle, TensorMapSwizzle)
    _require_enum("l2_promotion", l2, TensorMapL2Promotion)
    _require_enum("oob_fill", oob, TensorMapOOBFill)
    if interleave != TensorMapInterleave.NONE:
        if len(lay.shape) < 3:
            raise arg_error("interleave", "NONE for a tensor of rank < 3", interleave.name)
        if interleave == TensorMapInterleave.INTERLEAVE_32B and lay.ptr % 32:
            raise arg_error(
                "the tensor's address", "32-byte aligned with INTERLEAVE_32B", hex(lay.ptr)
            )
    else:
        if inner_bytes % 16:
            raise arg_error(
                "the innermost box dimension",
                "a multiple of 16 bytes",
                f"{inner_bytes} bytes",
                f"use a multiple of {16 // lay.elem if lay.elem < 16 else 1} elements",
            )
        span = _SWIZZLE_SPAN.get(swizzle)
        if span is not None and inner_bytes > span:
            raise arg_error(
                "the innermost box dimension",
                f"at most {span} bytes with {swizzle.name}",
                f"{inner_bytes} bytes",
            )
    if oob == TensorMapOOBFill.NAN_REQUEST_ZERO_FMA and lay.dtype not in _FLOAT_TYPES:
        raise arg_error("oob_fill", "NONE for an integer data type", oob.name)


class TensorMapDescriptor:
    """A TMA tensor map (the opaque 128-byte ``CUtensorMap``), for Hopper (sm_90) and later.

    Made by :meth:`StridedMemoryView.as_tensor_map
    <cuda_core.utils.StridedMemoryView.as_tensor_map>`; passed to :func:`~cuda_core.launch`
    as a kernel argument, where it is copied by value into a 64-byte-aligned 128-byte slot
    (declare the parameter ``const __grid_constant__ CUtensorMap``). The descriptor keeps the
    tensor's producer object alive; it owns no driver resource, so it has no ``close()``.

    Examples
    --------
    >>> view = StridedMemoryView.from_any_interface(cupy_array, stream_ptr=-1)
    >>> tmap = view.as_tensor_map(box_dim=(16, 16))
    >>> launch(s, config, kernel, tmap, out.data.ptr)
    """

    __slots__ = (
        "_box",
        "_bytes",
        "_cu",
        "_device_id",
        "_dl_type",
        "_dtype",
        "_kind",
        "_shape",
        "_source",
        "_view_cls",
    )

    _bytes: bytes
    _box: tuple[int, ...]
    _cu: Any
    _device_id: int
    _dl_type: int
    _dtype: TensorMapDataType | None
    _kind: str
    _shape: tuple[int, ...]
    _source: Any
    _view_cls: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "TensorMapDescriptor cannot be instantiated directly; use StridedMemoryView.as_tensor_map()"
        )

    @classmethod
    def _wrap(
        cls, cu: Any, kind: str, lay: _Layout | None, box: tuple[int, ...], view_cls: Any = None
    ) -> Any:
        self = object.__new__(cls)
        self._cu = cu
        self._bytes = tensor_map_bytes(cu)
        self._kind, self._box, self._view_cls = kind, box, view_cls
        self._shape = lay.shape if lay is not None else ()
        self._dtype = lay.dtype if lay is not None else None
        self._device_id = lay.device_id if lay is not None else 0
        self._dl_type = lay.dl_type if lay is not None else _KDLCUDA
        self._source = lay.source if lay is not None else None
        return self

    @property
    def device(self) -> Any:
        """The :class:`~cuda_core.Device` whose memory the tensor is in (``None``: pinned or
        managed memory, usable from any device)."""
        if self._dl_type != _KDLCUDA:
            return None
        Device = _links.Device

        return Device(self._device_id)

    @classmethod
    def _from_tiled(
        cls,
        view: Any,
        box_dim: Any = None,
        *,
        options: Any = None,
        element_strides: Any = None,
        data_type: Any = None,
        interleave: Any = TensorMapInterleave.NONE,
        swizzle: Any = TensorMapSwizzle.NONE,
        l2_promotion: Any = TensorMapL2Promotion.NONE,
        oob_fill: Any = TensorMapOOBFill.NONE,
    ) -> TensorMapDescriptor:
        """A tiled tensor map of ``view`` (``cuTensorMapEncodeTiled``); see
        :class:`TensorMapDescriptorOptions` for the arguments. ``ValueError`` on any rule the
        driver would refuse."""
        interleave = TensorMapInterleave.NONE if interleave is None else interleave
        swizzle = TensorMapSwizzle.NONE if swizzle is None else swizzle
        l2_promotion = TensorMapL2Promotion.NONE if l2_promotion is None else l2_promotion
        oob_fill = TensorMapOOBFill.NONE if oob_fill is None else oob_fill
        if options is not None:
            given = [name for name, v, default in (
                ("box_dim", box_dim, None), ("element_strides", element_strides, None), ("data_type", data_type, None),
                ("interleave", interleave, TensorMapInterleave.NONE), ("swizzle", swizzle, TensorMapSwizzle.NONE),
                ("l2_promotion", l2_promotion, TensorMapL2Promotion.NONE), ("oob_fill", oob_fill, TensorMapOOBFill.NONE),
            ) if v is not None and v is not default]  # fmt: skip
            if given:
                raise ValueError(
                    f"pass either options= or the individual arguments, not both (got options and {given})"
                )
            if isinstance(options, dict):
                options = TensorMapDescriptorOptions(**options)
            elif not isinstance(options, TensorMapDescriptorOptions):
                raise arg_error(
                    "options", "a TensorMapDescriptorOptions or a dict", options, exc=TypeError
                )
            o = options
        else:
            if box_dim is None:
                raise ValueError(
                    "box_dim is required (the tile size, one value per tensor dimension)"
                )
            o = TensorMapDescriptorOptions(
                box_dim, element_strides, data_type, interleave, swizzle, l2_promotion, oob_fill
            )
        lay = _Layout(view, o.data_type)
        rank = len(lay.shape)
        if len(o.box_dim) != rank:
            raise arg_error("box_dim", f"of the tensor's rank ({rank} values)", o.box_dim)
        for i, (b, n) in enumerate(zip(o.box_dim, lay.shape)):
            if not 1 <= b <= 256:
                raise arg_error(f"box_dim[{i}]", "in [1, 256]", b)
            if b > n:
                raise arg_error(
                    f"box_dim[{i}]",
                    f"at most the tensor's extent {n} (a box larger than the tensor)",
                    b,
                )
        es = _check_element_strides(o.element_strides, rank)
        _check_common(
            lay, o.interleave, o.swizzle, o.l2_promotion, o.oob_fill, o.box_dim[-1] * lay.elem
        )
        cu = _encode(
            "cuTensorMapEncodeTiled",
            driver.cuTensorMapEncodeTiled,
            _DT(int(lay.dtype)),
            rank,
            lay.ptr,
            _u64(lay.shape),
            _global_strides(lay),
            _u32(o.box_dim),
            _u32(es),
            driver.CUtensorMapInterleave(int(o.interleave)),
            driver.CUtensorMapSwizzle(int(o.swizzle)),
            driver.CUtensorMapL2promotion(int(o.l2_promotion)),
            driver.CUtensorMapFloatOOBfill(int(o.oob_fill)),
        )
        return cls._wrap(cu, "tiled", lay, o.box_dim, type(view))

    @classmethod
    def _from_im2col(
        cls,
        view: Any,
        pixel_box_lower_corner: Any,
        pixel_box_upper_corner: Any,
        channels_per_pixel: int,
        pixels_per_column: int,
        *,
        element_strides: Any = None,
        data_type: Any = None,
        interleave: Any = TensorMapInterleave.NONE,
        swizzle: Any = TensorMapSwizzle.NONE,
        l2_promotion: Any = TensorMapL2Promotion.NONE,
        oob_fill: Any = TensorMapOOBFill.NONE,
    ) -> TensorMapDescriptor:
        """An im2col tensor map of a rank-3..5 ``view`` laid out N, spatial..., C
        (``cuTensorMapEncodeIm2col``). The corners have one value per spatial dimension."""
        lay = _Layout(view, _normalize_data_type(data_type), min_rank=3)
        rank = len(lay.shape)
        lo = _int_tuple("pixel_box_lower_corner", pixel_box_lower_corner)
        hi = _int_tuple("pixel_box_upper_corner", pixel_box_upper_corner)
        bits = _CORNER_BITS[rank]
        for name, c in (("pixel_box_lower_corner", lo), ("pixel_box_upper_corner", hi)):
            if len(c) != rank - 2:
                raise arg_error(name, f"{rank - 2} values (one per spatial dimension)", c)
            for i, v in enumerate(c):
                if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
                    raise arg_error(
                        f"{name}[{i}]",
                        f"in [{-(1 << (bits - 1))}, {(1 << (bits - 1)) - 1}] "
                        f"for a rank-{rank} tensor",
                        v,
                    )
        cpp = check_int("channels_per_pixel", channels_per_pixel, 1, 256)
        ppc = check_int("pixels_per_column", pixels_per_column, 1, 1024)
        es = _check_element_strides(element_strides, rank)
        _check_common(lay, interleave, swizzle, l2_promotion, oob_fill, cpp * lay.elem)
        cu = _encode(
            "cuTensorMapEncodeIm2col",
            driver.cuTensorMapEncodeIm2col,
            _DT(int(lay.dtype)),
            rank,
            lay.ptr,
            _u64(lay.shape),
            _global_strides(lay),
            list(reversed(lo)),
            list(reversed(hi)),
            cpp,
            ppc,
            _u32(es),
            driver.CUtensorMapInterleave(int(interleave)),
            driver.CUtensorMapSwizzle(int(swizzle)),
            driver.CUtensorMapL2promotion(int(l2_promotion)),
            driver.CUtensorMapFloatOOBfill(int(oob_fill)),
        )
        return cls._wrap(cu, "im2col", lay, (ppc, cpp), type(view))

    @classmethod
    def _from_im2col_wide(
        cls,
        view: Any,
        pixel_box_lower_corner_width: int,
        pixel_box_upper_corner_width: int,
        channels_per_pixel: int,
        pixels_per_column: int,
        *,
        element_strides: Any = None,
        data_type: Any = None,
        interleave: Any = TensorMapInterleave.NONE,
        mode: Any = TensorMapIm2ColWideMode.W,
        swizzle: Any = TensorMapSwizzle.SWIZZLE_128B,
        l2_promotion: Any = TensorMapL2Promotion.NONE,
        oob_fill: Any = TensorMapOOBFill.NONE,
    ) -> TensorMapDescriptor:
        """An im2col-wide tensor map (``cuTensorMapEncodeIm2colWide``: CUDA 12.8+, sm_100+)."""
        lay = _Layout(view, _normalize_data_type(data_type), min_rank=3)
        rank = len(lay.shape)
        _require_enum("mode", mode, TensorMapIm2ColWideMode)
        lo = check_int("pixel_box_lower_corner_width", pixel_box_lower_corner_width, -32768, 32767)
        hi = check_int("pixel_box_upper_corner_width", pixel_box_upper_corner_width, -32768, 32767)
        cpp = check_int("channels_per_pixel", channels_per_pixel, 1, 256)
        ppc = check_int("pixels_per_column", pixels_per_column, 1, 1024)
        es = _check_element_strides(element_strides, rank)
        _check_common(lay, interleave, swizzle, l2_promotion, oob_fill, 16)
        require("im2col-wide tensor maps", bindings=(12, 8), driver=(12, 8))
        cu = _encode(
            "cuTensorMapEncodeIm2colWide",
            driver.cuTensorMapEncodeIm2colWide,
            _DT(int(lay.dtype)),
            rank,
            lay.ptr,
            _u64(lay.shape),
            _global_strides(lay),
            lo,
            hi,
            cpp,
            ppc,
            _u32(es),
            driver.CUtensorMapInterleave(int(interleave)),
            driver.CUtensorMapIm2ColWideMode(int(mode)),
            driver.CUtensorMapSwizzle(int(swizzle)),
            driver.CUtensorMapL2promotion(int(l2_promotion)),
            driver.CUtensorMapFloatOOBfill(int(oob_fill)),
        )
        return cls._wrap(cu, "im2col_wide", lay, (ppc, cpp), type(view))

    def replace_address(self, tensor: object) -> None:
        """Point this tensor map at ``tensor``'s memory (``cuTensorMapReplaceAddress``).

        Parameters
        ----------
        tensor : object
            A :class:`~cuda_core.utils.StridedMemoryView` or any DLPack /
            ``__cuda_array_interface__`` object: device-accessible, 16-byte aligned, with the
            shape and element size the map was made for.

        Raises
        ------
        ValueError
            Host memory, a misaligned address, or another shape or element size.
        """
        view_cls = self._view_cls
        # from_any_interface, not the constructor cuda.core deprecates (it would warn the caller)
        view = (
            tensor
            if view_cls is None or isinstance(tensor, view_cls)
            else view_cls.from_any_interface(tensor, stream_ptr=-1)
        )
        lay = _Layout(view, self._dtype, min_rank=1)
        if lay.shape != self._shape:
            raise arg_error(
                "tensor's shape", f"the shape the map was made for {self._shape}", lay.shape
            )
        _encode("cuTensorMapReplaceAddress", driver.cuTensorMapReplaceAddress, self._cu, lay.ptr)
        self._bytes = tensor_map_bytes(self._cu)
        self._device_id, self._dl_type, self._source = lay.device_id, lay.dl_type, lay.source

    def __repr__(self) -> str:
        dtype = self._dtype.name if self._dtype is not None else None
        return (
            f"TensorMapDescriptor(kind={self._kind!r}, shape={self._shape}, box={self._box}, "
            f"data_type={dtype})"
        )
