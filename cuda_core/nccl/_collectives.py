"""The collectives of a :class:`~cuda_core.nccl.Communicator`: all-reduce, broadcast, all-gather
and reduce-scatter on cuda_core's Buffers, views, device arrays and Streams.

Each call reads the address, count and data type of its buffer arguments (``_args``), checks
them, and calls ``nccl.bindings`` directly with the stream's handle, so a call costs a few
microseconds of Python on top of NCCL's own enqueue.
"""

from __future__ import annotations

from typing import Any

from .._utils import arg_error
from . import _args
from ._errors import nccl_error

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
            raise _args.closed()
        dev = self._device_id
        return comm, dev, _args.stream_ptr(stream, dev)

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
