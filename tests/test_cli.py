"""``python -m cuda_core``: the environment report and the self-check, in a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cuda_core import system
from tests.helpers import gpu_skip_reason


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_core", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def default_run() -> subprocess.CompletedProcess[str]:
    return _run()


def test_report_names_the_environment(default_run):
    proc = default_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    import platform

    import cuda_core

    assert f"cuda_core {cuda_core.__version__}" in out
    assert f"Python {platform.python_version()}" in out
    assert f"cuda-bindings {system.get_bindings_version()}" in out
    major, minor = system.get_nvrtc_version()
    assert f"NVRTC {major}.{minor}" in out
    assert "nvJitLink " in out
    assert "Self-check passed." in out


def test_report_without_driver(default_run):
    if gpu_skip_reason() is None:
        pytest.skip("a GPU is present; the no-driver report is checked on machines without one")
    out = default_run.stdout
    assert "GPUs: 0" in out
    if "no NVIDIA driver found" in out:
        assert "launching it needs a GPU" in out
    assert "compiled the self-check kernel for sm_90" in out


@pytest.mark.gpu
def test_report_with_gpu_lists_devices_and_launches(default_run):
    from cuda_core import Device

    out = default_run.stdout
    n = system.get_num_devices()
    assert f"GPUs: {n}" in out
    for i in range(n):
        dev = Device(i)
        cc = dev.compute_capability
        assert f"[{i}] {dev.name}, compute capability {cc.major}.{cc.minor}" in out
    major, minor = system.get_driver_version()
    assert f"supports CUDA {major}.{minor}" in out
    assert "verified 1000 results" in out


def test_named_arch_is_used_without_gpu():
    if gpu_skip_reason() is None:
        pytest.skip("with a GPU the self-check compiles for the GPU's own architecture")
    proc = _run("--arch", "sm_80")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compiled the self-check kernel for sm_80" in proc.stdout


def test_failing_check_exits_non_zero():
    if gpu_skip_reason() is None:
        pytest.skip("with a GPU --arch is not used, so the check cannot be made to fail this way")
    proc = _run("--arch", "sm_1")
    assert proc.returncode == 1
    assert "FAILED" in proc.stdout
    assert "Self-check FAILED." in proc.stdout


def test_help_exits_zero():
    proc = _run("--help")
    assert proc.returncode == 0
    assert "--arch" in proc.stdout


def test_bare_arch_number_is_reported_as_sm():
    if gpu_skip_reason() is None:
        pytest.skip("with a GPU --arch is not used")
    proc = _run("--arch", "90")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "compiled the self-check kernel for sm_90 " in proc.stdout
    assert " for 90 " not in proc.stdout
