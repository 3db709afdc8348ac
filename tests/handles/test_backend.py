"""Backend selection (cuda_core._handles._backend): native where built, pure Python when asked or stale."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
import warnings

import pytest

import cuda_core
from cuda_core._handles import _backend
from cuda_core._handles import _pure as _handles

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(code: str, **env: str) -> str:
    full_env = {
        **os.environ,
        **env,
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _fake_native(monkeypatch: pytest.MonkeyPatch, module: object) -> None:
    """Make ``cuda_core._native`` resolve to ``module`` (None: not importable) for one test."""
    monkeypatch.delenv("CUDA_CORE_NO_FASTPATH", raising=False)
    monkeypatch.setitem(sys.modules, "cuda_core._native", module)
    if module is None:
        monkeypatch.delattr(cuda_core, "_native", raising=False)
    else:
        monkeypatch.setattr(cuda_core, "_native", module, raising=False)


def test_native_backend_is_used_where_a_compiler_is():
    # The README's install builds cuda_core._native (setup.py) wherever a C compiler is; running
    # on pure Python there means a failed, skipped or stale build, unless asked for on purpose.
    if _backend._switched_off():
        pytest.skip(
            f"pure-Python backend selected on purpose (CUDA_CORE_NO_FASTPATH={os.environ['CUDA_CORE_NO_FASTPATH']})"
        )
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler (cc or gcc) on PATH: the native backend is optional")
    assert _backend.NATIVE, f"native backend not in use: {_backend.REASON}"
    assert _backend.backend.ABI_VERSION == _handles.ABI_VERSION
    assert _backend.REASON == "on"


def test_no_fastpath_is_honoured_without_importing_native():
    out = _run(
        "import sys, cuda_core, cuda_core._handles._backend as b\n"
        "print(b.NATIVE, 'cuda_core._native' in sys.modules, b.backend.__name__)\n"
        "print(b.REASON)\n",
        CUDA_CORE_NO_FASTPATH="1",
    )
    first, reason = out.strip().splitlines()
    assert first == "False False cuda_core._handles._pure"
    assert "CUDA_CORE_NO_FASTPATH" in reason


@pytest.mark.parametrize("value", ["", "0", "false", "no", "No "])
def test_no_fastpath_off_values_do_not_switch_off(monkeypatch, value):
    monkeypatch.setenv("CUDA_CORE_NO_FASTPATH", value)
    assert not _backend._switched_off()


def test_stale_native_module_falls_back_with_one_warning(monkeypatch):
    stale = types.ModuleType("cuda_core._native")
    stale.ABI_VERSION = _handles.ABI_VERSION + 1  # type: ignore[attr-defined]
    stale.__file__ = "/stale/build/_native.so"
    _fake_native(monkeypatch, stale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend, native, reason = _backend._select()
    assert backend is _handles and native is False
    assert [w.category for w in caught] == [RuntimeWarning]
    message = str(caught[0].message)
    assert _backend.REBUILD_COMMAND in message and "/stale/build/_native.so" in message
    assert f"ABI version {_handles.ABI_VERSION + 1}" in message
    assert reason.startswith("ABI mismatch") and _backend.REBUILD_COMMAND in reason


def test_missing_native_module_falls_back_quietly(monkeypatch):
    _fake_native(monkeypatch, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend, native, reason = _backend._select()
    assert backend is _handles and native is False and reason.startswith("not built")
    assert caught == []


def test_matching_native_module_is_chosen(monkeypatch):
    current = types.ModuleType("cuda_core._native")
    current.ABI_VERSION = _handles.ABI_VERSION  # type: ignore[attr-defined]
    _fake_native(monkeypatch, current)
    assert _backend._select() == (current, True, "on")
