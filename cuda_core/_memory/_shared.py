"""Memory a Buffer shares with the graphs whose nodes use it.

A graph node that reads or writes a Buffer (``GraphDefinition.memset``, ``memcpy``, their raw
pointer forms with ``dst_owner``/``src_owner``) takes a share of the buffer's allocation. Closing
the buffer then gives up the buffer's share only: the memory is freed once no share is left,
so a graph (or its clone, or its executable graph) never runs on freed memory, as in
``cuda.core``. A buffer no graph uses is freed at ``close()`` as before.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__: list[str] = []  # private module


class SharedAllocation:
    """An allocation (the handle layer's ``Allocation``) with more owners than its Buffer.

    The buffer's ``_h`` becomes this object, which answers the calls the buffer makes on its
    allocation: ``stream``, ``set_stream`` and ``close``. ``close`` gives up the buffer's
    share, ordering the eventual free on ``stream`` when given, and frees the memory at once
    when no :class:`Share` is alive; otherwise the last share's death drops the allocation,
    which frees it on its deallocation stream (a failure then is a ``CUDAWarning``).
    """

    __slots__ = ("__weakref__", "_h", "_shares")

    def __init__(self, h: Any) -> None:
        self._h = h
        self._shares: weakref.WeakSet[Share] = weakref.WeakSet()

    @property
    def stream(self) -> Any:
        return self._h.stream

    @property
    def ptr(self) -> int:
        return int(self._h.ptr)

    def set_stream(self, stream: Any) -> None:
        self._h.set_stream(stream)

    def close(self, stream: Any = None) -> None:
        """The buffer's share goes; the memory is freed now when no graph shares it."""
        if stream is not None:
            self._h.set_stream(stream)
        if not self._shares:
            self._h.close()


class Share:
    """One graph node's hold on a shared allocation: the memory lives while this does."""

    __slots__ = ("__weakref__", "_shared")

    def __init__(self, shared: SharedAllocation) -> None:
        self._shared = shared
        shared._shares.add(self)

    def __repr__(self) -> str:
        return f"<Share of the allocation at {self._shared.ptr:#x}>"


def share(buffer: Any) -> Any:
    """What keeps ``buffer``'s memory allocated, even past ``buffer.close()``, until dropped.

    An owning buffer's allocation becomes shared (a :class:`Share` is returned); a buffer that
    owns nothing (a view made with ``Buffer.from_handle``) is returned itself, which keeps its
    ``owner`` alive until it is closed.
    """
    h = buffer._h
    if h is None:
        return buffer
    if type(h) is not SharedAllocation:
        h = buffer._h = SharedAllocation(h)
    return Share(h)
