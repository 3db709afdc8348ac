"""Incremental links and linked LTO-IR (cuda.core 1.3): ``LinkerOptions(incremental=True)``
(nvJitLink 13.2+) and ``Linker.link("ltoir")`` (nvJitLink 13.3+), on the nvJitLink installed here.

Where the installed nvJitLink is new enough, the chains really link; where it is older, the
refusals are checked instead (each test says which it needs). The refusal itself is checked on
any nvJitLink against a version above the installed one.
"""

from __future__ import annotations

import pytest

from cuda_core import Linker, LinkerError, LinkerOptions, ObjectCode, Program, ProgramOptions
from cuda_core._compile import _libraries, _linker

ARCH = "sm_90"
F = 'extern "C" __device__ int f(int x) { return x + 1; }\n'
G = 'extern "C" __device__ int f(int);\nextern "C" __device__ int g(int x) { return f(x) * 2; }\n'
K = 'extern "C" __device__ int g(int);\nextern "C" __global__ void k(int* p) { *p = g(*p); }\n'
LTO = {"arch": ARCH, "link_time_optimization": True}
HAVE = _libraries.nvjitlink_version()


def _needs(since):
    return pytest.mark.skipif(
        HAVE is None or HAVE < since,
        reason=f"needs nvJitLink {since[0]}.{since[1]}+ (here: {HAVE}); the refusal is tested instead",
    )


def _older_than(since):
    return pytest.mark.skipif(
        HAVE is not None and HAVE >= since,
        reason=f"nvJitLink {HAVE} here is {since[0]}.{since[1]}+, so the real link is tested",
    )


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cache"))


def _ltoir(src, name):
    opts = ProgramOptions(
        arch=ARCH, relocatable_device_code=True, link_time_optimization=True, name=name
    )
    return Program(src, options=opts).compile("ltoir")


def _ptx(src, name):
    opts = ProgramOptions(arch=ARCH, relocatable_device_code=True, name=name)
    return Program(src, options=opts).compile("ptx")


def test_incremental_is_the_relocatable_link_flag():
    assert LinkerOptions(arch=ARCH, incremental=True).as_bytes()[-1] == b"-r"
    assert b"-r" not in LinkerOptions(arch=ARCH, incremental=False).as_bytes()
    assert LinkerOptions(arch=ARCH, incremental=1).incremental is True  # any truth value
    assert LinkerOptions().incremental is None
    assert "incremental=True" in repr(LinkerOptions(incremental=True))


def test_the_refusal_names_the_version_needed():
    # The installed nvJitLink, asked for a version above it: the path an older one takes.
    with pytest.raises(
        NotImplementedError, match=r"^a feature requires nvJitLink 99\.0 or newer"
    ) as e:
        _libraries.require_nvjitlink((99, 0), "a feature")
    assert (
        "no nvJitLink is installed" if HAVE is None else f"nvJitLink {HAVE[0]}.{HAVE[1]}"
    ) in str(e.value)
    if HAVE is not None:
        _libraries.require_nvjitlink(HAVE, "a feature")  # its own version is enough


@_needs(_linker.INCREMENTAL_SINCE)
def test_an_incremental_native_link_is_a_cubin_another_linker_takes():
    partial = Linker(
        _ltoir(F, "f.cu"), _ltoir(G, "g.cu"), options=LinkerOptions(**LTO, incremental=True)
    ).link("cubin")
    assert partial.code_type == "cubin" and partial.code[:4] == b"\x7fELF"
    # g() is resolved in the partial result; the kernel links against it in a second step.
    final = Linker(partial, _ptx(K, "k.cu"), options=LinkerOptions(arch=ARCH)).link("cubin")
    assert final.code[:4] == b"\x7fELF"
    # Without -r, LTO drops f and g (nothing references them): the kernel finds no g.
    whole = Linker(_ltoir(F, "f.cu"), _ltoir(G, "g.cu"), options=LinkerOptions(**LTO)).link("cubin")
    with pytest.raises(LinkerError, match="Undefined reference to 'g'"):
        Linker(whole, _ptx(K, "k.cu"), options=LinkerOptions(arch=ARCH)).link("cubin")


@_needs(_linker.LTOIR_OUTPUT_SINCE)
def test_an_incremental_lto_chain_keeps_ir_until_the_final_link():
    partial = Linker(
        _ltoir(F, "f.cu"), _ltoir(G, "g.cu"), options=LinkerOptions(**LTO, incremental=True)
    ).link("ltoir")
    assert partial.code_type == "ltoir" and partial.code[:4] == _ltoir(F, "f.cu").code[:4]
    final = Linker(partial, _ltoir(K, "k.cu"), options=LinkerOptions(**LTO)).link("ptx")
    text = final.code.decode() if isinstance(final.code, bytes) else final.code
    assert ".entry k" in text
    # f and g came in as IR and were optimised into the kernel: no call remains.
    assert "call" not in text and ".func" not in text
    again = ObjectCode.from_ltoir(partial.code)
    assert Linker(again, _ltoir(K, "k.cu"), options=LinkerOptions(**LTO)).link("cubin").code[
        :4
    ] == (b"\x7fELF")


def test_ltoir_output_needs_lto_and_takes_no_ptx_or_cubin():
    f = _ltoir(F, "f.cu")
    with pytest.raises(ValueError, match=r'link\("ltoir"\) requires link_time_optimization=True'):
        Linker(f, options=LinkerOptions(arch=ARCH)).link("ltoir")
    with pytest.raises(ValueError, match=r"cannot take PTX or cubin inputs: k\.cu \(ptx\)"):
        Linker(f, _ptx(K, "k.cu"), options=LinkerOptions(**LTO)).link("ltoir")
    cubin = ObjectCode.from_cubin(b"\x7fELF not linked", name="pre.cubin")
    with pytest.raises(ValueError, match=r"pre\.cubin \(cubin\)"):
        Linker(f, cubin, options=LinkerOptions(**LTO)).link("ltoir")
    with pytest.raises(ValueError, match='"cubin", "ptx" or "ltoir"'):
        Linker(f, options=LinkerOptions(**LTO)).link("fatbin")


@_older_than(_linker.INCREMENTAL_SINCE)
def test_incremental_on_an_older_nvjitlink_is_refused():
    with pytest.raises(NotImplementedError, match=r"incremental=True\) requires nvJitLink 13\.2"):
        Linker(_ltoir(F, "f.cu"), options=LinkerOptions(**LTO, incremental=True))


@_older_than(_linker.LTOIR_OUTPUT_SINCE)
def test_ltoir_output_on_an_older_nvjitlink_is_refused():
    with pytest.raises(NotImplementedError, match=r'link\("ltoir"\) requires nvJitLink 13\.3'):
        Linker(_ltoir(F, "f.cu"), options=LinkerOptions(**LTO)).link("ltoir")
