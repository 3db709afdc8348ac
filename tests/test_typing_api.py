"""Type checkers see the whole public API, the way a user's code imports it.

A user script written into ``tmp_path`` imports every name in the ``__all__`` of each public
face (:mod:`cuda_core`, ``graph``, ``system``, ``texture``, ``utils``, ``nccl`` (which imports
without nccl4py), ``profiler``, and ``experimental`` with its ``utils``), both as
``from cuda_core.graph import GraphNode`` and as ``cuda_core.graph.GraphNode``, and reveals the
type of each. ``python -m mypy --strict`` checks it.

How mypy finds cuda_core: as an installed package. mypy takes the interpreter's ``sys.path``
(site-packages, static ``.pth`` entries, ``PYTHONPATH``) as its package path, where PEP 561
applies: ``py.typed`` must be present, errors inside cuda_core are not reported, and ``--strict``
(no implicit re-export) accepts only explicit re-exports. The test puts this checkout first
there through ``PYTHONPATH`` (an import-hook editable install is invisible to type checkers; see
README.md). mypy runs in ``tmp_path`` with its own config and cache there: it neither reads the
repository's ``[tool.mypy]`` (whose ``ignore_missing_imports`` would hide a cuda_core it cannot
find) nor writes outside ``tmp_path``.

What it proves: every public name resolves for mypy to a real type, never ``Any``, and each class
to itself; a face that re-exported through star imports and a computed ``__all__`` (as
``cuda_core`` and ``cuda_core._memory`` did) fails here with ``Module has no attribute "Buffer"``.
With pyright installed, the same script is checked with pyright too.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cuda_core

ROOT = Path(cuda_core.__file__).resolve().parent.parent
FACES = (
    "cuda_core",
    "cuda_core.graph",
    "cuda_core.system",
    "cuda_core.texture",
    "cuda_core.utils",
    "cuda_core.nccl",
    "cuda_core.profiler",
    "cuda_core.experimental",  # the pre-1.0 namespace: the same objects under an old path
    "cuda_core.experimental.utils",
)
# Expressions a user writes, and the type each must name (the owner module is looked up at run
# time, so moving a class between private modules keeps the test valid).
_KEY_EXPRESSIONS = {
    "cuda_core.Buffer": f"-> {cuda_core.Buffer.__module__}.Buffer",
    "cuda_core.DeviceMemoryResource": (
        f"-> {cuda_core.DeviceMemoryResource.__module__}.DeviceMemoryResource"
    ),
    "cuda_core.Device().create_stream": f"-> {cuda_core.Stream.__module__}.Stream",
    "cuda_core.Device().allocate": f"-> {cuda_core.Buffer.__module__}.Buffer",
    # a range, and a decorated function that keeps its own type
    'cuda_core.profiler.range("step")': f"{cuda_core.profiler.Range.__module__}.Range",
    "cuda_core.profiler.range(cuda_core.is_available)": "def () -> bool",
}


def _user_script() -> tuple[str, dict[int, str]]:
    """The script's text, and the expression revealed on each ``reveal_type`` line (1-based)."""
    lines = ["from typing import reveal_type", ""]
    lines += [f"import {face}" for face in FACES]
    for face in FACES:
        tag = face.replace(".", "_")
        for name in importlib.import_module(face).__all__:
            lines.append(f"from {face} import {name} as {tag}__{name}")
    lines.append("")
    reveals: dict[int, str] = {}
    exprs = [f"{face}.{name}" for face in FACES for name in importlib.import_module(face).__all__]
    for expr in [*exprs, *_KEY_EXPRESSIONS]:
        lines.append(f"reveal_type({expr})")
        reveals[len(lines)] = expr
    return "\n".join(lines) + "\n", reveals


def _runtime_object(expr: str) -> object:
    module, _, name = expr.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def test_every_public_name_has_its_real_type_for_mypy(tmp_path):
    if importlib.util.find_spec("mypy") is None:  # the test extra installs it (CI always has it)
        pytest.skip('mypy is not installed (pip install -e ".[cu13,test]" brings it)')
    script, reveals = _user_script()
    (tmp_path / "user_code.py").write_text(script)
    (tmp_path / "mypy.ini").write_text(f"[mypy]\ncache_dir = {tmp_path / 'mypy_cache'}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--no-incremental",
            "--strict",
            "--show-traceback",
            "user_code.py",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert not errors, "mypy reports errors in the user script:\n" + "\n".join(errors[:40])
    assert proc.returncode == 0 and "Success: no issues found" in out, out

    revealed = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r'^user_code\.py:(\d+): note: Revealed type is "(.*)"$', out, re.M)
    }
    assert set(revealed) == set(reveals), out
    for line, expr in reveals.items():
        typ = revealed[line]
        assert typ != "Any", f"mypy sees {expr} as Any"
        if expr in _KEY_EXPRESSIONS:
            assert _KEY_EXPRESSIONS[expr] in typ, f"{expr}: revealed {typ!r}"
            continue
        obj = _runtime_object(expr)
        if inspect.isclass(obj) and obj.__module__.startswith("cuda_core."):
            assert f"{obj.__module__}.{obj.__qualname__}" in typ, f"{expr}: revealed {typ!r}"


def _pyright_or_skip() -> str:
    exe = shutil.which("pyright")
    if exe is None:
        pytest.skip("pyright is not installed (optional: pip install pyright)")
    try:
        ok = subprocess.run([exe, "--version"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        pytest.skip("pyright is installed but does not start here (it needs its Node.js runtime)")
    return exe


def test_every_public_name_has_its_real_type_for_pyright(tmp_path):
    exe = _pyright_or_skip()
    script, reveals = _user_script()
    (tmp_path / "user_code.py").write_text(script)
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"include": ["user_code.py"]}))
    proc = subprocess.run(
        [exe, "--outputjson", "--pythonpath", sys.executable, "user_code.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=300,
    )
    report = json.loads(proc.stdout)
    diagnostics = report["generalDiagnostics"]
    errors = [d["message"] for d in diagnostics if d["severity"] != "information"]
    assert not errors, "pyright reports problems in the user script:\n" + "\n".join(errors[:40])
    revealed = {
        d["range"]["start"]["line"] + 1: d["message"]
        for d in diagnostics
        if d["message"].startswith("Type of ")
    }
    assert set(revealed) == set(reveals), proc.stdout[-4000:]
    for line, expr in reveals.items():
        typ = revealed[line].split('" is "', 1)[1].rstrip('"')
        assert typ not in ("Any", "Unknown"), f"pyright sees {expr} as {typ}"
