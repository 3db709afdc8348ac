"""Running NCCL ranks in spawned processes for tests/nccl/test_nccl.py, and the ranks' own checks.

:func:`run_ranks` starts one spawned process per rank, each running a ``rank_*`` function of
this module, and returns what each returned; a rank that raises sends its traceback back, and
the call fails with every rank's traceback (a failed rank leaves the others waiting in NCCL,
so they are stopped). The ``rank_*`` functions assert on the data they read back.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import queue as _queue
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

ADDR = "127.0.0.1"


def nccl_skip_reason(gpus: int = 2) -> str | None:
    """``None`` when NCCL collectives over ``gpus`` GPUs can run here, else why not."""
    from cuda_core import nccl
    from tests.helpers import gpu_count, gpu_skip_reason

    try:
        nccl.library_info()
    except nccl.NCCLNotFoundError as exc:
        return f"cuda_core.nccl cannot load NCCL here ({exc.remedy}): {exc.library}"
    reason = gpu_skip_reason()
    if reason:
        return reason
    if gpu_count() < gpus:
        return f"needs {gpus} GPUs (this machine has {gpu_count()})"
    return None


def need_gpus(gpus: int = 2) -> None:
    """Skip the calling test, saying why, unless NCCL collectives over ``gpus`` GPUs can run."""
    import pytest

    reason = nccl_skip_reason(gpus)
    if reason:
        pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((ADDR, 0))
        return int(sock.getsockname()[1])


def _entry(
    target: Callable[..., Any],
    rank: int,
    world: int,
    port: int,
    out: Any,
    args: tuple[Any, ...],
    dump_after: float,
) -> None:
    # A rank stuck in NCCL is killed by run_ranks; dump its stacks first so the failure says where.
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # every GPU process of the tests (NVLink SHARP off)
    faulthandler.dump_traceback_later(dump_after, exit=False)
    try:
        out.put((rank, True, target(rank, world, port, *args)))
    except BaseException:
        out.put((rank, False, traceback.format_exc()))
    finally:
        faulthandler.cancel_dump_traceback_later()


def run_ranks(
    target: Callable[..., Any],
    world: int,
    *args: Any,
    procs: int | None = None,
    timeout: float = 180.0,
    may_die: tuple[int, ...] = (),
) -> list[Any]:
    """Run ``target(rank, world, port, *args)`` for each rank in its own spawned process.

    ``procs`` processes are started (default ``world``; 1 for a target that drives every GPU
    itself). Returns the results in rank order (``None`` for a rank of ``may_die`` that died
    without answering, as a fault test makes it); fails with the tracebacks of the ranks that
    raised, or names those that never answered.
    """
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    n = world if procs is None else procs
    dump_after = max(1.0, timeout - 10.0)
    ps = [
        ctx.Process(target=_entry, args=(target, r, world, port, out, args, dump_after))
        for r in range(n)
    ]
    for p in ps:
        p.start()
    results: dict[int, tuple[bool, Any]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < n - sum(1 for r in may_die if not ps[r].is_alive()):
            try:
                rank, ok, value = out.get(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            except _queue.Empty:
                dead = [r for r, p in enumerate(ps)
                        if not p.is_alive() and r not in results and r not in may_die]  # fmt: skip
                if dead or time.monotonic() >= deadline:
                    break
                continue
            results[rank] = (ok, value)
            if not ok:
                break  # the others may wait for it in NCCL forever
    finally:
        for p in ps:
            p.join(timeout=10 if len(results) == n else 2)
            if p.is_alive():
                p.kill()
                p.join()
    errors = [f"rank {r}:\n{v}" for r, (ok, v) in sorted(results.items()) if not ok]
    missing = [r for r in range(n) if r not in results and r not in may_die]
    if errors or missing:
        codes = [p.exitcode for p in ps]
        raise AssertionError(
            "\n".join(errors)
            + (f"\nno answer from ranks {missing} (exit codes {codes})" if missing else "")
        )
    return [results[r][1] if r in results else None for r in range(n)]


# -- ranks --------------------------------------------------------------------------------------


def rank_exchange_only(rank: int, world: int, port: int) -> bytes:
    """The rendezvous alone (no GPU): rank 0 makes an NCCL unique id, every rank returns it."""
    from cuda_core import nccl

    return nccl.exchange_unique_id(rank, world, ADDR, port, timeout=60)


def _setup(rank: int, world: int, port: int) -> tuple[Any, Any, Any, Any]:
    from cuda_core import Device, nccl

    dev = Device(rank)
    dev.set_current()
    s = dev.create_stream()
    uid = nccl.exchange_unique_id(rank, world, ADDR, port, timeout=60)
    comm = nccl.Communicator.init(world, rank, uid, device=dev)
    return nccl, dev, s, comm


def _to_device(dev: Any, s: Any, host: np.ndarray) -> Any:
    buf = dev.allocate(host.nbytes, stream=s)
    buf.copy_from(host, stream=s)
    return buf


def _view(buf: Any, dtype: Any, n: int | None = None) -> Any:
    from cuda_core.utils import StridedMemoryView

    dt = np.dtype(dtype)
    return StridedMemoryView.from_buffer(
        buf, (buf.size // dt.itemsize if n is None else n,), dtype=dt
    )


def _read(buf: Any, s: Any, dtype: Any) -> np.ndarray:
    out = np.empty(buf.size // np.dtype(dtype).itemsize, dtype)
    buf.copy_to(out, stream=s)
    s.sync()
    return out


def rank_collectives(rank: int, world: int, port: int) -> str:
    """all_reduce (sum, max, avg; in and out of place), broadcast, all_gather, reduce_scatter."""
    nccl, dev, s, comm = _setup(rank, world, port)
    with comm:
        assert (comm.rank, comm.nranks, comm.device.device_id) == (rank, world, rank)
        assert repr(comm) == f"<Communicator rank={rank}/{world} device={rank}>"
        n = 4099  # not a multiple of anything NCCL likes
        ar = np.arange(n)

        # sum, out of place, float32 views
        src = _to_device(dev, s, (ar + rank).astype(np.float32))
        dst = dev.allocate(4 * n, stream=s)
        comm.all_reduce(_view(src, np.float32), _view(dst, np.float32), op="sum", stream=s)
        expect = (world * ar + world * (world - 1) // 2).astype(np.float32)
        np.testing.assert_array_equal(_read(dst, s, np.float32), expect)
        np.testing.assert_array_equal(
            _read(src, s, np.float32), (ar + rank).astype(np.float32)
        )  # untouched

        # max, in place, on a Buffer with dtype=
        ib = _to_device(dev, s, (rank * 10 + ar % 7).astype(np.int32))
        comm.all_reduce(ib, op="max", stream=s, dtype=np.int32)
        np.testing.assert_array_equal(
            _read(ib, s, np.int32), ((world - 1) * 10 + ar % 7).astype(np.int32)
        )

        # avg, float64, nccl4py's op constant
        import nccl.core as nc

        fb = _to_device(dev, s, np.full(n, 2.0 * (rank + 1)))
        comm.all_reduce(_view(fb, np.float64), op=nc.AVG, stream=s)
        np.testing.assert_allclose(_read(fb, s, np.float64), np.full(n, float(world + 1)))

        # broadcast from the last rank, in place, raw bytes of a Buffer
        root = world - 1
        bb = _to_device(dev, s, np.full(1000, rank, np.uint8))
        comm.broadcast(bb, root=root, stream=s)
        np.testing.assert_array_equal(_read(bb, s, np.uint8), np.full(1000, root, np.uint8))

        # broadcast out of place; sendbuf is None away from the root
        rb = dev.allocate(8 * n, stream=s)
        sb = _to_device(dev, s, ar.astype(np.int64) * 3) if rank == 0 else None
        comm.broadcast(
            None if sb is None else _view(sb, np.int64), _view(rb, np.int64), root=0, stream=s
        )
        np.testing.assert_array_equal(_read(rb, s, np.int64), ar.astype(np.int64) * 3)

        # all_gather: rank r's piece lands at r * n
        piece = _to_device(dev, s, (rank * 100000 + ar).astype(np.int64))
        every = dev.allocate(8 * n * world, stream=s)
        comm.all_gather(_view(piece, np.int64), _view(every, np.int64), stream=s)
        got = _read(every, s, np.int64).reshape(world, n)
        np.testing.assert_array_equal(got, np.stack([r * 100000 + ar for r in range(world)]))

        # reduce_scatter: rank r receives block r of the sum
        full = np.arange(world * n, dtype=np.float32)
        sendb = _to_device(dev, s, full * np.float32(rank + 1))
        recvb = dev.allocate(4 * n, stream=s)
        comm.reduce_scatter(_view(sendb, np.float32), _view(recvb, np.float32), op="sum", stream=s)
        total = full * np.float32(world * (world + 1) // 2)
        np.testing.assert_array_equal(_read(recvb, s, np.float32), total[rank * n : (rank + 1) * n])

        _check_argument_errors(nccl, dev, s, comm, n)
    assert comm.is_closed and comm.handle == 0
    return "ok"


def _raises(exc: type[BaseException], text: str, fn: Callable[[], object]) -> None:
    try:
        fn()
    except exc as e:
        assert text in str(e), f"{type(e).__name__}: {e!s} does not mention {text!r}"
    else:
        raise AssertionError(f"no {exc.__name__} ({text})")


def _check_argument_errors(nccl: Any, dev: Any, s: Any, comm: Any, n: int) -> None:
    """Misuse is refused before NCCL runs, the same way on every rank (so no rank hangs)."""
    from cuda_core import PinnedMemoryResource

    buf = dev.allocate(4 * n, stream=s)
    short = dev.allocate(4 * (n - 1), stream=s)
    _raises(
        TypeError,
        "dtype must be given when sendbuf is a Buffer",
        lambda: comm.all_reduce(buf, stream=s),
    )
    _raises(
        TypeError, "stream must be", lambda: comm.all_reduce(_view(buf, np.float32), stream=None)
    )
    _raises(ValueError, "recvbuf must be at least 4099 elements",
            lambda: comm.all_reduce(_view(buf, np.float32), _view(short, np.float32), stream=s))  # fmt: skip
    _raises(ValueError, "recvbuf must be of the same data type as sendbuf (float32)",
            lambda: comm.all_reduce(_view(buf, np.float32), _view(buf, np.int32), stream=s))  # fmt: skip
    _raises(
        ValueError,
        "op must be one of",
        lambda: comm.all_reduce(_view(buf, np.float32), op="mean", stream=s),
    )
    _raises(
        ValueError,
        "root must be a rank in",
        lambda: comm.broadcast(buf, root=comm.nranks, stream=s),
    )
    _raises(ValueError, "recvbuf must be at least",
            lambda: comm.all_gather(_view(buf, np.float32), _view(buf, np.float32), stream=s))  # fmt: skip
    pinned = PinnedMemoryResource().allocate(4 * n, stream=s)
    _raises(
        ValueError,
        "device or managed memory",
        lambda: comm.all_reduce(pinned, stream=s, dtype=np.float32),
    )
    other = dev.create_stream()
    other.close()
    _raises(
        RuntimeError,
        "Stream has been closed",
        lambda: comm.all_reduce(_view(buf, np.float32), stream=other),
    )
    closed = dev.allocate(64, stream=s)
    closed.close()
    _raises(RuntimeError, "closed Buffer", lambda: comm.broadcast(closed, stream=s))
    for b in (buf, short, pinned):
        b.close()


def rank_nccl4py_direct(rank: int, world: int, port: int) -> str:
    """nccl4py's own communicator takes our StridedMemoryView, Buffer and Stream as they are."""
    _nccl, dev, s, comm = _setup(rank, world, port)
    import nccl.core as nc

    with comm:
        n4p = comm.as_nccl4py()
        assert isinstance(n4p, nc.Communicator) and n4p.ptr == comm.handle
        n = 1 << 12
        vals = _to_device(dev, s, np.full(n, rank + 1, np.float32))
        view = _view(vals, np.float32)
        n4p.allreduce(view, view, nc.SUM, stream=s)  # DLPack view, __cuda_stream__ stream
        comm.wait()  # non-blocking: NCCL may still be enqueueing it
        np.testing.assert_array_equal(
            _read(vals, s, np.float32), np.full(n, world * (world + 1) / 2, np.float32)
        )
        raw = _to_device(dev, s, np.full(777, 10 + rank, np.uint8))
        n4p.broadcast(raw, raw, 0, stream=s)  # a Buffer: bytes through DLPack
        comm.wait()
        np.testing.assert_array_equal(_read(raw, s, np.uint8), np.full(777, 10, np.uint8))
    return "ok"


