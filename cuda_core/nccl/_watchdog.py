"""The watchdog of a communicator: a thread that turns a hang or an asynchronous NCCL error into
an abort and an error, so that no rank waits forever for a rank that died.

A collective is enqueued on its stream and returns at once; an event recorded after it says when
it completed. The watchdog thread looks at the oldest unfinished one with sleeps that grow from
1 ms to 100 ms (it never spins) and, between looks, asks NCCL for the communicator's asynchronous
error. When NCCL reports an error, or the oldest collective has been the oldest for longer than
the timeout, it aborts the communicator (NCCL stops its kernels, so the streams move on) and
keeps the error; the next call on the communicator, on any thread, raises it. The thread starts
with the first collective and is joined by ``stop()`` (``close()``, ``abort()``, collection).

Everything NCCL-specific comes in as callables (``async_error``, ``abort``, ``status_error``) and
completion objects with an ``is_done`` property (a :class:`~cuda_core.Event`), so the logic runs
without a GPU in the tests.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ._errors import NCCLError, NCCLTimeoutError, closed

__all__: list[str] = []  # private module

IN_PROGRESS = 7  # ncclInProgress
WATCH_MIN, WATCH_MAX = 0.001, 0.1  # the watchdog's sleeps between looks, seconds
SETTLE_MIN, SETTLE_MAX = 0.0001, 0.05  # a caller's sleeps while NCCL says ncclInProgress
# ...after this long of polling without sleeping: a non-blocking communicator answers most calls
# ncclInProgress while it enqueues the work, which takes microseconds, and the shortest sleep
# costs 100 us or more (an all-reduce of 1 MiB takes about 50 us on two H200s).
SETTLE_SPIN = 0.002
ABORT_LOCK_WAIT = 1.0  # seconds an abort waits for a caller's NCCL call to return


class Watchdog:
    """The fault state of one communicator and the thread that watches its work.

    ``lock`` is held around every NCCL call on the communicator, so the watchdog never aborts
    it under a caller's feet. ``failure`` is the error that ended it (``None`` while it works).
    """

    __slots__ = (
        "__weakref__",
        "_abort",
        "_aborted",
        "_async_error",
        "_cond",
        "_head_since",
        "_on_start",
        "_pending",
        "_status_error",
        "_stopping",
        "_thread",
        "device_id",
        "failure",
        "finalized",
        "free",
        "lock",
        "nranks",
        "rank",
        "reported",
        "timeout",
    )

    def __init__(
        self,
        timeout: float,
        rank: int,
        nranks: int,
        device_id: int,
        async_error: Callable[[], int],
        abort: Callable[[], None],
        status_error: Callable[[str, int], NCCLError],
        on_start: Callable[[], None] | None = None,
    ) -> None:
        self.timeout = timeout
        self.rank, self.nranks, self.device_id = rank, nranks, device_id
        self._async_error = async_error
        self._abort = abort
        self._status_error = status_error
        self._on_start = on_start  # run first on the thread (makes the device's context current)
        self.lock = threading.Lock()
        self._cond = threading.Condition(threading.Lock())
        self._pending: deque[tuple[Any, str]] = deque()
        self._head_since = 0.0
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._aborted = False
        self.failure: NCCLError | None = None
        self.reported = False  # whether a call raised the failure yet
        self.finalized = False  # ncclCommFinalize was called (close() then only destroys)
        self.free: deque[Any] = deque()  # completed events, for the next collective to re-record

    # -- the caller's side ----------------------------------------------------------------------

    def watch(self, done: Any, api: str) -> None:
        """Watch ``done`` (``done.is_done`` turns true when the work of ``api`` completed)."""
        with self._cond:
            if self._stopping:
                return
            self._pending.append((done, api))
            if len(self._pending) == 1:
                self._head_since = time.monotonic()
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run,
                        name=f"cuda_core.nccl watchdog (rank {self.rank}/{self.nranks})",
                        daemon=True,
                    )
                    self._thread.start()
                self._cond.notify_all()

    @property
    def aborted(self) -> bool:
        """Whether the communicator was aborted (after a failure, or by :meth:`abort`)."""
        return self._aborted

    def check(self) -> None:
        """Raise the error that ended the communicator, if one did."""
        failure = self.failure
        if failure is not None:
            self.reported = True
            raise failure

    def status(self, wait: float = -1) -> int:
        """NCCL's asynchronous status of the communicator (``ncclCommGetAsyncError``); ``0``
        once aborted, or when the lock was not free within ``wait`` seconds (-1: no limit)."""
        if not self.lock.acquire(timeout=wait):
            return 0  # a caller is inside NCCL: look again next round
        try:
            return 0 if self._aborted else self._async_error()
        finally:
            self.lock.release()

    def settle(self, api: str, timeout: float | None = None) -> None:
        """Wait while NCCL says ``ncclInProgress`` for ``api``; an error or ``timeout`` (default:
        the communicator's) aborts the communicator and raises."""
        limit = self.timeout if timeout is None else timeout
        start = time.monotonic()
        deadline = start + limit
        spin_until = start + min(SETTLE_SPIN, limit)
        delay = SETTLE_MIN
        while True:
            self.check()
            if self._aborted:  # status() says 0 then: never success, whatever NCCL had left
                raise closed()
            code = self.status()
            if code == 0:
                return
            now = time.monotonic()
            if code != IN_PROGRESS:
                self.fail(self._status_error(api, code))
            elif now >= deadline:
                self.fail(self.timeout_error(api, limit))
            elif now < spin_until:
                os.sched_yield()  # time.sleep(0) costs the timer's slack, about 60 us on Linux
            else:
                time.sleep(delay)
                delay = min(delay * 2, SETTLE_MAX)

    def wait_idle(self) -> None:
        """Block until every watched operation completed (or raise the error that ended them)."""
        with self._cond:
            while self._pending and self.failure is None and not self._stopping:
                self._cond.wait()
            unfinished = self._stopping and bool(self._pending)
        self.check()
        if unfinished:  # closed or aborted by another thread while this one waited
            raise closed()

    def timeout_error(self, api: str, timeout: float | None = None) -> NCCLTimeoutError:
        t = self.timeout if timeout is None else timeout
        return NCCLTimeoutError(api, self.rank, self.nranks, self.device_id, t)

    def fail(self, error: NCCLError) -> None:
        """Abort the communicator (once), keep ``error`` as its failure (the first one wins),
        and raise it."""
        self._end(error)
        self.check()

    def abort(self) -> None:
        """Abort the communicator now (idempotent); no failure is recorded.

        Waits at most ``ABORT_LOCK_WAIT`` for the lock: a caller stuck inside an NCCL call
        (an enqueue waiting for room, on a rank whose peer died) holds it, and ncclCommAbort
        from this thread is what frees it (NCCL allows that)."""
        got = self.lock.acquire(timeout=ABORT_LOCK_WAIT)
        try:
            if not self._aborted:
                self._aborted = True
                self._abort()
        finally:
            if got:
                self.lock.release()

    def stop(self) -> None:
        """Stop watching and join the thread (from any thread but the watchdog's own)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:
            items = [d for d, _api in self._pending] + list(self.free)
            self._pending.clear()
            self.free.clear()
        for item in items:
            close = getattr(item, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # an event of a context already gone: nothing to free
                    pass

    @property
    def is_alive(self) -> bool:
        """Whether the watchdog thread is running."""
        t = self._thread
        return t is not None and t.is_alive()

    # -- the thread -----------------------------------------------------------------------------

    def _end(self, error: NCCLError) -> None:
        try:
            self.abort()
        finally:
            with self._cond:
                if self.failure is None:
                    self.failure = error
                self._cond.notify_all()

    def _run(self) -> None:
        if self._on_start is not None:
            try:
                self._on_start()
            except Exception:  # the looks below say what is wrong, if anything is
                pass
        delay = WATCH_MIN
        cond, pending = self._cond, self._pending
        while True:
            with cond:
                while not pending and not self._stopping:
                    cond.wait()
                if self._stopping or self.failure is not None:
                    return
                item, api = pending[0]
                since = self._head_since
            try:
                done = item.is_done
                code = 0 if done else self.status(delay)
            except Exception as exc:  # the event or NCCL itself broke: that ends the communicator
                error = (
                    exc
                    if isinstance(exc, NCCLError)
                    else NCCLError(api, type(exc).__name__, str(exc))
                )
                self._end(error)
                return
            if done:
                with cond:
                    if pending and pending[0][0] is item:
                        pending.popleft()
                        self.free.append(item)
                    self._head_since = time.monotonic()
                    if not pending:
                        cond.notify_all()  # wait_idle()
                delay = WATCH_MIN
                continue
            if code not in (0, IN_PROGRESS):
                self._end(self._status_error(api, code))
                return
            if time.monotonic() - since > self.timeout:
                self._end(self.timeout_error(api))
                return
            with cond:
                if not self._stopping:
                    cond.wait(delay)
            delay = min(delay * 2, WATCH_MAX)
