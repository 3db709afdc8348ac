"""PyTorch's and CuPy's stream classes, recognised exactly, and the attribute holding the handle.

A stream of those classes is borrowed by reading that attribute (no ``__cuda_stream__`` call):
``Stream._from_foreign`` and ``Device.create_stream(obj)`` look the class up in
:data:`_foreign_handle_attrs`, which :func:`_foreign_handle_attr` fills as classes are first seen.
"""

from __future__ import annotations

import sys
from typing import Any

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
