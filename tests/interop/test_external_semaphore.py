"""ExternalSemaphore: the argument rules (CPU tier, on semaphores that hold a made-up handle and
never reach the driver) and semaphores exported by Vulkan (GPU tier: signal and wait from
CUDA streams, several in one call, graph nodes, refused imports)."""

from __future__ import annotations

import os

import pytest

from cuda_core import (
    CUDAError,
    ExternalMemory,
    ExternalSemaphore,
    signal_external_semaphores,
    wait_external_semaphores,
)
from cuda_core._handles._owned import OwnedHandle
from cuda_core._interop._external_semaphore import check_semaphores

# -- CPU tier ---------------------------------------------------------------------------------


def _fake(kind: str) -> ExternalSemaphore:
    """A semaphore whose handle is made up and borrowed (never destroyed, never used)."""
    sem = object.__new__(ExternalSemaphore)
    sem._ref, sem._ctx, sem._device_id, sem._kind = (
        OwnedHandle("external semaphore", 0x1234),
        None,
        0,
        kind,
    )
    return sem


def test_not_constructible():
    with pytest.raises(RuntimeError, match=r"ExternalSemaphore.from_fd\(\)"):
        ExternalSemaphore()


def test_from_fd_checks_before_the_driver():
    with pytest.raises(TypeError, match="fd must be an int"):
        ExternalSemaphore.from_fd("3")
    with pytest.raises(ValueError, match="fd must be an open file descriptor"):
        ExternalSemaphore.from_fd(-5)
    r, w = os.pipe()
    try:
        with pytest.raises(
            ValueError, match=r"kind must be 'binary' or 'timeline' \(got 'fence'\)"
        ):
            ExternalSemaphore.from_fd(r, kind="fence")
        os.fstat(r)
    finally:
        os.close(r)
        os.close(w)


def test_values_follow_each_semaphore_kind():
    b, t = _fake("binary"), _fake("timeline")
    assert check_semaphores([b, t], [None, 7])[1] == [0, 7]
    assert check_semaphores(b, None)[1] == [0]
    assert check_semaphores((t,), [2**64 - 1])[1] == [2**64 - 1]
    with pytest.raises(
        ValueError, match=r"values\[0\] must be None for a binary semaphore .* \(got 3\)"
    ):
        check_semaphores([b], [3])
    with pytest.raises(
        TypeError, match=r"values\[1\] must be an integer in \[0, 2\*\*64\) for a timeline"
    ):
        check_semaphores([b, t], [None, None])
    with pytest.raises(TypeError, match=r"values\[0\] must be an integer in \[0, 2\*\*64\)"):
        check_semaphores([t], None)
    with pytest.raises(ValueError, match=r"values\[0\] must be"):
        check_semaphores([t], [2**64])
    with pytest.raises(ValueError, match=r"values\[0\] must be"):
        check_semaphores([t], [-1])
    with pytest.raises(TypeError, match=r"values\[0\] must be"):
        check_semaphores([t], [1.5])


def test_the_sequences_are_checked():
    b = _fake("binary")
    with pytest.raises(ValueError, match=r"semaphores must be a non-empty sequence"):
        check_semaphores([], None)
    with pytest.raises(TypeError, match=r"semaphores\[1\] must be an ExternalSemaphore"):
        check_semaphores([b, 5], None)
    with pytest.raises(TypeError, match="semaphores must be a sequence"):
        check_semaphores({b}, None)
    with pytest.raises(ValueError, match=r"values must be as long as semaphores \(2 values\)"):
        check_semaphores([b, b], [None])
    with pytest.raises(TypeError, match="values must be None or a sequence"):
        check_semaphores([b], 3)


def test_a_closed_semaphore_is_refused_and_nothing_is_queued():
    t = _fake("timeline")
    t.close()
    t.close()
    assert t.is_closed and t.handle == 0 and "closed" in repr(t)
    with pytest.raises(RuntimeError, match="ExternalSemaphore has been closed"):
        check_semaphores([t], [1])
    # checked before the stream: a bad stream is never reached
    with pytest.raises(RuntimeError, match="ExternalSemaphore has been closed"):
        t.signal(1, stream=object())
    with pytest.raises(ValueError, match="must be None for a binary semaphore"):
        _fake("binary").wait(1, stream=object())
    with pytest.raises(TypeError, match="stream"):
        signal_external_semaphores([_fake("binary")], stream=object())
    with pytest.raises(TypeError, match="stream"):
        wait_external_semaphores([_fake("timeline")], [4], stream=3.5)


