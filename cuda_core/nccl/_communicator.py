"""Communicator: one rank of an NCCL group, running collectives on cuda_core's objects.

The communicator itself is nccl4py's (``nccl.core.Communicator``, reachable through
:meth:`Communicator.as_nccl4py` for everything this class does not wrap); the collectives call
``nccl.bindings`` directly with the address, count and data type read from a
:class:`~cuda_core.Buffer` or :class:`~cuda_core.utils.StridedMemoryView` and the stream's handle,
so a call costs a few microseconds of Python on top of NCCL's own enqueue.
"""

from __future__ import annotations

import weakref
from typing import Any

from .. import system
from .._device import Device
from .._errors import warn_release_failure
from .._utils import arg_error
from . import _args
from ._collectives import Collectives
from ._errors import NCCLError, nccl_error, status_error
from ._group import add_call, open_calls
from ._loader import library_info, load
from ._timeout import check_timeout, get_default_timeout
from ._watchdog import Watchdog

__all__ = ["Communicator"]

_UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES


def _abort_quietly(n4p: Any, w: Watchdog | None = None) -> None:
    # The safety net for a communicator that was never closed: abort is local (it does not wait
    # for the other ranks, as destroy would), and a finalizer never raises. The watchdog thread
    # is joined first: nothing is left running.
    try:
        if w is None:
            n4p.abort()
        else:
            w.stop()
            w.abort()
    except Exception as exc:  # a CUDAWarning (silent at interpreter exit)
        warn_release_failure("an NCCL communicator", id(n4p), exc, "ncclCommAbort")


def _watchdog(n4p: Any, b: Any, timeout: float, rank: int, nranks: int, device_id: int) -> Watchdog:
    """The watchdog of nccl4py communicator ``n4p``: NCCL's calls as callables (no reference to
    the cuda_core Communicator, which stays collectable)."""
    comm = b.Comm(n4p.ptr)
    where = f"rank {rank} of {nranks} ranks (device {device_id})"
    return Watchdog(
        timeout,
        rank,
        nranks,
        device_id,
        lambda: int(b.comm_get_async_error(comm)),
        n4p.abort,
        lambda api, code: status_error(api, code, b, comm, where),
        lambda: _make_current(device_id),
    )


def _make_current(device_id: int) -> None:
    # On the watchdog's thread: its event queries run with the device's context current.
    Device(device_id).set_current()


def _unique_id(core: Any, unique_id: Any) -> Any:
    if isinstance(unique_id, core.UniqueId):
        return unique_id
    if isinstance(unique_id, bytes | bytearray | memoryview):
        data = bytes(unique_id)
        if len(data) != _UNIQUE_ID_BYTES:
            raise arg_error(
                "unique_id",
                f"the {_UNIQUE_ID_BYTES} bytes from get_unique_id()",
                f"{len(data)} bytes",
            )
        return core.UniqueId.from_bytes(data)
    raise arg_error(
        "unique_id",
        "the bytes from get_unique_id() (or an nccl4py UniqueId)",
        unique_id,
        exc=TypeError,
    )


