"""Shared test code: GPU detection and small fixtures used by several test modules."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from cuda_core._compat import BINDINGS_MAJOR, BINDINGS_TEXT

cuda13_bindings = pytest.mark.skipif(
    BINDINGS_MAJOR < 13,
    reason=f"needs cuda-bindings 13 (a CUDA 13 feature: managed memory pools, batched discard); "
    f"this run has cuda-bindings {BINDINGS_TEXT}",
)
"""Marks a test of a feature only ``cuda-bindings`` 13 offers (under 12.x it raises
``NotImplementedError``, which tests/test_compat.py checks)."""


def _harmful_mix() -> bool:
    from cuda_core._compile._majors import mixed

    mix = mixed()
    return mix is not None and mix.harmful


report_fails_the_mix = pytest.mark.skipif(
    _harmful_mix(),
    reason="this environment mixes CUDA majors (cuda-bindings 12 beside the CUDA 13 wheels, as "
    "the GPU machine's cu12 run makes it): python -m cuda_core fails it by design "
    "(tests/report/test_report_layout.py checks that)",
)
"""Marks a test of ``python -m cuda_core`` that expects a setup of one CUDA major."""


@functools.cache
def gpu_skip_reason() -> str | None:
    """``None`` when a CUDA GPU is usable, else why GPU-tier tests are skipped."""
    from cuda_core._errors import CUDADriverNotFoundError, CUDAError
    from cuda_core._handles._driver import ensure_driver

    try:
        ensure_driver()
    except CUDADriverNotFoundError:
        return "GPU tier: no NVIDIA driver (libcuda) on this machine"
    except CUDAError as exc:
        return f"GPU tier: the driver cannot be used ({exc})"
    from cuda.bindings import driver

    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "GPU tier skipped: the NVIDIA driver is present but reports no CUDA device"
    return None


@functools.cache
def nvml_present() -> bool:
    """Whether NVML (``libnvidia-ml.so.1``, part of the driver) can be started here."""
    from cuda_core import system

    try:
        system.get_nvml_version()
    except system.LibraryNotFoundError:
        return False
    return True


def no_nvml(fn: Any) -> Any:
    """Marks a test of the paths taken where NVML is missing: skipped where it is installed."""
    return pytest.mark.skipif(nvml_present(), reason="NVML is installed here")(fn)


def gpu_count() -> int:
    """The number of CUDA devices (0 without a driver)."""
    if gpu_skip_reason() is not None:
        return 0
    from cuda.bindings import driver

    return int(driver.cuDeviceGetCount()[1])


def user_cache_dir() -> str:
    """The compile cache a user gets with no ``CUDA_CORE_CACHE_DIR``: ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cuda_core")


def user_cache_snapshot() -> dict[str, tuple[int, int]]:
    """``{path: (mtime_ns, size)}`` of every file under :func:`user_cache_dir` (reads refresh mtimes)."""
    out: dict[str, tuple[int, int]] = {}
    for root, _dirs, files in os.walk(user_cache_dir()):
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            out[path] = (st.st_mtime_ns, st.st_size)
    return out


def in_thread(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a fresh thread (no context current there); return its result or re-raise
    its exception in the calling thread."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(120)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def settled_kept_callbacks() -> int:
    """The number of host-callback entries graphs hold, once the releases of earlier tests'
    graphs have ended (the driver releases a graph's user objects on a thread of its own, a
    moment after the graph goes) and the hand-over they queued for the main thread has run
    (this loop is on the main thread, which runs it between bytecodes), so a test can count its
    own entries against it and find no drain pending."""
    import gc
    import time

    from cuda_core import _trampolines

    count, same = -1, 0
    for _ in range(250):  # at most 5 s; settled: the same count for 100 ms, and nothing queued
        gc.collect()
        time.sleep(0.02)
        now = _trampolines.pending_callbacks()[1]
        same = same + 1 if now == count and not _trampolines._drain_queued else 0
        if same == 5:
            break
        count = now
    return count
