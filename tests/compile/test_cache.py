"""The compile cache: hits, misses, key sensitivity, templates, corruption, processes, eviction."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys

import pytest

from cuda_core._compile._cache import (
    _UTILS_EXPORTS,
    FileStreamProgramCache,
    InMemoryProgramCache,
    ProgramCacheResource,
    get_default_program_cache,
    make_program_cache_key,
)
from cuda_core._compile._object_code import ObjectCode
from cuda_core._compile._program import Program, ProgramOptions

ARCH = "sm_90"
TEMPLATED = r"""
template <typename T>
__global__ void scale(T* x, T a, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""
NAMES = ("scale<float>", "scale<double>")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(d))
    monkeypatch.delenv("CUDA_CORE_CACHE", raising=False)
    get_default_program_cache().reset_stats()
    return d


def _compile(code=TEMPLATED, names=NAMES, target="cubin", **kw):
    kw.setdefault("arch", ARCH)
    return Program(code, "c++", options=ProgramOptions(**kw)).compile(
        target, name_expressions=names
    )


def _entry_files(d):
    return sorted(
        p for p in (d / "entries").rglob("*") if p.is_file() and not p.name.startswith(".tmp-")
    )


def test_utils_exports_exist():
    import cuda_core._compile._cache as c

    assert sorted(_UTILS_EXPORTS) == _UTILS_EXPORTS
    for n in _UTILS_EXPORTS:
        assert hasattr(c, n)


def test_miss_then_memory_hit_then_disk_hit(cache_dir):
    c = get_default_program_cache()
    a = _compile()
    assert (c.hits, c.misses) == (0, 1)
    assert len(_entry_files(cache_dir)) == 1
    b = _compile()
    assert (c.hits, c.misses, c.memory_hits) == (1, 1, 1)
    assert b.code == a.code and b is not a
    c.clear(disk=False)
    d = _compile()
    assert (c.hits, c.disk_hits) == (2, 1)
    assert d.code == a.code


def test_templated_hit_restores_symbol_mapping(cache_dir):
    a = _compile()
    get_default_program_cache().clear(disk=False)
    b = _compile()
    assert get_default_program_cache().disk_hits == 1
    assert b.symbol_mapping == a.symbol_mapping
    assert b.symbol_mapping["scale<float>"] == b"_Z5scaleIfEvPT_S0_m"
    assert b.name == a.name and b.code_type == "cubin"


def test_hit_in_a_fresh_process(cache_dir):
    _compile()
    script = (
        "from cuda_core._compile._program import Program, ProgramOptions\n"
        "from cuda_core._compile._cache import get_default_program_cache as g\n"
        f"o = Program({TEMPLATED!r}, options=ProgramOptions(arch={ARCH!r})).compile('cubin', name_expressions={NAMES!r})\n"
        "print(g().disk_hits, g().misses, o.symbol_mapping['scale<double>'].decode())\n"
    )
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["1", "0", "_Z5scaleIdEvPT_S0_m"]


@pytest.mark.parametrize(
    "change",
    [
        {"code": TEMPLATED + "\n// edited\n"},
        {"names": ("scale<float>",)},
        {"names": ("scale<float>", "scale<int>")},
        {"target": "ptx"},
        {"arch": "sm_80"},
        {"std": "c++17"},
        {"use_fast_math": True},
        {"define_macro": "X"},
        {"name": "other_name"},
    ],
)
def test_key_changes_with_every_input(change):
    base = {"code": TEMPLATED, "names": NAMES, "target": "cubin", "arch": ARCH}
    k0 = make_program_cache_key(
        code=base["code"],
        code_type="c++",
        options=ProgramOptions(arch=ARCH),
        target_type="cubin",
        name_expressions=NAMES,
    )
    args = {**base, **change}
    opt_kw = {k: v for k, v in args.items() if k not in ("code", "names", "target")}
    k1 = make_program_cache_key(
        code=args["code"],
        code_type="c++",
        options=ProgramOptions(**opt_kw),
        target_type=args["target"],
        name_expressions=args["names"],
    )
    assert len(k0) == len(k1) == 32
    assert k0 != k1


