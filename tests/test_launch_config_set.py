"""LaunchConfig fields set after construction (as cuda.core 1.2 allows), and what launches use.

A LaunchConfig keeps per-stream native configs (``LaunchConfigHandle``), its last-used stream's
handle for launch()'s fast path, the devices it was checked on, and tells the PreparedLaunch
objects bound to it. Setting a field must reach all of them: the CPU tests drive ``launch()``
and ``PreparedLaunch`` with a stand-in kernel whose launch entry records the handle it was
given and read back what that handle hands the driver (``LaunchConfigHandle.values``); the GPU
tests launch a kernel that writes its grid and block sizes.
"""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from cuda_core import LaunchConfig, PreparedLaunch, _links, launch
from cuda_core._stream import Stream
from tests.helpers.dropin import outcome, same_outcome

# -- CPU: what a launch would hand the driver after a field is set ----------------------------

# An H100's limits, as LaunchConfig checks a config against a stream's device at first use.
_H100 = SimpleNamespace(
    max_threads_per_block=1024, max_block_dim_x=1024, max_block_dim_y=1024, max_block_dim_z=64,
    max_grid_dim_x=2**31 - 1, max_grid_dim_y=65535, max_grid_dim_z=65535,
    max_shared_memory_per_block_optin=232448, compute_capability_major=9, compute_capability_minor=0,
    cooperative_launch=True,
)  # fmt: skip


class _Recorder:
    """A kernel's launch entry (``Kernel._launch``) whose run records the LaunchConfigHandle it
    was given instead of launching: no driver is called."""

    def __init__(self):
        self.handles = []
        self.func = 0x1
        self.layout = None
        self.plans = {}

    def run(self, cfg, args):
        self.handles.append(cfg)
        return 0

    def plan(self, kernel, args):
        return SimpleNamespace(
            types=tuple(map(type, args)),
            new_slot=lambda: (None, 0),
            pack=lambda slot, a: None,
            native=None,  # no native LaunchPlan: calls take the Python path
        )


class _Kernel:
    def __init__(self):
        self._launch = _Recorder()


_STAND_IN = SimpleNamespace(_id=0, name="H100 limits", properties=_H100)


@pytest.fixture
def _stand_in_device(monkeypatch):
    """Streams hold their device's ordinal; the launch asks the one accessor (``_links.Device``)
    for the device, which here is a stand-in with H100 limits (no driver needed)."""
    real = _links.Device
    monkeypatch.setattr(_links, "Device", lambda o=None: _STAND_IN if o == 0 else real(o))


def _stream(address=0x5000):
    """A Stream over a borrowed, never-used address, on the stand-in device (ordinal 0)."""
    return Stream._wrap(address, _STAND_IN)


def _launched(stream, cfg, kernel):
    launch(stream, cfg, kernel)
    return kernel._launch.handles[-1].values


@pytest.mark.parametrize(
    "field,value,expected",
    [
        ("grid", 7, ((7, 1, 1), (32, 1, 1), 0, None, False, False)),
        ("grid", (3, 2), ((3, 2, 1), (32, 1, 1), 0, None, False, False)),
        ("block", (16, 4), ((4, 1, 1), (16, 4, 1), 0, None, False, False)),
        ("shmem_size", 4096, ((4, 1, 1), (32, 1, 1), 4096, None, False, False)),
        ("cluster", 2, ((8, 1, 1), (32, 1, 1), 0, (2, 1, 1), False, False)),
        ("is_cooperative", True, ((4, 1, 1), (32, 1, 1), 0, None, True, False)),
        ("cooperative_launch", 1, ((4, 1, 1), (32, 1, 1), 0, None, True, False)),
        (
            "programmatic_stream_serialization",
            np.True_,
            ((4, 1, 1), (32, 1, 1), 0, None, False, True),
        ),
    ],
)
@pytest.mark.usefixtures("_stand_in_device")
def test_setting_a_field_changes_what_the_next_launch_hands_the_driver(field, value, expected):
    cfg = LaunchConfig(grid=4, block=32)
    s, kernel = _stream(), _Kernel()
    assert _launched(s, cfg, kernel) == ((4, 1, 1), (32, 1, 1), 0, None, False, False)
    assert _launched(s, cfg, kernel) == (
        (4, 1, 1),
        (32, 1, 1),
        0,
        None,
        False,
        False,
    )  # the cached one
    if field == "cooperative_launch":  # the name before cuda.core 1.0
        with pytest.warns(DeprecationWarning, match="is_cooperative"):
            setattr(cfg, field, value)
    else:
        setattr(cfg, field, value)
    assert _launched(s, cfg, kernel) == expected  # not the handle cached for the old values
    other = _stream(0x6000)
    assert _launched(other, cfg, kernel) == expected


