"""Memory a Buffer shares with graph nodes (CPU tier: a user-written resource with fake
addresses, never dereferenced), and the main-thread release of what graphs let go of."""

from __future__ import annotations

import gc
import threading
import time

from cuda_core import _trampolines as table
from cuda_core._memory._shared import Share, SharedAllocation, share
from tests.memory.test_memory import HostIntResource


def test_an_unshared_buffer_is_freed_at_close():
    mr = HostIntResource()
    buf = mr.allocate(16)
    buf.close()
    assert [f[:2] for f in mr.freed] == [(0x10000, 16)]


def test_a_share_keeps_the_memory_past_close_and_frees_it_when_it_goes():
    mr = HostIntResource()
    buf = mr.allocate(16)
    held = share(buf)
    assert isinstance(held, Share) and type(buf._h) is SharedAllocation
    buf.close()
    assert buf.is_closed
    assert mr.freed == [] and mr.live == {0x10000: 16}  # the graph's share holds it
    del held
    gc.collect()
    assert [f[:2] for f in mr.freed] == [(0x10000, 16)] and mr.live == {}


def test_the_memory_lives_until_the_last_of_several_shares_goes():
    mr = HostIntResource()
    buf = mr.allocate(8)
    first, second = share(buf), share(buf)
    assert type(buf._h) is SharedAllocation  # wrapped once
    buf.close()
    del first
    gc.collect()
    assert mr.freed == []
    del second
    gc.collect()
    assert len(mr.freed) == 1


def test_a_buffer_still_open_after_its_shares_go_is_freed_by_its_close():
    mr = HostIntResource()
    buf = mr.allocate(8)
    held = share(buf)
    del held
    gc.collect()
    assert mr.freed == []  # the buffer still owns it
    buf.close()
    assert len(mr.freed) == 1
    buf.close()  # idempotent
    assert len(mr.freed) == 1


def test_a_view_that_owns_nothing_is_kept_as_itself():
    from cuda_core import Buffer

    owner = object()
    view = Buffer.from_handle(0x2000, 4, owner=owner)
    assert share(view) is view


class _Finalized:
    def __init__(self, threads):
        self.threads = threads

    def __del__(self):
        self.threads.append(threading.get_ident())


def _spin_until(predicate, seconds=5.0):
    end = time.monotonic() + seconds
    while not predicate() and time.monotonic() < end:
        sum(range(100))  # bytecode: the main thread runs CPython's pending calls between
        time.sleep(0.001)
    return predicate()


def test_what_a_worker_thread_releases_is_finalized_on_the_main_thread():
    threads: list[int] = []

    def worker():
        table.release_on_main_thread(_Finalized(threads))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert _spin_until(lambda: threads)
    assert threads == [threading.main_thread().ident]


def test_a_release_on_the_main_thread_is_immediate():
    threads: list[int] = []
    table.release_on_main_thread(_Finalized(threads))
    assert threads == [threading.main_thread().ident]
