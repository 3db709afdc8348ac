"""Graph nodes share the memory of the Buffers they use: closing a Buffer while a graph (or a
driver clone of it) can still run frees nothing until the graph goes, as in cuda.core. What a
graph kept is let go of on the main thread, never on the driver's or a worker's thread."""

from __future__ import annotations

import ctypes
import gc
import threading
import time
import warnings

import numpy as np
import pytest
from cuda.bindings import driver

import cuda_core.graph as G
from cuda_core import Buffer, CUDAWarning, DeviceMemoryResource
from cuda_core import _trampolines as table
from cuda_core._utils import handle_return
from tests.helpers import settled_kept_callbacks
from tests.memory.test_memory import HostIntResource


class CudaMallocResource(HostIntResource):
    """cuMemAlloc/cuMemFree, recording each free and the thread it ran on (a device resource
    of device 0, as the CPU tier's user-written resource it extends)."""

    def __init__(self):
        super().__init__()
        self.freed: list[tuple[int, int]] = []  # type: ignore[assignment]

    def allocate(self, size, *, stream=None):
        ptr = handle_return(driver.cuMemAlloc(size), "cuMemAlloc")
        return Buffer.from_handle(int(ptr), size, mr=self)

    def deallocate(self, ptr, size, *, stream=None):
        # Recorded once the memory is really freed: cuMemFree refuses inside a driver callback
        # (CUDA_ERROR_NOT_PERMITTED), which must never be where this runs.
        handle_return(driver.cuMemFree(int(ptr)), "cuMemFree")
        self.freed.append((int(ptr), threading.get_ident()))


def _read(ptr, n):
    out = (ctypes.c_uint8 * n)()
    handle_return(driver.cuMemcpyDtoH(out, ptr, n), "cuMemcpyDtoH")
    return list(out)


def _run(g, dev):
    s = dev.create_stream()
    g.instantiate().launch(s)
    s.sync()


def _spin_until(predicate, seconds=10.0):
    end = time.monotonic() + seconds
    while not predicate() and time.monotonic() < end:
        gc.collect()  # bytecode too: the main thread runs CPython's pending calls between
        time.sleep(0.005)
    return predicate()


@pytest.mark.gpu
def test_memset_and_memcpy_run_on_buffers_closed_after_the_nodes_were_added(dev):
    mr = DeviceMemoryResource(dev)
    a = mr.allocate(64, stream=dev.default_stream)
    b = mr.allocate(64, stream=dev.default_stream)
    dev.default_stream.sync()
    pa, pb = int(a.handle), int(b.handle)
    g = G.GraphDefinition()
    g.memset(a, 0x5A, 64).memcpy(b, a, 64)
    a.close()
    b.close()
    _run(g, dev)
    assert _read(pb, 64) == [0x5A] * 64
    assert _read(pa, 64) == [0x5A] * 64


@pytest.mark.gpu
def test_raw_pointers_with_buffer_owners_keep_the_memory(dev):
    mr = DeviceMemoryResource(dev)
    a = mr.allocate(16, stream=dev.default_stream)
    b = mr.allocate(16, stream=dev.default_stream)
    dev.default_stream.sync()
    pa, pb = int(a.handle), int(b.handle)
    g = G.GraphDefinition()
    n = g.memset(pa, np.uint32(0x01020304), 4, dst_owner=a)
    n.memcpy(pb, pa, 16, dst_owner=b, src_owner=a)
    a.close()
    b.close()
    _run(g, dev)
    assert _read(pb, 16) == [4, 3, 2, 1] * 4


@pytest.mark.gpu
def test_the_memory_is_freed_once_when_the_graph_goes_and_on_the_main_thread(dev):
    mr = CudaMallocResource()
    buf = mr.allocate(256)
    ptr = int(buf.handle)
    g = G.GraphDefinition()
    g.memset(buf, 0x11, 256)
    buf.close()
    assert mr.freed == []  # the graph still shares it
    _run(g, dev)
    assert _read(ptr, 256) == [0x11] * 256
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del g  # the driver may call the destructor here, on this thread, inside cuGraphDestroy
        assert _spin_until(lambda: mr.freed), f"the memory outlived the graph: {caught}"
        time.sleep(0.05)
        gc.collect()
    assert mr.freed == [(ptr, threading.main_thread().ident)]
    assert [w for w in caught if issubclass(w.category, CUDAWarning)] == []