def test_key_is_stable_and_order_free():
    o = ProgramOptions(arch=ARCH)
    k = make_program_cache_key(
        code=TEMPLATED, code_type="c++", options=o, target_type="cubin", name_expressions=NAMES
    )
    assert k == make_program_cache_key(
        code=TEMPLATED,
        code_type="c++",
        options=ProgramOptions(arch=ARCH),
        target_type="cubin",
        name_expressions=NAMES[::-1],
    )
    assert k != make_program_cache_key(
        code=TEMPLATED,
        code_type="c++",
        options=o,
        target_type="cubin",
        name_expressions=[n.encode() for n in NAMES],
    )
    assert k != make_program_cache_key(
        code=TEMPLATED,
        code_type="c++",
        options=o,
        target_type="cubin",
        name_expressions=NAMES,
        extra_digest=b"x",
    )
    with pytest.raises(ValueError, match="target_type"):
        make_program_cache_key(code="x", code_type="ptx", options=o, target_type="ltoir")


def test_included_header_change_misses(tmp_path):
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    (inc / "sub" / "deep.h").write_text("#define DEEP 1\n")
    (inc / "val.h").write_text('#include "sub/deep.h"\n#define VAL (DEEP + 1)\n')
    src = '#include <val.h>\nextern "C" __global__ void k(int* p) { *p = VAL; }\n'
    c = get_default_program_cache()
    a = _compile(src, (), "ptx", include_path=str(inc))
    _compile(src, (), "ptx", include_path=str(inc))
    assert (c.hits, c.misses) == (1, 1)
    (inc / "sub" / "deep.h").write_text("#define DEEP 40\n")  # a header included by a header
    b = _compile(src, (), "ptx", include_path=str(inc))
    assert c.misses == 2
    assert b"41" in b.code and a.code != b.code
    pre = tmp_path / "pre.h"
    pre.write_text("#define P 1\n")
    _compile(SRC_P, (), "ptx", pre_include=str(pre))
    pre.write_text("#define P 2\n")
    _compile(SRC_P, (), "ptx", pre_include=str(pre))
    assert c.misses == 4


SRC_P = 'extern "C" __global__ void k(int* p) { *p = P; }\n'


def test_corrupt_truncated_and_foreign_files_are_misses(cache_dir):
    c = get_default_program_cache()
    a = _compile()
    (f,) = _entry_files(cache_dir)
    good = f.read_bytes()
    for bad in (good[:-7], good[:10], b"", good[:-1] + bytes([good[-1] ^ 1]), b"garbage" * 100):
        f.write_bytes(bad)
        c.clear(disk=False)
        misses = c.misses
        b = _compile()
        assert c.misses == misses + 1
        assert b.code == a.code
        assert f.read_bytes() == good  # rewritten


