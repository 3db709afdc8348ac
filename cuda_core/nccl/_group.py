"""group: NCCL calls issued inside one ``with`` block run as one group (ncclGroupStart/End)."""

from __future__ import annotations

import threading
from typing import Any

from ._errors import nccl_error
from ._loader import load
from ._watchdog import Blocking

__all__ = ["group"]

_local = threading.local()  # .calls: the calls of this thread's open group (see open_calls)

Calls = dict[Any, dict[Any, tuple[Any, list[str]]]]  # watchdog -> stream address -> (stream, apis)


def open_calls() -> Calls | None:
    """The calls of the group this thread has open (outermost ``with``), or ``None``: for each
    communicator's watchdog, its streams (``None`` for a call without one, ``finalize``) with
    the NCCL calls made on them."""
    return getattr(_local, "calls", None)


def add_call(calls: Calls, w: Any, st: Any, api: str) -> None:
    """With ``w.lock`` held: ``api`` was called inside the group on ``st`` (``None``: no stream).
    The first call of a communicator counts the group in ``w.grouped``, so that an abort waits
    for ``ncclGroupEnd``."""
    streams = calls.get(w)
    if streams is None:
        calls[w] = streams = {}
        w.grouped += 1
    key = None if st is None else st._h.address
    entry = streams.get(key)
    if entry is None:
        streams[key] = (st, [api])
    elif api not in entry[1]:
        entry[1].append(api)


def end(b: Any, calls: Calls) -> BaseException | None:
    """``ncclGroupEnd`` under the locks of the group's communicators (taken in one order, so
    two threads never wait for each other), so that no abort runs while NCCL starts their work;
    then each leaves the group, and an abort left to its end runs. The watchdogs watch the call
    (a blocking communicator's work, ``finalize`` included, runs in it). Returns NCCL's error."""
    dogs = sorted(calls, key=id)
    marks = [Blocking() for _ in dogs]  # a blocking communicator's work runs in ncclGroupEnd
    for w, mark in zip(dogs, marks):
        w.watch(mark, "ncclGroupEnd")
    taken = []
    try:
        for w in dogs:
            w.lock.acquire()
            taken.append(w)
        try:
            b.group_end()  # always: NCCL's group depth must come back down
        except b.NCCLError as exc:
            for w in dogs:  # a watchdog's abort ended the call: say why
                if w.failure is not None:
                    return w.failure  # type: ignore[no-any-return]
            return nccl_error("ncclGroupEnd", exc, b)
        return None
    finally:
        for mark in marks:
            mark.is_done = True
        for w in reversed(taken):
            try:
                w.group_left()
            finally:
                w.lock.release()


def finish(calls: Calls) -> BaseException | None:
    """After ``ncclGroupEnd``, on every path (the block or NCCL raised too): wait while each
    communicator's work is ``ncclInProgress``, then hand one event per stream to its watchdog,
    so that nothing the group started goes unwatched. Returns the first error (the others are
    kept as their communicators' failures)."""
    first: BaseException | None = None
    for w, streams in calls.items():
        apis: list[str] = []
        for _st, names in streams.values():
            apis += [a for a in names if a not in apis]
        api = " + ".join(apis)
        try:
            w.settle(api)
            if None in streams:  # ncclCommFinalize: done once settled
                w.finalized = 2
            with w.lock:
                if w.aborted or w.failure is not None:
                    w.raise_ended()
                for st, _names in streams.values():
                    if st is not None:
                        w.record_locked(st, api)
        except Exception as exc:  # this communicator ended: its failure says why
            if first is None:
                first = exc
    return first


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
            _local.calls = {}
        return self

    def __exit__(self, exc_type: Any, *rest: object) -> None:
        b = self._b
        calls = open_calls() if self._outer else None
        if self._outer:
            _local.calls = None
        if calls:
            error = end(b, calls)
            late = finish(calls)
            if exc_type is None:  # never hide the block's own exception behind these
                if error is not None:
                    raise error from None
                if late is not None:
                    raise late from None
            return
        try:
            b.group_end()  # always: NCCL's group depth must come back down
        except b.NCCLError as exc:
            if exc_type is None:
                raise nccl_error("ncclGroupEnd", exc, b) from None