@pytest.mark.usefixtures("_stand_in_device")
def test_setting_a_field_reaches_a_bound_prepared_launch():
    cfg = LaunchConfig(grid=4, block=32)
    s, kernel = _stream(), _Kernel()
    p = PreparedLaunch(s, cfg, kernel)
    assert p._cfg.values[0] == (4, 1, 1)
    cfg.grid = 9
    cfg.shmem_size = 512
    assert p._cfg is None  # dropped; rebuilt from the new values at the next call
    # What the next call does before it launches (the launch itself needs a GPU: see the GPU
    # test below): bind the plan, which builds the handle from the config's new values.
    plan = kernel._launch.plan(kernel, ())
    p._use(plan, plan.new_slot())
    assert p._cfg.values == ((9, 1, 1), (32, 1, 1), 512, None, False, False)
    assert p._call.func.__self__ is p._cfg  # the call it would make launches with that handle
    ref = weakref.ref(p)
    del p
    gc.collect()
    assert ref() is None  # the config holds its PreparedLaunch objects weakly
    cfg.block = 64  # and a collected one is not told


@pytest.mark.usefixtures("_stand_in_device")
def test_a_set_value_is_checked_against_the_device_at_the_next_launch():
    cfg = LaunchConfig(grid=4, block=32)
    s, kernel = _stream(), _Kernel()
    launch(s, cfg, kernel)
    cfg.block = (2048, 1, 1)  # a valid shape, too large for the device: found at first use
    with pytest.raises(ValueError, match="2048 threads, more than the 1024 allowed on H100 limits"):
        launch(s, cfg, kernel)
    cfg.block = 1024
    assert _launched(s, cfg, kernel)[1] == (1024, 1, 1)


@pytest.mark.parametrize(
    "field,value,exc",
    [
        ("grid", 0, ValueError), ("grid", (1, 2, 3, 4), ValueError), ("grid", None, TypeError),
        ("grid", "8", TypeError), ("grid", [8], TypeError), ("block", (0, 1), ValueError), ("block", 1.5, TypeError),
        ("cluster", (0,), ValueError), ("cluster", "2", TypeError), ("shmem_size", -1, ValueError),
        ("shmem_size", None, TypeError), ("shmem_size", "4", TypeError), ("shmem_size", 1.5, TypeError),
        ("shmem_size", 2**32, OverflowError),
    ],
)  # fmt: skip
def test_set_values_are_checked_as_at_construction(field, value, exc):
    cfg = LaunchConfig(grid=4, block=32)
    before = repr(cfg)
    with pytest.raises(exc, match=f"^LaunchConfig.{field} (values? )?must be"):
        setattr(cfg, field, value)
    assert repr(cfg) == before  # a refused value changes nothing
    if value is not None:
        with pytest.raises(exc):
            LaunchConfig(**{"grid": 4, "block": 32, field: value})


def test_set_values_are_normalised_and_flags_take_truth_values():
    cfg = LaunchConfig(grid=4, block=32)
    cfg.grid, cfg.block, cfg.cluster = 5, (8, 2), 1
    cfg.shmem_size = np.int64(128)
    cfg.is_cooperative = "yes"
    assert (cfg.grid, cfg.block, cfg.cluster, cfg.shmem_size, cfg.is_cooperative) == ((5, 1, 1), (8, 2, 1), (1, 1, 1),
                                                                                      128, True)  # fmt: skip
    assert type(cfg.shmem_size) is int
    cfg.shmem_size = 1024.0  # a whole float, as cuda.core takes it
    cfg.cluster = None
    assert (cfg.shmem_size, cfg.cluster) == (1024, None)
    with pytest.raises(AttributeError):
        cfg.other = 1  # no other attributes, as in cuda.core


