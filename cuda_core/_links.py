"""The links that run up the layers, set when the upper module loads instead of imported.

Memory, textures, graphs and interop take devices and streams as arguments, and ``Device``
hands out their objects (``allocate``, ``create_graph_builder``, ``create_texture_object``, ...).
Were each to import the other, every wing and the hall would form one import cycle (and did,
through 105 deferred imports). Instead the modules below import this one, which imports only the
base and the handle layer, and each link is set by the module that defines it, once, when it
loads:

* ``Device`` (set by ``_device``): the Device class; ``Device(ordinal)`` is an ordinal's Device.
* ``Stream``, ``as_stream`` (``_stream``): the Stream class and the stream-argument converter.
* ``default_memory_resource``, ``MemoryResource``, ``Buffer`` (``_memory``): a device's default
  resource, and the classes Device and launch() check what they are given against.
* ``ipc``, ``prefetch`` (``_memory/_ipc``, ``_memory/_managed``): Buffer's and pools' IPC
  operations, Buffer.prefetch.
* ``graph_builder``, ``GraphBuilder`` (``graph/_builder``): Device/Stream.create_graph_builder;
  batched copies refuse a builder as their stream.
* ``textures`` (``texture/*``): Device's four texture and array factories.
* ``system_device`` (``system/_device``): Device.to_system_device.

``import cuda_core`` loads every one of those modules before user code runs, so a link is
always set when it is used. The device count needs no link: :func:`device_count` asks the
driver here.
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
