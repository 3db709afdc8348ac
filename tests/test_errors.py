"""CUDAError and its subclasses: message format, attributes, pickling; the error funnel."""

from __future__ import annotations

import pickle

import pytest
from cuda.bindings import driver, nvrtc

import cuda_core
from cuda_core import (
    CompileError,
    CUDADriverNotFoundError,
    CUDAError,
    LinkerError,
    NVRTCError,
    NVVMError,
)
from cuda_core._utils import call, handle_return, make_error


def _roundtrip(err: Exception) -> Exception:
    return pickle.loads(pickle.dumps(err))


def test_cuda_error_message_and_attributes():
    err = CUDAError("cuMemAllocAsync", "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", 2)
    assert str(err) == "cuMemAllocAsync: CUDA_ERROR_OUT_OF_MEMORY: out of memory"
    assert (err.api, err.name, err.explanation, err.code) == (
        "cuMemAllocAsync",
        "CUDA_ERROR_OUT_OF_MEMORY",
        "out of memory",
        2,
    )
    assert isinstance(err, Exception)
    assert cuda_core.CUDAError is CUDAError


def test_cuda_error_without_explanation_has_no_dangling_separator():
    err = CUDAError("cuInit", "CUDA_ERROR_UNKNOWN")
    assert str(err) == "cuInit: CUDA_ERROR_UNKNOWN"


@pytest.mark.parametrize(
    "err",
    [
        CUDAError("cuStreamCreate", "CUDA_ERROR_INVALID_VALUE", "invalid argument", 1),
        CUDADriverNotFoundError("libcuda.so.1: cannot open shared object file"),
        CompileError(
            "nvrtcCompileProgram", "NVRTC_ERROR_COMPILATION", "", 6, log="l1\nl2", options=("-a",)
        ),
        NVRTCError(
            "nvrtcCompileProgram",
            "NVRTC_ERROR_COMPILATION",
            "compilation failed",
            6,
            log="kernel.cu(3): error: identifier x is undefined",
            options=("--gpu-architecture=sm_90", "-std=c++17"),
            program_name="kernel.cu",
        ),
        LinkerError("nvJitLinkComplete", "NVJITLINK_ERROR_PTX_COMPILE", "", 4, log="ptxas fatal"),
        NVVMError("nvvmCompileProgram", "NVVM_ERROR_COMPILATION", "", 9, log="bad IR"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_errors_pickle_with_type_message_and_attributes(err):
    back = _roundtrip(err)
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.args == err.args
    assert vars(back) == vars(err)
    with pytest.raises(type(err)) as info:
        raise back
    assert str(info.value) == str(err)


def test_nvrtc_error_keeps_log_options_and_program_name():
    err = NVRTCError(
        "nvrtcCompileProgram",
        "NVRTC_ERROR_COMPILATION",
        "",
        6,
        log="k.cu(1): error: expected a ';'\n1 error detected\n",
        options=("--gpu-architecture=sm_90",),
        program_name="k.cu",
    )
    text = str(err)
    first = text.splitlines()[0]
    assert first.startswith("nvrtcCompileProgram: NVRTC_ERROR_COMPILATION")
    assert "'k.cu'" in first
    assert "--gpu-architecture=sm_90" in text
    assert "k.cu(1): error: expected a ';'" in text
    assert "1 error detected" in text
    assert err.name == "k.cu"  # cuda.core's contract: name is the program's name
    assert err.error_name == "NVRTC_ERROR_COMPILATION"
    assert err.log.startswith("k.cu(1)")
    assert isinstance(err, CompileError) and isinstance(err, CUDAError)


def test_subclass_hierarchy():
    for cls in (CUDADriverNotFoundError, CompileError, NVRTCError, LinkerError, NVVMError):
        assert issubclass(cls, CUDAError)
    for cls in (NVRTCError, LinkerError, NVVMError):
        assert issubclass(cls, CompileError)


def test_driver_not_found_message_says_what_and_what_still_works():
    err = CUDADriverNotFoundError("loader detail")
    text = str(err)
    assert "libcuda" in text and "not found" in text
    assert "compil" in text.lower()
    assert "loader detail" in text
    assert err.name == "CUDA_ERROR_DRIVER_NOT_FOUND"


def test_handle_return_payload_shapes():
    ok = driver.CUresult.CUDA_SUCCESS
    assert handle_return((ok,), "cuX") is None
    assert handle_return((ok, 5), "cuX") == 5
    assert handle_return((ok, 5, "a"), "cuX") == (5, "a")


def test_handle_return_driver_failure():
    status = driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY
    with pytest.raises(CUDAError) as info:
        handle_return((status, None), "cuMemAlloc")
    err = info.value
    assert str(err).startswith("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY")
    assert err.code == int(status)
    assert err.name == "CUDA_ERROR_OUT_OF_MEMORY"
    assert err.api == "cuMemAlloc"
    assert str(_roundtrip(err)) == str(err)


def test_handle_return_context_errors_suggest_set_current():
    with pytest.raises(CUDAError) as info:
        handle_return((driver.CUresult.CUDA_ERROR_INVALID_CONTEXT, None), "cuStreamCreate")
    assert "set_current()" in str(info.value)
    assert info.value.name == "CUDA_ERROR_INVALID_CONTEXT"


def test_handle_return_nvrtc_failure():
    with pytest.raises(CUDAError) as info:
        handle_return((nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION,), "nvrtcCompileProgram")
    assert str(info.value).startswith("nvrtcCompileProgram: NVRTC_ERROR_COMPILATION")
    assert info.value.code == int(nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION)


def test_call_names_the_api_from_the_function():
    assert tuple(call(nvrtc.nvrtcVersion)) == tuple(nvrtc.nvrtcVersion()[1:])
    with pytest.raises(CUDAError) as info:
        call(nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcProgram(0))
    assert str(info.value).startswith("nvrtcGetPTXSize: NVRTC_ERROR_INVALID_PROGRAM")


def test_make_error_with_unknown_status_code():
    err = make_error(123456, "cuSomething")
    assert err.code == 123456
    assert "123456" in err.name
    assert str(err).startswith("cuSomething: ")


def test_make_error_extra_context_is_appended():
    err = make_error(driver.CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemcpy", "copying 8 bytes")
    assert str(err).startswith("cuMemcpy: CUDA_ERROR_INVALID_VALUE")
    assert str(err).endswith("copying 8 bytes")
