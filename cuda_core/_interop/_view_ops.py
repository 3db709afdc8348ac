"""``StridedMemoryView.view``, ``copy_from`` and ``copy_to``: new layouts and strided copies.

A copy between views of the same shape and item size goes, for any strides, through
``cuMemcpyAsync``/``cuMemcpy2DAsync`` on unified addresses (host, pinned, managed and device
memory alike): adjacent axes that are contiguous in both views are merged, the innermost
remaining axes become one 2-D copy, and the outer axes are walked in Python. Two views of
host-only memory are copied by NumPy, without a stream. Two contiguous views of device memory
on two devices are copied as one run of bytes (a peer copy where the pools do not grant the
stream's device access); strided layouts across two devices are refused.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any

import numpy

from .. import _links
from .._compat import driver
from .._memory import Buffer, MemoryResource
from .._stream_ops import copy_across_devices, on_stream, stream_context
from .._utils import arg_error, handle_return

__all__: list[str] = []  # private: StridedMemoryView's methods call these

_UNIFIED = driver.CUmemorytype.CU_MEMORYTYPE_UNIFIED


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    acc = 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def elem_strides(view: Any) -> tuple[int, ...]:
    """The view's strides in elements (computed for a C-contiguous view)."""
    raw = view._raw_strides
    return tuple(raw) if raw is not None else _c_strides(tuple(view.shape))


def _itemsize(view: Any) -> int | None:
    dt = view.dtype
    return None if dt is None else int(dt.itemsize)


def make_view(src: Any, layout: Any = None, dtype: Any = None) -> Any:
    """A new view of ``src``'s memory with another layout and/or dtype (``view()``)."""
    dt = src.dtype if dtype is None else numpy.dtype(dtype)
    if layout is None:
        shape = tuple(src.shape)
        strides = src._raw_strides
        offset = 0
        item = _itemsize(src)
        if dt is not None and item is not None and dt.itemsize != item:
            raise ValueError(
                f"dtype {dt} has item size {dt.itemsize}, not the view's {item}; give a layout "
                "with the new item size to reinterpret the memory"
            )
    else:
        try:
            shape = tuple(int(n) for n in layout.shape)
            raw = layout.strides
            strides = None if raw is None else tuple(int(x) for x in raw)
            item = int(layout.itemsize)
            offset = int(getattr(layout, "slice_offset", 0) or 0)
        except AttributeError:
            raise arg_error(
                "layout",
                "None or a layout with shape, strides (in elements) and itemsize",
                layout,
                exc=TypeError,
            ) from None
        if any(n < 0 for n in shape) or (strides is not None and len(strides) != len(shape)):
            raise arg_error(
                "layout", "a layout with non-negative extents and one stride per axis", layout
            )
        if dt is not None and dt.itemsize != item:
            raise ValueError(
                f"dtype {dt} has item size {dt.itemsize}, but the layout's itemsize is {item}"
            )
    cls: Any = type(src)
    view = cls.__new__(cls)
    for name in (
        "_capsule",
        "_dl_device_type",
        "device_id",
        "exporting_obj",
        "is_device_accessible",
        "readonly",
    ):
        setattr(view, name, getattr(src, name))
    view.ptr = src.ptr + offset * (item or 0)
    view.shape = shape
    view._raw_strides = strides  # as given, as cuda.core reports a layout's strides
    view._dtype = dt
    buf = src.exporting_obj
    if layout is not None and item and _has_extent_check(buf):
        _check_extent(buf, view.ptr, shape, elem_strides(view), item)
    return view


def _has_extent_check(obj: Any) -> bool:
    return isinstance(obj, Buffer) and obj.memory_resource is not None and not obj.is_closed


def _span(shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> tuple[int, int]:
    """(lowest, one past the highest) byte offset a view touches, relative to its pointer."""
    if any(n == 0 for n in shape):
        return 0, 0
    lo = sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0) * item
    hi = sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0) * item
    return lo, hi + item


def _check_extent(
    buf: Any, ptr: int, shape: tuple[int, ...], strides: tuple[int, ...], item: int
) -> None:
    lo, hi = _span(shape, strides, item)
    start = ptr - int(buf.handle)
    if start + lo < 0 or start + hi > buf.size:
        raise ValueError(
            f"the layout reaches outside the buffer's {buf.size} bytes (it needs bytes {start + lo} to {start + hi})"
        )


# ---------------------------------------------------------------------------------------------
# Copies.


def _host_array(view: Any, item: int) -> numpy.ndarray[Any, Any]:
    """A NumPy array over a host view's memory (no copy)."""
    shape = tuple(view.shape)
    bstrides = tuple(s * item for s in elem_strides(view))
    lo, hi = _span(shape, elem_strides(view), item)
    dt = numpy.dtype(f"V{item}")  # a copy moves bytes: no casting
    if hi == lo:
        return numpy.empty(shape, dtype=dt)
    raw = (ctypes.c_char * (hi - lo)).from_address(view.ptr + lo)
    return numpy.ndarray(shape, dtype=dt, buffer=raw, offset=-lo, strides=bstrides)  # type: ignore[arg-type]


def _merge(
    shape: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]
) -> tuple[list[int], list[int], list[int]]:
    """Drop extent-1 axes and merge neighbours that are contiguous in both views (byte strides)."""
    axes = [(n, x, y) for n, x, y in zip(shape, a, b) if n != 1]
    out: list[list[int]] = []
    for n, x, y in axes:
        if out:
            pn, px, py = out[-1]
            if px == x * n and py == y * n:
                out[-1] = [pn * n, x, y]
                continue
        out.append([n, x, y])
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out]


