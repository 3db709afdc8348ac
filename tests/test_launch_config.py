"""LaunchConfig: validation (no GPU), the native config it builds, device limit checks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from cuda.bindings import driver

from cuda_core import LaunchConfig
from cuda_core._launch_config import check_limits


def test_ints_become_3_tuples():
    c = LaunchConfig(grid=4, block=128)
    assert c.grid == (4, 1, 1)
    assert c.block == (128, 1, 1)
    assert c.cluster is None
    assert c.shmem_size == 0
    assert c.is_cooperative is False


def test_tuples_are_padded():
    c = LaunchConfig(
        grid=(2, 3), cluster=(2,), block=(8, 4, 2), shmem_size=1024, is_cooperative=True
    )
    assert c.grid == (2, 3, 1)
    assert c.cluster == (2, 1, 1)
    assert c.block == (8, 4, 2)
    assert c.shmem_size == 1024
    assert c.is_cooperative
    with pytest.warns(
        DeprecationWarning, match=r"LaunchConfig\.cooperative_launch .*LaunchConfig\.is_cooperative"
    ):
        assert c.cooperative_launch


def test_cluster_multiplies_grid_into_blocks():
    c = LaunchConfig(grid=(3, 2), cluster=(2, 2), block=32)
    assert c.grid_blocks == (6, 4, 1)
    assert LaunchConfig(grid=5, block=1).grid_blocks == (5, 1, 1)


def test_cooperative_launch_the_name_before_1_0_warns():
    with pytest.warns(DeprecationWarning, match=r"is_cooperative=\.\.\.") as rec:
        assert LaunchConfig(grid=1, block=1, cooperative_launch=True).is_cooperative
    assert rec[0].filename == __file__
    c = LaunchConfig(grid=1, block=1)
    with pytest.warns(DeprecationWarning, match="is_cooperative"):
        c.cooperative_launch = 1
    assert c.is_cooperative is True


@pytest.mark.parametrize("field", ["grid", "block"])
def test_grid_and_block_are_required(field):
    kw = {"grid": 1, "block": 1, field: None}
    with pytest.raises(TypeError, match=rf"^LaunchConfig.{field} must be an int, or a tuple"):
        LaunchConfig(**kw)


@pytest.mark.parametrize(
    "value,exc",
    [
        (0, ValueError),
        (-1, ValueError),
        ((1, 0), ValueError),
        ((1, 1, 1, 1), ValueError),
        (1.0, TypeError),
        (True, TypeError),
        ("4", TypeError),
        ((1, 2.0), TypeError),
        ([1, 2], TypeError),
    ],
    ids=repr,
)
@pytest.mark.parametrize("field", ["grid", "block", "cluster"])
def test_bad_dimensions(field, value, exc):
    kw = {"grid": 1, "block": 1, field: value}
    # cuda.core's message first ("LaunchConfig.grid value must be >= 1 (got 0)", "... must be
    # an int, or a tuple with up to 3 ints (got <class 'float'>)"), then the rule and the value
    lead = rf"^LaunchConfig.{field} (must be an int, or a tuple with up to 3 ints|values? must be >= 1)"
    with pytest.raises(exc, match=lead + rf" \(got .*\); LaunchConfig.{field} takes ") as ei:
        LaunchConfig(**kw)
    assert str(ei.value).endswith(f"(got {value!r})")


def test_an_empty_dimension_tuple_is_one_as_in_cuda_core():
    assert LaunchConfig(grid=(), block=()).grid == (1, 1, 1)


@pytest.mark.parametrize(
    "value,exc",
    [
        (-1, ValueError),
        (1.5, TypeError),
        ("1", TypeError),
        (2**32, OverflowError),
        ([4], TypeError),
    ],
)
def test_bad_shmem_size(value, exc):
    with pytest.raises(exc, match=r"LaunchConfig\.shmem_size must be"):
        LaunchConfig(grid=1, block=1, shmem_size=value)


def test_cooperative_takes_any_truth_value():
    # cuda.core reads the flag by truth value; so do we (normalised to bool).
    assert LaunchConfig(grid=1, block=1, is_cooperative=0).is_cooperative is False
    assert LaunchConfig(grid=1, block=1, is_cooperative=None).is_cooperative is False
    assert LaunchConfig(grid=1, block=1, is_cooperative=1).is_cooperative is True


def test_programmatic_stream_serialization():
    assert LaunchConfig(grid=1, block=1).programmatic_stream_serialization is False
    on = LaunchConfig(grid=1, block=1, programmatic_stream_serialization=True)
    assert on.programmatic_stream_serialization is True
    assert (
        LaunchConfig(1, None, 1, None, False, 1).programmatic_stream_serialization is True
    )  # 6th positional
    assert on != LaunchConfig(grid=1, block=1) and on == LaunchConfig(
        grid=1, block=1, programmatic_stream_serialization=1
    )
    assert hash(on) == hash(
        LaunchConfig(grid=(1, 1), block=1, programmatic_stream_serialization=True)
    )
    assert repr(on) == (
        "LaunchConfig(grid=(1, 1, 1), cluster=None, block=(1, 1, 1), shmem_size=0, is_cooperative=False, "
        "programmatic_stream_serialization=True)"
    )
    on.programmatic_stream_serialization = 0  # settable, as in cuda.core 1.2
    assert on.programmatic_stream_serialization is False and on == LaunchConfig(grid=1, block=1)


@pytest.mark.parametrize("value", ["yes", None, 1.0, [True], 0, ""], ids=repr)
def test_programmatic_stream_serialization_takes_any_truth_value(value):
    # As in cuda.core 1.2, which stores bool(value).
    cfg = LaunchConfig(grid=1, block=1, programmatic_stream_serialization=value)
    assert cfg.programmatic_stream_serialization is bool(value)


def test_equal_hashable_and_cuda_core_repr():
    a = LaunchConfig(grid=(2, 1), block=64)
    b = LaunchConfig(grid=2, block=(64, 1, 1))
    assert a == b and hash(a) == hash(b)
    assert a != LaunchConfig(grid=2, block=64, shmem_size=4)
    assert len({a, b}) == 1
    a.grid = (3, 1, 1)  # the fields follow: equality and hash too (as in cuda.core)
    assert (
        a != b
        and a == LaunchConfig(grid=3, block=64)
        and hash(a) == hash(LaunchConfig(grid=3, block=64))
    )
    assert repr(LaunchConfig(grid=2, cluster=2, block=64, shmem_size=8, is_cooperative=True)) == (
        "LaunchConfig(grid=(2, 1, 1), cluster=(2, 1, 1), block=(64, 1, 1), shmem_size=8, is_cooperative=True, "
        "programmatic_stream_serialization=False)"
    )


def _built(c: LaunchConfig, stream: int) -> Any:
    """The native CUlaunchConfig the pure-Python handle layer builds for ``c`` (the native
    backend's is checked field by field against a stub driver in test_native_stub.py)."""
    import cuda_core._handles._pure as pure

    h = pure.LaunchConfigHandle(
        pure.StreamHandle.borrow(stream),
        c.grid_blocks,
        c.block,
        c.shmem_size,
        c.cluster,
        c.is_cooperative,
        c.programmatic_stream_serialization,
    )
    return h._cfg


def test_native_config_fields_and_attributes():
    c = LaunchConfig(
        grid=(3, 2), cluster=(2, 1, 1), block=(32, 4), shmem_size=256, is_cooperative=True
    )
    n = _built(c, 0x1234)
    assert (n.gridDimX, n.gridDimY, n.gridDimZ) == (6, 2, 1)
    assert (n.blockDimX, n.blockDimY, n.blockDimZ) == (32, 4, 1)
    assert n.sharedMemBytes == 256
    assert int(n.hStream) == 0x1234
    assert n.numAttrs == 2
    ids = [n.attrs[i].id for i in range(2)]
    assert ids == [
        driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
    ]
    dim = n.attrs[0].value.clusterDim
    assert (dim.x, dim.y, dim.z) == (2, 1, 1)
    assert n.attrs[1].value.cooperative == 1
    plain = _built(LaunchConfig(grid=1, block=1), 0)
    assert plain.numAttrs == 0


def test_native_config_programmatic_stream_serialization():
    ids = driver.CUlaunchAttributeID
    n = _built(LaunchConfig(grid=4, block=32, programmatic_stream_serialization=True), 0)
    assert n.numAttrs == 1
    assert n.attrs[0].id == ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert n.attrs[0].value.programmaticStreamSerializationAllowed == 1
    both = LaunchConfig(
        grid=4, cluster=2, block=32, is_cooperative=True, programmatic_stream_serialization=True
    )
    n = _built(both, 0)
    assert n.numAttrs == 3
    assert [n.attrs[i].id for i in range(3)] == [
        ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        ids.CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
        ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
    ]
    assert n.attrs[2].value.programmaticStreamSerializationAllowed == 1
    assert (n.gridDimX, n.blockDimX) == (8, 32)


def test_signature_matches_cuda_core():
    import inspect

    ours = list(inspect.signature(LaunchConfig).parameters.values())
    names = [
        "grid",
        "cluster",
        "block",
        "shmem_size",
        "is_cooperative",
        "programmatic_stream_serialization",
    ]
    assert [p.name for p in ours[:6]] == names
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in ours[:6])
    assert [p.default for p in ours[:6]] == [None, None, None, None, False, False]


