"""How cuda_core objects cross into another process through :mod:`multiprocessing`.

``multiprocessing`` pickles with its own pickler (``multiprocessing.reduction.ForkingPickler``)
for ``Process`` arguments, ``Queue`` and ``Pipe``; the reducers registered here apply there
only, as ``cuda.core`` does:

* an :class:`IPCAllocationHandle` travels as a duplicate of its file descriptor
  (``multiprocessing.reduction.DupFd``: passed to a child as it starts, or fetched later over a
  Unix socket from the sending process, which must still be running);
* an IPC-enabled :class:`DeviceMemoryResource` or :class:`PinnedMemoryResource` travels as
  its allocation handle and uuid: the receiver maps the pool once and registers the mapping,
  so the buffers that follow find it (a :class:`Buffer` pickles as its resource and its
  descriptor, with plain :mod:`pickle` too: see ``_memory/_ipc.py``);
* an IPC-enabled :class:`Event` travels as its descriptor and is opened by the receiver.

Plain :mod:`pickle` refuses allocation handles and events and sends a resource by its uuid
alone. Every reducer warns once per process (``UserWarning``, as ``cuda.core``) when the
objects go to a process that ``fork`` starts: CUDA does not survive ``fork``.
"""

from __future__ import annotations

import multiprocessing
import warnings
from multiprocessing import context as _mp_context
from multiprocessing import reduction
from typing import Any

from ._event import Event, rebuild_event
from ._memory._device_resource import DeviceMemoryResource
from ._memory._ipc import (
    IPCAllocationHandle,
    rebuild_allocation_handle,
    reduce_resource_for_process,
)
from ._memory._pinned import PinnedMemoryResource

__all__: list[str] = []  # private module

_warned = False


def start_method() -> str:
    """The start method of the process the objects are being pickled for: the one being started
    (``Process`` arguments), else the default of this process (``Queue``, ``Pipe``)."""
    popen = _mp_context.get_spawning_popen()
    method = getattr(popen, "method", None)
    if method is None:
        method = multiprocessing.get_start_method(allow_none=True)  # None: not chosen yet
    if method is None:
        method = multiprocessing.get_all_start_methods()[0]  # the platform's default
    return str(method)


def check_start_method() -> None:
    """Warn once per process when CUDA objects are pickled for a process ``fork`` starts."""
    global _warned
    if _warned or start_method() != "fork":
        return
    _warned = True
    warnings.warn(
        "multiprocessing start method is 'fork', which CUDA does not support: a forked child "
        "cannot use the CUDA objects it receives (or CUDA at all, once the parent has used it). "
        "Use multiprocessing.get_context('spawn') or multiprocessing.set_start_method('spawn').",
        UserWarning,
        stacklevel=3,
    )


def _reduce_allocation_handle(h: IPCAllocationHandle) -> Any:
    check_start_method()
    return (rebuild_allocation_handle, (reduction.DupFd(h._live_fd()), h.uuid))


def _reduce_pool_resource(mr: Any) -> Any:
    check_start_method()
    return reduce_resource_for_process(mr)


def _reduce_event(ev: Event) -> Any:
    check_start_method()
    desc = ev.ipc_descriptor  # refuses a closed event, or one that is not IPC-enabled
    return (rebuild_event, (desc, ev._device_id))


reduction.register(IPCAllocationHandle, _reduce_allocation_handle)
reduction.register(DeviceMemoryResource, _reduce_pool_resource)
reduction.register(PinnedMemoryResource, _reduce_pool_resource)
reduction.register(Event, _reduce_event)
