"""ProgramOptions and its flags: mapping, checks, PCH and the NVRTC version (compiling:
test_program_compile.py)."""

from __future__ import annotations

import pytest
from cuda.bindings import nvrtc, nvvm

from cuda_core._compile._program import Program, ProgramOptions
from cuda_core._errors import CUDAError, NVRTCError
from tests.helpers import gpu_skip_reason

ARCH = "sm_90"

TEMPLATED = r"""
template <typename T>
__global__ void vector_add(const T* a, const T* b, T* c, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
SIMPLE = 'extern "C" __global__ void fill(int* p, int v) { p[threadIdx.x] = v; }'


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_CORE_CACHE", raising=False)


def _opts(**kw):
    kw.setdefault("arch", ARCH)
    return ProgramOptions(**kw)


# --- flag mapping ---------------------------------------------------------------------------

FLAG_CASES = [
    ({"std": "c++17"}, ["--std=c++17"]),
    ({"debug": True}, ["--device-debug"]),
    ({"lineinfo": True}, ["--generate-line-info"]),
    ({"device_code_optimize": False}, []),
    ({"device_code_optimize": True}, ["--dopt=on"]),
    ({"ptxas_options": "-v"}, ["--ptxas-options=-v"]),
    (
        {"ptxas_options": ["-v", "--warn-on-spills"]},
        ["--ptxas-options=-v", "--ptxas-options=--warn-on-spills"],
    ),
    ({"max_register_count": 32}, ["--maxrregcount=32"]),
    ({"ftz": True}, ["--ftz=true"]),
    ({"ftz": False}, ["--ftz=false"]),
    ({"prec_sqrt": False}, ["--prec-sqrt=false"]),
    ({"prec_div": True}, ["--prec-div=true"]),
    ({"fma": False}, ["--fmad=false"]),
    ({"use_fast_math": True}, ["--use_fast_math"]),
    ({"extra_device_vectorization": True}, ["--extra-device-vectorization"]),
    ({"link_time_optimization": True}, ["--dlink-time-opt"]),
    ({"link_time_optimization": True, "gen_opt_lto": True}, ["--dlink-time-opt", "--gen-opt-lto"]),
    ({"define_macro": "FOO"}, ["--define-macro=FOO"]),
    ({"define_macro": ("N", "4")}, ["--define-macro=N=4"]),
    ({"define_macro": ["A", ("B", "2")]}, ["--define-macro=A", "--define-macro=B=2"]),
    ({"undefine_macro": ["X", "Y"]}, ["--undefine-macro=X", "--undefine-macro=Y"]),
    ({"include_path": "/opt/inc"}, ["--include-path=/opt/inc"]),
    ({"no_source_include": True}, ["--no-source-include"]),
    ({"relocatable_device_code": True}, ["--relocatable-device-code=true"]),
    ({"extensible_whole_program": True}, ["--extensible-whole-program"]),
    ({"builtin_move_forward": False}, ["--builtin-move-forward=false"]),
    ({"builtin_initializer_list": False}, ["--builtin-initializer-list=false"]),
    ({"disable_warnings": True}, ["--disable-warnings"]),
    ({"restrict": True}, ["--restrict"]),
    ({"device_as_default_execution_space": True}, ["--device-as-default-execution-space"]),
    ({"device_int128": True}, ["--device-int128"]),
    ({"optimization_info": "inline"}, ["--optimization-info=inline"]),
    ({"no_display_error_number": True}, ["--no-display-error-number"]),
    ({"diag_error": 550}, ["--diag-error=550"]),
    ({"diag_suppress": [177, 550]}, ["--diag-suppress=177", "--diag-suppress=550"]),
    ({"diag_warn": 20}, ["--diag-warn=20"]),
    ({"brief_diagnostics": True}, ["--brief-diagnostics=true"]),
    ({"split_compile": 2}, ["--split-compile=2"]),
    ({"minimal": True}, ["--minimal"]),
    ({"no_cache": True}, ["--no-cache"]),
    ({"frandom_seed": "1234"}, ["--frandom-seed=1234"]),
    ({"ofast_compile": "max"}, ["--Ofast-compile=max"]),
    ({"ofast_compile": "0"}, ["--Ofast-compile=0"]),
    ({"debug": True, "numba_debug": True}, ["--device-debug", "--numba-debug"]),
]

# The first NVRTC that takes each newer option (older ones raise a ValueError naming it).
NEWER = {
    "no_cache": (12, 9),
    "frandom_seed": (12, 8),
    "ofast_compile": (12, 8),
    "numba_debug": (13, 1),
    "fdevice_time_trace": (12, 8),
    "device_float128": (12, 8),
    "pch": (12, 8),
    "use_bundled_headers": (13, 3),
}


def _nvrtc_too_old(kw):
    have = tuple(nvrtc.nvrtcVersion()[1:])
    return [k for k in kw if k in NEWER and have < NEWER[k]]


@pytest.mark.parametrize(("kw", "flags"), FLAG_CASES)
def test_flag_mapping_and_nvrtc_accepts_it(kw, flags):
    opts = _opts(**kw)
    old = _nvrtc_too_old(kw)
    if old:
        with pytest.raises(ValueError, match=old[0]):
            opts.as_bytes("nvrtc")
        return
    got = opts.as_bytes("nvrtc")
    assert got[0] == b"-arch=sm_90"
    assert got[1:] == [f.encode() for f in flags]
    # NVRTC takes every flag: a compile with it succeeds.
    src = SIMPLE if not kw.get("minimal") else 'extern "C" __global__ void fill(int* p) { *p = 1; }'
    if kw.get("link_time_optimization"):
        obj = Program(src, "c++", options=opts).compile("ltoir", cache=False)
        assert obj.code_type == "ltoir" and len(obj.code) > 0
    else:
        obj = Program(src, "c++", options=opts).compile("ptx", cache=False)
        assert obj.code_type == "ptx" and b".entry fill" in obj.code


def test_every_field_has_a_flag_case_or_is_special():
    import dataclasses

    covered = {k for kw, _ in FLAG_CASES for k in kw}
    special = {
        "name",
        "arch",
        "pre_include",
        "time",
        "fdevice_syntax_only",
        "create_pch",
        "use_pch",
        "pch_dir",
        "pch_verbose",
        "pch_messages",
        "instantiate_templates_in_pch",
        "pch",
        "fdevice_time_trace",
        "device_float128",
        "use_bundled_headers",
        "extra_sources",
        "use_libdevice",
    }
    fields = {f.name for f in dataclasses.fields(ProgramOptions)}
    assert fields - covered - special == set()


def test_time_pre_include_and_syntax_only(tmp_path):
    hdr = tmp_path / "pre.h"
    hdr.write_text("#define PRE_VALUE 7\n")
    t = tmp_path / "timing.csv"
    opts = _opts(pre_include=str(hdr), time=str(t))
    assert opts.as_bytes("nvrtc")[1:] == [f"--pre-include={hdr}".encode(), f"--time={t}".encode()]
    obj = Program('extern "C" __global__ void k(int* p) { *p = PRE_VALUE; }', options=opts).compile(
        "ptx", cache=False
    )
    assert b"7" in obj.code
    assert t.exists()
    assert _opts(fdevice_syntax_only=True).as_bytes()[1:] == [b"--fdevice-syntax-only"]


def test_pch_flags_follow_nvrtc_version(tmp_path):
    opts = _opts(
        use_pch=str(tmp_path / "y.pch"),
        pch_dir=str(tmp_path),
        pch_verbose=False,
        pch_messages=True,
        instantiate_templates_in_pch=True,
        create_pch=str(tmp_path / "x.pch"),
        pch=True,
    )
    major, minor = nvrtc.nvrtcVersion()[1:]
    if (major, minor) >= (12, 8):
        assert opts.as_bytes("nvrtc")[1:] == [
            b"--pch",
            f"--create-pch={tmp_path / 'x.pch'}".encode(),
            f"--use-pch={tmp_path / 'y.pch'}".encode(),
            f"--pch-dir={tmp_path}".encode(),
            b"--pch-verbose=false",
            b"--pch-messages=true",
            b"--instantiate-templates-in-pch=true",
        ]
    else:
        with pytest.raises(ValueError, match=r"12\.8"):
            opts.as_bytes("nvrtc")


def test_field_order_and_name_default_follow_cuda_core():
    import dataclasses

    names = [f.name for f in dataclasses.fields(ProgramOptions)]
    assert names[:5] == [
        "name",
        "arch",
        "relocatable_device_code",
        "extensible_whole_program",
        "debug",
    ]
    assert names[-3:] == ["extra_sources", "use_libdevice", "numba_debug"]
    assert ProgramOptions().name == "default_program"
    o = ProgramOptions("mine", "sm_90", True)
    assert (o.name, o.arch, o.relocatable_device_code) == ("mine", "sm_90", True)
    assert Program(SIMPLE, options=_opts()).compile("ptx", cache=False).name == "default_program"


def test_new_option_values_are_checked():
    with pytest.raises(ValueError, match="ofast_compile must be one of"):
        ProgramOptions(ofast_compile="fast")
    with pytest.raises(TypeError, match="frandom_seed must be a string"):
        ProgramOptions(frandom_seed=7)
    with pytest.raises(TypeError, match="use_pch must be a string"):
        ProgramOptions(use_pch=True)
    with pytest.raises(TypeError, match="extra_sources must be"):
        ProgramOptions(extra_sources=["not a pair"])
    assert ProgramOptions(numba_debug=1).numba_debug is True  # any truth value, as in cuda.core


def test_nvvm_only_options_are_refused_by_nvrtc_and_nvjitlink():
    with pytest.raises(ValueError, match="extra_sources cannot be used with the NVRTC backend"):
        _opts(extra_sources=[("x", "y")]).as_bytes("nvrtc")
    with pytest.raises(ValueError, match="use_libdevice cannot be used with the NVRTC"):
        _opts(use_libdevice=True).as_bytes("nvrtc")
    # numba_debug asked of PTX input: Program warns (as cuda.core does) and the linker drops it
    assert _opts(numba_debug=True).as_bytes("nvjitlink") == [b"-arch=sm_90"]
    # NVVM: cuda.core's CUDAError with its whole message (code matches it whole)
    # (use_bundled_headers needs NVRTC 13.3+ even to be set: the GPU machine has 13.0)
    with pytest.raises(CUDAError) as info:
        _opts(no_cache=True, std="c++17").as_bytes("nvvm")
    assert isinstance(info.value, ValueError)  # as cuda_core raised before
    assert str(info.value) == (
        "The following options are not supported by NVVM backend: std, no_cache"
    )
    # A switch left at False asks for nothing: every backend takes it.
    assert _opts(use_libdevice=False).as_bytes("nvrtc") == [b"-arch=sm_90"]
    assert _opts(use_bundled_headers=False, no_cache=False).as_bytes("nvvm") == [
        b"-arch=compute_90"
    ]
    nvvm_flags = _opts(debug=True, numba_debug=True).as_bytes("nvvm")
    assert nvvm_flags == [b"-arch=compute_90", b"-g", b"-numba-debug"]


def test_time_trace_and_float128(tmp_path):
    if _nvrtc_too_old({"fdevice_time_trace": 1}):
        pytest.skip("NVRTC older than 12.8")
    trace = tmp_path / "trace"
    opts = _opts(fdevice_time_trace=str(trace))
    assert opts.as_bytes()[1:] == [f"--fdevice-time-trace={trace}".encode()]
    Program(SIMPLE, options=opts).compile("ptx")  # bypasses the default cache: the trace is written
    assert [p.name for p in tmp_path.glob("trace*")], "no time trace written"
    f128 = '__device__ __float128 g; extern "C" __global__ void k(double* p) { __float128 x = *p; g = x * x; *p = (double)g; }'
    opts = ProgramOptions(arch="sm_100", device_float128=True)
    assert opts.as_bytes()[1:] == [b"--device-float128"]
    assert b".entry k" in Program(f128, options=opts).compile("ptx", cache=False).code
    with pytest.raises(NVRTCError):
        Program(f128, options=ProgramOptions(arch="sm_100")).compile("ptx", cache=False)


def test_use_bundled_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cc"))
    if _nvrtc_too_old({"use_bundled_headers": 1}):
        # Refused when the options are made, as cuda.core does (a RuntimeError there).
        for exc in (ValueError, RuntimeError):
            with pytest.raises(exc, match=r"use_bundled_headers \(NVRTC 13\.3\+\)"):
                _opts(use_bundled_headers=True)
        return
    opts = _opts(use_bundled_headers=True)
    hdir = tmp_path / "cc" / "nvrtc-bundled-headers"
    assert opts.as_bytes()[1:] == [f"--use-bundled-headers={hdir}".encode()]
    src = (
        "#include <cuda/std/cstdint>\n#include <cuda_fp16.h>\n"
        'extern "C" __global__ void k(cuda::std::uint32_t* p) { *p = (unsigned)__half2float(__float2half(3.0f)); }'
    )
    obj = Program(src, options=opts).compile("ptx", cache=False)
    assert b".entry k" in obj.code
    assert hdir.is_dir() and any(hdir.iterdir())


def test_pch_status(tmp_path):
    p = Program(SIMPLE, options=_opts())
    assert p.pch_status is None
    p.compile("ptx", cache=False)
    assert p.pch_status is None  # not asked for
    if _nvrtc_too_old({"pch": 1}):
        pytest.skip("NVRTC older than 12.8")
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "big.h").write_text(
        "#pragma once\n"
        + "".join(
            f"template <int N> struct S{i} {{ static constexpr int v = N + {i}; }};\n"
            for i in range(200)
        )
    )
    pch_src = '#include "big.h"\n' + SIMPLE
    pch_file = tmp_path / "k.pch"
    q = Program(
        pch_src, options=_opts(create_pch=str(pch_file), include_path=str(tmp_path / "inc"))
    )
    q.compile("ptx")
    assert q.pch_status == "created" and pch_file.exists()
    q.compile("ptx")  # default cache bypassed: compiles (and writes the PCH) again
    assert q.pch_status == "created"
    (tmp_path / "auto").mkdir()
    auto = Program(
        pch_src,
        options=_opts(pch=True, pch_dir=str(tmp_path / "auto"), include_path=str(tmp_path / "inc")),
    )
    auto.compile("ptx")
    assert auto.pch_status in ("created", "not_attempted")
    assert Program(_nvvm_ir(), "nvvm", options=_opts()).pch_status is None


def test_arch_forms_and_errors():
    assert ProgramOptions(arch="90").arch == "sm_90"
    assert ProgramOptions(arch="sm_90a").arch == "sm_90a"
    assert ProgramOptions(arch="compute_80").as_bytes()[0] == b"-arch=compute_80"
    with pytest.raises(ValueError, match="arch must be"):
        ProgramOptions(arch="hopper")
    assert ProgramOptions(debug=1).debug is True  # any truth value, as in cuda.core
    with pytest.raises(TypeError, match="max_register_count"):
        ProgramOptions(max_register_count="32")
    with pytest.raises(ValueError, match="backend must be"):
        _opts().as_bytes("gcc")


@pytest.mark.skipif(gpu_skip_reason() is None, reason="a GPU is present, so arch has a default")
def test_no_gpu_and_no_arch_says_to_pass_arch():
    with pytest.raises(ValueError, match=r'pass arch="sm_XX"'):
        Program(SIMPLE, options=ProgramOptions()).compile("ptx")


def test_backend_rejects_options_it_cannot_take():
    with pytest.raises(ValueError, match="include_path"):
        _opts(include_path="/x").as_bytes("nvjitlink")
    with pytest.raises(ValueError, match="std"):
        _opts(std="c++17").as_bytes("nvvm")
    assert _opts(ftz=True, max_register_count=32, debug=True).as_bytes("nvjitlink") == [
        b"-arch=sm_90",
        b"-maxrregcount=32",
        b"-g",
        b"-ftz=true",
    ]
    assert _opts(ftz=True, fma=False, device_code_optimize=False).as_bytes("nvvm", "ltoir") == [
        b"-arch=compute_90",
        b"-opt=0",
        b"-ftz=1",
        b"-fma=0",
        b"-gen-lto",
    ]


def test_options_from_dict_and_bad_options():
    p = Program(SIMPLE, "c++", options={"arch": ARCH, "std": "c++17"})
    assert p.options == ProgramOptions(arch=ARCH, std="c++17")
    with pytest.raises(TypeError, match="unknown ProgramOptions field 'bogus'"):
        Program(SIMPLE, "c++", options={"arch": ARCH, "bogus": 1})
    with pytest.raises(RuntimeError, match=r"^Unsupported code_type='fortran'") as info:
        Program(SIMPLE, "fortran")
    assert isinstance(info.value, ValueError)  # as cuda_core raised before
    with pytest.raises(TypeError, match=r"^Expected type str, but got int: code must be"):
        Program(123)


def _nvvm_ir():
    major, minor, dmajor, dminor = nvvm.ir_version()
    return (
        'target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-'
        'f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"\n'
        'target triple = "nvptx64-nvidia-cuda"\n'
        "define void @nvvm_kernel(i32* %p) {\nentry:\n  store i32 42, i32* %p\n  ret void\n}\n"
        "!nvvm.annotations = !{!0}\n"
        '!0 = !{void (i32*)* @nvvm_kernel, !"kernel", i32 1}\n'
        "!nvvmir.version = !{!1}\n"
        f"!1 = !{{i32 {major}, i32 {minor}, i32 {dmajor}, i32 {dminor}}}\n"
    )
