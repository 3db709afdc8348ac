"""Every script in examples/ runs and checks its own result.

An example exits 0 (checked), 1 (a wrong result) or 3 after ONE line
``missing requirement [<key>]: <what>`` (see ``examples/_example.py``). Status 3 is a skip,
with that line as the reason, where the requirement is really absent (the CPU tier: no GPU,
no CuPy, no PyTorch, no NCCL), and a failure where it is present: on the H100 an example that says
"no GPU" is broken. Anything else (a traceback, an unknown status) is a failure. Each script is
also run as on a base install (``pip install cudacore``, no compiler libraries): it still ends
with that one line, naming the install command.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_core._compat import BINDINGS_MAJOR
from tests.helpers import gpu_count, gpu_skip_reason

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
MISSING = 3
_LINE = re.compile(r"^missing requirement \[(\w+)\]: (.+)$")
# Seconds each script may run (default 120): the IPC example starts consumer processes (each
# imports cuda_core and compiles its kernel) and makes 1,000 hand-offs between them.
TIMEOUTS = {"ipc_producer_consumer.py": 300}


def test_examples_exist_and_are_indexed():
    assert EXAMPLES, "examples/ holds no scripts"
    assert set(TIMEOUTS) <= {p.name for p in EXAMPLES}, "a timeout names a script that is not there"
    index = (ROOT / "examples" / "README.md").read_text()
    for script in EXAMPLES:
        assert f"`{script.name}`" in index, f"{script.name} is not in examples/README.md"


def _present(key: str) -> bool | None:
    """Whether requirement *key* is present here (None: cannot tell, e.g. a device feature)."""
    if key == "gpu":
        return gpu_skip_reason() is None
    if key in ("cupy", "torch"):
        return importlib.util.find_spec(key) is not None
    if key == "nccl":
        from cuda_core import nccl

        return nccl.is_available()
    if key == "compiler":
        from cuda_core._compile._libraries import library_status

        return all(library_status(lib)[0] is not None for lib in ("nvrtc", "nvjitlink"))
    m = re.fullmatch(r"(\d+)gpus", key)
    if m:
        return gpu_count() >= int(m.group(1))
    m = re.fullmatch(r"cc(\d+)", key)
    if m and gpu_skip_reason() is None:
        from cuda_core import Device

        return int(Device(0).arch) >= int(m.group(1))
    return None


def judge(script: str, returncode: int, stdout: str, stderr: str) -> str | None:
    """``None`` when the run passed, ``"skip: <reason>"`` or ``"fail: <reason>"`` otherwise."""
    if returncode == 0:
        if "Traceback" in stderr:
            return f"fail: {script} exited 0 after a traceback"
        return None
    if returncode == MISSING:
        lines = [ln for ln in stdout.strip().splitlines() if ln]
        m = _LINE.match(lines[-1]) if lines else None
        if m is None or "Traceback" in stderr or sum(bool(_LINE.match(ln)) for ln in lines) != 1:
            return f"fail: {script} exited {MISSING} without exactly one 'missing requirement' line"
        key, what = m.groups()
        if _present(key):
            return f"fail: {script} says {key!r} is missing, but this machine has it: {what}"
        return f"skip: {script}: {what}"
    return f"fail: {script} exited with {returncode}"


def test_judge_rules():
    line = "missing requirement [torch]: torch (pip install torch)\n"
    torch_here = importlib.util.find_spec("torch") is not None
    assert judge("x.py", 0, "ok\n", "") is None
    assert judge("x.py", 1, "", "").startswith("fail:")
    assert judge("x.py", 3, "", "Traceback (most recent call last):\n").startswith("fail:")
    assert judge("x.py", 3, "no line\n", "").startswith("fail:")
    assert judge("x.py", 3, line + line, "").startswith("fail:")
    assert judge("x.py", 3, line, "").startswith("fail:" if torch_here else "skip: x.py: torch")
    assert judge("x.py", 3, "missing requirement [numpy]: numpy\n", "").startswith("skip:")


def _run(script: Path, *, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run *script*; *site* is a folder put first on ``PYTHONPATH`` (its ``sitecustomize``)."""
    env = dict(os.environ)
    paths = [str(p) for p in (site, ROOT) if p is not None]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    timeout = TIMEOUTS.get(script.name, 120)
    try:
        return subprocess.run(
            [sys.executable, str(script)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{script.name} ran past {timeout} s\nstdout:\n{exc.stdout}\nstderr:\n{exc.stderr}"
        )


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path):
    proc = _run(script)
    verdict = judge(script.name, proc.returncode, proc.stdout, proc.stderr)
    if verdict is None:
        return
    kind, _, reason = verdict.partition(": ")
    if kind == "skip":
        pytest.skip(reason)
    pytest.fail(f"{reason}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


@pytest.mark.gpu
def test_multi_gpu_reduction_uses_every_gpu():
    """The reduction example splits over every visible GPU and says when there is only one."""
    proc = _run(ROOT / "examples" / "multi_gpu_reduction.py")
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    n = gpu_count()
    for i in range(n):
        assert f"device {i} (" in proc.stdout, proc.stdout
    assert f"device {n} (" not in proc.stdout
    assert ("only one GPU is visible" in proc.stdout) == (n == 1)
    assert f"{n} GPU(s): sum of squares" in proc.stdout


# As on a base install: cuda.pathfinder finds none of the compiler libraries, in the script and in
# every process it starts (sitecustomize runs in each), and nothing is answered from a cache.
_NO_COMPILERS = """
import cuda.pathfinder as _pf
_real = _pf.load_nvidia_dynamic_lib
def _fake(name):
    if name in ("nvrtc", "nvJitLink", "nvvm"):
        raise _pf.DynamicLibNotFoundError(f"Failure finding lib{name}.so: simulated by the test")
    return _real(name)
_pf.load_nvidia_dynamic_lib = _fake
"""
REMEDY = f'pip install "cudacore[cu{BINDINGS_MAJOR}]"'


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_on_a_base_install_ends_with_the_remedy(script: Path, tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(_NO_COMPILERS)
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cache"))
    proc = _run(script, site=tmp_path)
    detail = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, detail
    if proc.returncode == 0:  # it compiles nothing (or a GPU ran it without compiling)
        return
    assert proc.returncode == MISSING, detail
    lines = [ln for ln in proc.stdout.splitlines() if _LINE.match(ln)]
    assert len(lines) == 1 and proc.stdout.rstrip().endswith(lines[0]), detail
    key, what = _LINE.match(lines[0]).groups()  # type: ignore[union-attr]
    if key == "compiler":
        assert what.endswith(f"was not found ({REMEDY})"), what
        assert what.startswith(("NVRTC", "nvJitLink")), what
    else:  # stopped first by something that is really missing here
        assert not _present(key), f"{script.name} says {key!r} is missing: {what}"
    if script.name == "jit_lto.py":  # compiles before it needs a GPU: the compiler is named
        assert key == "compiler", detail


def test_the_cupy_hint_follows_the_cuda_bindings_major():
    spec = importlib.util.spec_from_file_location("_example", ROOT / "examples" / "_example.py")
    assert spec is not None and spec.loader is not None
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    assert helper._pip("cupy") == f"cupy-cuda{BINDINGS_MAJOR}x"
    assert helper._pip("torch") == "torch"