@pytest.mark.usefixtures("_stand_in_device")
def test_weakref_and_subclass_as_in_cuda_core():
    class Mine(LaunchConfig):
        pass

    cfg = Mine(grid=2, block=32)
    assert weakref.ref(cfg)() is cfg
    assert cfg == LaunchConfig(grid=2, block=32)
    s, kernel = _stream(), _Kernel()
    assert _launched(s, cfg, kernel)[0] == (2, 1, 1)  # launch takes a subclass, as cuda.core does


@pytest.mark.usefixtures("_stand_in_device")
def test_launch_takes_a_dict_config():
    s, kernel = _stream(), _Kernel()
    assert _launched(s, {"grid": 3, "block": (8, 8)}, kernel) == (
        (3, 1, 1),
        (8, 8, 1),
        0,
        None,
        False,
        False,
    )


# -- CPU: the same settings through cuda.core ----------------------------------------------------

_NV_SETS = [
    ("grid", (8, 2, 1)), ("block", (64, 1, 1)), ("cluster", None), ("cluster", (2, 1, 1)),
    ("shmem_size", 4096), ("shmem_size", np.int64(7)), ("shmem_size", True), ("shmem_size", None),
    ("shmem_size", "4"), ("is_cooperative", 0), ("is_cooperative", None), ("programmatic_stream_serialization", 1),
    ("programmatic_stream_serialization", np.False_), ("grid", [8]), ("grid", "8"), ("not_a_field", 1),
]  # fmt: skip


@pytest.mark.parametrize("field,value", _NV_SETS, ids=repr)
def test_setting_fields_matches_cuda_core(nv, field, value):
    """What cuda.core 1.2 accepts, we accept with the same result; what it refuses, we refuse with
    its class (values cuda.core stores unchecked, such as ``grid=(0, 1, 1)``, we refuse: see
    docs/migration.rst)."""
    results = []
    for lib in (nv, ours_lib()):
        cfg = lib.LaunchConfig(grid=4, block=32)
        results.append((outcome(setattr, cfg, field, value), cfg))
    (nv_out, nv_cfg), (our_out, our_cfg) = results
    same_outcome(nv_out, our_out, f"LaunchConfig.{field} = {value!r}")
    for name in (
        "grid",
        "cluster",
        "block",
        "shmem_size",
        "is_cooperative",
        "programmatic_stream_serialization",
    ):
        assert getattr(our_cfg, name) == getattr(nv_cfg, name), name
    assert repr(our_cfg) == repr(nv_cfg)
    assert (our_cfg == LaunchConfig(grid=4, block=32)) == (
        nv_cfg == nv.LaunchConfig(grid=4, block=32)
    )


def ours_lib():
    import cuda_core

    return cuda_core


def test_repr_matches_cuda_core(nv):
    for kw in ({"grid": 2, "block": 3}, {"grid": (2, 3), "block": 4, "shmem_size": 5, "is_cooperative": False},
               {"grid": 1, "block": 1, "programmatic_stream_serialization": True}):  # fmt: skip
        assert repr(LaunchConfig(**kw)) == repr(nv.LaunchConfig(**kw))


# -- GPU: real launches after a field is set ---------------------------------------------------

SHAPE_SRC = r"""
extern "C" __global__ void shape(unsigned* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) { out[0] = gridDim.x; out[1] = blockDim.x; }
    atomicAdd(&out[2], 1u);
}
"""


