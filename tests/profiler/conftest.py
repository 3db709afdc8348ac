"""The NVTX recorder these tests attach as a tool (``nvtx_recorder.c``), built once per session
with the compiler the stub-driver tests use, and a helper that runs a script under it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.handles.native_stub import stub_build

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass
class Run:
    """What a script printed, and the NVTX calls the recorder saw (``None``: NVTX never
    loaded the recorder, so nothing reached NVTX)."""

    stdout: str
    stderr: str
    calls: list[list[str]] | None


@pytest.fixture(scope="session")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorder library (skips without a C compiler)."""
    cc = stub_build.compiler()
    if cc is None:
        pytest.skip("a C compiler is needed to build the NVTX recorder")
    out = tmp_path_factory.mktemp("nvtx_recorder") / "libnvtx_recorder.so"
    flags = ["-std=c11", "-Wall", "-Werror", "-O1", "-pthread"]
    return stub_build.build_shared(cc, [HERE / "nvtx_recorder.c"], out, flags)


def run_script(
    script: str,
    tmp_path: Path,
    *,
    recorder: Path | None = None,
    env: dict[str, str] | None = None,
    python_flags: tuple[str, ...] = (),
) -> Run:
    """Run ``script`` in a fresh interpreter (where the profiler decides anew where ranges go),
    with the recorder attached when given; no tool is attached otherwise."""
    log = tmp_path / "nvtx_calls.tsv"
    full = dict(os.environ)
    for name in (
        "NVTX_INJECTION64_PATH",
        "NVTX_INJECTION32_PATH",
        "CUDA_CORE_NVTX",
        "NVTX_DISABLE",
    ):
        full.pop(name, None)  # e.g. when the tests themselves run under nsys
    pythonpath = [str(ROOT), full.get("PYTHONPATH", "")]
    full["PYTHONPATH"] = os.pathsep.join(pythonpath).rstrip(os.pathsep)
    if recorder is not None:
        full["NVTX_INJECTION64_PATH"] = str(recorder)
        full["CUDA_CORE_TEST_NVTX_LOG"] = str(log)
    full.update(env or {})
    proc = subprocess.run(
        [sys.executable, *python_flags, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    calls = None
    if log.exists():
        calls = [line.split("\t") for line in log.read_text().splitlines()]
    return Run(proc.stdout, proc.stderr, calls)
