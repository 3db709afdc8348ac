"""Kernel parameter types from mangled names and PTX (CPU tier, on NVRTC's own output)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_core import Program, ProgramOptions
from cuda_core._compile._param_types import (
    demangled_param_types,
    kernel_param_types,
    ptx_param_types,
)

SRC = r"""
struct Vec3 { float x, y, z; };
enum class Mode : int { A, B };
namespace ns {
struct P { double a; };
template <class T, int N> struct Arr { T v[N]; };
template <class T> __global__ void nsk(T* a, P p, P* pp, T v) {}
__global__ void inner(float* __restrict__ a, const float* __restrict__ b) {}
}
template <typename T>
__global__ void vector_add(const T* a, const T* b, T* c, size_t n) {}
__global__ void scale(float* p, float a, unsigned long n) {}
__global__ void scalars(bool b, char c, signed char sc, unsigned char uc, short s,
                        unsigned short us, int i, unsigned u, long l, unsigned long ul,
                        long long ll, unsigned long long ull, float f, double d) {}
__global__ void structs(Vec3 v, Mode m, ns::Arr<int, 2> a, ns::Arr<int, 2> a2, Vec3* pv,
                        const Vec3* cpv, Vec3** ppv) {}
template <int N, bool B, typename T> __global__ void literal(T* p, T v) {}
template <typename... Ts> __global__ void variadic(int n, Ts*... ps) {}
template <typename T> __global__ void ptrs(T** pp, const T* const* cpp, volatile T* vp) {}
extern "C" __global__ void plain(float* p, float a, int n, size_t m, double d, Vec3 v, bool b) {}
"""

# name expression -> the C types (as messages name them) and kinds of its parameters
EXPECTED = {
    "vector_add<float>": [
        ("const float*", "pointer"),
        ("const float*", "pointer"),
        ("float*", "pointer"),
        ("unsigned long", "int"),
    ],
    "vector_add<double>": [
        ("const double*", "pointer"),
        ("const double*", "pointer"),
        ("double*", "pointer"),
        ("unsigned long", "int"),
    ],
    "scale": [("float*", "pointer"), ("float", "float"), ("unsigned long", "int")],
    "scalars": [
        ("bool", "bool"),
        ("char", "int"),
        ("signed char", "int"),
        ("unsigned char", "int"),
        ("short", "int"),
        ("unsigned short", "int"),
        ("int", "int"),
        ("unsigned int", "int"),
        ("long", "int"),
        ("unsigned long", "int"),
        ("long long", "int"),
        ("unsigned long long", "int"),
        ("float", "float"),
        ("double", "float"),
    ],
    "structs": [
        ("Vec3", "other"),
        ("Mode", "other"),
        ("ns::Arr<int, 2>", "other"),
        ("ns::Arr<int, 2>", "other"),  # a substitution (S3_)
        ("Vec3*", "pointer"),
        ("const Vec3*", "pointer"),
        ("Vec3**", "pointer"),
    ],
    "ns::inner": [("float*", "pointer"), ("const float*", "pointer")],
    "ns::nsk<double>": [
        ("double*", "pointer"),
        ("ns::P", "other"),
        ("ns::P*", "pointer"),
        ("double", "float"),
    ],
    "ns::nsk<Vec3>": [
        ("Vec3*", "pointer"),
        ("ns::P", "other"),
        ("ns::P*", "pointer"),
        ("Vec3", "other"),
    ],
    "literal<-3, true, short>": [("short*", "pointer"), ("short", "int")],
    "variadic<>": [("int", "int")],
    "variadic<float, Vec3>": [("int", "int"), ("float*", "pointer"), ("Vec3*", "pointer")],
    "ptrs<int>": [
        ("int**", "pointer"),
        ("const int* const*", "pointer"),
        ("volatile int*", "pointer"),
    ],
}


@pytest.fixture(scope="module")
def ptx_module():
    opts = ProgramOptions(arch="sm_90", std="c++17")
    return Program(SRC, code_type="c++", options=opts).compile(
        "ptx", name_expressions=tuple(EXPECTED)
    )


def _symbol(mod, name):
    sym = mod.symbol_mapping[name]
    return sym.decode() if isinstance(sym, bytes) else sym


@pytest.mark.parametrize("name", list(EXPECTED))
def test_mangled_names_of_nvrtc_give_every_parameter_type(ptx_module, name):
    sym = _symbol(ptx_module, name)
    types = demangled_param_types(sym)
    assert types is not None, sym
    assert [(t.c_type, t.kind) for t in types] == EXPECTED[name], sym
    # The PTX the same compile wrote agrees: as many parameters, of the same sizes.
    ptx = ptx_param_types(ptx_module.code, sym)
    assert ptx is not None and len(ptx) == len(types)
    for mine, theirs in zip(types, ptx):
        assert theirs is not None
        if mine.size is not None:
            assert mine.size == theirs.size, (mine, theirs)
        if mine.kind == "pointer":
            assert theirs.kind == "word"
    # What ObjectCode.get_kernel hands the kernel: the mangled name wins over the PTX.
    assert kernel_param_types(sym.encode(), ptx_module.code, "ptx") == types
    assert kernel_param_types(sym.encode(), b"", "cubin") == types


def test_extern_c_kernel_types_come_from_its_ptx_entry(ptx_module):
    assert demangled_param_types("plain") is None
    types = kernel_param_types(b"plain", ptx_module.code, "ptx")
    assert types is not None
    assert [(t.c_type, t.kind, t.size) for t in types] == [
        ("a pointer or 64-bit integer (.u64)", "word", 8),
        ("float (.f32)", "float", 4),
        ("a 32-bit integer (.u32)", "int", 4),
        ("a pointer or 64-bit integer (.u64)", "word", 8),
        ("double (.f64)", "float", 8),
        (".b8[12]", "other", 12),  # a struct by value: never checked
        ("an 8-bit integer (.u8)", "int", 1),
    ]
    # A cubin, or PTX named by a path, tells nothing of an extern "C" kernel.
    assert kernel_param_types(b"plain", b"\x7fELF", "cubin") is None
    assert kernel_param_types(b"plain", "/some/file.ptx", "ptx") is None
    assert kernel_param_types(b"absent", ptx_module.code, "ptx") is None


def test_ptx_entries_written_by_hand():
    ptx = b"""
    .version 8.0
    .target sm_90
    .address_size 64
    .visible .entry k(
        .param .u64 .ptr .global .align 16 k_param_0,  // a pointer, said so
        .param .s64 k_param_1,
        .param .f16 k_param_2, /* a half */
        .param .align 8 .b8 k_param_3[24],
        .param .b32 k_param_4
    )
    .maxntid 128, 1, 1
    { ret; }
    .entry k2 ( .param .u32 n ) { ret; }
    .entry none() { ret; }
    .entry k_suffix(.param .f64 x) { ret; }
    """
    types = ptx_param_types(ptx, "k")
    assert types is not None
    assert [(t.c_type, t.kind, t.size) for t in types] == [
        ("a pointer (.u64 .ptr)", "pointer", 8),
        ("a pointer or 64-bit integer (.s64)", "word", 8),
        ("half (.f16)", "float", 2),
        (".b8[24]", "other", 24),
        (".b32", "other", 4),  # untyped bits: a float or an integer alike
    ]
    assert [t.c_type for t in ptx_param_types(ptx, "k2")] == ["a 32-bit integer (.u32)"]
    assert ptx_param_types(ptx, "none") == ()
    assert [t.c_type for t in ptx_param_types(ptx, "k_suffix")] == ["double (.f64)"]
    assert ptx_param_types(b".entry q(.param .x99 a)", "q") == (None,)  # unknown, not guessed
    assert ptx_param_types(b".entry q(.reg .u32 a)", "q") is None


@pytest.mark.parametrize(
    "symbol",
    [
        "plain",  # not mangled
        "_Z",
        "_Z5scale",  # a variable, no parameters
        "_Z5scalePf_",
        "_Z1fPFvvE",  # a function pointer
        "_Z1fRi",  # a reference
        "_Z1fA4_i",  # an array
        "_Z1fDv4_f",  # a vector type
        "_Z1fIiEvT0_",  # a template parameter that is not there
        "_Z1fILi3EEvT_",  # a value, not a type
        "_Z1fS_",  # a substitution that is not there
        "_Z1fSs",  # std::string
        "_ZN1A1fEv.cold",  # a clone
        "_ZNK1A1fEv",  # a const member function
        "_Z1fIJifEEvT_",  # a pack outside its expansion
        "_Z1fIJifEEvDpT_i",  # a parameter after the pack
        "_Z99f",  # a name longer than the symbol
    ],
)
def test_what_the_demangler_does_not_know_is_unknown(symbol):
    assert demangled_param_types(symbol) is None


@pytest.mark.parametrize(
    "symbol,expected",
    [
        ("_Z3foov", []),
        ("_Z4statPi", ["int*"]),
        ("_ZL4statPi", ["int*"]),  # internal linkage
        ("_ZN12_GLOBAL__N_14anonEPd", ["double*"]),
        ("_Z1fSt7complexIfEPS0_", ["std::complex<float>", "std::complex<float>*"]),
        ("_ZSt3fooIiEvPT_", ["int*"]),
        ("_Z1fPVKf", ["const volatile float*"]),
        ("_Z1fDhDF16_", ["half", "_Float16"]),
        ("_Z1fIJEEviDpT_", ["int"]),
    ],
)
def test_demangled_forms(symbol, expected):
    types = demangled_param_types(symbol)
    assert types is not None
    assert [t.c_type for t in types] == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="_ZNSEIJLTPKVrRODpv0123456789abcdfhijlmsxy", max_size=40))
def test_the_demangler_never_raises(symbol):
    result = demangled_param_types("_Z" + symbol)
    assert result is None or isinstance(result, tuple)


def test_every_prefix_of_real_symbols_is_read_or_refused(ptx_module):
    for name in EXPECTED:
        sym = _symbol(ptx_module, name)
        for end in range(len(sym)):
            demangled_param_types(sym[:end])  # never raises


def test_entries_are_found_by_their_whole_name(ptx_module):
    text = ptx_module.code.decode()
    sym = _symbol(ptx_module, "vector_add<float>")
    assert re.search(r"\.entry\s+" + re.escape(sym) + r"\(", text)
    assert ptx_param_types(ptx_module.code, sym[:-1]) is None


def test_a_ptr_parameter_of_untyped_bits_is_a_pointer_and_a_narrow_one_unknown():
    # ptxas accepts .ptr on .b64 (and on 32-bit types): .b64 was read by a slice of a name it
    # lacks, which raised from every launch of the kernel (a review finding).
    ptx = (
        b".version 8.0\n.target sm_90\n.address_size 64\n"
        b".visible .entry k(.param .b64 .ptr .global .align 8 k_0, .param .u32 .ptr k_1, "
        b".param .f32 k_2)\n{\nret;\n}\n"
    )
    types = ptx_param_types(ptx, "k")
    assert types is not None
    assert (types[0].c_type, types[0].kind, types[0].size) == (
        "a pointer (.b64 .ptr)",
        "pointer",
        8,
    )
    assert types[1] is None and types[2].kind == "float"


def test_kernel_param_types_never_raises(monkeypatch):
    from cuda_core._compile import _param_types

    def broken(name):
        raise ValueError("a reader's own bug")

    monkeypatch.setattr(_param_types, "demangled_param_types", broken)
    assert _param_types.kernel_param_types(b"_Z1kPf", None, "cubin") is None


def test_a_back_reference_inside_a_pack_expansion_names_its_own_element():
    # pairs<float, int>(int, std::pair<Ts, Ts*>...): each element reads the pattern afresh (the
    # trial pass's substitutions were kept and S1_ named a placeholder: a review finding).
    types = demangled_param_types("_Z5pairsIJfiEEviDpSt4pairIT_PS1_E")
    assert types is not None
    assert [t.c_type for t in types] == [
        "int",
        "std::pair<float, float*>",
        "std::pair<int, int*>",
    ]