def test_disk_off_with_env(cache_dir, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE", "0")
    c = get_default_program_cache()
    _compile()
    _compile()
    assert (c.hits, c.misses) == (1, 1)  # memory layer still works
    assert not (cache_dir / "entries").exists() or _entry_files(cache_dir) == []
    assert c.disk is None


def test_cache_false_and_explicit_cache():
    p = Program(TEMPLATED, options=ProgramOptions(arch=ARCH))
    c = get_default_program_cache()
    p.compile("ptx", name_expressions=NAMES, cache=False)
    assert (c.hits, c.misses) == (0, 0)
    mine = InMemoryProgramCache()
    a = p.compile("ptx", name_expressions=NAMES, cache=mine)
    b = p.compile("ptx", name_expressions=NAMES, cache=mine)
    assert (mine.hits, mine.misses) == (1, 1) and len(mine) == 1
    assert b.symbol_mapping == a.symbol_mapping and b.code == a.code
    with pytest.raises(TypeError, match="cache must be"):
        p.compile("ptx", cache=42)


def test_in_memory_cache_lru():
    c = InMemoryProgramCache(max_size_bytes=10)
    assert isinstance(c, ProgramCacheResource)
    c[b"a"] = b"1234"
    c[b"b"] = b"1234"
    assert c[b"a"] == b"1234"  # a is now most recent
    c[b"c"] = b"1234"  # evicts b
    assert b"b" not in c and b"a" in c and b"c" in c
    del c[b"a"]
    assert len(c) == 1
    with pytest.raises(KeyError):
        c[b"zz"]
    c.clear()
    assert len(c) == 0
    with pytest.raises(ValueError, match="max_size_bytes"):
        InMemoryProgramCache(max_size_bytes=0)


def test_file_cache_roundtrip_and_eviction(tmp_path):
    with FileStreamProgramCache(tmp_path / "fc", max_size_bytes=3000) as fc:
        for i in range(5):
            fc[f"k{i}".encode()] = bytes([i]) * 500
            t = 1_000_000 + i
            os.utime(fc._file(f"k{i}".encode()), (t, t))
        assert len(fc) == 5
        assert fc[b"k0"] == bytes([0]) * 500  # touched: now the most recent
        fc[b"k5"] = b"x" * 1200  # over the cap: LRU entries go first
        assert b"k0" in fc and b"k5" in fc
        assert b"k1" not in fc and b"k2" not in fc
        assert sum(f.stat().st_size for f in _entry_files(tmp_path / "fc")) <= 3000
        del fc[b"k5"]
        with pytest.raises(KeyError):
            del fc[b"k5"]
        fc.clear()
        assert len(fc) == 0


def test_update_stores_mappings_and_pairs(tmp_path):
    obj = ObjectCode.from_cubin(b"\x7fELF-cubin-bytes", name="x")
    for c in (InMemoryProgramCache(), FileStreamProgramCache(tmp_path / "fc")):
        c.update({b"a": b"1", "b": b"22"})
        c.update([(b"c", obj), ("d", bytearray(b"4"))])
        c.update(((b"e", b"5"),), f=b"6")
        assert [c[k] for k in (b"a", b"b", b"c", b"d", b"e", b"f")] == [
            b"1",
            b"22",
            obj.code,
            b"4",
            b"5",
            b"6",
        ]
        assert len(c) == 6
        with pytest.raises(TypeError, match="items must be"):
            c.update(5)
        with pytest.raises(TypeError, match="items must be"):
            c.update([b"not-a-pair"])
    small = InMemoryProgramCache(max_size_bytes=4)
    small.update([(b"x", b"12"), (b"y", b"34"), (b"z", b"56")])  # the cap applies per entry
    assert b"x" not in small and small[b"z"] == b"56"


def test_file_cache_is_unbounded_by_default(tmp_path):
    import inspect

    assert inspect.signature(FileStreamProgramCache).parameters["max_size_bytes"].default is None
    fc = FileStreamProgramCache(tmp_path / "fc")
    assert fc.max_size_bytes is None
    for i in range(4):
        fc[f"k{i}".encode()] = bytes(2000)
    assert len(fc) == 4
    assert (
        get_default_program_cache().disk.max_size_bytes == 1 << 30
    )  # the default cache keeps a cap


def test_file_cache_rejects_foreign_entry(tmp_path):
    fc = FileStreamProgramCache(tmp_path / "fc")
    fc[b"k1"] = b"value-one"
    src, dst = fc._file(b"k1"), fc._file(b"k2")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    os.replace(src, dst)  # an entry of another key at k2's path
    assert fc.get(b"k2") is None
    assert fc.corrupt == 1 and not os.path.exists(dst)


def _worker(args):
    d, n = args
    os.environ["CUDA_CORE_CACHE_DIR"] = d
    out = []
    for _ in range(n):
        o = Program(TEMPLATED, options=ProgramOptions(arch=ARCH)).compile(
            "cubin", name_expressions=NAMES
        )
        out.append((o.code, o.symbol_mapping))
    fc = FileStreamProgramCache(os.path.join(d, "raw"))
    for i in range(20):
        fc[b"shared"] = bytes([i % 7]) * 4096
        v = fc.get(b"shared")
        assert v is None or (len(v) == 4096 and len(set(v)) == 1)
    return out


def test_concurrent_writers_from_processes(cache_dir):
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_worker, [(str(cache_dir), 2)] * 4)
    flat = [r for rs in results for r in rs]
    assert all(r == flat[0] for r in flat)
    assert len(_entry_files(cache_dir)) == 1
    c = get_default_program_cache()
    o = _compile()
    assert c.disk_hits == 1 and (o.code, o.symbol_mapping) == flat[0]
    assert not [p for p in (cache_dir / "entries").rglob(".tmp-*")]
