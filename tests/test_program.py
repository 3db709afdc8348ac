"""Program and ProgramOptions: flag mapping, compiling to PTX/cubin/LTO-IR, names, errors."""

from __future__ import annotations

import io
import pickle

import pytest
from cuda.bindings import nvrtc, nvvm

from cuda_core._errors import CUDAError, NVRTCError, NVVMError
from cuda_core._module import ObjectCode
from cuda_core._program import Program, ProgramOptions
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
    ({"ptxas_options": ["-v", "--warn-on-spills"]}, ["--ptxas-options=-v", "--ptxas-options=--warn-on-spills"]),
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
]


@pytest.mark.parametrize(("kw", "flags"), FLAG_CASES)
def test_flag_mapping_and_nvrtc_accepts_it(kw, flags):
    opts = _opts(**kw)
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
    special = {"name", "arch", "pre_include", "time", "fdevice_syntax_only", "create_pch", "use_pch",
               "pch_dir", "pch_verbose", "pch_messages", "instantiate_templates_in_pch"}
    fields = {f.name for f in dataclasses.fields(ProgramOptions)}
    assert fields - covered - special == set()


def test_time_pre_include_and_syntax_only(tmp_path):
    hdr = tmp_path / "pre.h"
    hdr.write_text("#define PRE_VALUE 7\n")
    t = tmp_path / "timing.csv"
    opts = _opts(pre_include=str(hdr), time=str(t))
    assert opts.as_bytes("nvrtc")[1:] == [f"--pre-include={hdr}".encode(), f"--time={t}".encode()]
    obj = Program('extern "C" __global__ void k(int* p) { *p = PRE_VALUE; }', options=opts).compile("ptx", cache=False)
    assert b"7" in obj.code
    assert t.exists()
    assert _opts(fdevice_syntax_only=True).as_bytes()[1:] == [b"--fdevice-syntax-only"]


def test_pch_flags_follow_nvrtc_version(tmp_path):
    opts = _opts(use_pch=True, pch_dir=str(tmp_path), pch_verbose=False, pch_messages=True,
                 instantiate_templates_in_pch=True, create_pch=str(tmp_path / "x.pch"))
    major, minor = nvrtc.nvrtcVersion()[1:]
    if (major, minor) >= (12, 8):
        assert opts.as_bytes("nvrtc")[1:] == [
            f"--create-pch={tmp_path / 'x.pch'}".encode(), b"--use-pch", f"--pch-dir={tmp_path}".encode(),
            b"--pch-verbose=false", b"--pch-messages=true", b"--instantiate-templates-in-pch=true",
        ]
    else:
        with pytest.raises(ValueError, match=r"12\.8"):
            opts.as_bytes("nvrtc")


def test_arch_forms_and_errors():
    assert ProgramOptions(arch="90").arch == "sm_90"
    assert ProgramOptions(arch="sm_90a").arch == "sm_90a"
    assert ProgramOptions(arch="compute_80").as_bytes()[0] == b"-arch=compute_80"
    with pytest.raises(ValueError, match="arch must be"):
        ProgramOptions(arch="hopper")
    with pytest.raises(TypeError, match="debug must be True, False or None"):
        ProgramOptions(debug=1)
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
        b"-arch=sm_90", b"-maxrregcount=32", b"-g", b"-ftz=true"
    ]
    assert _opts(ftz=True, fma=False, device_code_optimize=False).as_bytes("nvvm", "ltoir") == [
        b"-arch=compute_90", b"-opt=0", b"-ftz=1", b"-fma=0", b"-gen-lto"
    ]


def test_options_from_dict_and_bad_options():
    p = Program(SIMPLE, "c++", options={"arch": ARCH, "std": "c++17"})
    assert p.options == ProgramOptions(arch=ARCH, std="c++17")
    with pytest.raises(TypeError, match="unknown field"):
        Program(SIMPLE, "c++", options={"arch": ARCH, "bogus": 1})
    with pytest.raises(ValueError, match="code_type must be"):
        Program(SIMPLE, "fortran")
    with pytest.raises(TypeError, match="code must be"):
        Program(123)