def _shape_kernel(dev):
    from cuda_core import Program, ProgramOptions

    return (
        Program(SHAPE_SRC, "c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        .compile("cubin")
        .get_kernel("shape")
    )


def _run_and_read(dev, s, buf, do_launch):
    buf.fill(0, stream=s)
    do_launch()
    out = np.zeros(3, np.uint32)
    buf.copy_to(out, stream=s)
    s.sync()
    return out.tolist()


@pytest.mark.gpu
def test_launches_after_setting_fields_use_the_new_values(dev):
    ker = _shape_kernel(dev)
    s = dev.create_stream()
    buf = dev.allocate(12, stream=s)
    cfg = LaunchConfig(grid=5, block=64)
    assert _run_and_read(dev, s, buf, lambda: launch(s, cfg, ker, buf)) == [5, 64, 320]
    cfg.grid = 3
    assert _run_and_read(dev, s, buf, lambda: launch(s, cfg, ker, buf)) == [3, 64, 192]
    cfg.block = (32, 1, 1)
    p = PreparedLaunch(s, cfg, ker, buf)
    assert _run_and_read(dev, s, buf, p) == [3, 32, 96]
    cfg.grid = 7  # the prepared launch follows its config
    assert _run_and_read(dev, s, buf, p) == [7, 32, 224]
    assert _run_and_read(dev, s, buf, lambda: launch(s, cfg, ker, buf)) == [7, 32, 224]
    cfg.block = 4096  # beyond every device's limit: refused at the next launch, by both paths
    with pytest.raises(ValueError, match="threads"):
        launch(s, cfg, ker, buf)
    with pytest.raises(ValueError, match="threads"):
        p()
    cfg.block = 16
    assert _run_and_read(dev, s, buf, p) == [7, 16, 112]
    buf.close(s)
    s.close()


@pytest.mark.gpu
def test_set_fields_launch_like_cuda_core(nv, dev):
    """The same kernel launched by cuda.core and by us with a config changed after construction."""
    ker = _shape_kernel(dev)
    nv_dev = nv.Device(dev.device_id)
    nv_dev.set_current()
    nv_opts = nv.ProgramOptions(arch=f"sm_{dev.arch}")
    nv_ker = nv.Program(SHAPE_SRC, "c++", options=nv_opts).compile("cubin").get_kernel("shape")
    dev.set_current()
    s = dev.create_stream()
    nv_s = nv_dev.create_stream()
    buf = dev.allocate(12, stream=s)
    results = []
    for lib, stream, kernel in ((nv, nv_s, nv_ker), (ours_lib(), s, ker)):
        cfg = lib.LaunchConfig(grid=5, block=64)
        cfg.grid = (6, 1, 1)
        cfg.block = (16, 1, 1)
        cfg.shmem_size = 256
        s.sync()
        buf.fill(0, stream=s)
        s.sync()
        lib.launch(stream, cfg, kernel, int(buf.handle))
        stream.sync()
        out = np.zeros(3, np.uint32)
        buf.copy_to(out, stream=s)
        s.sync()
        results.append(out.tolist())
    assert results[0] == results[1] == [6, 16, 96]
    buf.close(s)
    s.close()
    nv_s.close()


@pytest.mark.gpu
def test_cooperative_grid_too_large_raises_cuda_core_class(nv, dev):
    """cuda.core checks a cooperative grid against the occupancy and raises ValueError; we let
    the driver refuse it and raise a CUDAError that is also a ValueError."""
    if not dev.properties.cooperative_launch:
        pytest.skip("the device has no cooperative launch")
    ker = _shape_kernel(dev)
    nv_dev = nv.Device(dev.device_id)
    nv_dev.set_current()
    nv_ker = nv.Program(SHAPE_SRC, "c++", options=nv.ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin") \
        .get_kernel("shape")  # fmt: skip
    nv_s = nv_dev.create_stream()
    dev.set_current()
    s = dev.create_stream()
    buf = dev.allocate(12, stream=s)
    grid = dev.properties.multiprocessor_count * 64
    nv_out = outcome(nv.launch, nv_s, nv.LaunchConfig(grid=grid, block=1024, is_cooperative=True), nv_ker,
                     int(buf.handle))  # fmt: skip
    our_out = outcome(launch, s, LaunchConfig(grid=grid, block=1024, is_cooperative=True), ker, buf)
    same_outcome(nv_out, our_out, "a cooperative grid too large to be co-resident")
    assert nv_out[0] == "raises" and issubclass(nv_out[1], ValueError)
    s.sync()
    buf.close(s)
    s.close()
    nv_s.close()