# Limits of an H100 SXM, as DeviceProperties reports them (plain values, no driver involved).
H100 = SimpleNamespace(
    max_threads_per_block=1024,
    max_block_dim_x=1024,
    max_block_dim_y=1024,
    max_block_dim_z=64,
    max_grid_dim_x=2**31 - 1,
    max_grid_dim_y=65535,
    max_grid_dim_z=65535,
    max_shared_memory_per_block_optin=232448,
    compute_capability_major=9,
    compute_capability_minor=0,
    cooperative_launch=1,
)
NAME = "NVIDIA H100 80GB HBM3"


def test_limits_pass_for_a_valid_config():
    check_limits(
        LaunchConfig(grid=(1000, 65535), cluster=2, block=(32, 32), shmem_size=200_000), H100, NAME
    )


@pytest.mark.parametrize(
    "cfg,message",
    [
        (
            LaunchConfig(grid=1, block=2048),
            "block (2048, 1, 1) has 2048 threads, more than the 1024 allowed on NVIDIA H100 80GB HBM3",
        ),
        (LaunchConfig(grid=1, block=(64, 4, 8)), "block (64, 4, 8) has 2048 threads"),
        (
            LaunchConfig(grid=1, block=(1, 1, 128)),
            "block (1, 1, 128) has 128 threads in z, more than the 64 allowed on NVIDIA H100",
        ),
        (
            LaunchConfig(grid=(1, 65536), block=1),
            "grid (1, 65536, 1) has 65536 blocks in y, more than the 65535 allowed on",
        ),
        (
            LaunchConfig(grid=(1, 40000), cluster=(1, 2), block=1),
            "of clusters (1, 2, 1) has 80000 blocks in y",
        ),
        (
            LaunchConfig(grid=1, block=1, shmem_size=300_000),
            "shmem_size 300000 bytes is more than the 232448 bytes",
        ),
    ],
)
def test_limit_violations_name_limit_and_device(cfg, message):
    with pytest.raises(ValueError) as ei:
        check_limits(cfg, H100, NAME)
    assert message in str(ei.value)
    assert NAME in str(ei.value)


