"""CPU tier: what the distribution declares and carries (issue 23, item 3). The sdist round trip
itself (unpack, the README's install and test commands) runs in CI (.ci/run)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_classifiers_say_what_is_supported_and_typed():
    classifiers = PROJECT["project"]["classifiers"]
    for version in ("3.11", "3.12", "3.13", "3.14"):  # 3.14: its CPU tier passes (CPython 3.14.10)
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Typing :: Typed" in classifiers
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert PROJECT["project"]["requires-python"] == ">=3.11"


def test_every_dependency_is_imported_by_the_package():
    modules = {
        "cuda-bindings": "cuda.bindings",
        "cuda-pathfinder": "cuda.pathfinder",
        "numpy": "numpy",
    }
    deps = [re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0] for d in PROJECT["project"]["dependencies"]]
    assert sorted(deps) == sorted(modules), deps
    source = "\n".join(p.read_text() for p in (ROOT / "cuda_core").rglob("*.py"))
    for dist, module in modules.items():
        top, _, sub = module.partition(".")
        pattern = (
            rf"(import {re.escape(module)}\b|from {re.escape(module)}\b|from {top} import {sub})"
        )
        assert re.search(pattern, source), f"{dist} is a dependency nothing imports"


def test_the_wheel_leaves_out_the_c_sources_and_the_sdist_carries_the_tests():
    tool = PROJECT["tool"]["setuptools"]
    assert tool["exclude-package-data"]["cuda_core._handles._csrc"] == ["*.c", "*.h"]
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    for line in ("graft tests", "graft examples", "graft benchmarks", "graft tools", "graft docs"):
        assert line in manifest, line
    assert any(line.startswith("include ") and ".ci/run" in line for line in manifest)
