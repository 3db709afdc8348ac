"""Tensor-map arguments: their checks and the forms the driver's ``cuTensorMap*`` calls take.

The checks: the tensor's address, shape and byte strides, tuples of ints, enumeration members,
element strides. The driver forms: arrays innermost dimension first as ``cuuint32_t`` and
``cuuint64_t``, each call through the error funnel, and the 128 bytes of an encoded map.
"""

from __future__ import annotations

import ctypes
import enum
from collections.abc import Sequence
from typing import Any

from ._compat import driver
from ._handles._driver import ensure_driver
from ._utils import arg_error, handle_return

__all__: list[str] = []  # private: _tensor_map and the kernel-argument packer use these


def _int_tuple(name: str, values: Any) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise arg_error(name, "a tuple of ints", values, exc=TypeError)
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise arg_error(f"{name}[{i}]", "an int", v, exc=TypeError)
        out.append(v.__index__())
    return tuple(out)


def _require_enum(name: str, value: Any, enum_type: type[enum.IntEnum]) -> Any:
    if not isinstance(value, enum_type):
        raise arg_error(
            name, f"a {enum_type.__name__}", value, f"e.g. {enum_type.__name__}.NONE", exc=TypeError
        )
    return value


def _check_element_strides(element_strides: Any, rank: int) -> tuple[int, ...]:
    if element_strides is None:
        return (1,) * rank
    es = _int_tuple("element_strides", element_strides)
    if len(es) != rank:
        raise arg_error("element_strides", f"of the tensor's rank ({rank} values)", es)
    for i, e in enumerate(es):
        if not 1 <= e <= 8:
            raise arg_error(f"element_strides[{i}]", "in [1, 8]", e)
    return es


def view_address_and_shape(view: Any, min_rank: int) -> tuple[int, tuple[int, ...]]:
    """The tensor's address and shape, checked for a tensor map: device-accessible memory,
    16-byte aligned, rank in [``min_rank``, 5], every extent in [1, 2**32]."""
    if not getattr(view, "is_device_accessible", False):
        raise ValueError(
            "the tensor must be in device-accessible memory (device, pinned or managed) for a "
            "tensor map (got host memory); copy it to the device first"
        )
    ptr = int(view.ptr)
    if ptr % 16:
        raise arg_error(
            "the tensor's address",
            "16-byte aligned for a tensor map",
            hex(ptr),
            "slice the tensor at a 16-byte boundary or copy it to an aligned buffer",
        )
    shape = tuple(int(n) for n in view.shape)
    if not min_rank <= len(shape) <= 5:
        raise arg_error("the tensor's rank", f"in [{min_rank}, 5] for a tensor map", len(shape))
    for i, n in enumerate(shape):
        if not 1 <= n <= 1 << 32:
            raise arg_error(f"shape[{i}]", "in [1, 2**32] for a tensor map", n)
    return ptr, shape


def view_byte_strides(view: Any, shape: tuple[int, ...], elem: int) -> tuple[int, ...]:
    """The tensor's strides in bytes (elements of ``elem`` bytes), checked for a tensor map:
    the innermost is one element, the others positive multiples of 16 bytes below 2**40."""
    strides = view.strides
    if strides is None:  # C-contiguous
        acc, s = 1, []
        for n in reversed(shape):
            s.append(acc)
            acc *= n
        strides = tuple(reversed(s))
    if shape[-1] > 1 and strides[-1] != 1:
        raise arg_error(
            "the tensor's innermost stride",
            "1 element for a tensor map",
            strides[-1],
            "make the last dimension contiguous",
        )
    byte_strides = tuple(int(st) * elem for st in strides)
    for i, b in enumerate(byte_strides[:-1]):
        if b <= 0 or b % 16 or b >= 1 << 40:
            raise arg_error(
                f"the tensor's stride of dimension {i}",
                "a positive multiple of 16 bytes below 2**40 for a tensor map",
                f"{b} bytes",
                "pad the rows to 16 bytes",
            )
    return byte_strides


def _u64(values: Any) -> list[Any]:
    """``values`` innermost first, as the driver's ``cuuint64_t`` (cuda-bindings 13.3 takes no
    plain ints there)."""
    return [driver.cuuint64_t(int(v)) for v in reversed(values)]


def _u32(values: Any) -> list[Any]:
    """``values`` innermost first, as the driver's ``cuuint32_t``."""
    return [driver.cuuint32_t(int(v)) for v in reversed(values)]


def _global_strides(lay: Any) -> list[Any]:
    """The byte strides of all but the innermost dimension of ``lay`` (a ``_Layout``), for the
    driver. A rank-1 tensor has none, but the driver refuses a null array (the bindings pass
    ``[]`` as null), so it gets one slot the driver never reads: the tensor's size rounded up
    to 16 bytes."""
    strides = lay.byte_strides[:-1]
    if not strides:
        strides = ((lay.shape[0] * lay.elem + 15) // 16 * 16,)
    return _u64(strides)


def _encode(api: str, fn: Any, *args: Any) -> Any:
    ensure_driver()
    return handle_return(fn(*args), api)


def tensor_map_bytes(cu: Any) -> bytes:
    """The 128 bytes of a ``cuda.bindings`` ``CUtensorMap`` (what a kernel gets by value)."""
    return ctypes.string_at(cu.getPtr(), 128)
