"""cuda_core.system: driver, device and library facts."""

from __future__ import annotations

import importlib.metadata
import re

import pytest
from cuda.bindings import driver, nvjitlink, nvrtc, nvvm

from cuda_core import CUDADriverNotFoundError, system
from cuda_core._handles._driver import driver_available


def test_all_is_sorted_and_resolves():
    assert list(system.__all__) == sorted(system.__all__)
    for name in system.__all__:
        if name == "CUDA_BINDINGS_NVML_IS_COMPATIBLE":
            assert isinstance(system.CUDA_BINDINGS_NVML_IS_COMPATIBLE, bool)
            continue
        assert callable(getattr(system, name)), name


def test_nvrtc_version_matches_library():
    _, major, minor = nvrtc.nvrtcVersion()
    assert system.get_nvrtc_version() == (major, minor)
    assert all(type(v) is int for v in system.get_nvrtc_version())


def test_nvjitlink_and_nvvm_versions_match_libraries():
    assert system.get_nvjitlink_version() == tuple(nvjitlink.version())
    assert system.get_nvvm_version() == tuple(nvvm.version())


def test_bindings_version_matches_distribution():
    import cuda.bindings

    assert system.get_bindings_version() == cuda.bindings.__version__
    assert system.get_bindings_version() == importlib.metadata.version("cuda-bindings")


def test_old_system_attributes_warn_naming_the_functions():
    # cuda.core.experimental's system object (0.x) had them; 0.5 deprecated them. Reading one
    # warns first, also where no driver is there to answer.
    for name, new in (
        ("driver_version", "get_driver_version()"),
        ("num_devices", "get_num_devices()"),
        ("devices", "get_all_devices()"),
    ):
        with pytest.warns(DeprecationWarning, match=re.escape(new)) as rec:
            try:
                getattr(system, name)
            except CUDADriverNotFoundError:
                pass
        assert rec[0].filename == __file__, name


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="no_such_fact"):
        system.no_such_fact  # noqa: B018


@pytest.mark.skipif(driver_available(), reason="an NVIDIA driver is present")
def test_driver_facts_without_driver_raise_driver_not_found():
    for fn in (system.get_driver_version, system.get_driver_version_full, system.get_num_devices):
        with pytest.raises(CUDADriverNotFoundError, match="libcuda"):
            fn()
    with pytest.raises(CUDADriverNotFoundError), pytest.warns(DeprecationWarning):
        system.driver_version  # noqa: B018


@pytest.mark.gpu
def test_driver_version_matches_driver():
    v = driver.cuDriverGetVersion()[1]
    assert system.get_driver_version() == (v // 1000, (v % 1000) // 10)
    assert system.get_driver_version_full() == (v // 1000, (v % 1000) // 10, v % 10)
    with pytest.warns(DeprecationWarning, match=r"system\.driver_version .*get_driver_version\(\)"):
        assert system.driver_version == system.get_driver_version()


@pytest.mark.gpu
def test_kernel_mode_driver_version():
    try:
        from cuda.bindings import nvml  # noqa: F401
    except ImportError:
        pytest.skip("cuda-bindings has no NVML")
    full = system.get_driver_version_full(kernel_mode=True)
    assert len(full) >= 2
    assert full[0] >= 400  # kernel-mode driver branches are 3-digit numbers (e.g. 580)
    assert system.get_driver_version(kernel_mode=True) == full[:2]


@pytest.mark.gpu
def test_num_devices_matches_driver():
    n = driver.cuDeviceGetCount()[1]
    assert system.get_num_devices() == n >= 1
    with pytest.warns(DeprecationWarning, match=r"get_num_devices\(\)"):
        assert system.num_devices == n
    from cuda_core import Device

    with pytest.warns(DeprecationWarning, match=r"Device\.get_all_devices\(\)"):
        assert system.devices == tuple(Device(i) for i in range(n))


def test_result_classes_are_found_where_cuda_core_keeps_them():
    # NVIDIA's tests and code written for cuda.core check isinstance against
    # cuda.core.system._device.<Class>; each name there is our class, not a copy.
    from cuda_core.system import _board, _clocks, _device, _field_values, _thermal

    homes = {
        "ClockInfo": _clocks,
        "ClockOffsets": _clocks,
        "GpuDynamicPstatesInfo": _clocks,
        "DeviceAttributes": _board,
        "RepairStatus": _board,
        "FieldValues": _field_values,
        "CoolerInfo": _thermal,
        "FanInfo": _thermal,
        "Temperature": _thermal,
        "ThermalSensor": _thermal,
        "ThermalSettings": _thermal,
    }
    for name, home in homes.items():
        assert getattr(_device, name) is getattr(home, name), name
    assert "ClockInfo" not in _device.__all__  # found there, not public there
