"""``python -m cuda_core``: the environment report and the self-check, in a subprocess."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cuda_core import system
from tests.helpers import gpu_skip_reason, precompiled, report_fails_the_mix

pytestmark = report_fails_the_mix


def _section(out: str, title: str) -> list[str]:
    """The lines of section ``title`` of the text report, without the title."""
    lines = out.splitlines()
    start = lines.index(title) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def _fact(out: str, label: str) -> str:
    """The value of the fact ``label`` (its wrapped lines joined), or ``""``."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line[:19] == f"  {label:<16} ":
            value = [line[19:]]
            for more in lines[i + 1 :]:
                if not more.startswith(" " * 19):
                    break
                value.append(more.strip())
            return " ".join(value)
    return ""


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

    assert out.startswith(f"cuda_core {cuda_core.__version__} at ")
    assert _fact(out, "Python").startswith(f"{platform.python_version()} ")
    assert _fact(out, "cuda-bindings").startswith(f"{system.get_bindings_version()}: CUDA ")
    major, minor = system.get_nvrtc_version()
    assert _fact(out, "NVRTC") == f"{major}.{minor}"
    assert _fact(out, "nvJitLink")
    assert _section(out, "Self-check")[-1] == "  verdict          passed"
    assert out.rstrip().endswith("OK: a setup the README documents")


def test_report_without_driver(default_run):
    if gpu_skip_reason() is None:
        pytest.skip("a GPU is present; the no-driver report is checked on machines without one")
    out = default_run.stdout
    assert _fact(out, "GPUs") == "0"
    if "no NVIDIA driver found" in out:
        assert "launching it needs a GPU" in out
    assert "compiled the self-check kernel for sm_90" in out


@pytest.mark.gpu
def test_report_with_gpu_lists_devices_and_launches(default_run):
    from cuda_core import Device

    out = default_run.stdout
    n = system.get_num_devices()
    assert _fact(out, "GPUs") == str(n)
    for i in range(n):
        dev = Device(i)
        cc = dev.compute_capability
        assert f"[{i}] {dev.name}, compute capability {cc.major}.{cc.minor}" in out
    major, minor = system.get_driver_version()
    assert f"supports CUDA {major}.{minor}" in out
    if (
        precompiled.REFUSED_NEWER_NVRTC in out
    ):  # cuda-bindings 12.x beside NVRTC 13 only: no compiler
        pytest.skip(precompiled.SKIP_REASON)
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
    assert _section(proc.stdout, "Self-check")[-1].startswith("  verdict          FAILED: ")
    assert proc.stdout.rstrip().endswith("FAILED in: Self-check")


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


# --- the report's parts (issue 13): --json, --clear-cache, show_config, verdicts -----------------


