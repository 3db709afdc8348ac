"""The watchdog of a communicator: a thread that turns a hang or an asynchronous NCCL error into
an abort and an error, so that no rank waits forever for a rank that died.

A collective is enqueued on its stream and returns at once; an event recorded after it says when
it completed. The watchdog thread looks at the oldest unfinished one with sleeps that grow from
1 ms to 100 ms (it never spins) and, between looks, asks NCCL for the communicator's asynchronous
error. While a thread waits for the work (``wait()``, ``barrier()``) it looks more often: it
yields for the first 2 ms, then sleeps from 0.1 ms up to 2 ms, so the waiter learns of the
completion within about 2 ms without a core burnt for a long wait. A blocking NCCL call
(``ncclCommDestroy``, and each collective's own call, which a blocking communicator may spend
waiting) is watched the same way, as an item that completes when the call returns.
When NCCL reports an error, or the oldest item has been the oldest for longer than the timeout,
it aborts the communicator (NCCL stops its kernels, so the streams move on) and keeps the error;
the next call on the communicator, on any thread, raises it. The thread starts with the first
item and is joined by ``stop()`` (``close()``, ``abort()``, collection).

Locks: ``lock`` is held around every NCCL call on the communicator (and around the bookkeeping
of a collective: one acquisition per call). The queue of items and the pool of completed events
are changed with single deque/list operations, atomic in CPython, so the thread reads them while
a caller holds ``lock`` inside a blocking NCCL call. ``_cond`` (its own lock) only puts the thread
and the waiters to sleep and wakes them. The abort is decided once, under ``_guard``: exactly one
party calls ``ncclCommAbort``; the others wait until it returned.

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
from typing import Any, NoReturn

from ._errors import NCCLError, NCCLTimeoutError, closed

__all__: list[str] = []  # private module

IN_PROGRESS = 7  # ncclInProgress
WATCH_MIN, WATCH_MAX = 0.001, 0.1  # the watchdog's sleeps between looks, seconds
SETTLE_MIN, SETTLE_MAX = 0.0001, 0.05  # a caller's sleeps while NCCL says ncclInProgress
# ...after this long of polling without sleeping: a non-blocking communicator answers most calls
# ncclInProgress while it enqueues the work, which takes microseconds, and the shortest sleep
# costs 100 us or more (an all-reduce of 1 MiB takes about 50 us on two H200s).
SETTLE_SPIN = 0.002
WAIT_MAX = 0.002  # the watchdog's longest sleep while a thread waits for the work (wait_idle)
ABORT_LOCK_WAIT = 1.0  # seconds an abort waits for a caller's NCCL call to return


class Blocking:
    """The completion object of a blocking NCCL call: done once the call returned."""

    __slots__ = ("is_done",)

    def __init__(self) -> None:
        self.is_done = False


def pool_key(st: Any) -> Any:
    """The key of the event pool for stream ``st``: its context (an event is recorded only on a
    stream of the context it was made in), or the stream itself when its context is unknown."""
    h = st._h
    ctx = h.ctx
    return h.address if ctx is None else ctx.address


class Watchdog:
    """The fault state of one communicator and the thread that watches its work.

    ``lock`` is held around every NCCL call on the communicator, so the watchdog never aborts
    it under a caller's feet (except a caller stuck inside NCCL for ``ABORT_LOCK_WAIT``, which
    only the abort frees). ``failure`` is the error that ended it (``None`` while it works).
    ``grouped`` counts the open ``nccl.group()`` blocks holding calls of the communicator: an
    abort then waits for the end of the group (``group_left``), which runs under ``lock``.
    """

    __slots__ = (
        "__weakref__",
        "_abort",
        "_abort_done",
        "_abort_due",
        "_aborted",
        "_async_error",
        "_cond",
        "_guard",
        "_head_since",
        "_on_start",
        "_pending",
        "_status_error",
        "_stopped_with_work",
        "_stopping",
        "_thread",
        "_wait_gen",
        "_waiters",
        "device_id",
        "failure",
        "finalized",
        "free",
        "grouped",
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
        self._guard = threading.Lock()  # decides which party aborts
        self._abort_done = threading.Event()
        self._pending: deque[tuple[Any, str, Any]] = deque()  # (item, api, pool key or None)
        self._head_since = 0.0
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._stopped_with_work = False  # stop() found work not yet completed
        self._aborted = False  # NCCL's communicator is gone (aborted, or destroyed) or going
        self._abort_due = False  # an abort waits for the end of the open groups
        self._waiters = 0
        self._wait_gen = 0
        self.grouped = 0
        self.failure: NCCLError | None = None
        self.reported = False  # whether a call raised the failure yet
        self.finalized = 0  # 1: ncclCommFinalize called, 2: and settled (close() only destroys)
        self.free: dict[Any, list[Any]] = {}  # completed events by context, to re-record

    # -- the caller's side ----------------------------------------------------------------------

    def watch(self, done: Any, api: str, key: Any = None) -> None:
        """Watch ``done`` (``done.is_done`` turns true when the work of ``api`` completed); once
        done it goes to the pool ``free[key]`` for reuse, unless ``key`` is ``None``."""
        pending = self._pending
        if self._stopping:
            return
        pending.append((done, api, key))
        if len(pending) == 1 or self._thread is None:  # the thread may sleep, or not exist
            self._head_since = time.monotonic()
            with self._cond:
                if self._thread is None and not self._stopping:
                    self._thread = threading.Thread(
                        target=self._run,
                        name=f"cuda_core.nccl watchdog (rank {self.rank}/{self.nranks})",
                        daemon=True,
                    )
                    self._thread.start()
                self._cond.notify_all()

    def watch_call(self, api: str) -> Blocking:
        """Watch an NCCL call about to be made (its mark's ``is_done`` is set when it returned)."""
        mark = Blocking()
        self.watch(mark, api)
        return mark

    def record_locked(self, st: Any, api: str) -> None:
        """With ``lock`` held: record an event (one from the pool of ``st``'s context when one is
        free) on ``st`` after the work of ``api`` and watch it."""
        key = pool_key(st)
        pool = self.free.get(key)
        event = st.record(pool.pop()) if pool else st.record()
        self.watch(event, api, key)

    def poll_locked(self) -> int:
        """With ``lock`` held: NCCL's asynchronous status; raises when the communicator ended."""
        if self._aborted or self.failure is not None:
            self.raise_ended()
        return self._async_error()

    def raise_ended(self) -> NoReturn:
        """Raise the failure that ended the communicator, else that it was closed or aborted."""
        self.check()
        raise closed()

    def call(self, api: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, an NCCL call that returns at once, under ``lock``."""
        with self.lock:
            if self._aborted or self.failure is not None:
                self.raise_ended()
            return fn(*args)

    def blocking(self, api: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, an NCCL call that may block, under ``lock`` and watched: after the
        timeout the watchdog aborts the communicator (which ends the call) and this raises
        :class:`NCCLTimeoutError` (or the error that ended the communicator meanwhile)."""
        mark = self.watch_call(api)
        try:
            with self.lock:
                if self._aborted or self.failure is not None:
                    self.raise_ended()
                try:
                    result = fn(*args)
                except Exception:
                    if self.failure is not None:  # the abort ended the call: say why
                        self.raise_ended()
                    raise
                if self.failure is not None:  # it returned because it was aborted
                    self.raise_ended()
                return result
        finally:
            mark.is_done = True

    def gone(self) -> bool:
        """Mark NCCL's communicator freed (destroyed); ``False`` when an abort took it first."""
        with self._guard:
            first = not self._aborted
            self._aborted = True
        if first:
            self._abort_done.set()
        return first

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
        lock = self.lock
        if not (lock.acquire(False) if wait == 0 else lock.acquire(timeout=wait)):
            return 0  # a caller is inside NCCL: look again next round
        try:
            return 0 if self._aborted else self._async_error()
        finally:
            lock.release()

    def settle(self, api: str, timeout: float | None = None, code: int | None = None) -> None:
        """Wait while NCCL says ``ncclInProgress`` for ``api`` (``code``: what NCCL said last,
        so it is not asked again at once); an error or ``timeout`` (default: the
        communicator's) aborts the communicator and raises."""
        limit = self.timeout if timeout is None else timeout
        start = time.monotonic()
        deadline = start + limit
        spin_until = start + min(SETTLE_SPIN, limit)
        delay = SETTLE_MIN
        while True:
            self.check()
            if self._aborted:  # status() says 0 then: never success, whatever NCCL had left
                raise closed()
            if code is None:
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
            code = None

    def wait_idle(self) -> None:
        """Block until every watched operation completed (or raise the error that ended them).

        The watchdog thread looks often while someone waits (see the module's docstring)."""
        cond = self._cond
        with cond:
            self._waiters += 1
            self._wait_gen += 1
            cond.notify_all()  # cut the thread's sleep short
            try:
                while self._pending and self.failure is None and not self._stopping:
                    cond.wait()
            finally:
                self._waiters -= 1
            # stop() empties the queue once the thread is joined: a waiter woken by it may get
            # the lock only after that, so whether work was left is kept when stop() begins
            unfinished = self._stopping and (bool(self._pending) or self._stopped_with_work)
        self.check()
        if unfinished:  # closed or aborted by another thread while this one waited
            raise closed()

    def timeout_error(self, api: str, timeout: float | None = None) -> NCCLTimeoutError:
        t = self.timeout if timeout is None else timeout
        return NCCLTimeoutError(api, self.rank, self.nranks, self.device_id, t)

    def fail(self, error: NCCLError) -> NoReturn:
        """Keep ``error`` as the failure (the first one wins), abort the communicator (once),
        and raise the failure."""
        self._end(error)
        self.raise_ended()

    def abort(self) -> None:
        """Abort the communicator now (idempotent); no failure is recorded.

        Exactly one party calls ``ncclCommAbort``; any other returns once it returned. Waits at
        most ``ABORT_LOCK_WAIT`` for the lock: a caller stuck inside an NCCL call (an enqueue
        waiting for room, on a rank whose peer died, or ``ncclCommDestroy``) holds it, and
        ncclCommAbort from this thread is what frees it (NCCL allows that). With the lock and
        an open group holding calls of the communicator, the abort is left to the group's end
        (after ``ncclGroupEnd``): NCCL still holds those calls for this communicator."""
        got = self.lock.acquire(timeout=ABORT_LOCK_WAIT)
        try:
            with self._guard:
                first = not self._aborted
                self._aborted = True
            if first:
                try:
                    if got and self.grouped:
                        self._abort_due = True
                    else:
                        self._abort()
                finally:
                    self._abort_done.set()
        finally:
            if got:
                self.lock.release()
        if not first:
            self._abort_done.wait()

    def group_left(self) -> None:
        """With ``lock`` held, after ``ncclGroupEnd``: one group fewer holds calls of this
        communicator; the abort left to the group's end runs now."""
        self.grouped -= 1
        if not self.grouped and self._abort_due:
            self._abort_due = False
            self._abort()

    def stop(self) -> None:
        """Stop watching and join the thread (from any thread but the watchdog's own)."""
        with self._cond:
            self._stopping = True
            self._stopped_with_work = self._stopped_with_work or bool(self._pending)
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:
            items = [d for d, _api, _key in self._pending]
            self._pending.clear()
            for pool in self.free.values():
                items += pool
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
        with self._cond:  # first: a caller the abort frees raises this, not NCCL's own error
            if self.failure is None:
                self.failure = error
            self._cond.notify_all()
        self.abort()

    def _run(self) -> None:
        if self._on_start is not None:
            try:
                self._on_start()
            except Exception:  # the looks below say what is wrong, if anything is
                pass
        delay = WATCH_MIN
        cond, pending = self._cond, self._pending
        seen_gen, hurry_since, hurry_delay = 0, 0.0, SETTLE_MIN
        while True:
            if self._stopping or self.failure is not None:
                return
            if not pending:
                with cond:
                    if not pending and not self._stopping:
                        cond.wait()
                delay = WATCH_MIN
                continue
            item, api, key = pending[0]
            since = self._head_since
            hurry = self._waiters > 0
            try:
                done = item.is_done
                code = 0 if done else self.status(0 if hurry else delay)
            except Exception as exc:  # the event or NCCL itself broke: that ends the communicator
                error = (
                    exc
                    if isinstance(exc, NCCLError)
                    else NCCLError(api, type(exc).__name__, str(exc))
                )
                self._end(error)
                return
            if done:
                pending.popleft()  # only this thread takes items off (stop() after joining it)
                self._head_since = time.monotonic()
                if key is not None:
                    self.free.setdefault(key, []).append(item)
                if not pending:
                    with cond:
                        cond.notify_all()  # wait_idle()
                delay = WATCH_MIN
                continue
            if code not in (0, IN_PROGRESS):
                self._end(self._status_error(api, code))
                return
            now = time.monotonic()
            if now - since > self.timeout:
                self._end(self.timeout_error(api))
                return
            with cond:
                if self._stopping:
                    continue
                if self._waiters:  # someone waits: yield at first, then short sleeps
                    if self._wait_gen != seen_gen:
                        seen_gen, hurry_since, hurry_delay = self._wait_gen, now, SETTLE_MIN
                    if now - hurry_since < SETTLE_SPIN:
                        pause = 0.0
                    else:
                        pause, hurry_delay = hurry_delay, min(hurry_delay * 2, WAIT_MAX)
                else:
                    pause, delay = delay, min(delay * 2, WATCH_MAX)
                if pause:
                    cond.wait(pause)  # wait_idle() cuts it short
            if not pause:
                os.sched_yield()
