"""Linker and LinkerOptions: flags, LTO linking, PTX/cubin inputs, link errors and logs."""

from __future__ import annotations

import pytest

from cuda_core._compile._linker import Linker, LinkerOptions
from cuda_core._compile._object_code import ObjectCode
from cuda_core._compile._program import Program, ProgramOptions
from cuda_core._errors import LinkerError

ARCH = "sm_90"
LIB = "__device__ float twice(float x) { return 2.0f * x; }\n"
MAIN = (
    "__device__ float twice(float x);\n"
    'extern "C" __global__ void k(float* p) { p[threadIdx.x] = twice(p[threadIdx.x]); }\n'
)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cache"))


def _lto(src, name):
    opts = ProgramOptions(
        arch=ARCH, relocatable_device_code=True, link_time_optimization=True, name=name
    )
    return Program(src, options=opts).compile("ltoir")


def test_linker_options_flags():
    o = LinkerOptions(
        arch="90",
        max_register_count=64,
        time=True,
        verbose=True,
        link_time_optimization=True,
        ptx=True,
        optimization_level=3,
        debug=True,
        lineinfo=True,
        ftz=True,
        prec_div=False,
        prec_sqrt=True,
        fma=False,
        kernels_used=["a", "b"],
        variables_used="v",
        optimize_unused_variables=True,
        ptxas_options=["-v"],
        split_compile=0,
        split_compile_extended=1,
        no_cache=True,
    )
    assert o.as_bytes() == [
        b"-arch=sm_90",
        b"-maxrregcount=64",
        b"-time",
        b"-verbose",
        b"-lto",
        b"-ptx",
        b"-O3",
        b"-g",
        b"-lineinfo",
        b"-ftz=true",
        b"-prec-div=false",
        b"-prec-sqrt=true",
        b"-fma=false",
        b"-kernels-used=a",
        b"-kernels-used=b",
        b"-variables-used=v",
        b"-optimize-unused-variables",
        b"-Xptxas=-v",
        b"-split-compile=0",
        b"-split-compile-extended=1",
        b"-no-cache",
    ]
    assert LinkerOptions(arch=ARCH).as_bytes() == [b"-arch=sm_90"]
    with pytest.raises(ValueError, match="optimization_level"):
        LinkerOptions(optimization_level=7)
    # On/off options take any truth value, as in cuda.core.
    assert (
        LinkerOptions(arch=ARCH, ftz=1).as_bytes() == LinkerOptions(arch=ARCH, ftz=True).as_bytes()
    )
    assert LinkerOptions(arch=ARCH, ftz=0).ftz is False


def test_lto_link_to_cubin_and_ptx():
    a, b = _lto(LIB, "lib.cu"), _lto(MAIN, "main.cu")
    assert a.code_type == b.code_type == "ltoir"
    ln = Linker(a, b, options=LinkerOptions(arch=ARCH, link_time_optimization=True, name="linked"))
    assert ln.backend == "nvJitLink"
    cubin = ln.link("cubin")
    assert cubin.code_type == "cubin" and cubin.code[:4] == b"\x7fELF" and cubin.name == "linked"
    ptx = Linker(a, b, options=LinkerOptions(arch=ARCH, link_time_optimization=True)).link("ptx")
    assert ptx.code_type == "ptx"
    assert b".entry k" in ptx.code
    assert b"twice" not in ptx.code  # inlined across modules by LTO
    assert isinstance(ln.get_info_log(), str) and ln.get_error_log() == ""


def test_link_ptx_inputs_with_relocatable_code():
    opts = ProgramOptions(arch=ARCH, relocatable_device_code=True)
    a = Program(LIB, options=opts).compile("ptx")
    b = Program(MAIN, options=opts).compile("ptx")
    with Linker(a, b, options={"arch": ARCH}) as ln:
        out = ln.link("cubin")
    assert out.code[:4] == b"\x7fELF"
    assert ln.is_closed
    with pytest.raises(ValueError, match="closed"):
        ln.link("cubin")


