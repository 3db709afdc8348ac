"""External memory and external semaphores in the handle layer: imports from file descriptors.

Cold kinds (made and destroyed off the hot paths), so one implementation serves both backends,
as for every cold kind (:mod:`cuda_core._handles._owned`):

* an import of external memory is an :class:`~cuda_core._handles._owned.OwnedHandle`
  ``"external memory"`` (``cuDestroyExternalMemory``);
* a buffer mapped from it is an allocation of the backend (``Allocation.adopt``, both
  backends) whose release function, :class:`MappedFree`, holds the import's handle: the import
  outlives every buffer mapped from it, and ``cuMemFree`` runs before ``cuDestroyExternalMemory``;
* a mipmapped array mapped from it is an ``OwnedHandle("mipmapped array")`` whose ``deps`` hold
  the import's handle (``cuMipmappedArrayDestroy`` first, for the same reason);
* an imported semaphore is an ``OwnedHandle("external semaphore")``
  (``cuDestroyExternalSemaphore``).

Every handle also holds the context it was imported in (a ``CUcontext``, made current for the
destroy calls). The file descriptor rule is the driver's: on success the driver owns the
descriptor (it closes it when the import is destroyed); on failure nothing was taken and the
caller still owns it. Nothing here closes a descriptor.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .._compat import driver
from .._utils import arg_error, check_int, handle_return, make_error
from ._contexts import in_context
from ._owned import OwnedHandle

__all__: list[str] = []  # private module

_MEM = driver.CUexternalMemoryHandleType
_SEM = driver.CUexternalSemaphoreHandleType
MEMORY_HANDLE_TYPES: dict[str, Any] = {"opaque_fd": _MEM.CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD}
"""The memory handle types this layer imports, by the name the public API takes."""
_DMABUF = getattr(_MEM, "CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD", None)
if _DMABUF is not None:  # bound by cuda-bindings 13 (CUDA 13.0 added it); absent from 12.x
    MEMORY_HANDLE_TYPES["dmabuf_fd"] = _DMABUF
SEMAPHORE_KINDS: dict[str, Any] = {
    "binary": _SEM.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD,
    "timeline": _SEM.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD,
}
"""The semaphore kinds, each with the handle type of its opaque file descriptor."""
_DEDICATED = int(getattr(driver, "CUDA_EXTERNAL_MEMORY_DEDICATED", 1))
_MAX_VALUE = 2**64 - 1


def check_fd(fd: Any) -> int:
    """A file descriptor that is open in this process: ``TypeError`` for a non-integer,
    ``ValueError`` naming the error for a negative or closed one (checked before the driver,
    which would answer a closed descriptor with a bare ``CUDA_ERROR_INVALID_VALUE``)."""
    if isinstance(fd, bool) or not hasattr(fd, "__index__"):
        raise arg_error("fd", "an int (an open file descriptor)", fd, exc=TypeError)
    n = int(fd.__index__())
    if n < 0:
        raise arg_error("fd", "an open file descriptor (>= 0)", fd)
    try:
        os.fstat(n)
    except OSError as exc:
        raise arg_error("fd", "an open file descriptor", fd, f"{exc.strerror or exc}") from None
    return n


def _import_taking(fd: int, call: Any, ctx: Any, desc: Any) -> tuple[int, Any]:
    """``call(desc)`` with ``ctx`` current, ``desc.handle.fd`` a duplicate of ``fd``: the
    driver's ``(status, handle)``. On success the import owns the duplicate and ``fd`` is closed
    (consumed, as CUDA consumes the descriptor it imports); on failure ``fd`` is untouched. The
    driver may close a descriptor it refuses (driver 580 does, for a pipe): with a duplicate,
    the caller's stays open either way, and the duplicate is closed only while it still names
    the caller's file (the driver may have closed it, and its number been reused)."""
    dup = os.dup(fd)
    desc.handle.fd = dup
    try:
        err, handle = in_context(ctx, call, desc)
    except BaseException:
        _close_if_same_file(dup, fd)
        raise
    if err:
        _close_if_same_file(dup, fd)
        return err, None
    os.close(fd)
    return 0, handle