# --- compiling -----------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["ptx", "cubin", "ltoir"])
def test_compile_targets(target):
    obj = Program(TEMPLATED, "c++", options=_opts(name="va")).compile(
        target, name_expressions=("vector_add<float>", "vector_add<double>"), cache=False
    )
    assert isinstance(obj, ObjectCode)
    assert obj.code_type == target
    assert obj.name == "va"
    assert len(obj.code) > 100
    if target == "ptx":
        assert b".version" in obj.code and b"_Z10vector_addIfEvPKT_S2_PS0_m" in obj.code
    if target == "cubin":
        assert obj.code[:4] == b"\x7fELF"


def test_name_expressions_lowered_names():
    names = ("vector_add<float>", b"vector_add<int>")
    obj = Program(TEMPLATED, options=_opts()).compile("ptx", name_expressions=names, cache=False)
    m = obj.symbol_mapping
    assert m == {
        "vector_add<float>": b"_Z10vector_addIfEvPKT_S2_PS0_m",
        b"vector_add<int>": b"_Z10vector_addIiEvPKT_S2_PS0_m",
    }
    for v in m.values():
        assert v in obj.code
    m["x"] = b"y"  # a copy
    assert "x" not in obj.symbol_mapping


def test_target_type_checked():
    with pytest.raises(ValueError, match="target_type must be"):
        Program(SIMPLE, options=_opts()).compile("fatbin")
    with pytest.raises(ValueError, match="name_expressions"):
        Program(".version 8.0", "ptx", options=_opts()).compile("cubin", name_expressions=("f",))


def test_compile_error_has_whole_log():
    bad = 'extern "C" __global__ void k(int* p) {\n  *p = not_declared_here;\n  return 1;\n}\n'
    with pytest.raises(NVRTCError) as ei:
        Program(bad, options=_opts(name="broken.cu", std="c++17")).compile("ptx")
    e = ei.value
    assert isinstance(e, CUDAError)
    assert e.name == "broken.cu"
    assert "not_declared_here" in e.log and "broken.cu" in e.log
    assert "-arch=sm_90" in e.options and "--std=c++17" in e.options
    msg = str(e)
    assert msg.startswith("nvrtcCompileProgram: NVRTC_ERROR_COMPILATION")
    assert e.log.strip() in msg
    e2 = pickle.loads(pickle.dumps(e))
    assert e2.log == e.log and e2.name == "broken.cu"


def test_logs_receive_warnings():
    src = 'extern "C" __global__ void k(int* p) { int unused_var = 3; *p = 1; }'
    logs = io.StringIO()
    Program(src, options=_opts(diag_warn=177)).compile("ptx", logs=logs, cache=False)
    assert "unused_var" in logs.getvalue()


def test_ptx_program_through_nvjitlink():
    ptx = Program(SIMPLE, options=_opts()).compile("ptx", cache=False).code
    p = Program(ptx, "ptx", options=_opts())
    assert p.backend == "nvJitLink"
    cubin = p.compile("cubin", cache=False)
    assert cubin.code_type == "cubin" and cubin.code[:4] == b"\x7fELF"
    with pytest.raises(ValueError, match="target_type must be"):
        p.compile("ptx")


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


def test_nvvm_program_to_ptx_and_ltoir():
    p = Program(_nvvm_ir(), "nvvm", options=_opts())
    assert p.backend == "NVVM"
    ptx = p.compile("ptx")
    assert b".entry nvvm_kernel" in ptx.code and b"42" in ptx.code
    lto = p.compile("ltoir", cache=False)
    assert lto.code_type == "ltoir" and len(lto.code) > 0 and lto.code != ptx.code


def test_nvvm_error_has_log():
    with pytest.raises(NVVMError) as ei:
        Program("this is not IR", "nvvm", options=_opts(name="bad_ir")).compile("ptx")
    assert ei.value.log
    assert ei.value.log in str(ei.value)


def test_handle_close_and_context_manager():
    with Program(SIMPLE, options=_opts()) as p:
        h = p.handle
        assert isinstance(h, nvrtc.nvrtcProgram) and int(h) != 0
        assert p.handle is h
        assert p.backend == "NVRTC"
        assert not p.is_closed
    assert p.is_closed
    p.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        p.compile("ptx")
    assert "closed" in repr(p)
    assert Program(b".version 8.0", "ptx").handle is None
