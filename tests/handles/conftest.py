"""Builds the stub-driver tests of this folder share (once per session): the stub driver library
and the native module from the current sources, plain and with AddressSanitizer +
UndefinedBehaviorSanitizer (``tests/handles/native_stub/stub_build.py`` builds them)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.handles.native_stub import stub_build

GCC = shutil.which("gcc")
ASAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=86",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "PYTHONMALLOC": "malloc",  # Python objects in malloc'ed memory, where ASan sees them
}


def libasan() -> str | None:
    """gcc's libasan.so (to preload into the Python that loads a sanitized build), or None."""
    if GCC is None:
        return None
    path = subprocess.run(
        [GCC, "-print-file-name=libasan.so"], capture_output=True, text=True
    ).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The stub library and a plain build of the native module (skips without gcc)."""
    if GCC is None:
        pytest.skip("gcc is needed to build the stub driver and the module")
    d = tmp_path_factory.mktemp("native_stub")
    plain = d / "plain"
    plain.mkdir()
    return {"stub": stub_build.build_stub(GCC, d), "plain": stub_build.build_native(GCC, plain)}


@pytest.fixture(scope="session")
def asan_native(artifacts: dict[str, Path]) -> Path:
    """The native module built with AddressSanitizer and UndefinedBehaviorSanitizer."""
    if libasan() is None:
        pytest.skip("gcc's libasan.so is not installed: the sanitizer run needs it")
    assert GCC is not None
    d = artifacts["stub"].parent / "asan"
    d.mkdir(exist_ok=True)
    flags = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    return stub_build.build_native(GCC, d, [*flags, "-fno-sanitize-recover=undefined"])