def _close_if_same_file(dup: int, fd: int) -> None:
    try:
        a, b = os.fstat(dup), os.fstat(fd)
    except OSError:  # the driver closed the duplicate
        return
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        os.close(dup)


def _import_failed(status: int, api: str, fd: int, what: str) -> Exception:
    return make_error(
        status,
        api,
        f"importing {what} from file descriptor {fd} failed; the descriptor was not taken "
        f"and is still the caller's to close",
    )


# ---------------------------------------------------------------------------------------------
# Memory


def _destroy_memory(ctx: Any, value: int) -> object:
    return in_context(ctx, driver.cuDestroyExternalMemory, driver.CUexternalMemory(value))


def _destroy_mipmapped(ctx: Any, value: int) -> object:
    return in_context(ctx, driver.cuMipmappedArrayDestroy, driver.CUmipmappedArray(value))


class _Destroy:
    """A destroy function bound to its context (a finalizer references it, never an owner)."""

    __slots__ = ("ctx", "fn")

    def __init__(self, fn: Any, ctx: Any) -> None:
        self.fn, self.ctx = fn, ctx

    def __call__(self, value: int) -> object:
        return self.fn(self.ctx, value)


def import_memory(ctx: Any, fd: int, size: int, handle_type: Any, dedicated: bool) -> OwnedHandle:
    """``cuImportExternalMemory`` of ``size`` bytes from ``fd`` with ``ctx`` current: the
    import's handle, ``fd`` consumed. On failure, the error funnel's exception; ``fd`` is not
    taken."""
    desc = driver.CUDA_EXTERNAL_MEMORY_HANDLE_DESC()
    desc.type = handle_type
    desc.size = size
    desc.flags = _DEDICATED if dedicated else 0
    err, ext = _import_taking(fd, driver.cuImportExternalMemory, ctx, desc)
    if err:
        raise _import_failed(err, "cuImportExternalMemory", fd, f"{size} bytes of memory")
    destroy = _Destroy(_destroy_memory, ctx)
    return OwnedHandle("external memory", int(ext), destroy)


class MappedFree:
    """The release function of a buffer mapped from external memory (``free(ptr, size,
    stream)`` of ``Allocation.adopt``): synchronises the deallocation stream, if any, then
    ``cuMemFree`` with the import's context current. It holds the import's handle, so the
    import is destroyed only after its last buffer is freed."""

    __slots__ = ("ctx", "ext")

    def __init__(self, ext: OwnedHandle, ctx: Any) -> None:
        self.ext, self.ctx = ext, ctx

    def __call__(self, ptr: int, size: int, stream: Any) -> None:
        if stream is not None and not stream._h.is_released:
            handle_return(driver.cuStreamSynchronize(stream.handle), "cuStreamSynchronize")
        handle_return(in_context(self.ctx, driver.cuMemFree, ptr), "cuMemFree")


def map_buffer(ext: OwnedHandle, ctx: Any, offset: int, size: int) -> int:
    """``cuExternalMemoryGetMappedBuffer``: the device address of ``size`` bytes at ``offset``
    of the import (the caller checked the range against the import's size)."""
    d = driver.CUDA_EXTERNAL_MEMORY_BUFFER_DESC()
    d.offset = offset
    d.size = size
    d.flags = 0
    raw = driver.CUexternalMemory(live(ext, "ExternalMemory"))
    ptr = handle_return(
        in_context(ctx, driver.cuExternalMemoryGetMappedBuffer, raw, d),
        "cuExternalMemoryGetMappedBuffer",
    )
    return int(ptr)