def test_cluster_needs_sm90():
    a100 = SimpleNamespace(**{**vars(H100), "compute_capability_major": 8})
    with pytest.raises(
        ValueError, match=r"cluster .* needs compute capability 9\.0 or newer, but A100 has 8\.0"
    ):
        check_limits(LaunchConfig(grid=1, cluster=2, block=32), a100, "A100")


def test_cooperative_needs_support():
    old = SimpleNamespace(**{**vars(H100), "cooperative_launch": 0})
    with pytest.raises(ValueError, match="cooperative launches are not supported on OLD"):
        check_limits(LaunchConfig(grid=1, block=32, is_cooperative=True), old, "OLD")


# ---------------------------------------------------------------------------------------------
# Driver entry points: resolved in one place (cuda_core._handles._backend.entry_point).

_FLAGS = driver.CUdriverProcAddress_flags
_FOUND = driver.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SUCCESS


@pytest.fixture
def fake_get_proc(monkeypatch):
    """Stand in for ``cuGetProcAddress`` in ``cuda_core._handles._backend`` (with an empty address cache)."""
    from cuda_core._handles import _backend

    monkeypatch.setattr(_backend, "_entry_points", {})

    def install(result, seen):
        def get_proc(symbol, version, flags):
            seen.append((symbol, version, flags))
            if isinstance(result, Exception):
                raise result
            return result

        monkeypatch.setattr(_backend, "_get_proc_address", get_proc)

    return install


