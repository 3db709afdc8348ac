"""The ``cuda_core`` logger: silent by default, DEBUG records for cache, backend and fallbacks."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from cuda_core import Program, ProgramOptions
from cuda_core.utils import InMemoryProgramCache, get_default_program_cache

SRC = 'extern "C" __global__ void logged(int* p) { p[0] = %d; }'


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_CORE_CACHE", raising=False)


def test_logger_is_named_and_has_a_null_handler():
    logger = logging.getLogger("cuda_core")
    assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)


def test_silent_by_default():
    code = "import cuda_core, logging; cuda_core.Program('__global__ void k(){}', 'c++', {'arch': 'sm_90'}).compile('ptx')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout == ""


def test_default_cache_reports_miss_write_and_hits(caplog):
    src = SRC % 11
    with caplog.at_level(logging.DEBUG, logger="cuda_core"):
        Program(src, options=ProgramOptions(arch="sm_90")).compile("ptx")
        Program(src, options=ProgramOptions(arch="sm_90")).compile("ptx")
        get_default_program_cache().clear(disk=False)
        Program(src, options=ProgramOptions(arch="sm_90")).compile("ptx")
    msgs = [r.getMessage() for r in caplog.records if r.name == "cuda_core"]
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "cuda_core")
    assert any(m.startswith("compile cache: miss") for m in msgs), msgs
    assert any(m.startswith("compile cache: wrote") for m in msgs), msgs
    assert any(m.startswith("compile cache: hit in memory") for m in msgs), msgs
    assert any(m.startswith("compile cache: hit on disk") for m in msgs), msgs


def test_custom_cache_reports_miss_and_hit(caplog):
    cache = InMemoryProgramCache()
    src = SRC % 12
    with caplog.at_level(logging.DEBUG, logger="cuda_core"):
        Program(src, options=ProgramOptions(arch="sm_90")).compile("ptx", cache=cache)
        Program(src, options=ProgramOptions(arch="sm_90")).compile("ptx", cache=cache)
    msgs = [r.getMessage() for r in caplog.records if r.name == "cuda_core"]
    assert any(m.startswith("compile cache: miss in InMemoryProgramCache") for m in msgs), msgs
    assert any(m.startswith("compile cache: hit in InMemoryProgramCache") for m in msgs), msgs


def test_nothing_logged_above_debug_when_compiling(caplog):
    with caplog.at_level(logging.INFO, logger="cuda_core"):
        Program(SRC % 13, options=ProgramOptions(arch="sm_90")).compile("ptx")
    assert not [r for r in caplog.records if r.name == "cuda_core"]


def test_backend_selection_and_driver_fallback_are_logged():
    code = (
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, level=logging.DEBUG, format='%(name)s %(levelname)s %(message)s')\n"
        "import cuda_core\n"
        "from cuda_core._handles._driver import driver_available\n"
        "driver_available()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "cuda_core DEBUG handle layer: " in proc.stdout
    assert ("cuda_core DEBUG no CUDA driver" in proc.stdout) or (
        "cuda_core DEBUG CUDA driver initialised" in proc.stdout
    )
