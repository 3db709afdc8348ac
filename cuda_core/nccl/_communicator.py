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
from .._stream import as_stream
from .._utils import arg_error
from . import _args
from ._errors import nccl_error
from ._loader import load

__all__ = ["Communicator"]

_resolve = _args.resolve
_op = _args.reduction_op
_UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
_DTYPE_NAMES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64", 6: "float16",
                7: "float32", 8: "float64", 9: "bfloat16", 10: "float8_e4m3fn", 11: "float8_e5m2"}  # fmt: skip


def _closed() -> RuntimeError:
    return RuntimeError("Communicator has been closed; it cannot be used after close() or abort()")


def _abort_quietly(n4p: Any) -> None:
    # The safety net for a communicator that was never closed: abort is local (it does not wait
    # for the other ranks, as destroy would), and a finalizer never raises.
    try:
        n4p.abort()
    except Exception as exc:  # a CUDAWarning (silent at interpreter exit)
        warn_release_failure("an NCCL communicator", id(n4p), exc, "ncclCommAbort")


def _stream_ptr(stream: Any, device_id: int) -> int:
    st = as_stream(stream)
    h = st._h
    if h.is_released:
        raise RuntimeError("Stream has been closed; it cannot be used after close()")
    ordinal = st._device_id
    if ordinal >= 0 and ordinal != device_id:
        raise arg_error("stream", f"a stream of device {device_id}, the communicator's device", st,
                        hint=f"it belongs to device {ordinal}")  # fmt: skip
    return h.address  # type: ignore[no-any-return]


def _same_type(name: str, want: int, got: int) -> None:
    if got != want:
        raise arg_error(name, f"of the same data type as sendbuf ({_DTYPE_NAMES.get(want, want)})",
                        _DTYPE_NAMES.get(got, got), hint="pass dtype= for Buffers")  # fmt: skip


def _at_least(name: str, have: int, need: int, why: str) -> None:
    if have < need:
        raise arg_error(name, f"at least {need} elements long ({why})", f"{have} elements")


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