@pytest.mark.gpu
def test_an_unshared_buffer_is_still_freed_at_close(dev):
    mr = CudaMallocResource()
    buf = mr.allocate(32)
    ptr = int(buf.handle)
    buf.close()
    assert mr.freed == [(ptr, threading.get_ident())]


@pytest.mark.gpu
def test_a_driver_clone_keeps_closed_buffers_after_the_definition_is_gone(dev):
    mr = CudaMallocResource()
    src, dst = mr.allocate(8), mr.allocate(8)
    handle_return(driver.cuMemsetD8(int(src.handle), 0x77, 8), "cuMemsetD8")
    pdst = int(dst.handle)
    g = G.GraphDefinition()
    g.memcpy(dst, src, 8)
    clone = handle_return(driver.cuGraphClone(driver.CUgraph(int(g.handle))), "cuGraphClone")
    src.close()
    dst.close()
    del g
    gc.collect()
    time.sleep(0.05)
    gc.collect()
    assert mr.freed == []  # the clone's user objects hold the shares
    exe = handle_return(driver.cuGraphInstantiate(clone, 0), "cuGraphInstantiate")
    s = dev.create_stream()
    handle_return(driver.cuGraphLaunch(exe, driver.CUstream(int(s.handle))), "cuGraphLaunch")
    s.sync()
    assert _read(pdst, 8) == [0x77] * 8
    handle_return(driver.cuGraphExecDestroy(exe), "cuGraphExecDestroy")
    handle_return(driver.cuGraphDestroy(clone), "cuGraphDestroy")
    assert _spin_until(lambda: len(mr.freed) == 2), "the clone's buffers were never freed"
    assert {t for _, t in mr.freed} == {threading.main_thread().ident}


class _Recording:
    """A host callback that records the thread it is finalized on."""

    def __init__(self, threads):
        self.threads = threads

    def __call__(self):
        pass

    def __del__(self):
        self.threads.append(threading.get_ident())


@pytest.mark.gpu
def test_a_graph_dropped_on_a_worker_thread_finalizes_its_callbacks_on_the_main_thread(dev):
    threads: list[int] = []
    holder = [G.GraphDefinition()]
    holder[0].callback(_Recording(threads))
    t = threading.Thread(target=holder.clear)
    t.start()
    t.join()
    assert _spin_until(lambda: threads)
    assert threads == [threading.main_thread().ident]


@pytest.mark.gpu
def test_a_full_pending_call_queue_delays_the_release_to_the_next_graph_hold(dev):
    pending = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
    add = ctypes.pythonapi.Py_AddPendingCall
    add.argtypes = [pending, ctypes.c_void_p]
    add.restype = ctypes.c_int
    noop = pending(lambda _: 0)
    threads: list[int] = []
    # Earlier graphs' entries gone, so the count is ours; and no drain queued before the queue
    # fills (one queued earlier would run after join() and drain this graph's too).
    kept_before = settled_kept_callbacks()
    holder = [G.GraphDefinition()]
    holder[0].callback(_Recording(threads))
    filled: list[bool] = []
    state: list[tuple[int, bool, int]] = []  # (refusals, a drain queued, entries handed over)

    def fill_then_drop():
        while add(noop, None) == 0:
            pass
        # The main thread runs pending calls until it blocks in join(): top the queue up after.
        time.sleep(0.05)
        while add(noop, None) == 0:
            pass
        filled.append(True)
        refused = table.refused_drains()
        holder.clear()
        # Keep the queue full until the driver's thread has let go of every user object of the
        # graph and both hand-overs (the definition's own, here, and the driver's) have been
        # refused (the main thread runs no pending call while it waits in join()). The entry
        # leaves the table before the driver's hand-over asks: the count alone is not enough.
        end = time.monotonic() + 10
        while (
            table.pending_callbacks()[1] > kept_before or table.refused_drains() < refused + 2
        ) and time.monotonic() < end:
            time.sleep(0.001)
        state.append((table.refused_drains() - refused, table._drain_queued, len(table._released)))

    t = threading.Thread(target=fill_then_drop)
    t.start()
    t.join()
    assert filled == [True]
    assert table.pending_callbacks()[1] <= kept_before  # the driver released them meanwhile
    time.sleep(0.1)
    sum(range(1000))
    assert threads == [], state  # no room in the queue, and never finalized off the main thread
    later = G.GraphDefinition()
    later.callback(lambda: None)  # a new hold asks CPython again
    assert _spin_until(lambda: threads)
    assert threads == [threading.main_thread().ident]