def rank_group_two_devices(rank: int, world: int, port: int) -> str:
    """One process drives ``world`` GPUs: init_all, then all-reduces inside one group."""
    from cuda_core import Device, nccl

    devs = [Device(i) for i in range(world)]
    streams = []
    for d in devs:
        d.set_current()
        streams.append(d.create_stream())
    comms = nccl.Communicator.init_all(devs)
    assert [c.rank for c in comms] == list(range(world))
    assert [c.device.device_id for c in comms] == list(range(world))
    n = 1 << 15
    bufs = []
    for i, (d, s) in enumerate(zip(devs, streams)):
        d.set_current()
        bufs.append(_to_device(d, s, np.full(n, float(i + 1), np.float32)))
    with nccl.group():
        for c, b, s in zip(comms, bufs, streams):
            c.all_reduce(b, op="sum", stream=s, dtype=np.float32)
    for d, b, s in zip(devs, bufs, streams):
        d.set_current()
        np.testing.assert_array_equal(
            _read(b, s, np.float32), np.full(n, world * (world + 1) / 2, np.float32)
        )
    with nccl.group():  # one thread finalises its communicators together, then frees each
        for c in comms:
            c.finalize()
    for c in comms:
        c.close()
    assert all(c.is_closed for c in comms)
    return "ok"


