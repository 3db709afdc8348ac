"""``cuda_core._utils.cuda_utils``: the helpers code outside cuda.core imports, at cuda.core's path.

The failing results are real ``cuda.bindings`` status values in the tuples the bindings return
(and one real failed NVRTC compile); where NVIDIA's ``cuda.core`` is installed, each behaviour is
also compared with its ``cuda.core._utils.cuda_utils``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect

import pytest
from cuda.bindings import driver, nvrtc, runtime

import cuda_core
from cuda_core._utils import cuda_utils as cu

HAVE_PEER = importlib.util.find_spec("cuda.core") is not None

FAILED = [
    ((driver.CUresult.CUDA_ERROR_INVALID_VALUE,), "CUDAError", "CUDA_ERROR_INVALID_VALUE"),
    ((driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0), "CUDAError", "CUDA_ERROR_OUT_OF_MEMORY"),
    ((runtime.cudaError_t.cudaErrorInvalidValue,), "CUDAError", "cudaErrorInvalidValue: "),
    (
        (nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_INPUT, None),
        "NVRTCError",
        f"{nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_INPUT}: NVRTC_ERROR_INVALID_INPUT",
    ),
]


def test_names_are_cuda_cores_own_objects_and_the_bindings_modules():
    assert cu.CUDAError is cuda_core.CUDAError
    assert cu.NVRTCError is cuda_core.NVRTCError
    assert cu.ComputeCapability is cuda_core.ComputeCapability
    assert (cu.driver, cu.nvrtc, cu.runtime) == (driver, nvrtc, runtime)
    assert sorted(cu.__all__) == cu.__all__


@pytest.mark.parametrize(("result", "cls", "start"), FAILED)
def test_handle_return_raises_the_class_and_message_start_of_cuda_core(result, cls, start):
    with pytest.raises(getattr(cu, cls)) as info:
        cu.handle_return(result)
    assert str(info.value).startswith(start)
    assert info.value.code == int(result[0])
    assert info.value.error_name == result[0].name


def test_handle_return_of_an_nvrtc_failure_adds_the_program_log():
    err, prog = nvrtc.nvrtcCreateProgram(
        b"__global__ void k() { undefined_x; }", b"k.cu", 0, [], []
    )
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    try:
        result = nvrtc.nvrtcCompileProgram(prog, 0, [])
        with pytest.raises(cu.NVRTCError) as info:
            cu.handle_return(result, handle=prog)
        head, _, log = str(info.value).partition(", compilation log:\n\n")
        assert head == f"{result[0]}: NVRTC_ERROR_COMPILATION"
        assert "undefined_x" in log and log == info.value.log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def test_handle_return_refuses_a_status_of_no_known_type():
    with pytest.raises(RuntimeError, match=r"^Unknown error type: 0$"):
        cu.handle_return((0, 5))


def test_handle_return_gives_the_payload():
    ok = driver.CUresult.CUDA_SUCCESS
    assert cu.handle_return((ok,)) is None
    assert cu.handle_return((ok, 7)) == 7
    assert cu.handle_return((ok, 7, 8)) == (7, 8)
    assert cu.handle_return((runtime.cudaError_t.cudaSuccess, "x")) == "x"
    assert cu.handle_return((nvrtc.nvrtcResult.NVRTC_SUCCESS, 1, 2, 3)) == (1, 2, 3)


def test_errors_take_a_bare_message_as_cuda_cores_do():
    assert str(cu.CUDAError("something failed")) == "something failed"
    assert str(cu.NVRTCError("compile failed")) == "compile failed"


@dataclasses.dataclass
class _Opts:
    alpha: int = 1


def test_check_or_create_options_signature_and_keep_none():
    assert cu.check_or_create_options(_Opts, None) == _Opts()
    assert cu.check_or_create_options(_Opts, None, keep_none=True) is None
    assert cu.check_or_create_options(_Opts, None, "opts", True) is None
    assert cu.check_or_create_options(_Opts, {"alpha": 2}, "opts") == _Opts(2)
    with pytest.raises(
        TypeError, match=r"^The my opts must be provided as an object of type _Opts"
    ):
        cu.check_or_create_options(_Opts, 5, "my opts")


def test_sequences():
    assert cu.is_sequence([1]) and cu.is_sequence((1,)) and cu.is_sequence("ab")
    assert cu.is_sequence(range(2)) and not cu.is_sequence({1: 2}) and not cu.is_sequence(3)
    assert cu.is_nested_sequence([1, (2,)]) and cu.is_nested_sequence("ab")
    assert not cu.is_nested_sequence([1, 2]) and not cu.is_nested_sequence([])
    assert not cu.is_nested_sequence(5)


def test_precondition_calls_the_checker_first_with_what():
    seen = []

    def checker(*args, what, **kwargs):
        seen.append((args, kwargs, what))
        if args and args[0] < 0:
            raise ValueError(f"{what}: negative")

    @cu.precondition(checker, "scale")
    def scale(x, factor=2):
        """Doc."""
        return x * factor

    assert scale(3, factor=4) == 12
    assert seen == [((3,), {"factor": 4}, "scale")]
    with pytest.raises(ValueError, match="scale: negative"):
        scale(-1)
    assert (scale.__name__, scale.__doc__) == ("scale", "Doc.")


def test_cast_to_3_tuple_is_cuda_cores():
    assert cu.cast_to_3_tuple("grid", 4) == (4, 1, 1)
    assert cu.cast_to_3_tuple("grid", (4, 2)) == (4, 2, 1)
    with pytest.raises(ValueError, match=r"^grid must be an int"):
        cu.cast_to_3_tuple("grid", "x")


# -- the same as NVIDIA's module, where it is installed -------------------------------------


@pytest.fixture
def peer():
    if not HAVE_PEER:
        pytest.skip("NVIDIA's cuda.core is not installed here")
    return importlib.import_module("cuda.core._utils.cuda_utils")


NAMES = [
    "handle_return",
    "check_or_create_options",
    "cast_to_3_tuple",
    "precondition",
    "is_sequence",
    "is_nested_sequence",
]


@pytest.mark.parametrize("name", NAMES)
def test_signature_is_cuda_cores(peer, name):
    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params(getattr(cu, name)) == params(getattr(peer, name))


@pytest.mark.parametrize(("result", "cls", "start"), FAILED[2:])  # no driver needed
def test_failures_read_as_cuda_cores(peer, result, cls, start):
    with pytest.raises(getattr(peer, cls)) as theirs:
        peer.handle_return(result)
    with pytest.raises(getattr(cu, cls)) as ours:
        cu.handle_return(result)
    assert str(ours.value).split(": ")[0] == str(theirs.value).split(": ")[0]


@pytest.mark.parametrize("obj", [[1], "ab", (1, [2]), range(0), {1: 2}, 5, [[]], b"xy"])
def test_sequence_answers_are_cuda_cores(peer, obj):
    assert cu.is_sequence(obj) == peer.is_sequence(obj)
    assert cu.is_nested_sequence(obj) == peer.is_nested_sequence(obj)


def test_version_triples_at_cuda_core_s_path():
    import cuda.bindings

    from cuda_core._utils.version import binding_version, driver_version

    major, minor, patch = binding_version()
    assert cuda.bindings.__version__.startswith(f"{major}.{minor}.{patch}")
    try:
        drv = driver_version()
    except Exception as exc:  # no driver on this machine: the error says so
        from cuda_core import CUDADriverNotFoundError

        assert isinstance(exc, CUDADriverNotFoundError)
    else:
        from cuda_core import system

        assert drv[:2] == tuple(system.get_driver_version()[:2]) and drv[2] == 0
