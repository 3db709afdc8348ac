"""CPU tier: ``launch()`` and ``PreparedLaunch`` through the native fast path, against the stub driver.

Each check of ``tests/handles/native_stub/drive_launch.py`` runs in a subprocess that imports the
whole ``cuda_core`` package with a build of the native module from the current sources (plain,
and with AddressSanitizer + UndefinedBehaviorSanitizer where gcc's libasan is installed), binds it
to the stub driver and launches: the steady state in C (the module's counters say which path
ran), and every case C hands to the Python path (first launches, other types, misuse, driver
refusals, closed streams, changed configs) with the same outcome as the Python path itself.
The same checks run on the pure-Python backend, and the misuse check's outcomes must be the
same there. The GPU tier launches the fast path on a device (``tests/test_launcher_native.py``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.handles.conftest import ASAN_ENV, libasan
from tests.helpers import gpu_skip_reason

# The whole package runs against the stub here, so its Python path calls cuda.bindings, which
# loads the real libcuda where there is one and hands it the stub's fake handles (a segfault
# on the GPU machine). The stub stands in for a driver only where there is none; on a GPU the
# same paths are tested for real (tests/test_launcher_native.py).
pytestmark = pytest.mark.skipif(
    gpu_skip_reason() is None, reason="a real driver is present: the stub cannot stand in for it"
)

ROOT = Path(__file__).resolve().parents[2]
DRIVE = Path(__file__).resolve().parent / "native_stub" / "drive_launch.py"
CHECKS = (
    "stream_record",
    "buffer_copy",
    "pool_allocation",
    "stream_sync",
    "steady_state",
    "dense_doubles",
    "kernels_without_arguments",
    "misuse",
    "driver_refusals",
    "closed_stream",
    "config_changes",
    "python_paths",
    "gil_released_during_the_launch",
    "threads",
    "references",
)


def _run(native: str, stub: Path, env_extra: dict[str, str]) -> str:
    """Run every check in one process (``native``: a build's path, or ``-`` with
    CUDA_CORE_BACKEND in env_extra); its stdout, after asserting that each check passed."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ASAN_", "UBSAN_", "LD_PRELOAD", "CUDA_CORE_BACKEND"))
    }
    env.pop("CUDA_CORE_NO_FASTPATH", None)
    env["PYTHONPATH"] = os.pathsep.join([str(DRIVE.parent), str(ROOT)])
    env.update(env_extra)
    cmd = [sys.executable, "-X", "dev", "-W", "error::RuntimeWarning", str(DRIVE)]
    proc = subprocess.run(
        [*cmd, native, str(stub), "all"], capture_output=True, text=True, env=env, timeout=600
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    passed = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("PASS ")]
    assert tuple(passed) == CHECKS, out
    assert "runtime error:" not in out, out  # UBSan
    assert "AddressSanitizer" not in out, out
    assert "Exception ignored" not in out, out
    return proc.stdout


def _misuse_outcomes(stdout: str) -> list:
    """The misuse check's JSON line, addresses masked (they differ between processes)."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith("[["))
    return json.loads(re.sub(r"0x[0-9a-f]+", "0x?", line))


@pytest.fixture(scope="module")
def native_run(artifacts: dict[str, Path]) -> str:
    return _run(str(artifacts["plain"]), artifacts["stub"], {})


@pytest.fixture(scope="module")
def pure_run(artifacts: dict[str, Path]) -> str:
    return _run("-", artifacts["stub"], {"CUDA_CORE_BACKEND": "python"})


def test_drive_lists_every_check() -> None:
    out = subprocess.run(
        [sys.executable, str(DRIVE), "-", "-", "--list"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert tuple(out.stdout.split()) == CHECKS


def test_fast_path_against_stub(native_run: str) -> None:
    assert native_run.count("PASS ") == len(CHECKS)


def test_fast_path_against_stub_sanitized(artifacts: dict[str, Path], asan_native: Path) -> None:
    _run(str(asan_native), artifacts["stub"], {"LD_PRELOAD": str(libasan()), **ASAN_ENV})


def test_pure_backend_against_stub(pure_run: str) -> None:
    assert pure_run.count("PASS ") == len(CHECKS)


def test_misuse_outcomes_are_the_same_on_both_backends(native_run: str, pure_run: str) -> None:
    native, pure = _misuse_outcomes(native_run), _misuse_outcomes(pure_run)
    assert native == pure
    assert len(native) >= 15 and all(case[1][0].endswith("Error") for case in native)


def _run_stub_bench(name: str) -> tuple[list[str], set[str], bool]:
    """Run ``benchmarks/<name>`` briefly: its closing ``stub-overhead`` lines (asserted to end
    the output), the cases they name, and whether the native backend ran (it is not built
    everywhere: then there are only Python's lines)."""
    bench = ROOT / "benchmarks" / name
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_CORE_BACKEND", "LD_PRELOAD")}
    proc = subprocess.run(
        [sys.executable, str(bench), "--number", "20", "--repeat", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tail = [ln for ln in proc.stdout.splitlines() if ln.startswith("stub-overhead ")]
    assert tail and proc.stdout.rstrip().endswith(tail[-1])
    return tail, {ln.split()[1] for ln in tail}, "native backend: n/a" not in proc.stdout


def test_stub_benchmark_runs_and_ends_with_a_line_per_case(artifacts: dict[str, Path]) -> None:
    """``benchmarks/bench_stub_launch.py`` (which CI runs) works; its times are not judged."""
    assert "python benchmarks/bench_stub_launch.py" in (ROOT / ".ci" / "run").read_text()
    tail, cases, built = _run_stub_bench("bench_stub_launch.py")
    for backend in ("python", "native") if built else ("python",):
        for entry in ("launch", "prepared"):
            for args in ("0args", "4args", "10mixed", "512doubles"):
                assert f"{backend}-{entry}-{args}" in cases, sorted(cases)
    assert all(re.fullmatch(r"stub-overhead \S+ -?\d+", ln) for ln in tail), tail


def test_stub_objects_benchmark_runs_and_ends_with_a_line_per_case() -> None:
    """``benchmarks/bench_stub_objects.py`` works on both backends; its times are not judged."""
    tail, cases, built = _run_stub_bench("bench_stub_objects.py")
    for backend in ("python", "native") if built else ("python",):
        for case in (
            "event_create+close",
            "record()_dropped",
            "alloc+close_1_MiB",
            "Stream.sync()",
        ):
            assert f"{backend}-{case}" in cases, sorted(cases)
    assert all(re.fullmatch(r"stub-overhead \S+ \d+", ln) for ln in tail), tail