def _copy_2d(
    dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, s: Any, ctx: Any
) -> None:
    p = driver.CUDA_MEMCPY2D()
    p.srcMemoryType = _UNIFIED
    p.srcDevice = src
    p.srcPitch = spitch
    p.dstMemoryType = _UNIFIED
    p.dstDevice = dst
    p.dstPitch = dpitch
    p.WidthInBytes = width
    p.Height = height
    handle_return(on_stream(s, ctx, driver.cuMemcpy2DAsync, p, s.handle), "cuMemcpy2DAsync")


def _copy_1d(dst: int, src: int, n: int, s: Any, ctx: Any) -> None:
    handle_return(on_stream(s, ctx, driver.cuMemcpyAsync, dst, src, n, s.handle), "cuMemcpyAsync")


def strided_copy(
    dst: int,
    dstrides: tuple[int, ...],
    src: int,
    sstrides: tuple[int, ...],
    shape: tuple[int, ...],
    item: int,
    s: Any,
) -> None:
    """Queue the copy of ``shape`` items of ``item`` bytes between two strided layouts (byte
    strides) on stream ``s``."""

    if any(n == 0 for n in shape):
        return
    ctx = stream_context(s)
    ns, ds, ss = _merge(shape, dstrides, sstrides)
    if not ns:
        _copy_1d(dst, src, item, s, ctx)
        return
    if ds[-1] == item and ss[-1] == item:  # contiguous rows
        width = ns[-1] * item
        ns, ds, ss = ns[:-1], ds[:-1], ss[:-1]
        if not ns:
            _copy_1d(dst, src, width, s, ctx)
            return
    else:  # rows of one item
        width = item
    height, dp, sp = ns[-1], ds[-1], ss[-1]
    outer = list(zip(ns[:-1], ds[:-1], ss[:-1]))
    two_d = dp >= width and sp >= width
    for idx in itertools.product(*(range(n) for n, _, _ in outer)):
        d = dst + sum(i * x for i, (_, x, _) in zip(idx, outer))
        so = src + sum(i * y for i, (_, _, y) in zip(idx, outer))
        if two_d:
            _copy_2d(d, dp, so, sp, width, height, s, ctx)
        else:  # overlapping or negative pitches: one row at a time
            for r in range(height):
                _copy_1d(d + r * dp, so + r * sp, width, s, ctx)


def copy_views(dst: Any, src: Any, stream: Any, allocator: Any, blocking: Any) -> None:
    """``dst.copy_from(src, ...)``."""

    if allocator is not None and not isinstance(allocator, MemoryResource):
        raise arg_error("allocator", "None or a MemoryResource", allocator, exc=TypeError)
    if blocking is not None and not isinstance(blocking, bool):
        raise arg_error("blocking", "None, True or False", blocking, exc=TypeError)
    if dst.readonly:
        raise ValueError("the destination view is read-only")
    if tuple(dst.shape) != tuple(src.shape):
        raise ValueError(
            f"the views must have the same shape (destination {tuple(dst.shape)}, source {tuple(src.shape)})"
        )
    di, si = _itemsize(dst), _itemsize(src)
    item = di or si
    if item is None:
        raise ValueError("at least one of the views needs a dtype (its item size) to be copied")
    if di is not None and si is not None and di != si:
        raise ValueError(
            f"the views must have the same item size (destination {di}, source {si} bytes)"
        )
    if not dst.is_device_accessible and not src.is_device_accessible:
        numpy.copyto(_host_array(dst, item), _host_array(src, item))
        return
    dstr = tuple(x * item for x in elem_strides(dst))
    sstr = tuple(x * item for x in elem_strides(src))
    shape = tuple(dst.shape)
    s = _resolve_stream(stream, dst, src)
    if _on_two_devices(dst, src):
        # Device memory of two devices: one contiguous run of bytes goes as a peer copy.
        ns, ds, ss = _merge(shape, dstr, sstr)
        if ns and not (len(ns) == 1 and ds[0] == ss[0] == item):
            raise ValueError(
                f"a copy between two devices (destination {dst.device_id}, source {src.device_id}) must be "
                "between contiguous views; copy into a contiguous view on the source's device first"
            )
        if all(shape):
            nbytes = item * (ns[0] if ns else 1)
            copy_across_devices(dst.ptr, dst.device_id, src.ptr, src.device_id, nbytes, s)
    else:
        strided_copy(dst.ptr, dstr, src.ptr, sstr, shape, item, s)
    d2d = dst.is_device_accessible and src.is_device_accessible
    if blocking or (blocking is None and not d2d):
        s.sync()


def _on_two_devices(dst: Any, src: Any) -> bool:
    """Whether both views are plain device memory (DLPack kDLCUDA) of two different devices."""
    return (
        dst._dl_device_type == src._dl_device_type == 2
        and dst.device_id >= 0
        and src.device_id >= 0
        and dst.device_id != src.device_id
    )


def _resolve_stream(stream: Any, dst: Any, src: Any) -> Any:

    if stream is not None:
        return _links.as_stream(stream)
    Device = _links.Device

    dev_id = dst.device_id if dst.is_device_accessible and dst.device_id >= 0 else src.device_id
    return Device(max(dev_id, 0)).default_stream
