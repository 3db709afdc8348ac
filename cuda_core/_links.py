"""The links that run up the layers, set when the upper module loads instead of imported.

Memory, textures, graphs and interop take devices and streams as arguments, and ``Device``
hands out their objects (``allocate``, ``create_graph_builder``, ``create_texture_object``, ...).
Were each to import the other, every wing and the hall would form one import cycle (and did,
through 105 deferred imports). Instead the modules below import this one, which imports nothing
of cuda_core, and each link is set by the module that defines it, once, when it loads:

============================  ===================================  =========================
link                          what                                 set by
============================  ===================================  =========================
``Device``                    the Device class (ordinal -> Device)  ``_device``
``Stream``, ``as_stream``     the Stream class and its converter   ``_stream``
``default_memory_resource``   a device's default resource          ``_memory/_device_resource``
``MemoryResource``            the resource base class              ``_memory/_resource``
``Buffer``                    the Buffer class (kernel arguments)   ``_memory/_buffer``
``ipc``                       Buffer's and pools' IPC operations   ``_memory/_ipc``
``prefetch``                  Buffer.prefetch (managed memory)     ``_memory/_managed``
``graph_builder``             a GraphBuilder on a stream           ``graph/_builder``
``GraphBuilder``              the class (batched copies refuse it)  ``graph/_builder``
``textures``                  the four texture/array factories     ``texture``
``system_device``             NVML's Device by UUID                ``system/_device``
============================  ===================================  =========================

``import cuda_core`` loads every one of those modules before user code runs, so a link is
always set when it is used. The device count and the primary context of an ordinal need no
link: :func:`device_count` and :func:`primary_context` ask the driver here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ._compat import driver
from ._handles._driver import ensure_driver
from ._utils import handle_return

__all__: list[str] = []  # private module

Device: Any = None
Stream: Any = None
as_stream: Callable[..., Any]
default_memory_resource: Callable[[Any], Any]
MemoryResource: Any = None
Buffer: Any = None
ipc: SimpleNamespace = SimpleNamespace()  # reduce/export/import_buffer, export_pool
prefetch: Callable[[Any, Any, Any], None]
GraphBuilder: Any = None
graph_builder: Callable[[Any, bool], Any]  # (stream, owns_stream)
textures: SimpleNamespace = SimpleNamespace()
system_device: Callable[[str], Any]

_count_lock = threading.Lock()
_device_count: int | None = None


def device_count() -> int:
    """The number of CUDA devices (asked once per process)."""
    global _device_count
    if _device_count is None:
        ensure_driver()
        with _count_lock:
            if _device_count is None:
                _device_count = int(handle_return(driver.cuDeviceGetCount(), "cuDeviceGetCount"))
    return _device_count


def device(ordinal: Any = None) -> Any:
    """``Device(ordinal)``: this thread's Device of ``ordinal`` (``None``: the current one)."""
    return Device(ordinal)


def is_device(obj: Any) -> bool:
    """Whether ``obj`` is a :class:`~cuda_core.Device`."""
    return isinstance(obj, Device)


def primary_context(ordinal: int) -> Any:
    """The primary ``CUcontext`` of device ``ordinal``, retained (once per Device object)."""
    return Device(ordinal)._primary_ctx()
