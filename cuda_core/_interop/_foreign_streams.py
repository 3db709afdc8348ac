"""PyTorch's and CuPy's stream classes, recognised exactly, and the attribute holding the handle.

A stream of those classes is borrowed by reading that attribute (no ``__cuda_stream__`` call):
``Stream._from_foreign`` (through :func:`foreign_stream_handle`) and ``Device.create_stream(obj)`` look the class up in
:data:`_foreign_handle_attrs`, which :func:`_foreign_handle_attr` fills as classes are first seen.
"""

from __future__ import annotations

import sys
from typing import Any

from .._utils import arg_error

__all__: list[str] = []  # private module

# Foreign stream class -> the attribute holding its handle ("cuda_stream" for PyTorch's, "ptr" for
# CuPy's), or "" for a class read through __cuda_stream__. Filled as classes are first seen.
_foreign_handle_attrs: dict[type, str] = {}
_FOREIGN_STREAM_CLASSES = (
    ("torch", ("cuda.Stream", "cuda.ExternalStream"), "cuda_stream"),
    ("cupy", ("cuda.Stream", "cuda.ExternalStream"), "ptr"),
)


def _foreign_handle_attr(tp: type) -> str:
    """The handle attribute of ``tp`` when it is exactly a known PyTorch/CuPy stream class, else ``""``."""
    attr = ""
    for module, names, handle_attr in _FOREIGN_STREAM_CLASSES:
        mod = sys.modules.get(module)
        if mod is None:
            continue
        for dotted in names:
            found: Any = mod
            for part in dotted.split("."):
                found = getattr(found, part, None)
            if found is tp:
                attr = handle_attr
    if len(_foreign_handle_attrs) < 64:
        _foreign_handle_attrs[tp] = attr
    return attr


def foreign_stream_handle(obj: Any) -> int:
    """The ``CUstream`` address of a foreign stream object (``Stream(obj)``): read from the
    handle attribute of an exact PyTorch/CuPy stream class, else through ``__cuda_stream__``
    (checked as ``cuda.core`` checks it), else from the attribute of older CuPy and PyTorch
    streams that predate the protocol."""
    tp = obj.__class__
    attr = _foreign_handle_attrs.get(tp)
    if attr is None:
        attr = _foreign_handle_attr(tp)
    if attr:
        return int(getattr(obj, attr))
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is None:
        mod = tp.__module__
        attr = (
            "ptr" if mod.startswith("cupy") else "cuda_stream" if mod.startswith("torch") else None
        )
        raw = getattr(obj, attr, None) if attr else None
        if isinstance(raw, int):
            return raw
        raise arg_error(
            "obj",
            "an object with __cuda_stream__",
            obj,
            exc=TypeError,
            lead=f"{type(obj)} object does not have a '__cuda_stream__' attribute",
        )
    info = proto() if callable(proto) else proto
    if not (isinstance(info, tuple) and len(info) == 2):
        got = f"{len(info)} elements" if isinstance(info, (tuple, list)) else type(info).__name__
        raise arg_error(
            "obj.__cuda_stream__()",
            "a (version, handle) tuple",
            info,
            exc=TypeError,
            lead=f"obj.__cuda_stream__ must return a sequence with 2 elements, got {got}",
        )
    if info[0] != 0:
        raise arg_error(
            "obj.__cuda_stream__() version",
            "0",
            info[0],
            lead="The first element of the sequence returned by obj.__cuda_stream__ must "
            f"be 0, got {info[0]!r}",
        )
    return int(info[1])
