"""tests/helpers/precompiled.py: kernels compiled beforehand for the GPU tier under cuda-bindings
12.x on a machine without NVRTC 12 (CPU tier: keys, the request list, serving, the skip rule)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_core import Program, ProgramOptions
from cuda_core._compat import BINDINGS_MAJOR
from tests.helpers import precompiled

ROOT = Path(__file__).resolve().parents[2]
SRC = 'extern "C" __global__ void pk_fill(int* p, int v) { p[threadIdx.x] = v; }'


def test_keys_follow_what_changes_the_output():
    base = precompiled.request_key(SRC, "c++", ProgramOptions(arch="sm_90"), "cubin", ())
    arch = "90"
    assert (
        precompiled.request_key(SRC, "c++", ProgramOptions(arch=f"sm_{arch}"), "cubin", []) == base
    )
    assert (
        precompiled.request_key(SRC.encode(), "c++", ProgramOptions(arch="sm_90"), "cubin", ())
        != base
    )
    others = {
        precompiled.request_key(SRC + " ", "c++", ProgramOptions(arch="sm_90"), "cubin", ()),
        precompiled.request_key(SRC, "c++", ProgramOptions(arch="sm_80"), "cubin", ()),
        precompiled.request_key(SRC, "c++", ProgramOptions(arch="sm_90", std="c++17"), "cubin", ()),
        precompiled.request_key(SRC, "c++", ProgramOptions(arch="sm_90"), "ptx", ()),
        precompiled.request_key(SRC, "c++", ProgramOptions(arch="sm_90"), "cubin", ("pk_fill",)),
    }
    assert base not in others and len(others) == 5
    assert precompiled.request_key(
        SRC, "c++", ProgramOptions(arch="sm_90"), "cubin", "pk_fill"
    ) == precompiled.request_key(SRC, "c++", ProgramOptions(arch="sm_90"), "cubin", ("pk_fill",))


def test_every_request_names_a_kernel_source():
    seen = set()
    for desc, code, options, target, names in precompiled.requests():
        assert "__global__" in code, desc
        assert options.arch == precompiled.ARCH and target in ("cubin", "ptx")
        key = precompiled.request_key(code, "c++", options, target, names)
        assert key not in seen, f"{desc} repeats a request"
        seen.add(key)
    assert len(seen) == len(precompiled.REQUESTS)


def test_served_kernels_are_the_stored_code_and_misses_compile(tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    opts = ProgramOptions(arch="sm_90")
    names = ("pk_fill",)
    obj = Program(SRC, "c++", options=opts).compile("cubin", name_expressions=names, cache=False)
    key = precompiled.store(folder, "test", SRC, opts, "cubin", names, obj, "NVRTC (this machine)")
    meta = json.loads((folder / f"{key}.json").read_text())
    assert meta["target"] == "cubin" and meta["request"] == "test"
    misses = tmp_path / "misses.txt"
    child = textwrap.dedent(
        f"""
        import sys
        from cuda_core import Program, ProgramOptions
        from tests.helpers import precompiled
        precompiled.serve({str(folder)!r})
        got = Program({SRC!r}, "c++", options=ProgramOptions(arch="sm_90")).compile("cubin", name_expressions=("pk_fill",))
        assert got.code == open({str(folder / (key + ".bin"))!r}, "rb").read()
        assert got.symbol_mapping == {dict(obj.symbol_mapping)!r}, got.symbol_mapping
        assert got.code_type == "cubin"
        other = Program({SRC!r}, "c++", options=ProgramOptions(arch="sm_80")).compile("cubin")  # a miss compiles
        assert other.code[:4] == b"\\x7fELF"
        print("ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), precompiled.MISSES_ENV: str(misses)}
    proc = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
    lines = misses.read_text().splitlines()
    assert len(lines) == 1 and "sm_80" in lines[0]


def test_serve_needs_the_folder(tmp_path):
    with pytest.raises(RuntimeError, match=r"tools/precompile_cu12\.py"):
        precompiled.serve(str(tmp_path / "absent"))


def test_the_skip_rule_matches_cuda_cores_error_for_a_missing_nvrtc_12():
    from cuda_core._compile._libraries import library_not_found

    err = library_not_found(
        "nvrtc", "Program.compile() of C++ code", RuntimeError("found NVRTC 13.0, ...")
    )
    assert precompiled.failed_for_want_of_nvrtc_12(f"E   {type(err).__name__}: {err}") == (
        BINDINGS_MAJOR == 12
    )
    assert not precompiled.failed_for_want_of_nvrtc_12("AssertionError: 1 != 2")