class Communicator:
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
    def _adopt(cls, n4p: Any, bindings: Any) -> Communicator:
        self = object.__new__(cls)
        comm = bindings.Comm(n4p.ptr)
        try:
            self._rank = int(bindings.comm_user_rank(comm))
            self._nranks = int(bindings.comm_count(comm))
            self._device_id = int(bindings.comm_cu_device(comm))
        except bindings.NCCLError as exc:
            _abort_quietly(n4p)
            raise nccl_error("ncclCommUserRank", exc, bindings, comm) from None
        self._b = bindings
        self._comm = comm
        self._n4p = n4p
        self._finalizer = weakref.finalize(self, _abort_quietly, n4p)
        return self

    @classmethod
    def init(
        cls, nranks: int, rank: int, unique_id: Any, *, device: Device | int | None = None
    ) -> Communicator:
        """Join the group of ``nranks`` ranks identified by ``unique_id`` as ``rank``.

        Every rank calls this with the same ``nranks`` and ``unique_id``; the call returns once
        all of them have joined (NCCL waits for them, without a time limit).

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

        Returns
        -------
        Communicator

        Raises
        ------
        NCCLNotFoundError
            nccl4py or the NCCL library is missing.
        NCCLError
            NCCL refused (a bad unique id, a rank joined twice, ...).
        CUDAError
            The device has no context yet (call ``Device.set_current()``).
        """
        _args.check_rank(rank, nranks, "nranks")
        core, bindings = load()
        uid = _unique_id(core, unique_id)
        dev = Device(device)
        with dev._scope():  # NCCL binds the communicator to the current device
            try:
                n4p = core.Communicator.init(nranks, rank, uid)
            except bindings.NCCLError as exc:
                raise nccl_error("ncclCommInitRank", exc, bindings) from None
        return cls._adopt(n4p, bindings)

    @classmethod
    def init_all(cls, devices: Any = None) -> list[Communicator]:
        """One communicator per GPU of this process, forming one group (``ncclCommInitAll``).

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
        core, bindings = load()
        if devices is None:
            ids = list(range(system.get_num_devices()))
        else:
            ids = [Device(d)._id for d in devices]
        if not ids or len(set(ids)) != len(ids):
            raise arg_error("devices", "a non-empty sequence of distinct devices", devices)
        try:
            comms = core.Communicator.init_all(ids)
        except bindings.NCCLError as exc:
            raise nccl_error("ncclCommInitAll", exc, bindings) from None
        return [cls._adopt(c, bindings) for c in comms]

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
    def is_closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called."""
        return self._n4p is None

    def as_nccl4py(self) -> Any:
        """The nccl4py ``nccl.core.Communicator`` behind this one, for what this class does not wrap
        (point-to-point, ``reduce``, ``split``, buffer registration, ...).

        nccl4py's methods take cuda_core's objects as they are: a
        :class:`~cuda_core.utils.StridedMemoryView` through DLPack (its dtype), a
        :class:`~cuda_core.Buffer` through DLPack (as ``uint8``), a :class:`~cuda_core.Stream`
        through ``__cuda_stream__``. It stays owned by this object: do not destroy it.

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
            raise _closed()
        return n4p

    # -- collectives ----------------------------------------------------------------------------

    def all_reduce(
        self, sendbuf: Any, recvbuf: Any = None, op: Any = "sum", *, stream: Any, dtype: Any = None
    ) -> None:
        """Reduce ``sendbuf`` over all ranks into every rank's ``recvbuf`` (``ncclAllReduce``).

        Parameters
        ----------
        sendbuf : Buffer, StridedMemoryView or device array
            This rank's contribution; its element count is the count reduced.
        recvbuf : Buffer, StridedMemoryView or device array, optional
            Where the result goes, at least as long as ``sendbuf``; ``None``: in place, into
            ``sendbuf``.
        op : str or int
            ``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"avg"``, or an NCCL op from nccl4py.
        stream : Stream
            The stream the reduction is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of Buffer arguments (required for them: a reduction must know it);
            a view's own dtype must match it when both are given.

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message): a Buffer without ``dtype``, host memory,
            memory of another device, a non-contiguous or read-only view, mismatched types or
            lengths, a stream of another device.
        NCCLError
            NCCL refused the call.
        RuntimeError
            The communicator, a Buffer or the stream is closed.
        """
        comm, dev, s = self._begin(stream)
        sptr, count, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, True, recvbuf is None)
        if recvbuf is None or recvbuf is sendbuf:
            rptr = sptr
        else:
            rptr, rcount, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, True, True)
            _same_type("recvbuf", dt, rdt)
            _at_least("recvbuf", rcount, count, "sendbuf's length")
        code = _op(op)
        self._enqueue("ncclAllReduce", self._b.all_reduce, sptr, rptr, count, dt, code, comm, s)

    def broadcast(
        self, sendbuf: Any, recvbuf: Any = None, root: int = 0, *, stream: Any, dtype: Any = None
    ) -> None:
        """Copy ``root``'s ``sendbuf`` into every rank's ``recvbuf`` (``ncclBroadcast``).

        Parameters
        ----------
        sendbuf : Buffer, StridedMemoryView or device array
            The data, read on ``root`` only; on the other ranks it may be ``None`` when
            ``recvbuf`` is given.
        recvbuf : Buffer, StridedMemoryView or device array, optional
            Where the data lands; ``None``: in place, into ``sendbuf`` (on every rank).
        root : int
            The rank whose data is sent.
        stream : Stream
            The stream the copy is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of Buffer arguments (default: bytes).

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message).
        NCCLError
            NCCL refused the call.
        """
        comm, dev, s = self._begin(stream)
        root = self._check_root(root)
        if recvbuf is None:
            sptr, count, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, False, True)
            rptr = sptr
        else:
            rptr, count, dt = _resolve(recvbuf, dtype, "recvbuf", s, dev, False, True)
            sptr = rptr  # NCCL reads sendbuff on the root only
            if self._rank == root:
                sptr, scount, sdt = _resolve(sendbuf, dtype, "sendbuf", s, dev, False, False)
                _same_type("recvbuf", sdt, dt)
                if scount != count:
                    raise arg_error(
                        "recvbuf",
                        f"as long as sendbuf ({scount} elements) on the root",
                        f"{count} elements",
                    )
        self._enqueue("ncclBroadcast", self._b.broadcast, sptr, rptr, count, dt, root, comm, s)

    def all_gather(self, sendbuf: Any, recvbuf: Any, *, stream: Any, dtype: Any = None) -> None:
        """Concatenate every rank's ``sendbuf``, in rank order, into every rank's ``recvbuf``
        (``ncclAllGather``).

        Parameters
        ----------
        sendbuf : Buffer, StridedMemoryView or device array
            This rank's piece.
        recvbuf : Buffer, StridedMemoryView or device array
            At least ``nranks`` times as long as ``sendbuf``; rank ``r``'s piece lands at
            element ``r * len(sendbuf)``. (In place: ``sendbuf`` may be that slice of it.)
        stream : Stream
            The stream the gather is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of Buffer arguments (default: bytes).

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message).
        NCCLError
            NCCL refused the call.
        """
        comm, dev, s = self._begin(stream)
        sptr, count, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, False, False)
        rptr, rcount, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, False, True)
        _same_type("recvbuf", dt, rdt)
        _at_least(
            "recvbuf", rcount, count * self._nranks, f"nranks ({self._nranks}) x sendbuf's {count}"
        )
        self._enqueue("ncclAllGather", self._b.all_gather, sptr, rptr, count, dt, comm, s)

    def reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, op: Any = "sum", *, stream: Any, dtype: Any = None
    ) -> None:
        """Reduce ``sendbuf`` over all ranks and give rank ``r`` the ``r``-th block of the result
        (``ncclReduceScatter``).

        Parameters
        ----------
        sendbuf : Buffer, StridedMemoryView or device array
            ``nranks`` blocks of ``len(recvbuf)`` elements (at least).
        recvbuf : Buffer, StridedMemoryView or device array
            This rank's block of the result; its length is the block size.
        op : str or int
            ``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"avg"``, or an NCCL op from nccl4py.
        stream : Stream
            The stream the reduction is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of Buffer arguments (required for them).

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message).
        NCCLError
            NCCL refused the call.
        """
        comm, dev, s = self._begin(stream)
        sptr, scount, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, True, False)
        rptr, count, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, True, True)
        _same_type("recvbuf", dt, rdt)
        _at_least(
            "sendbuf", scount, count * self._nranks, f"nranks ({self._nranks}) x recvbuf's {count}"
        )
        code = _op(op)
        self._enqueue(
            "ncclReduceScatter", self._b.reduce_scatter, sptr, rptr, count, dt, code, comm, s
        )

    def _begin(self, stream: Any) -> tuple[Any, int, int]:
        """(the Comm, the device ordinal, the stream's address) for a collective, checked."""
        comm = self._comm
        if comm is None:
            raise _closed()
        dev = self._device_id
        return comm, dev, _stream_ptr(stream, dev)

    def _enqueue(self, api: str, fn: Any, *args: Any) -> None:
        """Call the binding ``fn``; an NCCL failure becomes :class:`NCCLError` naming ``api``."""
        try:
            fn(*args)
        except self._b.NCCLError as exc:
            raise nccl_error(api, exc, self._b, self._comm) from None

    def _check_root(self, root: Any) -> int:
        if isinstance(root, bool) or not isinstance(root, int):
            raise arg_error("root", "an int rank", root, exc=TypeError)
        if not 0 <= root < self._nranks:
            raise arg_error("root", f"a rank in 0..{self._nranks - 1}", root)
        return root

    # -- lifetime -------------------------------------------------------------------------------

    def finalize(self) -> None:
        """Finish the communicator's pending work and release its network resources
        (``ncclCommFinalize``); :meth:`close` then only frees memory.

        Every rank calls it. When one thread drives several communicators (:meth:`init_all`),
        finalise them inside one :func:`group`, then close each.

        Raises
        ------
        NCCLError
            NCCL reported an error.
        RuntimeError
            The communicator is closed.
        """
        n4p = self._n4p
        if n4p is None:
            raise _closed()
        b = self._b
        try:
            n4p.finalize()
        except b.NCCLError as exc:
            raise nccl_error("ncclCommFinalize", exc, b, self._comm) from None

    def close(self) -> None:
        """Destroy the communicator (``ncclCommDestroy``, after flushing its work); idempotent.

        Every rank calls it: NCCL finalises the group together, so a rank closing alone waits
        for the others. Use :meth:`abort` when the other ranks may be gone.

        Raises
        ------
        NCCLError
            NCCL reported an error while destroying (the communicator is released anyway).
        """
        n4p = self._n4p
        if n4p is None:
            return
        self._finalizer.detach()
        self._n4p = self._comm = None
        b = self._b
        try:
            n4p.destroy()
        except b.NCCLError as exc:
            raise nccl_error("ncclCommDestroy", exc, b) from None

    def abort(self) -> None:
        """Abort the communicator (``ncclCommAbort``): stop its pending work and free it without
        waiting for the other ranks; idempotent. For error paths."""
        n4p = self._n4p
        if n4p is None:
            return
        self._finalizer.detach()
        self._n4p = self._comm = None
        _abort_quietly(n4p)

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
