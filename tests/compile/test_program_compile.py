"""Program compiling: to PTX, cubin and LTO-IR, lowered names, logs and errors, NVVM, closing;
and the messages a newcomer meets first (ProgramOptions' flags: test_program.py)."""

from __future__ import annotations

import io
import pickle

import pytest
from cuda.bindings import nvrtc, nvvm

from cuda_core._compile._object_code import ObjectCode
from cuda_core._compile._program import Program, ProgramOptions
from cuda_core._errors import CUDAError, NVRTCError, NVVMError
from tests.compile.test_program import (
    ARCH,
    SIMPLE,
    TEMPLATED,
    _nvvm_ir,
    _opts,
    _private_cache,  # noqa: F401 (autouse: each test compiles with a cache in tmp_path)
)


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


def test_nvvm_program_to_ptx_and_ltoir():
    p = Program(_nvvm_ir(), "nvvm", options=_opts())
    assert p.backend == "NVVM"
    ptx = p.compile("ptx")
    assert b".entry nvvm_kernel" in ptx.code and b"42" in ptx.code
    lto = p.compile("ltoir", cache=False)
    assert lto.code_type == "ltoir" and len(lto.code) > 0 and lto.code != ptx.code


def _nvvm_module(body):
    major, minor, dmajor, dminor = nvvm.ir_version()
    return (
        'target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-'
        'f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"\n'
        'target triple = "nvptx64-nvidia-cuda"\n' + body + "!nvvmir.version = !{!1}\n"
        f"!1 = !{{i32 {major}, i32 {minor}, i32 {dmajor}, i32 {dminor}}}\n"
    )


def test_nvvm_extra_sources_and_libdevice():
    main = _nvvm_module(
        "declare i32 @helper(i32)\n"
        "declare float @__nv_sinf(float)\n"
        "define void @uses_both(i32* %p, float* %f) {\nentry:\n"
        "  %v = call i32 @helper(i32 5)\n  store i32 %v, i32* %p\n"
        "  %s = call float @__nv_sinf(float 1.0)\n  store float %s, float* %f\n  ret void\n}\n"
        "!nvvm.annotations = !{!0}\n"
        '!0 = !{void (i32*, float*)* @uses_both, !"kernel", i32 1}\n'
    )
    helper = _nvvm_module(
        "define i32 @helper(i32 %x) {\nentry:\n  %y = mul i32 %x, 7919\n  ret i32 %y\n}\n"
    )
    opts = _opts(extra_sources=[("helper.ll", helper)], use_libdevice=True)
    ptx = Program(main, "nvvm", options=opts).compile("ptx", cache=False).code
    assert b".entry uses_both" in ptx
    assert b"39595" in ptx  # helper (5 * 7919) linked in and folded
    assert b".extern" not in ptx  # both calls resolved: helper module and libdevice
    no_helper = (
        Program(main, "nvvm", options=_opts(use_libdevice=True)).compile("ptx", cache=False).code
    )
    assert (
        b".extern .func  (.param .b32 func_retval0) helper" in no_helper
        and b"__nv_sinf" not in no_helper
    )
    no_libdevice = (
        Program(main, "nvvm", options=_opts(extra_sources=[("h", helper.encode())]))
        .compile("ptx", cache=False)
        .code
    )
    assert b"__nv_sinf" in no_libdevice and b"39595" in no_libdevice
    # bytes sources work too, and the cache key covers extra sources
    from cuda_core._compile._cache import make_program_cache_key

    k1 = make_program_cache_key(code=main, code_type="nvvm", options=opts, target_type="ptx")
    other = _opts(
        extra_sources=[("helper.ll", helper.encode().replace(b"7919", b"7907"))], use_libdevice=True
    )
    k2 = make_program_cache_key(code=main, code_type="nvvm", options=other, target_type="ptx")
    k3 = make_program_cache_key(
        code=main,
        code_type="nvvm",
        options=_opts(extra_sources=[("helper.ll", helper)]),
        target_type="ptx",
    )
    assert len({k1, k2, k3}) == 3


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


# --- messages a newcomer meets first (issue 13) -----------------------------------------------


def test_unknown_keyword_suggests_the_close_field():
    with pytest.raises(TypeError) as info:
        ProgramOptions(fast_math=True)
    assert str(info.value) == (
        "ProgramOptions() got unknown ProgramOptions field 'fast_math' (did you mean 'use_fast_math'?); "
        "help(ProgramOptions) lists the fields"
    )


def test_unknown_dict_key_names_it_without_listing_every_field():
    with pytest.raises(TypeError) as info:
        Program(SIMPLE, "c++", options={"arch": ARCH, "fast_math": True})
    text = str(info.value)
    assert "'fast_math' (did you mean 'use_fast_math'?)" in text
    assert "brief_diagnostics" not in text  # no dump of the 58 field names
    assert len(text) < 200


def test_unknown_keyword_with_no_close_match_names_it():
    with pytest.raises(
        TypeError, match=r"unknown ProgramOptions field 'zzz'; help\(ProgramOptions\)"
    ):
        ProgramOptions(zzz=1)


def test_negative_count_is_a_value_error_and_a_wrong_type_a_type_error():
    with pytest.raises(
        ValueError, match=r"max_register_count must be a non-negative int or None \(got -1\)"
    ):
        ProgramOptions(max_register_count=-1)
    with pytest.raises(TypeError, match="max_register_count must be"):
        ProgramOptions(max_register_count="32")
    with pytest.raises(ValueError, match="split_compile must be"):
        ProgramOptions(split_compile=-2)


def test_repr_shows_only_what_was_set():
    assert repr(ProgramOptions(arch="sm_90")) == "ProgramOptions(arch='sm_90')"
    assert repr(ProgramOptions()) == "ProgramOptions()"
    assert repr(ProgramOptions(arch="sm_80", std="c++17", use_fast_math=True)) == (
        "ProgramOptions(arch='sm_80', use_fast_math=True, std='c++17')"
    )


def test_cubin_for_a_virtual_arch_is_refused_with_the_fix():
    p = Program(SIMPLE, "c++", options=ProgramOptions(arch="compute_90"))
    with pytest.raises(ValueError, match=r'"cubin" needs a real architecture.*pass arch="sm_90"'):
        p.compile("cubin", cache=False)
    assert p.compile("ptx", cache=False).code  # PTX for compute_90 is fine


def test_a_lone_name_expression_string_is_one_name():
    one = Program(TEMPLATED, "c++", options=_opts()).compile(
        "ptx", name_expressions="vector_add<float>", cache=False
    )
    assert list(one.symbol_mapping) == ["vector_add<float>"]
    assert one.symbol_mapping["vector_add<float>"].startswith(b"_Z")