def test_link_from_files(tmp_path):
    a, b = _lto(LIB, "lib.cu"), _lto(MAIN, "main.cu")
    pa, pb = tmp_path / "a.ltoir", tmp_path / "b.ltoir"
    pa.write_bytes(a.code)
    pb.write_bytes(b.code)
    out = Linker(
        ObjectCode.from_ltoir(str(pa)),
        ObjectCode.from_ltoir(str(pb)),
        options=LinkerOptions(arch=ARCH, link_time_optimization=True),
    ).link("cubin")
    assert out.code[:4] == b"\x7fELF"


def test_link_error_has_log():
    main = _lto(MAIN, "main.cu")  # twice() is never defined
    ln = Linker(main, options=LinkerOptions(arch=ARCH, link_time_optimization=True))
    with pytest.raises(LinkerError) as ei:
        ln.link("cubin")
    assert "twice" in ei.value.log
    assert ei.value.log.strip() in str(ei.value)
    assert str(ei.value).startswith("nvJitLinkComplete: NVJITLINK_ERROR_PTX_COMPILE")
    assert "twice" in ln.get_error_log()


def test_linker_argument_errors():
    with pytest.raises(ValueError, match="at least one"):
        Linker()
    with pytest.raises(TypeError, match=r"object_codes\[0\] must be an ObjectCode"):
        Linker(b"abc")
    ln = Linker(ObjectCode.from_ptx(b".version 8.0"), options=LinkerOptions(arch=ARCH))
    with pytest.raises(ValueError, match="target_type"):
        ln.link("fatbin")


def test_which_backend_name_default_and_numba_debug():
    from cuda_core._compile._libraries import nvjitlink_available
    from cuda_core.typing import CompilerBackendType

    b = Linker.which_backend()
    if not nvjitlink_available():  # the GPU run under cuda-bindings 12.x has only nvJitLink 13
        assert b is CompilerBackendType.DRIVER and b == "driver"
        pytest.skip(
            "nvJitLink of the installed cuda-bindings' major is not installed; the driver's linker is used"
        )
    assert (
        b is CompilerBackendType.NVJITLINK and b == "nvJitLink"
    )  # the [cu13]/[cu12] extra installs it
    assert (
        Linker(ObjectCode.from_ptx(b".version 8.0"), options=LinkerOptions(arch=ARCH)).backend is b
    )
    assert LinkerOptions().name == "<default linker>"
    ptx = Program(MAIN + LIB, options=ProgramOptions(arch=ARCH)).compile("ptx", cache=False)
    assert Linker(ptx, options=LinkerOptions(arch=ARCH)).link("cubin").name == "<default linker>"
    with pytest.warns(DeprecationWarning, match="numba_debug has no effect"):
        opts = LinkerOptions(arch=ARCH, numba_debug=True)
    assert opts.as_bytes() == LinkerOptions(arch=ARCH).as_bytes()  # ignored, as in cuda.core


def test_linker_without_arch_names_linker_options():
    from tests.helpers import gpu_skip_reason

    if gpu_skip_reason() is None:
        pytest.skip("with a GPU the arch comes from the device")
    obj = Program(LIB, options=ProgramOptions(arch=ARCH, relocatable_device_code=True)).compile(
        "ptx"
    )
    with pytest.raises(ValueError, match=r"^LinkerOptions\.arch was not given"):
        Linker(obj).link("cubin")


def test_linker_options_messages():
    with pytest.raises(
        TypeError,
        match=r"LinkerOptions\(\) got unknown LinkerOptions field 'archh' \(did you mean 'arch'\?\)",
    ):
        LinkerOptions(archh="sm_90")
    with pytest.raises(ValueError, match="max_register_count must be"):
        LinkerOptions(max_register_count=-1)
    assert repr(LinkerOptions(arch="sm_90")) == "LinkerOptions(arch='sm_90')"