def test_facts():
    t = _fake("timeline")
    assert t.is_timeline and t.kind == "timeline" and t.handle == 0x1234
    assert not _fake("binary").is_timeline


# -- GPU tier: semaphores Vulkan exports ------------------------------------------------------


@pytest.fixture
def vk(dev):
    from tests.interop.vulkan_helper import ping_pong, vulkan, vulkan_skip_reason

    why = vulkan_skip_reason()
    if why:
        pytest.skip(why)
    v = vulkan().Vulkan(uuid=ping_pong().device_uuid(dev))
    yield v
    v.close()


def _import_timeline(vk, dev, initial: int = 0) -> tuple[int, ExternalSemaphore]:
    sem = vk.timeline_semaphore(initial)
    fd = vk.semaphore_fd(sem)
    try:
        return sem, ExternalSemaphore.from_fd(fd, kind="timeline", device=dev)
    except BaseException:
        os.close(fd)
        raise


@pytest.mark.gpu
def test_cuda_signals_and_waits_for_vulkan_timelines(dev, vk):
    s = dev.create_stream()
    a, ca = _import_timeline(vk, dev)
    b, cb = _import_timeline(vk, dev, initial=10)
    assert ca.is_timeline and ca.handle and ca.device == dev
    ca.signal(5, stream=s)
    s.sync()
    assert vk.semaphore_value(a) == 5
    signal_external_semaphores([ca, cb], [6, 11], stream=s)  # two in one call
    s.sync()
    assert (vk.semaphore_value(a), vk.semaphore_value(b)) == (6, 11)
    # CUDA waits on the device for values Vulkan's host signals later, then signals past them.
    wait_external_semaphores([ca, cb], [7, 12], stream=s)
    ca.signal(8, stream=s)
    assert vk.semaphore_value(a) == 6  # CUDA's signal of 8 waits behind the wait
    vk.signal_semaphore(b, 12)
    vk.signal_semaphore(a, 7)
    vk.wait_semaphore(a, 8, timeout_ns=5_000_000_000)
    s.sync()
    assert vk.semaphore_value(a) == 8
    for c in (ca, cb):
        c.close()
        assert c.is_closed


@pytest.mark.gpu
def test_binary_semaphore_signal_then_wait(dev, vk):
    s, t = dev.create_stream(), dev.create_stream()
    raw = vk.timeline_semaphore(binary=True)
    fd = vk.semaphore_fd(raw)
    with ExternalSemaphore.from_fd(fd, kind="binary", device=dev) as sem:
        assert not sem.is_timeline
        sem.signal(stream=s)
        sem.wait(stream=t)
        t.sync()
        s.sync()
        with pytest.raises(ValueError, match="must be None for a binary semaphore"):
            sem.signal(1, stream=s)


@pytest.mark.gpu
def test_graph_nodes_signal_and_wait(dev, vk):
    from cuda_core.graph import (
        ExternalSemaphoresSignalNode,
        ExternalSemaphoresWaitNode,
        GraphDefinition,
    )

    s = dev.create_stream()
    a, ca = _import_timeline(vk, dev)
    g = GraphDefinition()
    w = g.wait_external_semaphores([ca], [1])
    n = w.signal_external_semaphores([ca], [2])
    assert isinstance(w, ExternalSemaphoresWaitNode) and isinstance(n, ExternalSemaphoresSignalNode)
    assert n.semaphores == (ca,) and n.values == (2,) and w.values == (1,)
    graph = g.instantiate()
    ca.close()  # the graph holds the import
    graph.launch(s)
    vk.signal_semaphore(a, 1)
    vk.wait_semaphore(a, 2, timeout_ns=5_000_000_000)
    s.sync()
    assert vk.semaphore_value(a) == 2
    graph.close()
    g.close()


@pytest.mark.gpu
def test_a_descriptor_of_the_wrong_kind_is_refused_and_stays_the_callers(dev, vk):
    sem = vk.timeline_semaphore()
    fd = vk.semaphore_fd(sem)
    try:
        with pytest.raises(CUDAError, match=r"cuImportExternalMemory: .*still the caller's"):
            ExternalMemory.from_fd(fd, 4096, device=dev)
        os.fstat(fd)
    finally:
        os.close(fd)
