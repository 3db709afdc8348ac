"""Backend selection (cuda_core._handles._backend): CUDA_CORE_BACKEND=python|native, unset: native
where built; pure Python when asked, not built or stale; the deprecated CUDA_CORE_NO_FASTPATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import types
import warnings

import pytest

from cuda_core._handles import _backend, _protocol
from cuda_core._handles import _pure as _handles

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fake_native(monkeypatch: pytest.MonkeyPatch, module: object, choice: str = "") -> None:
    """Make ``cuda_core._handles._native`` resolve to ``module`` (None: not importable) for one test,
    with ``CUDA_CORE_BACKEND`` set to ``choice`` (unset when empty)."""
    monkeypatch.delenv("CUDA_CORE_NO_FASTPATH", raising=False)
    if choice:
        monkeypatch.setenv("CUDA_CORE_BACKEND", choice)
    else:
        monkeypatch.delenv("CUDA_CORE_BACKEND", raising=False)
    monkeypatch.setitem(sys.modules, "cuda_core._handles._native", module)
    import cuda_core._handles as handles_pkg

    if module is None:
        monkeypatch.delattr(handles_pkg, "_native", raising=False)
    else:
        monkeypatch.setattr(handles_pkg, "_native", module, raising=False)


def test_native_backend_is_used_where_a_compiler_is():
    # The README's install builds cuda_core._handles._native (setup.py) wherever a C compiler is; running
    # on pure Python there means a failed, skipped or stale build, unless asked for on purpose.
    if _backend.REASON.startswith("selected"):
        pytest.skip(f"pure-Python backend selected on purpose: {_backend.REASON}")
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler (cc or gcc) on PATH: the native backend is optional")
    assert _backend.NATIVE, f"native backend not in use: {_backend.REASON}"
    assert _backend.backend.ABI_VERSION == _protocol.ABI_VERSION == _handles.ABI_VERSION
    assert _backend.REASON == "on"


_SHOW = (
    "import sys, warnings\n"
    "warnings.simplefilter('always')\n"
    "with warnings.catch_warnings(record=True) as caught:\n"
    "    import cuda_core, cuda_core._handles._backend as b\n"
    "print(b.NATIVE, 'cuda_core._handles._native' in sys.modules, b.backend.__name__)\n"
    "print(b.REASON)\n"
    "print([(w.category.__name__, str(w.message)) for w in caught if 'cuda_core' in str(w.message) or 'CUDA_CORE' in str(w.message)])\n"
)


def _show(**env: str) -> tuple[str, str, list[tuple[str, str]]]:
    """(NATIVE, native imported, module name), REASON and the warnings of a fresh import."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_CORE_BACKEND", "CUDA_CORE_NO_FASTPATH")
    }
    full_env = {**clean, **env, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", _SHOW], capture_output=True, text=True, env=full_env, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    first, reason, caught = out.stdout.strip().splitlines()
    return first, reason, eval(caught)


@pytest.mark.parametrize("value", ["python", "Python", " python "])
def test_backend_python_is_honoured_without_importing_native(value):
    first, reason, caught = _show(CUDA_CORE_BACKEND=value)
    assert first == "False False cuda_core._handles._pure"
    assert reason == "selected (CUDA_CORE_BACKEND=python)"
    assert caught == []


def test_no_fastpath_still_selects_pure_python_with_a_deprecation_warning():
    first, reason, caught = _show(CUDA_CORE_NO_FASTPATH="1")
    assert first == "False False cuda_core._handles._pure"
    assert "CUDA_CORE_NO_FASTPATH" in reason and "CUDA_CORE_BACKEND=python" in reason
    assert caught == [
        (
            "DeprecationWarning",
            "CUDA_CORE_NO_FASTPATH is deprecated: set CUDA_CORE_BACKEND=python instead",
        )
    ]


def test_backend_variable_wins_over_no_fastpath(monkeypatch):
    monkeypatch.setenv("CUDA_CORE_NO_FASTPATH", "1")
    monkeypatch.setenv("CUDA_CORE_BACKEND", "native")
    with pytest.warns(DeprecationWarning, match=r"CUDA_CORE_BACKEND=native is set and wins"):
        assert _backend.requested() == "native"


@pytest.mark.parametrize("value", ["", "0", "false", "no", "No "])
def test_no_fastpath_off_values_do_not_switch_off(monkeypatch, value):
    monkeypatch.delenv("CUDA_CORE_BACKEND", raising=False)
    monkeypatch.setenv("CUDA_CORE_NO_FASTPATH", value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no deprecation warning: the old switch does nothing
        assert _backend.requested() == ""


@pytest.mark.parametrize("value", ["", " ", "native", "NATIVE", "python"])
def test_accepted_values(monkeypatch, value):
    monkeypatch.delenv("CUDA_CORE_NO_FASTPATH", raising=False)
    monkeypatch.setenv("CUDA_CORE_BACKEND", value)
    assert _backend.requested() == value.strip().lower()


@pytest.mark.parametrize("value", ["pure", "c", "1", "pyhton"])
def test_unknown_value_is_refused_naming_the_choices(monkeypatch, value):
    monkeypatch.setenv("CUDA_CORE_BACKEND", value)
    with pytest.raises(
        ValueError, match=r"^CUDA_CORE_BACKEND must be one of python, native or unset \(got "
    ):
        _backend.requested()


def test_unknown_value_fails_the_import_with_that_error():
    env = {
        **os.environ,
        "CUDA_CORE_BACKEND": "pure",
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    out = subprocess.run(
        [sys.executable, "-c", "import cuda_core"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode != 0
    assert (
        "ValueError: CUDA_CORE_BACKEND must be one of python, native or unset (got 'pure')"
        in out.stderr
    )


def test_stale_native_module_falls_back_with_one_warning(monkeypatch):
    stale = types.ModuleType("cuda_core._handles._native")
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


def test_native_asked_but_not_built_falls_back_with_a_warning(monkeypatch):
    _fake_native(monkeypatch, None, "native")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend, native, reason = _backend._select()
    assert backend is _handles and native is False and reason.startswith("not built")
    assert [w.category for w in caught] == [RuntimeWarning]
    message = str(caught[0].message)
    assert message.startswith("cuda_core: CUDA_CORE_BACKEND=native is set, but the native backend")
    assert "is not built" in message and "running on pure Python" in message
    assert _backend.REBUILD_COMMAND in message


def test_native_asked_but_stale_falls_back_with_a_warning(monkeypatch):
    stale = types.ModuleType("cuda_core._handles._native")
    stale.ABI_VERSION = _protocol.ABI_VERSION - 1  # type: ignore[attr-defined]
    stale.__file__ = "/stale/build/_native.so"
    _fake_native(monkeypatch, stale, "native")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backend, native, reason = _backend._select()
    assert backend is _handles and native is False and reason.startswith("ABI mismatch")
    assert [w.category for w in caught] == [RuntimeWarning]
    message = str(caught[0].message)
    assert message.startswith(
        "cuda_core: CUDA_CORE_BACKEND=native is set, but the native backend in"
    )
    assert (
        f"ABI version {_protocol.ABI_VERSION - 1}" in message
        and _backend.REBUILD_COMMAND in message
    )


def test_python_asked_is_honoured_over_a_usable_native_module(monkeypatch):
    current = types.ModuleType("cuda_core._handles._native")
    current.ABI_VERSION = _protocol.ABI_VERSION  # type: ignore[attr-defined]
    _fake_native(monkeypatch, current, "python")
    assert _backend._select() == (_handles, False, "selected (CUDA_CORE_BACKEND=python)")


def test_matching_native_module_is_chosen(monkeypatch):
    current = types.ModuleType("cuda_core._handles._native")
    current.ABI_VERSION = _handles.ABI_VERSION  # type: ignore[attr-defined]
    _fake_native(monkeypatch, current)
    assert _backend._select() == (current, True, "on")
    _fake_native(monkeypatch, current, "native")
    assert _backend._select() == (current, True, "on")
