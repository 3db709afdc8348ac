"""CPU tier: the native handle layer (``cuda_core/_handles/_csrc``) driven against a fake driver.

``tests/handles/native_stub/stub_cuda.c`` fakes the driver entry points the native module
binds, with injectable failures, a context id the test changes (a reset), counters and busy
flags. Each check of ``tests/handles/native_stub/drive.py`` (the checks are in ``checks_*.py``
there) runs in a subprocess that loads its own build of the native module and binds it to the
stub (the test process's module is never bound to it: GPU tests share this process). The stub
only reaches the code and error paths a CPU can; it never stands in for the GPU tier. Every
check runs twice: against a plain build, and against an AddressSanitizer +
UndefinedBehaviorSanitizer build (skipped with the reason where gcc's libasan is missing).
Everything is written under ``tmp_path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.handles.conftest import ASAN_ENV, GCC, libasan

ROOT = Path(__file__).resolve().parents[2]
STUB_DIR = Path(__file__).resolve().parent / "native_stub"
DRIVE = STUB_DIR / "drive.py"
CHECKS = (  # in the order drive.py registers them (its checks_* modules, alphabetically)
    "event_pools",
    "context_changed",
    "primary_context_reset",
    "released_refuse",
    "driver_errors",
    "dealloc_warns",
    "torch_host_tensors",
    "view_entry_reads_torch_tensors",
    "launch",
    "gc_cycles",
    "types",
    "allocation_freed_once",
    "allocation_refused_while_capturing",
    "allocation_fallbacks",
    "allocation_free_callback",
    "unbound",
    "stream_pool",
    "stream_context",
    "busy_stream_destroyed",
    "stream_ops",
)
pytestmark = pytest.mark.skipif(
    GCC is None, reason="gcc is needed to build the stub driver and the module"
)


def _run(
    native: Path, stub: Path, check: str, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ASAN_", "UBSAN_", "LD_PRELOAD"))
    }
    env.update(env_extra or {})
    return subprocess.run(
        [
            sys.executable,
            "-X",
            "dev",
            "-W",
            "error::RuntimeWarning",
            str(DRIVE),
            str(native),
            str(stub),
            check,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def _assert_passed(proc: subprocess.CompletedProcess[str], check: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert f"PASS {check}" in proc.stdout, out
    assert "runtime error:" not in out, out  # UBSan
    assert "Exception ignored" not in out, out  # an unraisable error from a deallocator


def test_drive_lists_every_check(artifacts: dict[str, Path]) -> None:
    proc = _run(artifacts["plain"], artifacts["stub"], "--list")
    assert proc.returncode == 0, proc.stderr
    assert tuple(proc.stdout.split()) == CHECKS


@pytest.mark.parametrize("check", CHECKS)
def test_native_against_stub(artifacts: dict[str, Path], check: str) -> None:
    _assert_passed(_run(artifacts["plain"], artifacts["stub"], check), check)


@pytest.mark.parametrize("check", CHECKS)
def test_native_against_stub_sanitized(
    artifacts: dict[str, Path], asan_native: Path, check: str
) -> None:
    env = {"LD_PRELOAD": str(libasan()), **ASAN_ENV}
    proc = _run(asan_native, artifacts["stub"], check, env)
    assert "AddressSanitizer" not in proc.stderr, proc.stderr
    _assert_passed(proc, check)


def test_stub_catches_misuse(artifacts: dict[str, Path], tmp_path: Path) -> None:
    """The stub's misuse counter works (a check that cannot fail would prove nothing)."""
    script = tmp_path / "misuse.py"
    script.write_text(
        "import ctypes, sys\n"
        "lib = ctypes.CDLL(sys.argv[1])\n"
        "lib.stub_reset(); lib.stub_set_current(ctypes.c_void_p(lib.stub_ctx()))\n"
        "lib.stub_ctx.restype = ctypes.c_void_p; lib.stub_set_current(ctypes.c_void_p(lib.stub_ctx()))\n"
        "h = ctypes.c_void_p()\n"
        "assert lib.cuStreamCreate(ctypes.byref(h), 0) == 0\n"
        "assert lib.cuStreamDestroy(h) == 0 and lib.cuStreamDestroy(h) == 400\n"
        "lib.stub_change_ctx_id()\n"
        "assert lib.cuStreamCreate(ctypes.byref(h), 0) == 0 and lib.stub_change_ctx_id() is not None\n"
        "assert lib.cuStreamQuery(h) == 400\n"
        "print(ctypes.c_int.in_dll(lib, 'stub_errors').value)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script), str(artifacts["stub"])], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2"]
