"""Shared code of the drop-in tests: NVIDIA's ``cuda.core`` (``nv``) beside ``cuda_core``.

``tests/test_dropin*.py`` run one snippet against both libraries and compare what comes back:
the value, or the class of the exception (ours may be a subclass). The ``nv`` fixture (in
``tests/conftest.py``) gives NVIDIA's module or skips.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest


def _import_nv() -> Any:
    try:
        return importlib.import_module("cuda.core")
    except Exception as exc:  # pragma: no cover - depends on the environment
        return exc


NV = _import_nv()
"""NVIDIA's ``cuda.core`` module, or the exception its import raised."""


def require_nv() -> Any:
    """NVIDIA's cuda.core, or a skip when it is not importable here (the ``nv`` fixture of
    ``tests/conftest.py``)."""
    if isinstance(NV, Exception):
        pytest.skip(f"NVIDIA's cuda.core is not importable: {NV!r}")
    return NV


def outcome(fn: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """``("ok", value)`` or ``("raises", exception class)`` of calling ``fn(*args, **kwargs)``."""
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as exc:
        return ("raises", type(exc))


def same_outcome(nv_out: tuple[str, Any], our_out: tuple[str, Any], what: str) -> None:
    """Both accepted (values compared by the caller), or ours raises the same class or a subclass."""
    assert nv_out[0] == our_out[0], f"{what}: cuda.core {nv_out}, cuda_core {our_out}"
    if nv_out[0] == "raises":
        assert issubclass(our_out[1], nv_out[1]), (
            f"{what}: cuda.core raises {nv_out[1]}, we raise {our_out[1]}"
        )


def host_resource(lib: Any) -> Any:
    """A host-only Python memory resource of ``lib``: its buffers need no driver (``device_id``
    -1, host-accessible), so the CPU tier can make Buffers of both libraries. ``allocate``
    wraps the address ``0x2000`` (never read); ``freed`` records the ``(ptr, size)`` of each
    ``deallocate``."""

    class HostResource(lib.MemoryResource):
        def __init__(self):
            self.freed = []

        def allocate(self, size, *, stream=None):
            return lib.Buffer.from_handle(0x2000, size, mr=self)

        def deallocate(self, ptr, size, *, stream=None):
            self.freed.append((int(ptr), size))

        @property
        def is_device_accessible(self):
            return False

        @property
        def is_host_accessible(self):
            return True

        @property
        def is_managed(self):
            return False

        @property
        def device_id(self):
            return -1

    return HostResource()