def _run_env(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "cuda_core", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _fill_cache(path) -> None:
    import os

    from cuda_core import Program, ProgramOptions

    old = os.environ.get("CUDA_CORE_CACHE_DIR")
    os.environ["CUDA_CORE_CACHE_DIR"] = str(path)
    try:
        Program(
            'extern "C" __global__ void cli_fill() {}', options=ProgramOptions(arch="sm_90")
        ).compile("ptx")
    finally:
        if old is None:
            del os.environ["CUDA_CORE_CACHE_DIR"]
        else:
            os.environ["CUDA_CORE_CACHE_DIR"] = old


def test_json_report_is_one_object_with_every_part(tmp_path):
    import json

    _fill_cache(tmp_path)
    proc = _run_env({"CUDA_CORE_CACHE_DIR": str(tmp_path)}, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = json.loads(proc.stdout)
    assert set(info) >= {
        "cuda_core",
        "python",
        "cuda_bindings",
        "backend",
        "driver",
        "gpus",
        "compilers",
        "cache",
        "frameworks",
        "self_check",
    }
    assert info["cache"]["path"] == str(tmp_path)
    assert info["cache"]["entries"] >= 1 and info["cache"]["bytes"] > 0
    assert info["compilers"]["nvrtc"]["version"] == "{}.{}".format(*system.get_nvrtc_version())
    assert set(info["frameworks"]) == {"numpy", "cupy", "torch"}
    import numpy

    assert info["frameworks"]["numpy"]["version"] == numpy.__version__
    assert info["self_check"]["passed"] is True
    assert info["backend"]["state"] in ("on", "selected", "not built", "ABI mismatch")
    assert info["driver"]["verdict"]


def test_text_report_names_cache_backend_verdict_and_frameworks(tmp_path):
    _fill_cache(tmp_path)
    proc = _run_env({"CUDA_CORE_CACHE_DIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert _fact(out, "compile cache").startswith(f"{tmp_path}: 1 entries, ")
    assert _fact(out, "handle layer")
    assert _fact(out, "driver/bindings")
    assert _fact(out, "NumPy") and _fact(out, "CuPy") and _fact(out, "PyTorch")


def test_clear_cache_empties_the_directory(tmp_path):
    from cuda_core._report._environment import _entry_sizes

    _fill_cache(tmp_path)
    assert len(_entry_sizes(str(tmp_path))) == 1
    proc = _run_env({"CUDA_CORE_CACHE_DIR": str(tmp_path)}, "--clear-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cleared 1 entries" in proc.stdout and str(tmp_path) in proc.stdout
    assert _entry_sizes(str(tmp_path)) == []
    assert "Self-check" not in proc.stdout


def test_show_config_prints_and_returns_the_dict(capsys):
    import cuda_core

    assert cuda_core.show_config() is None
    out = capsys.readouterr().out
    assert out.startswith(f"cuda_core {cuda_core.__version__}")
    assert "Self-check" not in out
    info = cuda_core.show_config(mode="dicts")
    assert info["cuda_core"]["version"] == cuda_core.__version__
    with pytest.raises(ValueError, match="mode must be"):
        cuda_core.show_config(mode="json")


def test_missing_nvrtc_is_reported_with_the_remedy(tmp_path, monkeypatch):
    from tests.test_install import REMEDY, run_without

    monkeypatch.setenv(
        "CUDA_CORE_CACHE_DIR", str(tmp_path)
    )  # an empty cache: the check must compile

    proc = run_without(
        ("nvrtc",), "import sys; from cuda_core.__main__ import main; sys.exit(main())"
    )
    out = proc.stdout
    # A base install (the README documents it): reported as what it is, and not a failure.
    assert proc.returncode == 0, out + proc.stderr
    assert _fact(out, "NVRTC").startswith("not found (")
    install = _section(out, "Install")
    assert install[-1] == (
        "  verdict          base install: runs precompiled cubin and PTX, cannot compile"
    )
    assert "  to compile       run:" in install
    assert f"                   {REMEDY}" in install
    check = _section(out, "Self-check")
    if gpu_skip_reason() is None:  # the kernel goes in as PTX, which the driver compiles
        assert "verified 1000 results" in " ".join(check)
        assert check[-1] == "  verdict          passed"
    else:
        assert check[-1] == "  verdict          not run"


@pytest.mark.parametrize(
    ("cuda", "driver", "matches", "note"),
    [
        ("13.0", 13, True, "matches the driver"),
        ("12.4", 13, False, "runs on it"),
        ("13.1", 12, False, "NEEDS A NEWER DRIVER"),
        ("12.4", None, None, "no driver to compare with"),
    ],
)
def test_framework_cuda_is_compared_with_the_driver(monkeypatch, cuda, driver, matches, note):
    import importlib.machinery
    import types

    from cuda_core._report._environment import _framework

    torch = types.ModuleType("torch")
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    torch.__version__ = "9.9.9"
    torch.version = types.SimpleNamespace(cuda=cuda)
    monkeypatch.setitem(sys.modules, "torch", torch)
    out = _framework("torch", driver)
    assert out["installed"] and out["version"] == "9.9.9" and out["cuda"] == cuda
    assert out["matches_driver"] is matches
    assert note in out["note"]


def test_cpu_only_torch_says_so(monkeypatch):
    import importlib.machinery
    import types

    from cuda_core._report._environment import _framework

    torch = types.ModuleType("torch")
    torch.__spec__ = importlib.machinery.ModuleSpec("torch", None)
    torch.__version__ = "2.0"
    torch.version = types.SimpleNamespace(cuda=None)
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert _framework("torch", 13)["note"] == "built without CUDA"


@pytest.mark.parametrize(
    ("native", "reason", "compiler", "state", "rebuild"),
    [
        (True, "on", "/usr/bin/cc", "on", False),
        (False, "selected (CUDA_CORE_BACKEND=python)", "/usr/bin/cc", "selected", False),
        (
            False,
            "not built (No module named 'cuda_core._handles._native')",
            "/usr/bin/cc",
            "not built",
            True,
        ),
        (
            False,
            "not built (No module named 'cuda_core._handles._native')",
            None,
            "not built",
            False,
        ),
        (False, "ABI mismatch (built 3, needs 4); rebuild: x", None, "ABI mismatch", True),
    ],
)
def test_backend_status_names_the_rebuild_command(
    monkeypatch, native, reason, compiler, state, rebuild
):
    from cuda_core._handles import _backend
    from cuda_core._report import _environment as _config

    monkeypatch.setattr(_backend, "NATIVE", native)
    monkeypatch.setattr(_backend, "REASON", reason)
    monkeypatch.setattr(_config, "_compiler_present", lambda: compiler)
    st = _config.backend_status()
    assert st["state"] == state
    assert (st["rebuild"] == _backend.REBUILD_COMMAND) is rebuild
    line = _fact(
        "\n".join(_config.format_report({**_config.collect(), "backend": st})), "handle layer"
    )
    assert (_backend.REBUILD_COMMAND in line or "rebuild: x" in line) is rebuild
