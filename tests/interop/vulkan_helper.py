"""The Vulkan side of the interop tests: ``examples/_vulkan.py`` (headless Vulkan through
ctypes) and the ping-pong of ``examples/vulkan_interop.py``, loaded from the examples folder so
that the example and the tests run the same code.

:func:`vulkan_skip_reason` says in one line why Vulkan cannot be used here (no loader, an
instance the driver refuses, no device with the fd extensions), or returns ``None``.
"""

from __future__ import annotations

import functools
import importlib
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _examples_module(name: str) -> ModuleType:
    if str(EXAMPLES) not in sys.path:
        sys.path.append(str(EXAMPLES))  # after the tests' own paths: _example, _vulkan
    return importlib.import_module(name)


def vulkan() -> ModuleType:
    """``examples/_vulkan.py``: ``Vulkan``, ``VulkanError``, ``skip_reason``..."""
    return _examples_module("_vulkan")


def ping_pong() -> ModuleType:
    """``examples/vulkan_interop.py``: ``PingPong``, ``device_uuid``..."""
    return _examples_module("vulkan_interop")


@functools.cache
def vulkan_skip_reason() -> str | None:
    """Why the Vulkan interop tests cannot run here (checked once), or ``None``."""
    from cuda_core import Device

    uuid = ping_pong().device_uuid(Device(0))
    why = vulkan().skip_reason(uuid)
    return None if why is None else f"Vulkan interop: {why}"
