"""Contexts made by Device.create_context, green contexts and device resources.

CPU tier: options and argument checking, names, direct construction refused. GPU tier: the
device's SMs split into two green contexts, a kernel on a stream of each records ``%smid`` of
every block, and each context's SM ids are disjoint from the other's and fit its partition;
plain contexts (``cuCtxCreate``) are current-able, their streams and events work, closing is
idempotent and a closed context refuses new streams; asking for more SMs than exist is a
clear error after which the process keeps working.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import cuda_core
from cuda_core import (
    Context,
    ContextOptions,
    CUDAWarning,
    DeviceResources,
    SMResource,
    SMResourceOptions,
    WorkqueueResource,
    WorkqueueResourceOptions,
)
from cuda_core._context import _check_resources

# -- CPU tier ---------------------------------------------------------------------------------


def test_public_names():
    for name in ("ContextOptions", "DeviceResources", "SMResource", "SMResourceOptions",
                 "WorkqueueResource", "WorkqueueResourceOptions"):  # fmt: skip
        assert name in cuda_core.__all__


@pytest.mark.parametrize("cls", [DeviceResources, SMResource, WorkqueueResource, Context])
def test_not_constructible(cls):
    with pytest.raises(RuntimeError, match="directly"):
        cls()


def test_context_options_fields():
    assert [f.name for f in dataclasses.fields(ContextOptions)] == ["resources"]
    with pytest.raises(TypeError):
        ContextOptions()  # resources is required, as in cuda.core


def test_sm_options_defaults_and_groups():
    opts = SMResourceOptions()
    assert (opts.count, opts.coscheduled_sm_count, opts.preferred_coscheduled_sm_count, opts.backfill) == (
        None, None, None, False)  # fmt: skip
    assert opts._groups() == [(0, 0, 0, False)]
    assert SMResourceOptions(count=16)._groups() == [(16, 0, 0, False)]
    groups = SMResourceOptions(
        count=[8, 16], coscheduled_sm_count=2, backfill=[False, True]
    )._groups()
    assert groups == [(8, 2, 0, False), (16, 2, 0, True)]


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"count": []}, ValueError, "non-empty"),
        ({"count": "8"}, TypeError, "count must be"),
        ({"count": 1.5}, TypeError, "count must be"),
        ({"count": -2}, ValueError, "non-negative"),
        ({"count": [8, -2]}, ValueError, "non-negative"),
        ({"count": True}, TypeError, "count must be"),
        ({"count": 8, "coscheduled_sm_count": [2, 2]}, ValueError, "count is scalar"),
        ({"count": [8, 8], "preferred_coscheduled_sm_count": [2]}, ValueError, "expected 2"),
        ({"count": [8, 8], "backfill": [True]}, ValueError, "expected 2"),
        ({"count": [8, 8], "coscheduled_sm_count": [2, 2, 2]}, ValueError, "expected 2 entries"),
        ({"count": 8, "backfill": 1}, TypeError, "backfill must be a bool"),
    ],
)
def test_sm_options_checked(kwargs, exc, match):
    opts = SMResourceOptions(**kwargs)  # constructing is lenient, as in cuda.core; split() checks
    with pytest.raises(exc, match=match):
        opts._groups()


def test_workqueue_options_checked():
    assert WorkqueueResourceOptions().sharing_scope is None
    assert WorkqueueResourceOptions(sharing_scope="device_ctx").sharing_scope == "device_ctx"
    from cuda_core.typing import WorkqueueSharingScopeType

    opts = WorkqueueResourceOptions(
        sharing_scope=WorkqueueSharingScopeType.GREEN_CTX_BALANCED, concurrency_limit=4
    )
    assert opts.concurrency_limit == 4
    # the wording of cuda.core's messages, which code written for it may match on
    with pytest.raises(
        ValueError, match=r"'everyone' is not a valid WorkqueueSharingScopeType\. Must be None"
    ):
        WorkqueueResourceOptions(sharing_scope="everyone")
    with pytest.raises(ValueError, match="concurrency_limit must be >= 1"):
        WorkqueueResourceOptions(concurrency_limit=0)
    with pytest.raises(ValueError, match="concurrency_limit must be >= 1"):
        WorkqueueResourceOptions(concurrency_limit=-3)
    with pytest.raises(TypeError, match="concurrency_limit must be"):
        WorkqueueResourceOptions(concurrency_limit="many")


@pytest.mark.parametrize("resources", [[], "sm", 5, [object()]])
def test_context_resources_checked(resources):
    with pytest.raises((TypeError, ValueError), match=r"ContextOptions\.resources must be"):
        _check_resources(resources, 0)


def test_context_resources_none_refused():
    # cuda.core's class and wording for ContextOptions(resources=None)
    with pytest.raises(ValueError, match="resources must be provided"):
        _check_resources(None, 0)


def test_dry_run_results_refused():
    from cuda.bindings import driver

    res = SMResource._wrap(driver.CUdevResource(), 0, usable=False)
    with pytest.raises(ValueError, match="dry-run SMResource"):  # cuda.core's wording
        _check_resources([res], 0)
    with pytest.raises(ValueError, match="dry-run"):
        res.split(SMResourceOptions(count=8))
    with pytest.raises(TypeError, match="options must be"):
        res.split(None)


def test_other_device_resources_refused():
    from cuda.bindings import driver

    res = SMResource._wrap(driver.CUdevResource(), 1)
    with pytest.raises(ValueError, match="resources of device 0"):
        _check_resources([res], 0)


# -- GPU tier ---------------------------------------------------------------------------------

SMID_SRC = r"""
extern "C" __global__ void record_smid(unsigned int* out, long long spin) {
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    if (threadIdx.x == 0) {
        out[blockIdx.x] = smid;
        long long start = clock64();
        while (clock64() - start < spin) { }
    }
}
"""


def _smid_kernel(dev):
    from cuda_core import Program, ProgramOptions

    prog = Program(SMID_SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    return prog.compile("cubin").get_kernel("record_smid")


def _green_supported(dev):
    try:
        _ = dev.resources.sm
    except NotImplementedError as exc:
        pytest.skip(f"no green contexts here: {exc}")


def _run_smids(dev, stream, kernel, nblocks):
    from cuda_core import LaunchConfig, launch

    buf = dev.allocate(4 * nblocks, stream=stream)
    launch(stream, LaunchConfig(grid=nblocks, block=32), kernel, buf, np.int64(100_000))
    host = np.zeros(nblocks, dtype=np.uint32)
    buf.copy_to(host, stream=stream)
    stream.sync()
    buf.close()
    return set(host.tolist())


@pytest.mark.gpu
def test_device_resources(dev):
    _green_supported(dev)
    sm = dev.resources.sm
    assert sm.sm_count == dev.properties.multiprocessor_count
    assert sm.min_partition_size >= 1 and sm.coscheduled_alignment >= 1
    assert isinstance(sm.handle, int) and sm.handle
    assert dev.context.resources.sm.sm_count == sm.sm_count  # the primary context: the whole device


@pytest.mark.gpu
def test_green_contexts_use_disjoint_sms(dev):
    _green_supported(dev)
    sm = dev.resources.sm
    size = max(16, sm.min_partition_size)
    groups, rest = sm.split(SMResourceOptions(count=[size, size]))
    assert len(groups) == 2
    assert all(g.sm_count >= size for g in groups)
    assert sum(g.sm_count for g in groups) + rest.sm_count == sm.sm_count
    kernel = _smid_kernel(dev)
    seen = []
    ctxs = [dev.create_context(ContextOptions(resources=[g])) for g in groups]
    try:
        for ctx, group in zip(ctxs, groups):
            assert ctx.is_green and not ctx.is_closed
            assert ctx.resources.sm.sm_count == group.sm_count
            s = ctx.create_stream()
            assert s.context == ctx and s.context.is_green
            assert s.resources.sm.sm_count == group.sm_count
            ids = _run_smids(dev, s, kernel, 4 * sm.sm_count)
            assert 0 < len(ids) <= group.sm_count, (ids, group.sm_count)
            assert max(ids) < sm.sm_count
            ev = s.record()
            ev.sync()
            assert ev.is_done
            seen.append(ids)
        assert not (seen[0] & seen[1]), seen
    finally:
        for ctx in ctxs:
            ctx.close()
    assert all(c.is_closed and c.handle is None for c in ctxs)
    # The primary context still uses every SM afterwards.
    s = dev.create_stream()
    assert len(_run_smids(dev, s, kernel, 8 * sm.sm_count)) > 2 * size
    s.close()


@pytest.mark.gpu
def test_too_many_sms_is_a_clear_error_and_the_process_goes_on(dev):
    from cuda_core import CUDAError

    _green_supported(dev)
    sm = dev.resources.sm
    with pytest.raises(CUDAError, match=f"has {sm.sm_count}"):
        sm.split(SMResourceOptions(count=[sm.sm_count, sm.sm_count]))
    with pytest.raises(CUDAError):
        sm.split(SMResourceOptions(count=sm.sm_count + 8))
    groups, _ = sm.split(SMResourceOptions(count=max(8, sm.min_partition_size)))
    with dev.create_context(ContextOptions(resources=groups)) as ctx:
        s = ctx.create_stream()
        kernel = _smid_kernel(dev)
        assert _run_smids(dev, s, kernel, 64)
    assert ctx.is_closed and s.is_closed


@pytest.mark.gpu
def test_green_context_streams_events_and_close(dev):
    from cuda_core import StreamOptions

    _green_supported(dev)
    groups, _ = dev.resources.sm.split(
        SMResourceOptions(count=max(8, dev.resources.sm.min_partition_size))
    )
    ctx = dev.create_context(ContextOptions(resources=groups[:1]))
    try:
        # Green contexts take non-blocking streams only (cuda.core's class and wording).
        for blocking in (StreamOptions(nonblocking=False), {"nonblocking": False}):
            with pytest.raises(ValueError, match="must be non-blocking"):
                ctx.create_stream(blocking)
        s = ctx.create_stream(StreamOptions(nonblocking=True, priority=None))
        assert s.is_nonblocking and s.context == ctx
        # An event recorded on a green context's stream reports that context.
        ev = s.record()
        assert ev.context.is_green and ev.context == ctx
        assert ev.context is s.context
        ev.sync()
        ev2 = s.record(options={"timing_enabled": True})
        assert ev2.context == ctx
        ev2.sync()
        # An event of the primary context still reports the primary context.
        with dev.create_stream() as ps:
            pe = ps.record()
            assert pe.context == dev.context and not pe.context.is_green
            pe.sync()
        # A current context cannot be closed (cuda.core's class and wording).
        prev = dev.set_current(ctx)
        try:
            with pytest.raises(RuntimeError, match="while it is current"):
                ctx.close()
            assert not ctx.is_closed
        finally:
            dev.set_current(prev)
    finally:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ctx.close()  # its streams go first: none is left detached to fail later
    assert [str(w.message) for w in caught if issubclass(w.category, CUDAWarning)] == []
    assert ctx.is_closed and s.is_closed and ev.is_closed
    # A plain context (our extension) keeps taking blocking streams.
    with dev.create_context() as plain:
        bs = plain.create_stream(StreamOptions(nonblocking=False))
        assert not bs.is_nonblocking
        bs.sync()


@pytest.mark.gpu
def test_create_context_resources_must_be_provided(dev):
    _green_supported(dev)
    with pytest.raises(ValueError, match="resources must be provided"):
        dev.create_context(ContextOptions(resources=None))
    with pytest.raises(ValueError, match="resources must be provided"):
        dev.create_context({"resources": None})
    with pytest.raises(TypeError):
        dev.create_context(object())


@pytest.mark.gpu
def test_dry_run_split(dev):
    _green_supported(dev)
    sm = dev.resources.sm
    groups, _ = sm.split(SMResourceOptions(count=16), dry_run=True)
    assert groups and groups[0].sm_count >= 16
    with pytest.raises(ValueError, match="dry-run SMResource"):
        dev.create_context(ContextOptions(resources=groups))


@pytest.mark.gpu
def test_plain_context_lifetime(dev):
    from cuda_core import Device

    ctx = dev.create_context()
    assert not ctx.is_green and not ctx.is_closed
    assert Device._has_current() and dev.context != ctx  # not made current
    s = ctx.create_stream()
    assert s.context == ctx
    ev = s.record()
    ev.sync()
    assert ev.is_done
    prev = dev.set_current(ctx)
    try:
        with pytest.raises(RuntimeError, match="current"):
            ctx.close()  # refuses while current
        s2 = ctx.create_stream()  # made while ctx is current: still one of ctx's streams
        s2.sync()
    finally:
        dev.set_current(prev) if prev is not None else dev.set_current()
    ctx.close()
    ctx.close()  # idempotent
    assert ctx.is_closed and ctx.handle is None
    assert s.is_closed and s2.is_closed and ev.is_closed  # closed with their context
    with pytest.raises(RuntimeError, match="closed"):
        s.sync()
    with pytest.raises(RuntimeError, match="closed"):
        ctx.create_stream()
    with pytest.raises(RuntimeError, match="closed"):
        _ = ctx.resources
    dev.create_stream().sync()  # the primary context is unaffected


@pytest.mark.gpu
def test_green_context_collected_with_its_streams(dev):
    import gc

    _green_supported(dev)
    groups, _ = dev.resources.sm.split(SMResourceOptions(count=16))
    s = dev.create_context(ContextOptions(resources=groups)).create_stream()
    gc.collect()
    s.sync()  # the stream keeps working while alive, though its Context object is gone
    assert s.context.is_green
    del s
    gc.collect()


@pytest.mark.gpu
def test_workqueue_resource(dev):
    _green_supported(dev)
    try:
        wq = dev.resources.workqueue
    except NotImplementedError as exc:
        pytest.skip(str(exc))
    assert wq.device == dev
    assert wq.concurrency_limit >= 1
    wq.configure(WorkqueueResourceOptions(sharing_scope="green_ctx_balanced", concurrency_limit=2))
    assert wq.sharing_scope == "green_ctx_balanced" and wq.concurrency_limit == 2
    groups, _ = dev.resources.sm.split(SMResourceOptions(count=16))
    with dev.create_context(ContextOptions(resources=[groups[0], wq])) as ctx:
        ctx.create_stream().sync()
