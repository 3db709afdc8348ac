"""The uuid registry of IPC-enabled pool resources: how a pickled resource or buffer finds its
resource in the receiving process.

Every IPC-enabled resource that exports its pool gets a ``uuid.UUID`` when it is made (held
weakly here, so that it is found by its uuid in its own process). A process that maps the pool
(``from_allocation_handle`` with a handle carrying that uuid, or by unpickling the resource)
registers the mapping under the exporter's uuid and keeps it until it is closed, so that the
pool is mapped once per process however many buffers arrive.
"""

from __future__ import annotations

import threading
import uuid as uuid_mod
import weakref
from typing import Any

from .._utils import arg_error

__all__: list[str] = []  # private module

_mapped: dict[uuid_mod.UUID, Any] = {}  # mappings of other processes' pools, until closed
_exporters: weakref.WeakValueDictionary[uuid_mod.UUID, Any] = weakref.WeakValueDictionary()
_lock = threading.Lock()


def _check_key(key: Any) -> uuid_mod.UUID:
    if not isinstance(key, uuid_mod.UUID):
        raise arg_error("uuid", "a uuid.UUID", key, exc=TypeError)
    return key


def new_exporter(mr: Any) -> uuid_mod.UUID:
    """A fresh uuid for an IPC-enabled resource that exports its pool, registered weakly."""
    key = uuid_mod.uuid4()
    _exporters[key] = mr
    return key


def find(key: Any) -> Any:
    """The open resource mapped or exporting in this process under ``key``, or ``None``."""
    with _lock:
        found = _mapped.get(key)
        if found is None or found._pool is None:
            found = _exporters.get(key)
    if found is None or found._pool is None:
        return None
    return found


def find_registered(cls: type, key: Any) -> Any:
    """``cls.from_registry(key)``: the open resource of type ``cls`` registered under ``key``.

    Raises ``TypeError`` for a key that is not a uuid, ``RuntimeError`` when nothing is
    registered under it or what is registered is not a ``cls``.
    """
    found = find(_check_key(key))
    if found is None:
        # cuda.core's wording first ("Memory resource <uuid> was not found"; its tests match it)
        raise RuntimeError(
            f"Memory resource {key} was not found: no open resource is registered under it in this "
            "process (send the resource itself through multiprocessing first, or map it with "
            "from_allocation_handle())"
        )
    if not isinstance(found, cls):
        raise RuntimeError(
            f"the memory resource registered under {key} is a {type(found).__name__}, not a {cls.__name__}"
        )
    return found


def register(mr: Any, key: Any) -> Any:
    """``mr.register(key)``: the resource registered under ``key`` (``mr``, or the mapping of the
    same pool registered before)."""
    _check_key(key)
    mr._live_pool()
    if not mr._ipc_enabled:
        raise RuntimeError(
            "Memory resource is not IPC-enabled; only IPC-enabled resources and their mappings "
            "are registered"
        )
    if mr._uuid is not None and mr._uuid != key:
        raise RuntimeError(
            f"the memory resource is registered under {mr._uuid} already; it cannot take {key}"
        )
    if not mr._mapped:
        return mr  # an exporting resource is found by its own uuid already
    with _lock:
        found = _mapped.get(key)
        if found is not None and found._pool is not None:
            return found
        _mapped[key] = mr
        mr._uuid = key
    return mr


def unregister(mr: Any) -> None:
    """Forget a mapped resource that is being closed."""
    key = mr._uuid
    with _lock:
        if key is not None and _mapped.get(key) is mr:
            del _mapped[key]