def map_mipmapped_array(
    ext: OwnedHandle, ctx: Any, offset: int, array_desc: Any, num_levels: int
) -> OwnedHandle:
    """``cuExternalMemoryGetMappedMipmappedArray``: the mipmapped array's handle, which holds
    the import's (destroyed with ``cuMipmappedArrayDestroy`` before the import can be)."""
    d = driver.CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC()
    d.offset = offset
    d.arrayDesc = array_desc
    d.numLevels = num_levels
    raw = driver.CUexternalMemory(live(ext, "ExternalMemory"))
    h = handle_return(
        in_context(ctx, driver.cuExternalMemoryGetMappedMipmappedArray, raw, d),
        "cuExternalMemoryGetMappedMipmappedArray",
    )
    destroy = _Destroy(_destroy_mipmapped, ctx)
    return OwnedHandle("mipmapped array", int(h), destroy, (ext,), at_exit=False)


def live(h: OwnedHandle, what: str) -> int:
    """The raw value of an open handle, else ``RuntimeError`` naming ``what``."""
    value = h.value
    if value is None:
        raise RuntimeError(f"{what} has been closed; it cannot be used after close()")
    return int(value)


# ---------------------------------------------------------------------------------------------
# Semaphores


def _destroy_semaphore(ctx: Any, value: int) -> object:
    return in_context(ctx, driver.cuDestroyExternalSemaphore, driver.CUexternalSemaphore(value))


def import_semaphore(ctx: Any, fd: int, kind: str) -> OwnedHandle:
    """``cuImportExternalSemaphore`` of a ``kind`` semaphore (:data:`SEMAPHORE_KINDS`) from
    ``fd`` with ``ctx`` current. On failure, the error funnel's exception; ``fd`` is not taken."""
    desc = driver.CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC()
    desc.type = SEMAPHORE_KINDS[kind]
    desc.flags = 0
    err, sem = _import_taking(fd, driver.cuImportExternalSemaphore, ctx, desc)
    if err:
        raise _import_failed(err, "cuImportExternalSemaphore", fd, f"a {kind} semaphore")
    destroy = _Destroy(_destroy_semaphore, ctx)
    return OwnedHandle("external semaphore", int(sem), destroy)


def check_value(value: Any, timeline: bool, name: str = "value") -> int:
    """The fence value of one signal or wait: an integer in ``[0, 2**64)`` for a timeline
    semaphore, ``None`` (read as 0) for a binary one, which has no value."""
    if not timeline:
        if value is not None:
            raise arg_error(
                name,
                "None for a binary semaphore (it has no value; only timeline semaphores take one)",
                value,
            )
        return 0
    if value is None:
        raise arg_error(
            name, "an integer in [0, 2**64) for a timeline semaphore", value, exc=TypeError
        )
    return check_int(name, value, 0, _MAX_VALUE)


def fence_params(values: Sequence[int], signal: bool) -> list[Any]:
    """One ``CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS`` (or ``..._WAIT_PARAMS``) per fence value."""
    cls = (
        driver.CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS
        if signal
        else driver.CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS
    )
    out = []
    for v in values:
        p = cls()
        p.params.fence.value = v
        out.append(p)
    return out


def signal(sems: Sequence[int], values: Sequence[int], stream: Any) -> None:
    """``cuSignalExternalSemaphoresAsync`` of every semaphore (raw addresses) with its value,
    in one call, ordered on ``stream`` (a ``CUstream``)."""
    handles = [driver.CUexternalSemaphore(a) for a in sems]
    handle_return(
        driver.cuSignalExternalSemaphoresAsync(
            handles, fence_params(values, True), len(handles), stream
        ),
        "cuSignalExternalSemaphoresAsync",
    )


def wait(sems: Sequence[int], values: Sequence[int], stream: Any) -> None:
    """``cuWaitExternalSemaphoresAsync`` of every semaphore (raw addresses) for its value, in
    one call, ordered on ``stream`` (a ``CUstream``)."""
    handles = [driver.CUexternalSemaphore(a) for a in sems]
    handle_return(
        driver.cuWaitExternalSemaphoresAsync(
            handles, fence_params(values, False), len(handles), stream
        ),
        "cuWaitExternalSemaphoresAsync",
    )
