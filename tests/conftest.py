"""Test tiers: everything not marked ``gpu`` runs anywhere; ``gpu`` tests skip without a GPU.

Shared GPU fixtures live here too; they reach the driver only when a (GPU) test requests them.

The whole session (and every subprocess it starts) compiles into a temporary cache directory
(``CUDA_CORE_CACHE_DIR``), never into the user's ``~/.cache/cuda_core``: the session fails if
that directory changed while it ran (``tests/compile/test_cache_hygiene.py`` checks it too).

With ``CUDA_CORE_TEST_PRECOMPILED=<folder>`` (the GPU tier under ``cuda-bindings`` 12.x on a
machine without NVRTC 12, ``tools/device/cu12.sh``), compiles are answered from kernels compiled
beforehand, and a test that needed NVRTC 12 for anything else is a skip with the reason
"NVRTC 12 is not installed on this machine" (``tests/helpers/precompiled.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tests.helpers import dropin, gpu_skip_reason, precompiled, user_cache_snapshot

_session_cache: str | None = None
_user_cache_before: dict[str, tuple[int, int]] = {}


def pytest_configure(config):
    global _session_cache, _user_cache_before
    _user_cache_before = user_cache_snapshot()
    _session_cache = tempfile.mkdtemp(prefix="cuda_core_test_cache_")
    os.environ["CUDA_CORE_CACHE_DIR"] = _session_cache
    os.environ.pop("CUDA_CORE_CACHE", None)
    if os.environ.get(precompiled.ENV):
        precompiled.serve(os.environ[precompiled.ENV])


def pytest_runtest_setup(item):
    # The tests of compiling itself (cache, logs, linking, options) must see NVRTC: no kernels
    # compiled beforehand for them.
    precompiled.active = item.path.name not in precompiled.NOT_SERVED


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (
        report.failed
        and os.environ.get(precompiled.ENV)
        and precompiled.failed_for_want_of_nvrtc_12(str(report.longrepr))
    ):
        report.outcome = "skipped"
        report.longrepr = (
            str(item.path),
            item.location[1] or 0,
            f"Skipped: {precompiled.SKIP_REASON}",
        )


def pytest_sessionfinish(session, exitstatus):
    if _session_cache is None:
        return
    changed = sorted(set(user_cache_snapshot().items()) ^ set(_user_cache_before.items()))
    if changed:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line("")
            tr.write_line(
                f"FAILED: the tests wrote into the user's compile cache: {changed[:5]}", red=True
            )
    shutil.rmtree(_session_cache, ignore_errors=True)


@pytest.fixture(scope="session")
def session_cache_dir() -> str:
    """The temporary compile-cache directory of this test session."""
    assert _session_cache is not None
    return _session_cache


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            if reason is None:
                reason = gpu_skip_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def nv():
    """NVIDIA's ``cuda.core`` (the drop-in tests compare against it), or a skip without it."""
    return dropin.require_nv()


@pytest.fixture(scope="module")
def dev():
    """The current device (``Device()``), made current once per test module."""
    from cuda_core import Device

    d = Device()
    d.set_current()
    return d