class Communicator(Collectives):
    """One rank of a group of GPUs that run NCCL collectives together.

    Create one per rank with :meth:`init` (one process or thread per GPU, on one or several
    machines; every rank passes the same unique id from :func:`get_unique_id`) or all ranks of
    one process at once with :meth:`init_all`. Collectives take cuda_core's objects:
    :class:`~cuda_core.Buffer` (bytes unless ``dtype=`` is given),
    :class:`~cuda_core.utils.StridedMemoryView` (its dtype and size) or any device array with
    DLPack or ``__cuda_array_interface__`` (CuPy, PyTorch, ...), and run on ``stream``, a
    :class:`~cuda_core.Stream` of the communicator's device (or an object with
    ``__cuda_stream__``), in that stream's order with the work queued before them.
    Every rank must call the same collectives in the same order.

    The communicator owns its NCCL communicator: :meth:`close` (all ranks together) destroys
    it; a ``with`` block closes it on exit, or aborts it when the block raised (so one failing
    rank does not hang in a collective destroy); one never closed is aborted when collected.

    Examples
    --------
    >>> uid = nccl.exchange_unique_id(rank, world_size, master_addr, master_port)
    >>> dev = Device(local_rank); dev.set_current(); s = dev.create_stream()
    >>> with nccl.Communicator.init(world_size, rank, uid, device=dev) as comm:
    ...     comm.all_reduce(grad_view, op="sum", stream=s)   # in place
    """

    __slots__ = (
        "__weakref__",
        "_b",
        "_comm",
        "_device_id",
        "_finalizer",
        "_n4p",
        "_nranks",
        "_rank",
        "_scratch",
        "_w",
    )

    _b: Any  # nccl.bindings.nccl
    _comm: Any  # nccl.bindings.nccl.Comm of the communicator; None once closed
    _n4p: Any  # the nccl4py Communicator that owns it; None once closed
    _rank: int
    _nranks: int
    _device_id: int
    _finalizer: weakref.finalize  # aborts a communicator that was never closed

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "Communicator objects cannot be created directly; use Communicator.init() (one rank "
            "per process or thread) or Communicator.init_all() (every GPU of one process)"
        )

    @classmethod
    def _adopt(
        cls, n4p: Any, bindings: Any, timeout: float, w: Watchdog | None = None
    ) -> Communicator:
        self = object.__new__(cls)
        comm = bindings.Comm(n4p.ptr)
        try:
            self._rank = int(bindings.comm_user_rank(comm))
            self._nranks = int(bindings.comm_count(comm))
            self._device_id = int(bindings.comm_cu_device(comm))
        except bindings.NCCLError as exc:
            _abort_quietly(n4p, w)
            raise nccl_error("ncclCommUserRank", exc, bindings, comm) from None
        if w is None:
            w = _watchdog(n4p, bindings, timeout, self._rank, self._nranks, self._device_id)
        self._b = bindings
        self._comm = comm
        self._n4p = n4p
        self._w = w
        self._scratch = None
        self._finalizer = weakref.finalize(self, _abort_quietly, n4p, w)
        return self

    @classmethod
    def _start(cls, core: Any, b: Any, api: str, make: Any, timeout: float, rank: int,
               nranks: int, device_id: int, parent: Watchdog | None = None,
               blocking: bool = False) -> Communicator:  # fmt: skip
        """Make a communicator with ``make(config)`` and wait, sleeping, until NCCL finished
        making it (or abort it after ``timeout`` and raise).

        A child of ``parent`` (split, shrink): NCCL runs the child's making as the parent's
        work (asynchronous when the parent is non-blocking) and writes the child's handle only
        when it is done (NULL until then), so the parent is waited for first; on failure the
        parent is aborted, which stops the child's making too."""
        try:
            n4p = make(core.NCCLConfig(blocking=blocking))
        except b.NCCLError as exc:
            raise nccl_error(api, exc, b) from None
        if parent is not None:
            parent.settle(api, timeout)  # n4p is kept alive: NCCL writes the handle into it
        w = _watchdog(n4p, b, timeout, rank, nranks, device_id)
        try:
            w.settle(api)
        except BaseException:
            w.abort()  # a KeyboardInterrupt too: nothing half-made is left behind
            raise
        return cls._adopt(n4p, b, timeout, w)

    @classmethod
    def init(
        cls,
        nranks: int,
        rank: int,
        unique_id: Any,
        *,
        device: Device | int | None = None,
        timeout: float | None = None,
    ) -> Communicator:
        """Join the group of ``nranks`` ranks identified by ``unique_id`` as ``rank``.

        Every rank calls this with the same ``nranks`` and ``unique_id``; the call returns once
        all of them have joined. NCCL makes it non-blocking (``blocking=0``): this call waits,
        sleeping, for at most ``timeout`` seconds; when a rank never joins, it aborts and raises
        :class:`NCCLTimeoutError`. The ranks then split off a blocking twin to work on (its
        calls cost no thread hand-off; the watchdog bounds them) and close the first.

        Parameters
        ----------
        nranks : int
            The number of ranks (GPUs) in the group.
        rank : int
            This rank, ``0 <= rank < nranks``.
        unique_id : bytes
            The 128 bytes from :func:`get_unique_id` on one rank (or nccl4py's ``UniqueId``);
            send them to the others with :func:`exchange_unique_id`, ``multiprocessing``, MPI...
        device : cuda_core.Device or int, optional
            This rank's GPU; its context must exist (``Device.set_current()``). ``None``: the
            current device (``Device()``).
        timeout : float, optional
            Seconds this communicator waits for NCCL before it aborts and raises
            :class:`NCCLTimeoutError`: for ``init`` itself, for each collective (counted from
            when it becomes the oldest unfinished one), for ``finalize`` and ``close``.
            ``None``: :func:`get_default_timeout` (600 s unless changed by
            :func:`set_default_timeout` or ``CUDA_CORE_NCCL_TIMEOUT``); ``math.inf``: never.

        Returns
        -------
        Communicator

        Raises
        ------
        NCCLNotFoundError
            nccl4py or the NCCL library is missing.
        NCCLError
            NCCL refused (a bad unique id, a rank joined twice, ...).
        NCCLTimeoutError
            Not every rank joined within ``timeout``.
        CUDAError
            The device has no context yet (call ``Device.set_current()``).
        """
        _args.check_rank(rank, nranks, "nranks")
        limit = get_default_timeout() if timeout is None else check_timeout(timeout)
        core, bindings = load()
        uid = _unique_id(core, unique_id)
        dev = Device(device)
        with dev._scope():  # NCCL binds the communicator to the current device
            first = cls._start(core, bindings, "ncclCommInitRank",
                               lambda config: core.Communicator.init(nranks, rank, uid, config),
                               limit, rank, nranks, dev._id)  # fmt: skip
            return first._blocking_twin(core, bindings)

    def _blocking_twin(self, core: Any, b: Any) -> Communicator:
        """The same group as a blocking communicator (``ncclCommSplit``, one colour), and this
        non-blocking one closed.

        A non-blocking communicator hands each call to a thread of NCCL's own and answers
        ``ncclInProgress``: about 60 us more per small collective (1 MiB all-reduce on four
        H200s: 108 us against PyTorch's 44). Only the making has to be non-blocking, so that
        a rank that never joins ends in a timeout; the twin's calls are bounded by the watchdog
        instead, which aborts it from its own thread (NCCL ends a call stuck in it then)."""
        n4p, w = self._working()

        def make(config: Any) -> Any:
            return w.call("ncclCommSplit", n4p.split, 0, self._rank, config)

        try:
            twin = self._start(core, b, "ncclCommSplit", make, w.timeout, self._rank,
                               self._nranks, self._device_id, parent=w, blocking=True)  # fmt: skip
        except BaseException:
            self.abort()
            raise
        try:
            self.close()  # every rank does the same: bounded by the timeout
        except BaseException:
            twin.abort()
            raise
        return twin

    @classmethod
    def init_all(cls, devices: Any = None, *, timeout: float | None = None) -> list[Communicator]:
        """One communicator per GPU of this process, forming one group (``ncclCommInitAll``).

        These communicators are blocking (``ncclCommInitAll`` takes no configuration); their
        watchdogs still abort them after ``timeout`` (see :meth:`init`), a ``finalize``,
        ``close`` or group end that blocks included. ``ncclCommInitAll`` itself is not bounded
        (NCCL gives no communicator to abort before it returns; its ranks are all in this
        process). When one cannot be set up, every one made is aborted before the error is
        raised.

        Collectives over them must be issued inside one :func:`group` so that NCCL runs them
        together (one thread drives every GPU); so must :meth:`finalize`, before each is closed::

            with nccl.group():
                for c in comms:
                    c.finalize()
            for c in comms:
                c.close()

        Parameters
        ----------
        devices : sequence of cuda_core.Device or int, optional
            The GPUs, rank ``i`` on ``devices[i]``; ``None``: every visible GPU.
        timeout : float, optional
            As for :meth:`init`.

        Returns
        -------
        list of Communicator

        Raises
        ------
        NCCLNotFoundError
            nccl4py or the NCCL library is missing.
        NCCLError
            NCCL refused.
        ValueError
            ``devices`` is empty or names a device twice.
        """
        limit = get_default_timeout() if timeout is None else check_timeout(timeout)
        core, bindings = load()
        if devices is None:
            ids = list(range(system.get_num_devices()))
        else:
            ids = [Device(d)._id for d in devices]
        if not ids or len(set(ids)) != len(ids):
            raise arg_error("devices", "a non-empty sequence of distinct devices", devices)
        try:
            made = core.Communicator.init_all(ids)
        except bindings.NCCLError as exc:
            raise nccl_error("ncclCommInitAll", exc, bindings) from None
        comms: list[Communicator] = []
        try:
            for n4p in made:
                comms.append(cls._adopt(n4p, bindings, limit))
        except BaseException:  # none is left half-made: the adopted ones and the rest aborted
            for c in comms:
                c.abort()
            for n4p in made[len(comms) + 1 :]:  # _adopt aborted the one that failed
                _abort_quietly(n4p)
            raise
        return comms

    # -- facts ----------------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """This rank, ``0 <= rank < nranks``."""
        return self._rank

    @property
    def nranks(self) -> int:
        """The number of ranks in the group."""
        return self._nranks

    @property
    def device(self) -> Device:
        """The GPU this rank runs on."""
        return Device(self._device_id)

    @property
    def handle(self) -> int:
        """The address of the NCCL communicator (``ncclComm_t``); ``0`` once closed."""
        n4p = self._n4p
        return 0 if n4p is None else int(n4p.ptr)

    @property
    def timeout(self) -> float:
        """Seconds this communicator waits for NCCL before it aborts (``math.inf``: never)."""
        return self._w.timeout  # type: ignore[no-any-return]

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called."""
        return self._n4p is None

    def as_nccl4py(self) -> Any:
        """The nccl4py ``nccl.core.Communicator`` behind this one, for what this class does not wrap
        (``gather``, ``scatter``, ``split``, buffer registration, ...; the watchdog does not
        watch its calls).

        nccl4py's methods take cuda_core's objects as they are: a
        :class:`~cuda_core.utils.StridedMemoryView` through DLPack (its dtype), a
        :class:`~cuda_core.Buffer` through DLPack (as ``uint8``), a :class:`~cuda_core.Stream`
        through ``__cuda_stream__``. It stays owned by this object: do not destroy it. It is
        a blocking communicator.

        Returns
        -------
        object
            nccl4py's ``nccl.core.Communicator``.

        Raises
        ------
        RuntimeError
            The communicator is closed.
        """
        n4p = self._n4p
        if n4p is None:
            raise _args.closed()
        return n4p

    # -- lifetime -------------------------------------------------------------------------------

    def shrink(self, exclude_ranks: Any, *, timeout: float | None = None) -> Communicator:
        """A new communicator of the ranks not in ``exclude_ranks``, renumbered from 0
        (``ncclCommShrink``, NCCL 2.27 and later).

        Every rank that stays calls it with the same ``exclude_ranks``; the excluded ranks do
        not. This communicator stays as it was (close it after). For a communicator still
        working: after a timeout or an NCCL error the communicator is aborted and cannot be
        shrunk; build a new one from a new unique id then.

        Parameters
        ----------
        exclude_ranks : sequence of int
            The ranks left out, distinct, not this rank.
        timeout : float, optional
            The new communicator's timeout; ``None``: this one's.

        Returns
        -------
        Communicator

        Raises
        ------
        TypeError, ValueError
            A bad ``exclude_ranks``.
        NCCLError
            NCCL refused, or the installed NCCL has no ``ncclCommShrink`` (the message says
            which version is installed); :class:`NCCLTimeoutError` after the timeout.
        RuntimeError
            The communicator is closed.
        """
        n4p, w = self._working()
        limit = w.timeout if timeout is None else check_timeout(timeout)
        ranks = _args.excluded_ranks(exclude_ranks, self._rank, self._nranks)
        core, b = load()
        new_rank = self._rank - sum(1 for r in ranks if r < self._rank)

        def make(config: Any) -> Any:
            try:  # a blocking parent makes the child in this call: watched
                return w.blocking("ncclCommShrink", n4p.shrink, ranks, config)
            except (b.NCCLError, NCCLError):
                raise
            except Exception as exc:  # no ncclCommShrink in this library
                raise NCCLError("ncclCommShrink", "ncclInvalidUsage",
                                f"the installed NCCL ({library_info()['version']}) has no "
                                "ncclCommShrink (NCCL 2.27 and later): build a new "
                                f"communicator from a new unique id ({exc})") from None  # fmt: skip

        w.wait_idle()  # NCCL's default shrink wants no operation of this one outstanding
        with Device(self._device_id)._scope():
            return self._start(core, b, "ncclCommShrink", make, limit, new_rank,
                               self._nranks - len(ranks), self._device_id, parent=w,
                               blocking=True)  # fmt: skip

    def finalize(self) -> None:
        """Finish the communicator's pending work and release its network resources
        (``ncclCommFinalize``); :meth:`close` then only frees memory.

        Every rank calls it. Waits (sleeping) at most the communicator's timeout, then aborts
        the communicator and raises. When one thread drives several communicators
        (:meth:`init_all`), finalise them inside one :func:`group`, then close each.

        Raises
        ------
        NCCLError
            NCCL reported an error; :class:`NCCLTimeoutError` after the timeout.
        RuntimeError
            The communicator is closed.
        """
        n4p, w = self._working()
        b = self._b
        calls = open_calls()
        if calls is not None:  # NCCL finalises when the group ends; the group's end settles it
            with w.lock:
                if w.aborted or w.failure is not None:
                    w.raise_ended()
                try:
                    n4p.finalize()
                except b.NCCLError as exc:
                    raise nccl_error("ncclCommFinalize", exc, b, self._comm) from None
                w.finalized = 1
                add_call(calls, w, None, "ncclCommFinalize")
            return
        try:  # blocking for a communicator of init_all: watched
            w.blocking("ncclCommFinalize", n4p.finalize)
        except b.NCCLError as exc:
            raise nccl_error("ncclCommFinalize", exc, b, self._comm) from None
        w.finalized = 1
        w.settle("ncclCommFinalize")
        w.finalized = 2

    def close(self) -> None:
        """Destroy the communicator (``ncclCommFinalize``, then ``ncclCommDestroy``); idempotent.

        Every rank calls it: NCCL finalises the group together, so a rank closing alone waits
        for the others -- at most the communicator's timeout, after which it aborts and raises
        :class:`NCCLTimeoutError`; ``ncclCommDestroy`` is bounded by the timeout too (a
        destroy that hangs is aborted). A :meth:`finalize` issued inside a group is waited for
        before the destroy. Use :meth:`abort` when the other ranks may be gone. After a
        failure (a timeout or an NCCL error, already aborted) it only releases, and raises
        that failure if no call raised it yet. The watchdog thread has ended when it returns.

        Raises
        ------
        NCCLError
            NCCL reported an error (the communicator is released anyway);
            :class:`NCCLTimeoutError` when the other ranks did not close in time.
        """
        n4p = self._n4p
        if n4p is None:
            return
        w = self._w
        self._finalizer.detach()
        self._n4p = self._comm = None
        if w.failure is not None:
            w.stop()
            self._free_scratch()
            if not w.reported:
                w.check()
            return
        b = self._b
        try:  # the watchdog watches until the communicator is gone
            if w.finalized != 2:  # not finalised, or finalised in a group not yet settled
                if not w.finalized:
                    w.blocking("ncclCommFinalize", n4p.finalize)
                    w.finalized = 1
                w.settle("ncclCommFinalize")
                w.finalized = 2
            w.blocking("ncclCommDestroy", n4p.destroy)  # bounded: aborted after the timeout
            w.gone()
        except b.NCCLError as exc:
            w.abort()
            raise nccl_error("ncclCommDestroy", exc, b) from None
        except BaseException:
            w.abort()  # the timeout aborted it already; anything else: abort, never leak
            raise
        finally:
            w.stop()
            self._free_scratch()

    def abort(self) -> None:
        """Abort the communicator (``ncclCommAbort``): stop its pending work and free it without
        waiting for the other ranks; idempotent. For error paths. The watchdog thread has
        ended when it returns."""
        n4p = self._n4p
        if n4p is None:
            return
        self._finalizer.detach()
        self._n4p = self._comm = None
        _abort_quietly(n4p, self._w)
        self._free_scratch()

    def _working(self) -> tuple[Any, Watchdog]:
        """(the nccl4py communicator, the watchdog) of a communicator neither closed nor failed."""
        n4p = self._n4p
        if n4p is None:
            raise _args.closed()
        w = self._w
        w.check()
        return n4p, w

    def _free_scratch(self) -> None:
        scratch, self._scratch = self._scratch, None
        if scratch is not None:
            try:
                scratch.close()
            except Exception as exc:  # its context is gone: the memory went with it
                warn_release_failure("barrier scratch memory", id(scratch), exc, "cuMemFree")

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, exc_type: Any, *rest: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __reduce__(self) -> Any:
        raise TypeError(
            "a Communicator cannot be pickled; send the unique id to the other process and call "
            "Communicator.init() there"
        )

    def __repr__(self) -> str:
        if self._n4p is None:
            return "<Communicator closed>"
        return f"<Communicator rank={self._rank}/{self._nranks} device={self._device_id}>"
