"""cuda_core.system's NVML side: Device, versions, P2P/topology, events and the error classes."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from cuda_core import CUDADriverNotFoundError, system
from cuda_core.system import _nvml
from cuda_core.system.typing import ClockType, GpuP2PStatus, GpuTopologyLevel
from tests.helpers import no_nvml

if not _nvml.CUDA_BINDINGS_NVML_IS_COMPATIBLE:
    from cuda_core._compat import BINDINGS_TEXT

    pytest.skip(
        f"cuda-bindings {BINDINGS_TEXT} has no NVML module (12.9.6+ and 13.2+ have one)",
        allow_module_level=True,
    )


# -- CPU tier ----------------------------------------------------------------------------------


def test_import_loads_no_nvml():
    code = (
        "import sys, cuda_core, cuda_core.system, cuda_core.checkpoint\n"
        "from cuda_core.system import _nvml\n"
        "assert _nvml._ready_pid == 0 and _nvml._missing is None\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_error_classes_are_the_bindings_own():
    nvml = pytest.importorskip("cuda.bindings.nvml")
    for name in system.exceptions.__all__:
        assert getattr(system, name) is getattr(nvml, name), name
        assert issubclass(getattr(system, name), system.NvmlError), name


def test_status_table_maps_every_code_once():
    codes = [code for code, _, _ in _nvml.STATUS_TABLE]
    assert len(codes) == len(set(codes)) == len(system.exceptions.__all__) - 1  # not NvmlError
    nvml = pytest.importorskip("cuda.bindings.nvml")
    for code, name, cls_name in _nvml.STATUS_TABLE:
        assert nvml.Return(code).name == name.removeprefix("NVML_"), name
        assert _nvml.status_of(getattr(system, cls_name)) == code


@pytest.mark.parametrize(
    "code,cls_name",
    [
        (2, "InvalidArgumentError"),
        (3, "NotSupportedError"),
        (6, "NotFoundError"),
        (9, "DriverNotLoadedError"),
        (10, "TimeoutError"),
        (15, "GpuIsLostError"),
        (999, "UnknownError"),
    ],
)
def test_make_error_builds_the_class_for_the_status(code, cls_name):
    err = _nvml.make_error(code, "nvmlDeviceGetName")
    assert type(err) is getattr(system, cls_name)
    assert isinstance(err, system.NvmlError)
    assert err.status == code
    assert str(err).startswith(f"nvmlDeviceGetName: {err.name}")


def test_make_error_for_an_unknown_code_is_unknown_error():
    err = _nvml.make_error(12345, "nvmlX")
    assert isinstance(err, system.UnknownError)
    assert "NVML_ERROR_UNKNOWN_12345" in str(err)


def test_funnel_rewords_a_binding_error():
    def device_get_handle_by_index_v2(index):
        raise _nvml.make_error(2, "")

    if _nvml._ready_pid == 0:
        pytest.skip("the funnel starts NVML first; needs NVML")
    with pytest.raises(system.InvalidArgumentError, match=r"^nvmlDeviceGetHandleByIndex_v2: "):
        _nvml.call(device_get_handle_by_index_v2, 99)


def test_api_names():
    assert _nvml.nvml_api_name("device_get_handle_by_index_v2") == "nvmlDeviceGetHandleByIndex_v2"
    assert _nvml.nvml_api_name("system_get_driver_branch") == "nvmlSystemGetDriverBranch"
    assert _nvml.nvml_api_name("device_get_last_bbx_flush_time") == "nvmlDeviceGetLastBBXFlushTime"
    assert _nvml.nvml_api_name("device_get_fan_speed_rpm") == "nvmlDeviceGetFanSpeedRPM"
    assert _nvml.nvml_api_name("device_get_nvlink_state") == "nvmlDeviceGetNvLinkState"


def test_library_missing_error_is_all_three_kinds():
    err = _nvml.NvmlLibraryNotFoundError("no libnvidia-ml")
    assert isinstance(err, system.LibraryNotFoundError)
    assert isinstance(err, system.NvmlError)
    assert isinstance(err, RuntimeError)
    assert isinstance(err, CUDADriverNotFoundError)
    assert err.status == 12
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in str(err) and "no libnvidia-ml" in str(err)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)


@no_nvml
@pytest.mark.parametrize(
    "fn",
    [
        system.get_kernel_mode_driver_version,
        system.get_nvml_version,
        system.get_driver_branch,
        lambda: system.get_process_name(1),
        lambda: system.Device(index=0),
        lambda: system.Device.get_device_count(),
        lambda: system.register_events("bind"),
        lambda: system.get_driver_version_full(kernel_mode=True),
    ],
)
def test_without_nvml_every_query_raises_library_not_found(fn):
    with pytest.raises(system.LibraryNotFoundError, match=r"libnvidia-ml\.so\.1") as info:
        fn()
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(system.LibraryNotFoundError):  # remembered, raised again
        fn()


def test_device_argument_checking():
    with pytest.raises(ValueError, match="exactly one of index, uuid and pci_bus_id"):
        system.Device()
    with pytest.raises(ValueError, match="exactly one"):
        system.Device(index=0, uuid="GPU-x")
    with pytest.raises(TypeError, match=r"index must be an int \(got '0'\)"):
        system.Device(index="0")
    with pytest.raises(ValueError, match=r"index must be >= 0 \(got -1\)"):
        system.Device(index=-1)


def test_pair_queries_check_their_arguments():
    with pytest.raises(TypeError, match=r"device1 must be a cuda_core\.system\.Device"):
        system.get_p2p_status(0, 0, "read")
    with pytest.raises(TypeError, match=r"device2 must be a cuda_core\.system\.Device"):
        system.get_topology_common_ancestor(system.Device._from_handle(1), "x")
    dev = system.Device._from_handle(1)
    with pytest.raises(ValueError, match="index must be one of"):
        system.get_p2p_status(dev, dev, "telepathy")
    with pytest.raises(ValueError, match="clock_type must be one of"):
        dev.get_clock("warp")


def test_event_arguments_are_checked_before_nvml():
    with pytest.raises(ValueError, match="events must be one of"):
        system.register_events("reboot")
    with pytest.raises(ValueError, match="at least one event type"):
        system.register_events([])
    # None and ints are refused as cuda.core refuses them (TypeError), before NVML is asked;
    # a device's empty list is accepted (cuda.core registers it: see the GPU test).
    dev = system.Device._from_handle(1)
    for bad in (0, None):
        with pytest.raises(
            TypeError, match=r"events must be an EventType, a str, or a list of them"
        ):
            dev.register_events(bad)
        with pytest.raises(
            TypeError, match=r"events must be a SystemEventType, a str, or a list of them"
        ):
            system.register_events(bad)
    with pytest.raises(ValueError, match="events must be one of"):
        dev.register_events(["reboot"])
    with pytest.raises(TypeError, match="pid must be an int"):
        system.get_process_name("1")
    with pytest.raises(ValueError, match="pid must be > 0"):
        system.get_process_name(0)


def test_nvlink_max_links_is_nvml_constant_and_deprecated():
    with pytest.warns(DeprecationWarning, match="get_nvlink_count"):
        assert system.NvlinkInfo.max_links >= 18


# -- GPU tier ----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_versions_are_non_empty():
    km = system.get_kernel_mode_driver_version()
    assert len(km) >= 2 and km[0] >= 400
    assert km == system.get_driver_version_full(kernel_mode=True)
    assert len(system.get_nvml_version()) >= 2
    assert system.get_user_mode_driver_version() == system.get_driver_version()
    branch = system.get_driver_branch()
    assert isinstance(branch, str) and branch


@pytest.mark.gpu
def test_device0_identity_matches_cuda():
    from cuda_core import Device

    cuda_dev = Device(0)
    nv = cuda_dev.to_system_device()
    assert isinstance(nv, system.Device)
    assert nv.uuid_without_prefix.lower() == cuda_dev.uuid.lower()
    assert nv.uuid.upper().startswith("GPU-")
    assert nv.name == cuda_dev.name
    assert nv.pci_bus_id.lower().endswith(cuda_dev.pci_bus_id.lower()[-12:])
    assert nv.cuda_compute_capability == tuple(cuda_dev.compute_capability)
    assert nv.to_cuda_device() == cuda_dev
    assert system.Device(uuid=nv.uuid) == nv
    assert system.Device(pci_bus_id=nv.pci_bus_id) == nv
    assert nv in list(system.Device.get_all_devices())
    assert system.Device.get_device_count() >= 1


@pytest.mark.gpu
def test_device0_memory_matches_cuda_total():
    from cuda_core import Device

    nv = Device(0).to_system_device()
    mem = nv.memory_info
    total = Device(0).total_memory
    # NVML counts the memory the driver reserves for itself (about 480 MiB on the H100 with
    # driver 580); cuDeviceTotalMem does not.
    assert 0 <= mem.total - total <= 2**30, (mem.total, total)
    assert 0 <= mem.free <= mem.total and 0 <= mem.used <= mem.total
    bar1 = nv.bar1_memory_info
    assert bar1.total > 0


@pytest.mark.gpu
def test_device0_clocks_power_temperature_are_plausible():
    nv = system.Device(index=0)
    for ct in ("graphics", "sm", ClockType.MEMORY):
        clock = nv.get_clock(ct)
        mx = clock.get_max_mhz()
        assert 100 <= mx <= 10_000, (ct, mx)
        assert 0 <= clock.get_current_mhz() <= mx + 50
    temp = nv.temperature.get_sensor()
    assert 5 <= temp <= 110
    if nv.arch >= system.typing.DeviceArch.ADA:  # NVML prefers field values there; cuda.core warns
        with pytest.warns(DeprecationWarning, match="slowdown"):
            slowdown = nv.temperature.get_threshold("slowdown")
    else:
        slowdown = nv.temperature.get_threshold("slowdown")
    assert slowdown > temp
    assert 10_000 <= nv.power_usage <= 2_000_000  # milliwatts: 10 W to 2 kW
    assert nv.power_limit >= nv.power_usage // 2
    u = nv.utilization
    assert 0 <= u.gpu <= 100 and 0 <= u.memory <= 100
    assert nv.performance_state is None or 0 <= nv.performance_state <= 15
    assert all(0 <= p <= 15 for p in nv.supported_pstates)
    assert nv.arch >= system.typing.DeviceArch.VOLTA
    assert isinstance(nv.brand, str) and nv.brand
    pci = nv.pci_info
    assert pci.vendor_id == 0x10DE
    assert pci.current_link_width >= 1


@pytest.mark.gpu
def test_p2p_and_topology_on_device0_with_itself():
    nv = system.Device(index=0)
    status = system.get_p2p_status(nv, nv, "read")
    assert isinstance(status, GpuP2PStatus)
    try:
        level = system.get_topology_common_ancestor(nv, nv)
    except system.NotSupportedError:
        return  # NVML on the H100 (driver 580) does not answer for a device with itself
    assert level is GpuTopologyLevel.INTERNAL


@pytest.mark.gpu
def test_nvlinks_are_consistent():
    nv = system.Device(index=0)
    links = list(nv.get_nvlinks())
    assert len(links) == nv.get_nvlink_count()
    for link in links:
        assert isinstance(link.state, bool)
        if link.state:
            assert link.version >= (1, 0)
    with pytest.raises(ValueError, match="link must be an NVLink link"):
        nv.get_nvlink(18 + 1)  # NVML_NVLINK_MAX_LINKS is 18


@pytest.mark.gpu
def test_invalid_index_raises_nvml_error_and_process_keeps_working():
    n = system.Device.get_device_count()
    with pytest.raises(system.NvmlError) as info:
        system.Device(index=n + 1000)
    assert isinstance(info.value, system.InvalidArgumentError | system.NotFoundError)
    assert str(info.value).startswith("nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_")
    with pytest.raises(system.NotFoundError):
        system.Device(uuid="GPU-00000000-0000-0000-0000-000000000000")
    assert system.Device(index=0).name  # NVML still works


@pytest.mark.gpu
def test_process_name_and_running_processes(dev):
    import os

    name = system.get_process_name(os.getpid())
    assert "python" in name.lower() or sys.executable.endswith(name.rsplit("/", 1)[-1])
    nv = dev.to_system_device()
    procs = nv.compute_running_processes
    assert all(p.pid > 0 for p in procs)
    if nv.mig.is_mig_device:
        assert all(
            isinstance(p.gpu_instance_id, int) and isinstance(p.compute_instance_id, int)
            for p in procs
        )
    else:  # the instance ids exist on MIG devices only (cuda.core raises NotSupportedError)
        for p in procs:
            with pytest.raises(system.NotSupportedError, match="gpu_instance_id is only defined"):
                p.gpu_instance_id  # noqa: B018
            with pytest.raises(
                system.NotSupportedError, match="compute_instance_id is only defined"
            ):
                p.compute_instance_id  # noqa: B018


@pytest.mark.gpu
def test_event_sets_register_and_time_out():
    nv = system.Device(index=0)
    supported = nv.get_supported_event_types()
    if not supported:
        pytest.skip("device 0 supports no NVML events")
    with nv.register_events(supported[0]) as events:
        with pytest.raises(system.TimeoutError):
            events.wait(timeout_ms=1)
    assert events.is_closed


@pytest.mark.gpu
def test_empty_event_list_registers_nothing():
    # cuda.core registers an empty list (mask 0); waiting on it times out
    with system.Device(index=0).register_events([]) as events:
        with pytest.raises(system.TimeoutError):
            events.wait(timeout_ms=1)


def test_stand_in_for_missing_nvml_has_only_functions():
    # Where cuda-bindings has no nvml module, a stand-in answers nvml.<function> with a stub
    # that raises the error naming the bindings needed; constants and classes are missing, so
    # getattr defaults (NVLINK_MAX_LINKS) and hasattr checks see the bindings as they are.
    stand_in = _nvml._NoNvml()
    assert getattr(stand_in, "NVLINK_MAX_LINKS", 18) == 18
    assert getattr(stand_in, "MAX_GPU_UTILIZATIONS", 8) == 8
    assert not hasattr(stand_in, "FieldId") and not hasattr(stand_in, "__array__")
    assert callable(stand_in.device_get_count_v2)
