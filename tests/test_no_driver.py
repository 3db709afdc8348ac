"""CPU tier: with no NVIDIA driver, importing and compiling work and GPU calls fail clearly.

Skipped (with the reason) where a driver is present: there the GPU tier covers the same calls.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from cuda_core._handles._driver import driver_available

pytestmark = pytest.mark.skipif(
    driver_available(), reason="an NVIDIA driver is present; these tests need a machine without one"
)


def _check_driver_error(exc: BaseException) -> None:
    from cuda.pathfinder import DynamicLibNotFoundError

    from cuda_core import CUDADriverNotFoundError, CUDAError

    assert isinstance(exc, CUDADriverNotFoundError), "a bare loader exception leaked"
    assert isinstance(exc, CUDAError)
    # and what cuda.core raises here (cuda.pathfinder's, a RuntimeError): its handlers work
    assert isinstance(exc, DynamicLibNotFoundError) and isinstance(exc, RuntimeError)
    text = str(exc)
    assert "NVIDIA driver" in text
    assert "libcuda" in text
    assert "not found" in text
    assert "still works" in text and "Compil" in text
    assert exc.__suppress_context__ or exc.__context__ is None


def test_import_works_without_driver():
    import cuda_core

    assert cuda_core.__version__
    assert "Device" in cuda_core.__all__


def test_device_raises_driver_not_found():
    from cuda_core import CUDADriverNotFoundError, Device

    for args in ((), (0,)):
        with pytest.raises(CUDADriverNotFoundError) as info:
            Device(*args)
        _check_driver_error(info.value)


def test_stream_raises_driver_not_found():
    from cuda_core import CUDADriverNotFoundError, Stream

    with pytest.raises(CUDADriverNotFoundError) as info:
        Stream()
    _check_driver_error(info.value)


def test_error_repeats_on_every_call():
    from cuda_core import CUDADriverNotFoundError, Device

    messages = set()
    for _ in range(3):
        with pytest.raises(CUDADriverNotFoundError) as info:
            Device()
        messages.add(str(info.value))
    assert len(messages) == 1


def test_system_driver_facts_raise_and_library_facts_work():
    from cuda_core import CUDADriverNotFoundError, system

    with pytest.raises(CUDADriverNotFoundError):
        system.get_driver_version()
    with pytest.raises(CUDADriverNotFoundError):
        system.get_num_devices()
    assert system.get_nvrtc_version()[0] >= 12


def test_fresh_process_import_and_first_gpu_call():
    # A fresh interpreter: the first call that needs the driver gives the clear error.
    code = textwrap.dedent(
        """
        import cuda_core
        try:
            cuda_core.Device()
        except cuda_core.CUDADriverNotFoundError as exc:
            print("OK", type(exc).__name__, "|", exc)
        else:
            print("NO ERROR")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK CUDADriverNotFoundError |"), proc.stdout + proc.stderr
    assert "libcuda" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_compiling_needs_no_driver():
    from cuda.bindings import nvrtc

    from tests.helpers.kernels import TIMING_SRC, nvrtc_cubin

    cubin = nvrtc_cubin(TIMING_SRC, "90")
    assert cubin.startswith(b"\x7fELF")
    assert nvrtc.nvrtcVersion()[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