def rank_shrink(rank: int, world: int, port: int) -> str:
    """The last rank left out by the others (it does not call shrink), where this NCCL has
    ncclCommShrink; the new communicator all-reduces."""
    nccl, dev, s, comm = _setup(rank, world, port)
    buf = _to_device(dev, s, np.ones(256, np.float32))
    with comm:
        if rank < world - 1:
            try:
                small = comm.shrink([world - 1])
            except nccl.NCCLError as exc:
                assert "has no ncclCommShrink" in str(exc), str(exc)
            else:
                with small:
                    assert (small.rank, small.nranks) == (rank, world - 1)
                    small.all_reduce(_view(buf, np.float32), stream=s)
                    s.sync()
                    np.testing.assert_array_equal(
                        _read(buf, s, np.float32), np.full(256, world - 1, np.float32)
                    )
    buf.close()
    return "ok"


def rank_more_collectives(rank: int, world: int, port: int) -> str:
    """reduce, send/recv (a ring in a group, and a pair outside one), all_to_all, barrier, wait."""
    nccl, dev, s, comm = _setup(rank, world, port)
    with comm:
        n = 1031
        ar = np.arange(n)

        # reduce to the last rank, out of place; in place on rank 0
        for root, in_place in ((world - 1, False), (0, True)):
            src = _to_device(dev, s, (ar * (rank + 1)).astype(np.float64))
            dst = dev.allocate(8 * n, stream=s)
            comm.reduce(_view(src, np.float64), None if in_place else _view(dst, np.float64),
                        op="sum", root=root, stream=s)  # fmt: skip
            if rank == root:
                got = _read(src if in_place else dst, s, np.float64)
                np.testing.assert_array_equal(got, ar * (world * (world + 1) // 2))

        # a ring in one group: send to the right, receive from the left (bytes of a Buffer)
        out = _to_device(dev, s, np.full(999, rank, np.uint8))
        into = _to_device(dev, s, np.zeros(999, np.uint8))
        with nccl.group():
            comm.send(out, (rank + 1) % world, stream=s)
            comm.recv(into, (rank - 1) % world, stream=s)
        np.testing.assert_array_equal(
            _read(into, s, np.uint8), np.full(999, (rank - 1) % world, np.uint8)
        )

        # one pair outside a group: rank 0 sends int32 to rank 1
        if rank in (0, 1):
            pair = _to_device(
                dev, s, (ar * 7).astype(np.int32) if rank == 0 else np.zeros(n, np.int32)
            )
            if rank == 0:
                comm.send(_view(pair, np.int32), 1, stream=s)
            else:
                comm.recv(_view(pair, np.int32), 0, stream=s)
                np.testing.assert_array_equal(_read(pair, s, np.int32), (ar * 7).astype(np.int32))

        # all_to_all: block p of rank r holds r * 1000 + p; rank r receives p * 1000 + r from p
        blk = 37
        send = np.repeat(rank * 1000 + np.arange(world), blk).astype(np.int64)
        sb, rb = _to_device(dev, s, send), dev.allocate(8 * blk * world, stream=s)
        comm.all_to_all(_view(sb, np.int64), _view(rb, np.int64), stream=s)
        expect = np.repeat(np.arange(world) * 1000 + rank, blk).astype(np.int64)
        np.testing.assert_array_equal(_read(rb, s, np.int64), expect)

        comm.barrier(stream=s)
        comm.wait()

        # the argument errors of the new calls, the same on every rank
        buf = dev.allocate(4 * n, stream=s)
        _raises(
            ValueError,
            "root must be a rank in",
            lambda: comm.reduce(buf, root=world, stream=s, dtype=np.float32),
        )
        _raises(
            TypeError,
            "dtype must be given when sendbuf is a Buffer",
            lambda: comm.reduce(buf, stream=s),
        )
        _raises(
            ValueError,
            "peer must be another rank than this one",
            lambda: comm.send(buf, rank, stream=s),
        )
        _raises(ValueError, "peer must be a rank in", lambda: comm.recv(buf, world, stream=s))
        _raises(
            ValueError,
            f"sendbuf must be {world} equal blocks",
            lambda: comm.all_to_all(
                _view(buf, np.float32, world * 3 + 1), _view(buf, np.float32), stream=s
            ),
        )
        _raises(ValueError, "recvbuf must be of the same data type as sendbuf (float32)",
                lambda: comm.all_to_all(_view(buf, np.float32, world), _view(buf, np.int32), stream=s))  # fmt: skip
        _raises(ValueError, "recvbuf must be another buffer than sendbuf",
                lambda: comm.all_to_all(_view(buf, np.float32, world), _view(buf, np.float32, world), stream=s))  # fmt: skip

        # shrink: nothing left out is refused before NCCL (NCCL 2.28 refuses it too)
        _raises(ValueError, "exclude_ranks must be at least one rank", lambda: comm.shrink([]))
    assert comm.is_closed
    _raises(RuntimeError, "Communicator has been closed", lambda: comm.send(buf, 0, stream=s))
    assert not [t for t in threading.enumerate() if t.name.startswith("cuda_core.nccl watchdog")]
    return "ok"


def _after_fault(rank: int, world: int, port: int, dev: Any, s: Any) -> None:
    """What a survivor does after the fault: its memory and stream work, and a new communicator
    of the survivors (from a new unique id) runs an all-reduce to completion."""
    from cuda_core import nccl

    assert not [t for t in threading.enumerate() if t.name.startswith("cuda_core.nccl watchdog")]
    uid = nccl.exchange_unique_id(rank, world, ADDR, port, timeout=60)
    with nccl.Communicator.init(world, rank, uid, device=dev, timeout=30) as comm:
        b = _to_device(dev, s, np.full(4096, rank + 1, np.float32))
        comm.all_reduce(_view(b, np.float32), stream=s)
        np.testing.assert_array_equal(
            _read(b, s, np.float32), np.full(4096, world * (world + 1) / 2, np.float32)
        )


def rank_killed_mid_loop(
    rank: int, world: int, port: int, port2: int, timeout: float
) -> float | None:
    """The last rank SIGKILLs itself in the middle of a loop of all-reduces; the others must
    raise within ``timeout`` + 5 s of their last completed all-reduce, then work on."""
    from cuda_core import nccl

    nccl.set_default_timeout(timeout)
    _nccl, dev, s, comm = _setup(rank, world, port)
    buf = _to_device(dev, s, np.ones(1 << 16, np.float32))
    view = _view(buf, np.float32)
    prev = start = time.monotonic()
    try:
        for i in range(100000):
            if rank == world - 1 and i == 50:
                os.kill(os.getpid(), signal.SIGKILL)
            prev, start = start, time.monotonic()
            comm.all_reduce(view, stream=s)
            s.sync()  # the hung one returns once the watchdog aborted; the next call raises
    except nccl.NCCLError as exc:
        took = time.monotonic() - prev  # the hung all-reduce started at the latest then
        assert took <= timeout + 5, f"raised {took:.1f} s after the hung all-reduce began: {exc}"
        assert i > 50 - 2, f"failed at iteration {i}, before the kill: {exc}"
    else:
        raise AssertionError("the loop ended without an error")
    assert comm.timeout == timeout
    comm.close()  # after the failure: releases, raises nothing more
    _after_fault(rank, world - 1, port2, dev, s)
    return took


def rank_never_joins(rank: int, present: int, port: int, port2: int, timeout: float) -> float:
    """``present`` ranks init a communicator of ``present + 1``: the last never comes. Each must
    raise NCCLTimeoutError within ``timeout`` + 5 s, then build a communicator of those present."""
    from cuda_core import Device, nccl

    dev = Device(rank)
    dev.set_current()
    s = dev.create_stream()
    uid = nccl.exchange_unique_id(rank, present, ADDR, port, timeout=60)
    t0 = time.monotonic()
    try:
        nccl.Communicator.init(present + 1, rank, uid, device=dev, timeout=timeout)
    except nccl.NCCLTimeoutError as exc:
        took = time.monotonic() - t0
        assert took <= timeout + 5, f"raised after {took:.1f} s"
        assert (exc.api, exc.rank, exc.nranks, exc.timeout) == (
            "ncclCommInitRank",
            rank,
            present + 1,
            timeout,
        )
    else:
        raise AssertionError("init returned though a rank never joined")
    _after_fault(rank, present, port2, dev, s)
    return took
