"""The collectives of a :class:`~cuda_core.nccl.Communicator` -- all-reduce, broadcast, reduce,
all-gather, reduce-scatter, all-to-all, send, recv, barrier -- on cuda_core's Buffers, views,
device arrays and Streams.

Each call reads the address, count and data type of its buffer arguments (``_args``), checks
them, and calls ``nccl.bindings`` directly with the stream's handle, so a call costs a few
microseconds of Python on top of NCCL's own enqueue.
"""

from __future__ import annotations

from typing import Any

from .._device import Device
from .._utils import arg_error
from . import _args
from ._errors import nccl_error
from ._group import add_call, group, open_calls

__all__: list[str] = []  # private module: Communicator is the public face

_resolve = _args.resolve
_op = _args.reduction_op
_same_type = _args.same_type
_at_least = _args.at_least


class Collectives:
    """The collective calls of :class:`~cuda_core.nccl.Communicator` (a base it is built on)."""

    __slots__ = ()

    _b: Any  # nccl.bindings.nccl
    _comm: Any  # nccl.bindings.nccl.Comm of the communicator; None once closed
    _rank: int
    _nranks: int
    _device_id: int
    _w: Any  # the Watchdog: fault state, the NCCL lock, the thread watching the work
    _scratch: Any  # barrier()'s 4 bytes of device memory, made on first use

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
        comm, dev, st, s = self._begin(stream)
        sptr, count, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, True, recvbuf is None)
        if recvbuf is None or recvbuf is sendbuf:
            rptr = sptr
        else:
            rptr, rcount, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, True, True)
            _same_type("recvbuf", dt, rdt)
            _at_least("recvbuf", rcount, count, "sendbuf's length")
        code = _op(op)
        self._enqueue("ncclAllReduce", st, self._b.all_reduce, sptr, rptr, count, dt, code, comm, s)

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
        comm, dev, st, s = self._begin(stream)
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
        self._enqueue("ncclBroadcast", st, self._b.broadcast, sptr, rptr, count, dt, root, comm, s)

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
        comm, dev, st, s = self._begin(stream)
        sptr, count, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, False, False)
        rptr, rcount, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, False, True)
        _same_type("recvbuf", dt, rdt)
        _at_least(
            "recvbuf", rcount, count * self._nranks, f"nranks ({self._nranks}) x sendbuf's {count}"
        )
        self._enqueue("ncclAllGather", st, self._b.all_gather, sptr, rptr, count, dt, comm, s)

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
        comm, dev, st, s = self._begin(stream)
        sptr, scount, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, True, False)
        rptr, count, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, True, True)
        _same_type("recvbuf", dt, rdt)
        _at_least(
            "sendbuf", scount, count * self._nranks, f"nranks ({self._nranks}) x recvbuf's {count}"
        )
        code = _op(op)
        self._enqueue(
            "ncclReduceScatter", st, self._b.reduce_scatter, sptr, rptr, count, dt, code, comm, s
        )

    def reduce(
        self,
        sendbuf: Any,
        recvbuf: Any = None,
        op: Any = "sum",
        root: int = 0,
        *,
        stream: Any,
        dtype: Any = None,
    ) -> None:
        """Reduce ``sendbuf`` over all ranks into ``root``'s ``recvbuf`` (``ncclReduce``).

        Parameters
        ----------
        sendbuf : Buffer, StridedMemoryView or device array
            This rank's contribution; its element count is the count reduced.
        recvbuf : Buffer, StridedMemoryView or device array, optional
            Where the result goes on ``root``, at least as long as ``sendbuf``; ``None``: in
            place, into ``sendbuf``. Not read or written on the other ranks (may be ``None``).
        op : str or int
            ``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"avg"``, or an NCCL op from nccl4py.
        root : int
            The rank that receives the result.
        stream : Stream
            The stream the reduction is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of Buffer arguments (required for them).

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message), as for :meth:`all_reduce`, or a ``root``
            that is not a rank.
        NCCLError
            NCCL refused the call or failed; :class:`NCCLTimeoutError` after a timeout.
        """
        comm, dev, st, s = self._begin(stream)
        root = _args.rank_arg("root", root, self._nranks)
        on_root = self._rank == root
        in_place = recvbuf is None or recvbuf is sendbuf
        sptr, count, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, True, on_root and in_place)
        rptr = sptr
        if on_root and not in_place:
            rptr, rcount, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, True, True)
            _same_type("recvbuf", dt, rdt)
            _at_least("recvbuf", rcount, count, "sendbuf's length")
        code = _op(op)
        self._enqueue("ncclReduce", st, self._b.reduce, sptr, rptr, count, dt, code, root, comm, s)

    def all_to_all(self, sendbuf: Any, recvbuf: Any, *, stream: Any, dtype: Any = None) -> None:
        """Send block ``p`` of ``sendbuf`` to rank ``p`` and receive rank ``p``'s block for this
        rank into block ``p`` of ``recvbuf``, for every rank ``p`` (equal splits).

        Runs as one group of ``ncclSend``/``ncclRecv`` pairs, which every NCCL version has.

        Parameters
        ----------
        sendbuf : Buffer, StridedMemoryView or device array
            ``nranks`` blocks of equal length: its length must be a multiple of ``nranks``.
        recvbuf : Buffer, StridedMemoryView or device array
            At least as long as ``sendbuf``; another buffer (not in place).
        stream : Stream
            The stream the exchange is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of Buffer arguments (default: bytes).

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message): a length that does not divide by
            ``nranks``, a shorter or differently typed ``recvbuf``, ``recvbuf`` the same as
            ``sendbuf``.
        NCCLError
            NCCL refused the call or failed; :class:`NCCLTimeoutError` after a timeout.
        """
        comm, dev, st, s = self._begin(stream)
        sptr, scount, dt = _resolve(sendbuf, dtype, "sendbuf", s, dev, False, False)
        rptr, rcount, rdt = _resolve(recvbuf, dtype, "recvbuf", s, dev, False, True)
        _same_type("recvbuf", dt, rdt)
        count = _args.equal_blocks(scount, self._nranks)
        _at_least("recvbuf", rcount, scount, "sendbuf's length")
        if rptr == sptr and scount:
            raise arg_error("recvbuf", "another buffer than sendbuf (all_to_all is not in place)",
                            recvbuf)  # fmt: skip
        step = count * _args.ITEMSIZE[dt]
        b, api = self._b, "all_to_all (ncclSend/ncclRecv)"
        with group():
            for peer in range(self._nranks):
                self._enqueue(api, st, b.send, sptr + peer * step, count, dt, peer, comm, s)
                self._enqueue(api, st, b.recv, rptr + peer * step, count, dt, peer, comm, s)

    def send(self, sendbuf: Any, peer: int, *, stream: Any, dtype: Any = None) -> None:
        """Send ``sendbuf`` to rank ``peer`` (``ncclSend``), which calls :meth:`recv` with this
        rank and a buffer of the same length and type.

        A send completes when the peer receives: calls that wait for each other (a ring, an
        exchange, a rank sending to itself) go inside one :class:`group`.

        Parameters
        ----------
        sendbuf : Buffer, StridedMemoryView or device array
            The data; its element count and type are what the peer must receive.
        peer : int
            The receiving rank; this rank itself only inside a :class:`group`.
        stream : Stream
            The stream the send is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of a Buffer (default: bytes).

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message), or a ``peer`` that is not a rank.
        NCCLError
            NCCL refused the call or failed; :class:`NCCLTimeoutError` after a timeout.
        """
        self._p2p("ncclSend", False, "sendbuf", sendbuf, peer, stream, dtype)

    def recv(self, recvbuf: Any, peer: int, *, stream: Any, dtype: Any = None) -> None:
        """Receive into ``recvbuf`` what rank ``peer`` sends with :meth:`send` (``ncclRecv``).

        Parameters
        ----------
        recvbuf : Buffer, StridedMemoryView or device array
            Where the data lands; its element count and type must be the sender's.
        peer : int
            The sending rank; this rank itself only inside a :class:`group`.
        stream : Stream
            The stream the receive is ordered on (keyword-only, required).
        dtype : numpy.dtype, optional
            The element type of a Buffer (default: bytes).

        Raises
        ------
        TypeError, ValueError
            A bad argument (named in the message), or a ``peer`` that is not a rank.
        NCCLError
            NCCL refused the call or failed; :class:`NCCLTimeoutError` after a timeout.
        """
        self._p2p("ncclRecv", True, "recvbuf", recvbuf, peer, stream, dtype)

    def _p2p(
        self, api: str, dest: bool, name: str, buf: Any, peer: Any, stream: Any, dtype: Any
    ) -> None:
        """send or recv: ``peer`` checked, ``buf`` read (written, for a recv), enqueued."""
        comm, dev, st, s = self._begin(stream)
        grouped = open_calls() is not None
        peer = _args.rank_arg("peer", peer, self._nranks, self._rank, grouped)
        ptr, count, dt = _resolve(buf, dtype, name, s, dev, False, dest)
        fn = self._b.recv if dest else self._b.send
        self._enqueue(api, st, fn, ptr, count, dt, peer, comm, s)

    def barrier(self, *, stream: Any) -> None:
        """Return once every rank has called ``barrier`` and all of this communicator's work
        enqueued before it has completed (an all-reduce of one integer on ``stream``, waited for).

        Unlike the other calls, this one blocks the calling thread, at most the communicator's
        timeout (it learns of the completion within about 2 ms, and sleeps through a long
        wait); it must not be called inside a :class:`group`.

        Parameters
        ----------
        stream : Stream
            The stream the all-reduce runs on (keyword-only, required).

        Raises
        ------
        NCCLError
            NCCL failed; :class:`NCCLTimeoutError` when a rank did not arrive in time.
        RuntimeError
            Called inside a :class:`group`, or the communicator is closed.
        """
        comm, dev, st, s = self._begin(stream)
        if open_calls() is not None:
            raise RuntimeError("barrier() cannot run inside nccl.group(): it waits for its result")
        scratch = self._scratch
        if scratch is None:
            scratch = self._scratch = Device(dev).allocate(4, stream=st)
        self._enqueue("ncclAllReduce (barrier)", st, self._b.all_reduce, scratch._ptr,
                      scratch._ptr, 1, 2, 0, comm, s)  # fmt: skip
        self._w.wait_idle()

    def wait(self) -> None:
        """Block until all work this communicator enqueued (on any stream) has completed.

        Learns of the completion within about 2 ms and sleeps through a long wait (no core is
        kept busy); returns at the latest after the communicator's timeout, by raising
        :class:`NCCLTimeoutError`.

        Raises
        ------
        NCCLError
            A collective failed; :class:`NCCLTimeoutError` after a timeout.
        RuntimeError
            The communicator is closed.
        """
        if self._comm is None:
            raise _args.closed()
        self._w.settle("wait")
        self._w.wait_idle()

    def _begin(self, stream: Any) -> tuple[Any, int, Any, int]:
        """(the Comm, the device ordinal, the Stream, its address) for a call, checked; the
        error that ended the communicator, if one did."""
        comm = self._comm
        if comm is None:
            raise _args.closed()
        w = self._w
        if w.failure is not None:
            w.check()
        dev = self._device_id
        st, s = _args.stream_of(stream, dev)
        return comm, dev, st, s

    def _enqueue(self, api: str, st: Any, fn: Any, *args: Any) -> None:
        """Call the binding ``fn`` and hand an event recorded after the work to the watchdog,
        all under one hold of the communicator's lock (inside a group: note the call, the group's
        end records); NCCL is asked for its status once, and only when it said
        ``ncclInProgress`` is it waited for, outside the lock, before the event is recorded.

        The call itself is watched too: a blocking communicator may wait inside it (for room
        in its queue, or to connect to a peer that died), and the watchdog's abort ends that."""
        w = self._w
        calls = open_calls()
        with w.lock:
            if w.aborted or w.failure is not None:  # abort() or close() on another thread
                w.raise_ended()  # since _begin: the communicator NCCL had is freed
            mark = None if calls is not None else w.watch_call(api)
            try:
                fn(*args)
            except self._b.NCCLError as exc:
                if w.aborted:  # the watchdog's abort ended the call: say why
                    w.raise_ended()
                raise nccl_error(api, exc, self._b, self._comm) from None
            finally:
                if mark is not None:
                    mark.is_done = True
            if calls is not None:
                add_call(calls, w, st, api)
                return
            code = w.poll_locked()
            if not code:
                w.record_locked(st, api)
                return
        w.settle(api, code=code)
        with w.lock:
            if w.aborted or w.failure is not None:  # ended while NCCL enqueued
                w.raise_ended()
            w.record_locked(st, api)

    def _check_root(self, root: Any) -> int:
        return _args.rank_arg("root", root, self._nranks)
