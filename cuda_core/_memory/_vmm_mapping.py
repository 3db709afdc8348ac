"""The mappings of a VirtualMemoryResource's buffers, and undoing a mapping that failed midway.

Each buffer's address ranges and mapped chunks are kept by a :class:`_Mapping`, the buffer's
release function: it unmaps every chunk and frees every address range exactly once (at
``close()``, collection, or an explicit ``deallocate``), after the work on the buffer's stream
is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._compat import driver
from .._handles._contexts import in_context
from .._utils import handle_return, note_failed_rollback

__all__: list[str] = []  # private module


def _align_up(size: int, gran: int) -> int:
    return -(-size // gran) * gran


class _Mapping:
    """The address ranges and mapped chunks of one VMM buffer; also the buffer's release
    function ``free(ptr, size, stream)`` (the handle layer's Allocation calls it once)."""

    __slots__ = ("__weakref__", "chunks", "ctx", "ranges", "registry")

    def __init__(self, ctx: Any, registry: dict[int, _Mapping]) -> None:
        self.ctx = ctx
        self.ranges: list[tuple[int, int]] = []  # (address, size) as reserved
        self.chunks: list[tuple[int, int]] = []  # (address, size) as mapped
        self.registry = registry

    @property
    def base(self) -> int:
        return self.chunks[0][0]

    @property
    def mapped(self) -> int:
        return sum(n for _, n in self.chunks)

    def __call__(self, ptr: int, size: int, stream: Any) -> None:
        self.release(stream)

    def release(self, stream: Any) -> None:
        """Unmap every chunk and free every range, once, after the work queued on ``stream``
        (or, without one, all work of the device's context) is done."""
        ranges, chunks = self.ranges, self.chunks
        if not ranges:
            return
        self.registry.pop(self.base, None)
        self.ranges, self.chunks = [], []
        _wait(self.ctx, stream)
        _unmap(self.ctx, chunks, ranges)


def _wait(ctx: Any, stream: Any) -> None:
    # Unmapping is immediate: work still using the memory must be finished first.
    if stream is not None and not stream._h.is_released:
        handle_return(driver.cuStreamSynchronize(stream.handle), "cuStreamSynchronize")
    else:
        handle_return(in_context(ctx, driver.cuCtxSynchronize), "cuCtxSynchronize")


def _unmap(ctx: Any, chunks: list[tuple[int, int]], ranges: list[tuple[int, int]]) -> None:
    first: BaseException | None = None
    for ptr, n in chunks:
        try:
            handle_return(in_context(ctx, driver.cuMemUnmap, ptr, n), "cuMemUnmap")
        except Exception as exc:  # keep going: free what can be freed, then report
            first = first or exc
    for ptr, n in ranges:
        try:
            handle_return(in_context(ctx, driver.cuMemAddressFree, ptr, n), "cuMemAddressFree")
        except Exception as exc:
            first = first or exc
    if first is not None:
        raise first


def _unmapper(ctx: Any, ptr: int, size: int) -> Callable[[], Any]:
    return lambda: in_context(ctx, driver.cuMemUnmap, ptr, size)


class _Undo:
    """Undo steps of a multi-step driver operation, run in reverse on failure. A step that fails
    too becomes a note on the error that propagates (which stays the one raised)."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: list[tuple[str, Callable[[], Any]]] = []

    def add(self, api: str, step: Callable[[], Any]) -> None:
        """Undo with ``step()``, the call ``api`` (its ``cuda.bindings`` result is checked)."""
        self.steps.append((api, step))

    def __enter__(self) -> _Undo:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        for api, step in reversed(self.steps):
            try:
                result = step()
            except Exception as failed:
                exc.add_note(f"(and undoing it with {api} failed: {failed})")
                continue
            note_failed_rollback(exc, result if isinstance(result, tuple) else None, api)