@pytest.mark.parametrize(
    "env,flag",
    [
        (None, _FLAGS.CU_GET_PROC_ADDRESS_DEFAULT),
        ("0", _FLAGS.CU_GET_PROC_ADDRESS_DEFAULT),
        ("1", _FLAGS.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
        ("true", _FLAGS.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
    ],
)
def test_entry_points_honour_per_thread_stream_semantics(monkeypatch, fake_get_proc, env, flag):
    from cuda_core._handles import _backend

    if env is None:
        monkeypatch.delenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", raising=False)
    else:
        monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", env)
    addr = 0x7F0012345000
    seen: list = []
    fake_get_proc((driver.CUresult.CUDA_SUCCESS, addr, _FOUND), seen)
    assert _backend.entry_point("cuLaunchKernelEx") == addr
    assert seen == [(b"cuLaunchKernelEx", 12000, int(flag))]
    # One lookup per symbol and flag: later callers get the cache.
    assert _backend.entry_point("cuLaunchKernelEx") == addr
    assert len(seen) == 1
    # Functions without a stream never ask for per-thread semantics.
    assert _backend.entry_point("cuCtxGetDevice") == addr
    assert seen[1] == (b"cuCtxGetDevice", 12000, int(_FLAGS.CU_GET_PROC_ADDRESS_DEFAULT))


@pytest.mark.parametrize(
    "result",
    [
        RuntimeError("no driver"),
        (driver.CUresult.CUDA_ERROR_INVALID_VALUE, 0, _FOUND),
        (
            driver.CUresult.CUDA_SUCCESS,
            0,
            driver.CUdriverProcAddressQueryResult.CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
        ),
        (driver.CUresult.CUDA_SUCCESS, 0, _FOUND),
    ],
    ids=["raises", "error", "not-found", "null"],
)
def test_a_missing_entry_point_is_0_and_not_cached(fake_get_proc, result):
    from cuda_core._handles import _backend

    seen: list = []
    fake_get_proc(result, seen)
    assert _backend.entry_point("cuLaunchKernelEx") == 0
    assert _backend._entry_points == {}  # a failure is not cached: the driver may load later
    _backend.entry_point("cuLaunchKernelEx")
    assert len(seen) == 2


def test_host_callbacks_call_the_same_entry_point(monkeypatch, fake_get_proc):
    import ctypes

    from cuda_core import _host_callbacks as _callbacks

    monkeypatch.setenv("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "1")
    monkeypatch.setattr(_callbacks, "ensure_driver", lambda: None)
    monkeypatch.setattr(_callbacks, "_launch_fn", None)
    libc = ctypes.CDLL(None)
    addr = ctypes.cast(libc.abs, ctypes.c_void_p).value  # an address to wrap (never called)
    seen: list = []
    fake_get_proc((driver.CUresult.CUDA_SUCCESS, addr, _FOUND), seen)
    fn = _callbacks._launch_host_func_c()
    assert seen == [
        (b"cuLaunchHostFunc", 12000, int(_FLAGS.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    ]
    assert ctypes.cast(fn, ctypes.c_void_p).value == addr
    # CUresult (CUstream, CUhostFn, void*), called with the GIL released (not a PYFUNCTYPE).
    assert fn._restype_ is ctypes.c_int and fn._argtypes_ == (ctypes.c_void_p,) * 3
    assert not fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI
    assert _callbacks._launch_host_func_c() is fn
