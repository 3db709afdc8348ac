"""group: NCCL calls issued inside one ``with`` block run as one group (ncclGroupStart/End)."""

from __future__ import annotations

import threading
from typing import Any

from ._errors import nccl_error
from ._loader import load

__all__ = ["group"]

_local = threading.local()  # .calls: the (watchdog, stream, api) of this thread's open group


def open_calls() -> list[tuple[Any, Any, str]] | None:
    """The calls of the group this thread has open (outermost ``with``), or ``None``."""
    return getattr(_local, "calls", None)


def finish(calls: list[tuple[Any, Any, str]]) -> None:
    """After ``ncclGroupEnd``: wait while each communicator's work is ``ncclInProgress``, then
    hand one event per (communicator, stream) to the communicator's watchdog."""
    watched: dict[tuple[int, int], tuple[Any, Any, list[str]]] = {}
    for w, st, api in calls:
        key = (id(w), st._h.address)
        entry = watched.setdefault(key, (w, st, []))
        if api not in entry[2]:
            entry[2].append(api)
    for w, _st, apis in watched.values():
        w.settle(" + ".join(apis))
    for w, st, apis in watched.values():
        w.watch(st.record(), " + ".join(apis))


class group:  # lower case: used like a function, ``with nccl.group():``
    """Batch the NCCL calls issued inside a ``with`` block into one group.

    Needed when one thread drives several GPUs (communicators from
    :meth:`~cuda_core.nccl.Communicator.init_all`): their collectives only complete together, so they must be
    issued inside one group. Needed too for point-to-point calls that depend on each other
    (a :meth:`~cuda_core.nccl.Communicator.send` and a :meth:`~cuda_core.nccl.Communicator.recv` to and from the same or
    different peers, a rank sending to itself): NCCL runs the whole group at once, where the
    same calls one after the other could wait for each other forever. Also lets NCCL fuse
    several collectives of one communicator. Groups nest; NCCL runs the work when the outermost
    block ends, and that is when the communicators' timeouts start to count. Use this class
    for cuda_core's communicators, not nccl4py's own ``group`` (which does not tell their
    watchdogs).

    Raises
    ------
    NCCLNotFoundError
        nccl4py or the NCCL library is missing.
    NCCLError
        NCCL refused the group or a communicator failed while it started (raised on leaving
        the block, unless the block itself raised); :class:`NCCLTimeoutError` when it did not
        start within a communicator's timeout.

    Examples
    --------
    >>> with nccl.group():
    ...     for comm, view, s in zip(comms, views, streams):
    ...         comm.all_reduce(view, op="sum", stream=s)
    >>> with nccl.group():   # a ring: send right, receive from the left
    ...     comm.send(out, (comm.rank + 1) % comm.nranks, stream=s)
    ...     comm.recv(into, (comm.rank - 1) % comm.nranks, stream=s)
    """

    __slots__ = ("_b", "_outer")

    def __enter__(self) -> group:
        _core, b = load()
        self._b = b
        try:
            b.group_start()
        except b.NCCLError as exc:
            raise nccl_error("ncclGroupStart", exc, b) from None
        self._outer = open_calls() is None
        if self._outer:
            _local.calls = []
        return self

    def __exit__(self, exc_type: Any, *rest: object) -> None:
        b = self._b
        calls = open_calls() if self._outer else None
        if self._outer:
            _local.calls = None
        try:
            b.group_end()  # always: NCCL's group depth must come back down
        except b.NCCLError as exc:
            if exc_type is None:  # never hide the block's own exception behind this one
                raise nccl_error("ncclGroupEnd", exc, b) from None
            return
        if calls and exc_type is None:
            finish(calls)
