"""ExternalSemaphore: a binary or timeline semaphore another API exported as a file descriptor,
signalled and waited on in stream order, alone or several in one call.

``cuImportExternalSemaphore`` imports it (:meth:`ExternalSemaphore.from_fd`);
:meth:`~ExternalSemaphore.signal` and :meth:`~ExternalSemaphore.wait`, and the module functions
:func:`signal_external_semaphores` and :func:`wait_external_semaphores` (several semaphores in
one ``cuSignalExternalSemaphoresAsync`` / ``cuWaitExternalSemaphoresAsync``), order the
operation on a :class:`~cuda_core.Stream`. A :class:`~cuda_core.GraphBuilder` is a stream too:
the operations are captured into its graph; explicit graphs add them as nodes
(:meth:`GraphNode.signal_external_semaphores
<cuda_core.graph.GraphNode.signal_external_semaphores>`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import _links
from .._handles import _external as _ext
from .._handles._owned import OwnedHandle
from .._utils import arg_error
from ._external_memory import Imported, device_of

__all__ = ["ExternalSemaphore", "signal_external_semaphores", "wait_external_semaphores"]


class ExternalSemaphore(Imported):
    """A semaphore exported by another API, imported into CUDA (``CUexternalSemaphore``).

    Made by :meth:`from_fd`; not constructed directly. A *binary* semaphore (Vulkan's
    ``VK_SEMAPHORE_TYPE_BINARY``) is signalled and waited on without a value; a *timeline*
    semaphore (``VK_SEMAPHORE_TYPE_TIMELINE``) carries a 64-bit counter: ``signal(v)`` sets it
    to ``v`` and ``wait(v)`` waits until it is at least ``v``. An extension of cuda_core:
    NVIDIA's ``cuda.core`` has no counterpart.

    :meth:`close` (or leaving ``with``) destroys the import (``cuDestroyExternalSemaphore``)
    unless a graph still holds it, in which case it goes with the last such graph; signals and
    waits already queued must have completed (synchronise their streams first).

    Examples
    --------
    >>> sem = ExternalSemaphore.from_fd(fd, kind="timeline")   # doctest: +SKIP
    >>> sem.wait(2 * k, stream=s)          # until Vulkan signals 2k
    >>> launch(s, config, kernel, buf, n)
    >>> sem.signal(2 * k + 1, stream=s)    # Vulkan may go on
    """

    __slots__ = ("_kind",)

    _kind: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "ExternalSemaphore cannot be instantiated directly. Use ExternalSemaphore.from_fd()"
        )

    @classmethod
    def from_fd(cls, fd: int, *, kind: str = "binary", device: Any = None) -> ExternalSemaphore:
        """Import the semaphore exported as the file descriptor ``fd``.

        On success ``fd`` is consumed (closed; the import keeps a duplicate until it is
        destroyed): do not use or close it. On failure nothing was taken and ``fd`` is still
        open and the caller's (the driver is handed a duplicate).

        Parameters
        ----------
        fd : int
            An open file descriptor from ``vkGetSemaphoreFdKHR`` with
            ``VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT``.
        kind : str
            ``"binary"`` (``CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD``) or ``"timeline"``
            (``CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD``): what the exporter
            made.
        device : Device or int, optional
            The device to import into (set up with ``Device.set_current()``); default: the
            current device.

        Raises
        ------
        TypeError
            ``fd`` is not an integer, ``device`` not a Device or an ordinal.
        ValueError
            ``fd`` is negative or not open, or ``kind`` is unknown; ``fd`` stays the caller's.
        CUDAError
            The driver refused the import (a descriptor of another kind, memory rather than a
            semaphore); ``fd`` stays the caller's.
        """
        n = _ext.check_fd(fd)
        if not isinstance(kind, str) or kind not in _ext.SEMAPHORE_KINDS:
            raise arg_error("kind", "'binary' or 'timeline'", kind)
        device_id, ctx = device_of(device, "cuImportExternalSemaphore")
        ref = _ext.import_semaphore(ctx, n, kind)
        self = object.__new__(cls)
        self._ref, self._ctx, self._device_id, self._kind = ref, ctx, device_id, kind
        return self

    def _live(self) -> int:
        r = self._ref
        if r is None or r.value is None:
            raise RuntimeError("ExternalSemaphore has been closed; it cannot be used after close()")
        return int(r.value)

    def signal(self, value: int | None = None, *, stream: Any) -> None:
        """Signal the semaphore once the work queued on ``stream`` before it is done.

        Parameters
        ----------
        value : int, optional
            A timeline semaphore's new value (``0 <= value < 2**64``, required); ``None`` for
            a binary semaphore.
        stream : Stream
            The stream (or GraphBuilder) the signal is ordered on.

        Raises
        ------
        TypeError, ValueError
            A value on a binary semaphore, none or out of range on a timeline one; a bad
            stream.
        RuntimeError
            The semaphore was closed.
        """
        signal_external_semaphores([self], None if value is None else [value], stream=stream)

    def wait(self, value: int | None = None, *, stream: Any) -> None:
        """Make work queued on ``stream`` after this call wait for the semaphore, on the device.

        Parameters
        ----------
        value : int, optional
            For a timeline semaphore, the value to wait for (the wait ends once the counter is
            at least ``value``; required); ``None`` for a binary semaphore.
        stream : Stream
            The stream (or GraphBuilder) that waits.

        Raises
        ------
        TypeError, ValueError
            As for :meth:`signal`.
        RuntimeError
            The semaphore was closed.
        """
        wait_external_semaphores([self], None if value is None else [value], stream=stream)

    # -- facts --------------------------------------------------------------------------------

    @property
    def is_timeline(self) -> bool:
        """Whether it is a timeline semaphore (signalled and waited on with values)."""
        return self._kind == "timeline"

    @property
    def kind(self) -> str:
        """``"binary"`` or ``"timeline"``."""
        return self._kind

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else f"handle=0x{self.handle:x}"
        return f"<ExternalSemaphore kind={self._kind!r} device={self._device_id} {state}>"


def check_semaphores(
    semaphores: Any, values: Any
) -> tuple[list[ExternalSemaphore], list[int], list[OwnedHandle]]:
    """The semaphores, their fence values and their handles, checked: ``semaphores`` a
    non-empty sequence of open :class:`ExternalSemaphore`; ``values`` ``None`` (every semaphore
    binary) or a sequence as long, ``None`` for each binary one and an integer for each timeline
    one."""
    if isinstance(semaphores, ExternalSemaphore):
        semaphores = [semaphores]
    if not isinstance(semaphores, Sequence) or isinstance(semaphores, (str, bytes)):
        raise arg_error(
            "semaphores", "a sequence of ExternalSemaphore objects", semaphores, exc=TypeError
        )
    sems = list(semaphores)
    if not sems:
        raise arg_error(
            "semaphores", "a non-empty sequence of ExternalSemaphore objects", semaphores
        )
    for i, s in enumerate(sems):
        if not isinstance(s, ExternalSemaphore):
            raise arg_error(
                f"semaphores[{i}]", "an ExternalSemaphore (from ExternalSemaphore.from_fd())", s,
                exc=TypeError,
            )  # fmt: skip
    if values is None:
        vals: list[Any] = [None] * len(sems)
    elif not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise arg_error("values", "None or a sequence of values", values, exc=TypeError)
    else:
        vals = list(values)
        if len(vals) != len(sems):
            raise arg_error(
                "values", f"as long as semaphores ({len(sems)} values)", values,
                "give None for each binary semaphore",
            )  # fmt: skip
    out = [
        _ext.check_value(v, s.is_timeline, f"values[{i}]")
        for i, (s, v) in enumerate(zip(sems, vals))
    ]
    refs = []
    for s in sems:
        s._live()
        refs.append(s._ref)
    return sems, out, refs  # type: ignore[return-value]


def _stream_handle(stream: Any) -> Any:
    return _links.as_stream(stream).handle


def signal_external_semaphores(
    semaphores: Sequence[ExternalSemaphore], values: Sequence[int | None] | None = None, *,
    stream: Any,
) -> None:  # fmt: skip
    """Signal several external semaphores in one ``cuSignalExternalSemaphoresAsync``, once the
    work queued on ``stream`` before it is done.

    Parameters
    ----------
    semaphores : sequence of ExternalSemaphore
        The semaphores (at least one).
    values : sequence, optional
        One entry per semaphore: the new value of a timeline semaphore, ``None`` for a binary
        one. ``None`` when every semaphore is binary.
    stream : Stream
        The stream (or GraphBuilder, to capture it) the signal is ordered on.

    Raises
    ------
    TypeError, ValueError
        A bad sequence, a value on a binary semaphore or none on a timeline one, lengths that
        differ, a bad stream. Nothing is queued then.
    RuntimeError
        A semaphore was closed.
    """
    _, vals, refs = check_semaphores(semaphores, values)
    _ext.signal([int(r.value) for r in refs], vals, _stream_handle(stream))


def wait_external_semaphores(
    semaphores: Sequence[ExternalSemaphore], values: Sequence[int | None] | None = None, *,
    stream: Any,
) -> None:  # fmt: skip
    """Make work queued on ``stream`` after this call wait for several external semaphores (one
    ``cuWaitExternalSemaphoresAsync``), on the device.

    Parameters
    ----------
    semaphores : sequence of ExternalSemaphore
        The semaphores (at least one).
    values : sequence, optional
        One entry per semaphore: the value a timeline semaphore must reach, ``None`` for a
        binary one. ``None`` when every semaphore is binary.
    stream : Stream
        The stream (or GraphBuilder) that waits.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        As for :func:`signal_external_semaphores`.
    """
    _, vals, refs = check_semaphores(semaphores, values)
    _ext.wait([int(r.value) for r in refs], vals, _stream_handle(stream))
