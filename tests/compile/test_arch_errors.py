"""A wrong ``arch``: the error names what the installed NVRTC compiles for and this GPU's arch.

NVRTC refuses an arch it does not know with only "invalid value for --gpu-architecture";
nvJitLink 13 with ``ERROR_UNSUPPORTED_ARCH`` (12.x with ``ERROR_INTERNAL`` or a ptxas error).
The error keeps its class and the compiler's own words, and adds the architectures NVRTC lists
(``nvrtcGetSupportedArchs``) and, where a GPU is present, its own.
"""

from __future__ import annotations

import pickle

import pytest
from cuda.bindings import nvrtc

from cuda_core._compile import _option_checks
from cuda_core._compile._libraries import nvjitlink_version
from cuda_core._compile._linker import Linker, LinkerOptions
from cuda_core._compile._program import Program, ProgramOptions
from cuda_core._errors import LinkerError, NVRTCError
from tests.helpers import gpu_skip_reason

KERNEL = 'extern "C" __global__ void k(int* p) { *p = 1; }'
WRONG = ("sm_50", "sm_35", "sm_999")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cache"))


def _nvrtc() -> tuple[str, list[int]]:
    """NVRTC's version and architectures, asked here without cuda_core."""
    _, major, minor = nvrtc.nvrtcVersion()
    err, archs = nvrtc.nvrtcGetSupportedArchs()
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    return f"{major}.{minor}", sorted(archs)


def _listing(prefix: str = "sm") -> str:
    return ", ".join(f"{prefix}_{a}" for a in _nvrtc()[1])


def _number(arch: str) -> int:
    return int(arch.partition("_")[2])


@pytest.mark.parametrize("arch", WRONG)
def test_nvrtc_names_the_architectures_it_compiles_for(arch):
    version, archs = _nvrtc()
    prog = Program(KERNEL, options=ProgramOptions(arch=arch))
    if _number(arch) in archs:  # sm_50 under CUDA 12: it compiles, and nothing is said
        assert prog.compile("ptx", cache=False).code_type == "ptx"
        return
    with pytest.raises(NVRTCError) as info:
        prog.compile("ptx", cache=False)
    msg = str(info.value)
    assert msg.startswith("nvrtcCompileProgram: NVRTC_ERROR_INVALID_OPTION: compilation failed: ")
    assert f"arch {arch!r} is not supported by NVRTC {version}, which compiles for " in msg
    assert _listing() in msg
    assert "invalid value for --gpu-architecture" in msg  # NVRTC's own words stay
    assert f"-arch={arch}" in info.value.options
    assert ("this GPU is sm_" in msg) == (gpu_skip_reason() is None)
    assert str(pickle.loads(pickle.dumps(info.value))) == msg


def test_a_virtual_arch_is_listed_as_virtual_ones():
    with pytest.raises(NVRTCError) as info:
        Program(KERNEL, options=ProgramOptions(arch="compute_999")).compile("ptx", cache=False)
    assert f"which compiles for {_listing('compute')}" in str(info.value)


def test_other_compile_errors_say_nothing_about_the_arch():
    with pytest.raises(NVRTCError) as info:
        Program("int x = ;", options=ProgramOptions(arch="sm_90")).compile("ptx", cache=False)
    assert "is not supported by" not in str(info.value)
    assert _option_checks.arch_refusal(["-arch=sm_90", "-G"], "NVRTC 13.5", refused=False) == ""
    assert _option_checks.arch_refusal(["-G"], "NVRTC 13.5", refused=True) == ""


@pytest.mark.parametrize("arch", WRONG)
def test_nvjitlink_names_them_too(arch):
    _, archs = _nvrtc()
    if _number(arch) in archs:
        pytest.skip(f"NVRTC {_nvrtc()[0]} lists {arch}: nvJitLink has no arch to refuse")
    ptx = Program(KERNEL, options=ProgramOptions(arch="sm_90")).compile("ptx", cache=False)
    have = nvjitlink_version()
    assert have is not None
    with pytest.raises(LinkerError) as info:
        Linker(ptx, options=LinkerOptions(arch=arch)).link("cubin")
    msg = str(info.value)
    assert msg.startswith("nvJitLink")
    assert f"arch {arch!r} is not supported by nvJitLink {have[0]}.{have[1]}; " in msg
    assert f"the installed NVRTC {_nvrtc()[0]} compiles for {_listing()}" in msg
    # A PTX program compiles through nvJitLink: the same words.
    with pytest.raises(LinkerError, match=f"arch '{arch}' is not supported by nvJitLink"):
        Program(ptx.code, "ptx", options=ProgramOptions(arch=arch)).compile("cubin", cache=False)


def test_this_gpus_arch_is_named_and_checked_against_the_list(monkeypatch):
    version, archs = _nvrtc()
    monkeypatch.setattr(_option_checks, "gpu_arch", lambda: "sm_61")
    with pytest.raises(NVRTCError) as info:
        Program(KERNEL, options=ProgramOptions(arch="sm_999")).compile("ptx", cache=False)
    msg = str(info.value)
    assert "; this GPU is sm_61" in msg
    either = f"this GPU is sm_61, which NVRTC {version} does not compile for either"
    assert (either in msg) == (61 not in archs)


def test_without_nvrtcs_list_only_an_arch_status_blames_the_arch(monkeypatch):
    monkeypatch.setattr(_option_checks, "nvrtc_targets", lambda: ("", ()))
    monkeypatch.setattr(_option_checks, "gpu_arch", lambda: None)
    refusal = _option_checks.arch_refusal
    assert refusal(["-arch=sm_999"], "nvJitLink 13.5", refused=True) == (
        "arch 'sm_999' is not supported by nvJitLink 13.5"
    )
    assert refusal(["-arch=sm_999"], "nvJitLink 13.5", refused=False) == ""


def test_supported_archs_are_asked_once():
    first = _option_checks.nvrtc_targets()
    assert first == (_nvrtc()[0], tuple(_nvrtc()[1]))
    assert _option_checks.nvrtc_targets() is first


@pytest.mark.skipif(gpu_skip_reason() is None, reason="a GPU is present: its arch is named")
def test_without_a_gpu_no_gpu_is_named():
    assert _option_checks.gpu_arch() is None


@pytest.mark.gpu
def test_the_message_names_this_gpus_arch(dev):
    own = f"sm_{dev.arch}"
    assert _option_checks.gpu_arch() == own
    with pytest.raises(NVRTCError, match=f"; this GPU is {own}"):
        Program(KERNEL, options=ProgramOptions(arch="sm_999")).compile("ptx", cache=False)
    ptx = Program(KERNEL, options=ProgramOptions(arch=own)).compile("ptx", cache=False)
    with pytest.raises(LinkerError, match=f"; this GPU is {own}"):
        Linker(ptx, options=LinkerOptions(arch="sm_999")).link("cubin")
