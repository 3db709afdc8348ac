"""cuda_core.system.Device's wider NVML queries: field values, clocks and performance, thermal
and cooling, InfoROM, MIG, repair status, attributes, addressing mode, C2C and affinity.

The CPU tier checks the arguments, the decoding of NVML's structures (built with
``cuda.bindings.nvml`` itself) and the error every query raises without NVML. The GPU tier
compares each answer with a second source: NVIDIA's ``cuda.core.system`` on the same GPU (the
same value, or the same NVML error class where NVML refuses), ``nvidia-smi``, sysfs and CUDA's
device attributes.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from enum import Enum
from typing import Any

import pytest

from cuda_core import system
from cuda_core.system import _device_info
from cuda_core.system._board import DeviceAttributes
from cuda_core.system._clocks import ClockOffsets, GpuDynamicPstatesInfo
from cuda_core.system._field_values import FieldValues
from cuda_core.system._thermal import CoolerInfo, ThermalSettings
from cuda_core.system.typing import (
    AddressingMode,
    ClocksEventReasons,
    CoolerControl,
    CoolerTarget,
    ThermalController,
    ThermalTarget,
)

nvml = pytest.importorskip("cuda.bindings.nvml")
np = pytest.importorskip("numpy")
FieldId = nvml.FieldId


def _nvml_present() -> bool:
    try:
        system.get_nvml_version()
    except system.LibraryNotFoundError:
        return False
    return True


no_nvml = pytest.mark.skipif(_nvml_present(), reason="NVML is installed here")

# Every query this module adds, reached from a device object that holds an NVML handle. Without
# NVML each must raise LibraryNotFoundError (NVML is started on the first query).
NEW_QUERIES = {
    "addressing_mode": lambda d: d.addressing_mode,
    "attributes": lambda d: d.attributes,
    "clear_field_values": lambda d: d.clear_field_values([FieldId.DEV_PCIE_REPLAY_COUNTER]),
    "cooler": lambda d: d.cooler,
    "current_clock_event_reasons": lambda d: d.current_clock_event_reasons,
    "dynamic_pstates_info": lambda d: d.dynamic_pstates_info,
    "get_all_devices_with_cpu_affinity": lambda d: type(d).get_all_devices_with_cpu_affinity(0),
    "get_cpu_affinity": lambda d: d.get_cpu_affinity(),
    "get_fan": lambda d: d.get_fan(0),
    "get_field_values": lambda d: d.get_field_values([FieldId.DEV_NVLINK_LINK_COUNT]),
    "get_memory_affinity": lambda d: d.get_memory_affinity("socket"),
    "inforom.image_version": lambda d: d.inforom.image_version,
    "inforom.get_version": lambda d: d.inforom.get_version("ecc"),
    "is_auto_boosted_clocks_enabled": lambda d: d.is_auto_boosted_clocks_enabled,
    "is_c2c_enabled": lambda d: d.is_c2c_enabled,
    "mig.mode": lambda d: d.mig.mode,
    "mig.get_all_devices": lambda d: d.mig.get_all_devices(),
    "repair_status": lambda d: d.repair_status,
    "supported_clock_event_reasons": lambda d: d.supported_clock_event_reasons,
    "temperature.get_thermal_settings": lambda d: d.temperature.get_thermal_settings("gpu"),
    "clock.get_offsets": lambda d: d.get_clock("sm").get_offsets(0),
    "pci_info": lambda d: d.pci_info,
    "get_nvlink_count": lambda d: d.get_nvlink_count(),
}


# -- CPU tier ----------------------------------------------------------------------------------


@no_nvml
@pytest.mark.parametrize("name", sorted(NEW_QUERIES))
def test_without_nvml_each_query_raises_library_not_found(name):
    dev = system.Device._from_handle(1)  # a handle is never used: NVML cannot start
    with pytest.raises(system.LibraryNotFoundError, match=r"libnvidia-ml\.so\.1") as info:
        NEW_QUERIES[name](dev)
    assert isinstance(info.value, RuntimeError)  # what cuda.core.system lets through here


def test_argument_errors_come_before_nvml():
    dev = system.Device._from_handle(1)
    with pytest.raises(TypeError, match=r"fan must be an integer \(got '0'\)"):
        dev.get_fan("0")
    with pytest.raises(ValueError, match=r"scope must be one of 'node', 'socket' \(got 'rack'\)"):
        dev.get_cpu_affinity("rack")
    with pytest.raises(ValueError, match="scope must be one of"):
        dev.get_memory_affinity(3)
    with pytest.raises(TypeError, match=r"cpu_index must be an int >= 0 \(got '0'\)"):
        system.Device.get_all_devices_with_cpu_affinity("0")
    with pytest.raises(ValueError, match=r"cpu_index must be an int >= 0 \(got -1\)") as info:
        system.Device.get_all_devices_with_cpu_affinity(-1)
    assert isinstance(info.value, OverflowError)  # what cuda.core's conversion raises
    with pytest.raises(ValueError, match="inforom must be one of 'oem', 'ecc', 'power', 'den'"):
        dev.inforom.get_version("bios")
    with pytest.raises(TypeError, match=r"index must be an int >= 0 \(got 1\.0\)"):
        dev.mig.get_device_by_index(1.0)
    with pytest.raises(OverflowError, match="index must be an int >= 0"):
        dev.mig.get_device_by_index(-2)
    with pytest.raises(ValueError, match="sensor_index must be one of"):
        dev.temperature.get_thermal_settings("cpu")
    with pytest.raises(ValueError, match=r"pstate must be an integer <= 15 \(got 16\)"):
        dev.get_clock("sm").get_offsets(16)
    with pytest.raises(TypeError, match="pstate must be an integer"):
        dev.get_clock("sm").get_offsets("0")
    with pytest.raises(ValueError, match="pstate must be an integer >= 0"):
        dev.get_clock("sm").get_min_max_clock_of_pstate_mhz(-1)
    with pytest.raises(TypeError, match=r"link must be an integer \(got 'a'\)"):
        dev.get_nvlink("a")


@pytest.mark.parametrize(
    "field_ids,pattern",
    [
        ("abc", r"field_ids must be a list of FieldId values or \(FieldId, scope_id\) pairs"),
        (91, "field_ids must be a list"),
        ([1.5], r"field_ids\[0\] must be an int \(a FieldId value\) \(got 1\.5\)"),
        ([91, (91,)], r"field_ids\[1\] must be a \(field_id, scope_id\) pair \(got \(91,\)\)"),
        ([(91, "a")], r"field_ids\[0\]\[1\] must be an int"),
        ([True], r"field_ids\[0\] must be an int"),
    ],
)
def test_field_id_lists_are_checked(field_ids, pattern):
    dev = system.Device._from_handle(1)
    for method in (dev.get_field_values, dev.clear_field_values):
        with pytest.raises(TypeError, match=pattern) as info:
            method(field_ids)
        assert isinstance(info.value, ValueError)  # cuda.core (its bindings) raise ValueError


def test_negative_field_id_is_a_value_error():
    with pytest.raises(ValueError, match=r"field_ids\[0\] must be an integer >= 0 \(got -1\)"):
        system.Device._from_handle(1).get_field_values([-1])


def test_empty_field_lists_ask_nothing():
    dev = system.Device._from_handle(1)  # no NVML call is made, so this works anywhere
    values = dev.get_field_values([])
    assert len(values) == 0 and values.get_all_values() == []
    values.validate()
    with pytest.raises(IndexError):
        values[0]
    assert dev.clear_field_values([]) is None


def _field_array(rows):
    """An nvml.FieldValue array filled as NVML would: (field, scope, status, type, value)."""
    fv = nvml.FieldValue(len(rows))
    fv.field_id = [r[0] for r in rows]
    fv.scope_id = [r[1] for r in rows]
    fv.nvml_return = [r[2] for r in rows]
    fv.value_type = [r[3] for r in rows]
    fv.timestamp = [1_700_000_000_000_000 + i for i in range(len(rows))]
    fv.latency_usec = [7] * len(rows)
    member = {0: "d_val", 1: "ui_val", 2: "ul_val", 3: "ull_val", 4: "sll_val", 5: "si_val", 6: "us_val"}
    for i, r in enumerate(rows):
        setattr(fv[i].value, member[r[3]], r[4])
    return fv


def test_field_values_decode_each_value_type_and_status():
    rows = [
        (int(FieldId.DEV_NVLINK_LINK_COUNT), 0, 0, 1, 18),
        (int(FieldId.DEV_POWER_INSTANT), 0, 0, 0, 71.5),
        (int(FieldId.DEV_PCIE_REPLAY_COUNTER), 0, 3, 3, 0),  # NOT_SUPPORTED
        (int(FieldId.DEV_TOTAL_ENERGY_CONSUMPTION), 0, 0, 3, 2**40 + 5),
        (int(FieldId.DEV_NVLINK_SPEED_MBPS_L0), 2, 0, 4, -3),
        (int(FieldId.DEV_MEMORY_TEMP), 0, 0, 5, -40),
        (int(FieldId.DEV_ECC_CURRENT), 0, 0, 6, 65535),
    ]
    values = FieldValues(_field_array(rows))
    assert len(values) == 7
    assert values[0].field_id is FieldId.DEV_NVLINK_LINK_COUNT
    assert values[0].value == 18 and type(values[0].value) is int
    assert values[1].value == 71.5 and type(values[1].value) is float
    assert values[3].value == 2**40 + 5
    assert values[4].value == -3 and values[4].scope_id == 2
    assert values[5].value == -40 and values[6].value == 65535
    assert values[-1].field_id is FieldId.DEV_ECC_CURRENT
    assert values[2].timestamp == 1_700_000_000_000_002 and values[2].latency_usec == 7
    with pytest.raises(system.NotSupportedError, match="DEV_PCIE_REPLAY_COUNTER") as info:
        values[2].value
    assert str(info.value).startswith("nvmlDeviceGetFieldValues: NVML_ERROR_NOT_SUPPORTED")
    with pytest.raises(system.NotSupportedError):
        values.validate()
    with pytest.raises(system.NotSupportedError):
        values.get_all_values()
    with pytest.raises(IndexError, match="there are 7"):
        values[7]
    good = FieldValues(_field_array([rows[0], rows[1]]))
    good.validate()
    assert good.get_all_values() == [18, 71.5]
    assert [v.field_id for v in good] == [FieldId.DEV_NVLINK_LINK_COUNT, FieldId.DEV_POWER_INSTANT]


def test_field_value_status_maps_to_the_nvml_class():
    for status, cls in ((2, system.InvalidArgumentError), (4, system.NoPermissionError), (999, system.UnknownError)):
        values = FieldValues(_field_array([(int(FieldId.DEV_NVLINK_LINK_COUNT), 0, status, 1, 0)]))
        with pytest.raises(cls):
            values[0].value


def test_dynamic_pstates_read_nvmls_layout():
    raw = np.zeros(1, dtype=nvml.gpu_dynamic_pstates_info_dtype)
    util = raw["utilization"]
    util["b_is_present"][0, 0] = 1
    util["percentage"][0, 0] = 42
    util["inc_threshold"][0, 0] = 30
    util["dec_threshold"][0, 0] = 10
    util["b_is_present"][0, 7] = 1
    util["percentage"][0, 7] = 99
    info = GpuDynamicPstatesInfo(nvml.GpuDynamicPstatesInfo.from_data(raw))
    assert len(info) == nvml.MAX_GPU_UTILIZATIONS == 8
    first = info[0]
    assert (first.is_present, first.percentage, first.inc_threshold, first.dec_threshold) == (True, 42, 30, 10)
    assert info[7].percentage == 99 and info[-1].percentage == 99
    assert not info[3].is_present and info[3].percentage == 0
    with pytest.raises(IndexError):
        info[8]
    del raw  # the wrapper keeps NVML's structure (and so the memory it reads) alive
    assert info[0].percentage == 42


def test_thermal_settings_read_nvmls_layout():
    raw = np.zeros(1, dtype=nvml.gpu_thermal_settings_dtype)
    raw["count"] = 2
    sensor = raw["sensor"]
    sensor["controller"][0, 1] = 1
    sensor["default_min_temp"][0, 1] = -5
    sensor["default_max_temp"][0, 1] = 95
    sensor["current_temp"][0, 1] = 41
    sensor["target"][0, 1] = 2
    settings = ThermalSettings(nvml.GpuThermalSettings.from_data(raw))
    assert len(settings) == 2
    s = settings[1]
    assert s.controller is ThermalController.GPU_INTERNAL
    assert (s.default_min_temp, s.default_max_temp, s.current_temp) == (-5, 95, 41)
    assert s.target is ThermalTarget.MEMORY
    assert settings[0].target is ThermalTarget.NONE
    with pytest.raises(IndexError):
        settings[2]
    raw["count"] = 9  # NVML never reports more than three sensors
    assert len(ThermalSettings(nvml.GpuThermalSettings.from_data(raw))) == 3


def test_cooler_info_decodes_signal_and_targets():
    raw = nvml.CoolerInfo_v1()
    raw.signal_type = 2
    raw.target = 2 | 8
    cooler = CoolerInfo(raw)
    assert cooler.signal_type is CoolerControl.VARIABLE
    assert cooler.target == [CoolerTarget.GPU, CoolerTarget.POWER_SUPPLY]
    raw.signal_type = 0
    raw.target = 1 << 6
    cooler = CoolerInfo(raw)
    assert cooler.signal_type is None
    with pytest.raises(ValueError, match="unknown cooler target bit: 0x40"):
        cooler.target


def test_value_objects_read_their_nvml_structures():
    a = nvml.DeviceAttributes()
    a.multiprocessor_count, a.memory_size_mb, a.shared_copy_engine_count = 132, 81559, 7
    attrs = DeviceAttributes(a)
    assert (attrs.multiprocessor_count, attrs.memory_size_mb, attrs.shared_copy_engine_count) == (132, 81559, 7)
    o = nvml.ClockOffset_v1()
    o.clock_offset_m_hz, o.min_clock_offset_m_hz, o.max_clock_offset_m_hz = -5, -200, 300
    off = ClockOffsets(o)
    assert (off.clock_offset_mhz, off.min_offset_mhz, off.max_offset_mhz) == (-5, -200, 300)
    m = nvml.Memory_v2()
    m.total, m.free, m.used, m.reserved = 100, 60, 40, 3
    mem = _device_info.MemoryInfo(m)
    assert (mem.total, mem.free, mem.used, mem.reserved) == (100, 60, 40, 3)
    b = nvml.BAR1Memory()
    b.bar1_total, b.bar1_free, b.bar1_used = 10, 7, 3
    bar1 = _device_info.BAR1MemoryInfo(b)
    assert (bar1.total, bar1.free, bar1.used, bar1.reserved) == (10, 7, 3, 0)


def test_bitmask_helpers():
    assert _device_info.unpack_bitmask([0b1011, 1]) == [0, 1, 3, 64]
    assert _device_info.unpack_bitmask([np.uint64(2**63)]) == [63]
    assert _device_info.unpack_bitmask([]) == []
    by_bit = {1: "a", 4: "c"}
    assert _device_info.members_from_mask(5, by_bit, "x") == ["a", "c"]
    assert _device_info.members_from_mask(0, by_bit, "x") == []
    with pytest.raises(ValueError, match="unknown x bit: 0x2"):
        _device_info.members_from_mask(2, by_bit, "x")


def test_enum_values_match_cuda_core():
    ref = pytest.importorskip("cuda.core.system.typing")
    from cuda_core.system import typing as ours

    for name in ref.__all__:
        ref_enum, our_enum = getattr(ref, name), getattr(ours, name)
        if name == "FieldId":
            assert our_enum is ref_enum is nvml.FieldId
            continue
        assert {m.name: m.value for m in ref_enum} == {m.name: m.value for m in our_enum}, name


def test_field_id_is_the_bindings_enum():
    from cuda_core.system.typing import FieldId as Ours

    assert Ours is nvml.FieldId
    assert "FieldId" in system.typing.__all__


# -- GPU tier: helpers -------------------------------------------------------------------------


def _norm(value: Any) -> Any:
    """Plain values for comparing ours with cuda.core's (enums by value, sequences as lists)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    return value


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return ("value", _norm(fn()))
    except Exception as exc:
        return ("error", exc)


@pytest.fixture(scope="module")
def nv() -> system.Device:
    from cuda_core import Device

    return Device(0).to_system_device()


@pytest.fixture(scope="module")
def ref(nv):
    """cuda.core.system's Device for the same GPU, or a skip where cuda.core cannot give one."""
    ref_system = pytest.importorskip("cuda.core.system")
    if not getattr(ref_system, "CUDA_BINDINGS_NVML_IS_COMPATIBLE", False):
        pytest.skip("cuda.core.system cannot use this cuda-bindings' NVML")
    return ref_system.Device(uuid=nv.uuid)


def _compare(ours: Any, theirs: Any, what: str) -> tuple[str, Any]:
    """Assert that ours and cuda.core's give the same value or the same NVML error class."""
    a, b = _outcome(ours), _outcome(theirs)
    if b[0] == "error" and isinstance(b[1], AttributeError):
        pytest.skip(f"the installed cuda.core has no {what}")
    if b[0] == "error":
        assert a[0] == "error", f"{what}: cuda.core raised {b[1]!r}, cuda_core gave {a[1]!r}"
        assert isinstance(a[1], type(b[1])), f"{what}: {a[1]!r} is not a {type(b[1]).__name__}"
        if isinstance(b[1], system.NvmlError):
            assert str(a[1]).startswith("nvml"), a[1]  # "<nvmlApi>: <NVML_ERROR_NAME>: ..."
    else:
        assert a == b, f"{what}: cuda_core gave {a[1]!r}, cuda.core {b[1]!r}"
    return a


def _smi(nv: system.Device, field: str) -> str | None:
    """One ``nvidia-smi --query-gpu`` field of this GPU, or None (no nvidia-smi, unknown field)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    out = subprocess.run(
        [exe, f"--query-gpu={field}", "--format=csv,noheader,nounits", "-i", nv.uuid],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        return None
    return out.stdout.strip()


def _smi_known(text: str | None) -> bool:
    return text is not None and text not in ("[N/A]", "N/A", "[Not Supported]", "")


# Stable queries (no reading that changes from one call to the next), with cuda.core's spelling.
STABLE = {
    "addressing_mode": lambda d: d.addressing_mode,
    "is_c2c_enabled": lambda d: d.is_c2c_enabled,
    "attributes": lambda d: [getattr(d.attributes, f) for f in DeviceAttributes._FIELDS],
    "supported_clock_event_reasons": lambda d: d.supported_clock_event_reasons,
    "is_auto_boosted_clocks_enabled": lambda d: d.is_auto_boosted_clocks_enabled,
    "cooler": lambda d: [d.cooler.signal_type, d.cooler.target],
    "num_fans": lambda d: d.num_fans,
    "get_cpu_affinity(node)": lambda d: d.get_cpu_affinity(),
    "get_cpu_affinity(socket)": lambda d: d.get_cpu_affinity("socket"),
    "get_memory_affinity(node)": lambda d: d.get_memory_affinity(),
    "get_memory_affinity(socket)": lambda d: d.get_memory_affinity("socket"),
    "inforom.image_version": lambda d: d.inforom.image_version,
    "inforom.get_version(oem)": lambda d: d.inforom.get_version("oem"),
    "inforom.get_version(ecc)": lambda d: d.inforom.get_version("ecc"),
    "inforom.get_version(power)": lambda d: d.inforom.get_version("power"),
    "inforom.get_version(den)": lambda d: d.inforom.get_version("den"),
    "inforom.configuration_checksum": lambda d: d.inforom.configuration_checksum,
    "inforom.board_part_number": lambda d: d.inforom.board_part_number,
    "inforom.validate": lambda d: d.inforom.validate(),
    "mig.is_mig_device": lambda d: d.mig.is_mig_device,
    "mig.mode": lambda d: d.mig.mode,
    "mig.pending_mode": lambda d: d.mig.pending_mode,
    "mig.device_count": lambda d: d.mig.device_count,
    "mig.get_all_devices": lambda d: sorted(m.uuid for m in d.mig.get_all_devices()),
    "mig.parent": lambda d: d.mig.parent.uuid,
    "mig.get_device_by_index(0)": lambda d: d.mig.get_device_by_index(0).uuid,
    "repair_status": lambda d: [d.repair_status.channel_repair_pending, d.repair_status.tpc_repair_pending],
    "get_nvlink_count": lambda d: d.get_nvlink_count(),
    "thermal_settings(gpu)": lambda d: [
        (s.controller, s.default_min_temp, s.default_max_temp, s.target)
        for s in (d.temperature.get_thermal_settings("gpu")[i] for i in range(len(d.temperature.get_thermal_settings("gpu"))))
    ],
    "clock(sm).get_offsets(0)": lambda d: [
        d.get_clock("sm").get_offsets(0).min_offset_mhz, d.get_clock("sm").get_offsets(0).max_offset_mhz
    ],
    "pci_info.link_generation": lambda d: d.pci_info.link_generation,
    "pci_info.max_link_generation": lambda d: d.pci_info.max_link_generation,
    "pci_info.replay_counter": lambda d: d.pci_info.replay_counter,
    "field_values(link count, replay)": lambda d: d.get_field_values(
        [FieldId.DEV_NVLINK_LINK_COUNT, FieldId.DEV_PCIE_REPLAY_COUNTER]
    ).get_all_values(),
    "field_values(unknown id)": lambda d: d.get_field_values([FieldId.DEV_NVLINK_LINK_COUNT, 60_000])[1].value,
    "dynamic_pstates_info.is_present": lambda d: [d.dynamic_pstates_info[i].is_present for i in range(8)],
}


# -- GPU tier ----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(STABLE))
def test_matches_cuda_core(nv, ref, name):
    _compare(lambda: STABLE[name](nv), lambda: STABLE[name](ref), name)


@pytest.mark.gpu
def test_addressing_mode_agrees_with_cuda_attributes(nv):
    from cuda_core import Device

    try:
        mode = nv.addressing_mode
    except system.NotSupportedError:
        pytest.skip("NVML does not report the addressing mode of this GPU (driver or kernel)")
    assert mode is None or isinstance(mode, AddressingMode)
    props = Device(0).properties
    host_tables = bool(props.pageable_memory_access_uses_host_page_tables)
    if mode is AddressingMode.ATS:
        assert host_tables and props.pageable_memory_access
    elif mode is AddressingMode.HMM:
        assert props.pageable_memory_access and not host_tables
    else:
        assert not host_tables


@pytest.mark.gpu
def test_c2c_is_off_on_a_pcie_or_sxm_x86_machine(nv):
    try:
        enabled = nv.is_c2c_enabled
    except system.NotSupportedError:
        return  # NVML has no C2C answer for this GPU: the documented error
    assert isinstance(enabled, bool)
    if platform.machine() == "x86_64":
        assert enabled is False  # C2C links a GPU to a Grace (Arm) CPU


@pytest.mark.gpu
def test_attributes_match_cuda(nv):
    from cuda_core import Device

    try:
        attrs = nv.attributes
    except (system.NotSupportedError, system.InvalidArgumentError):
        return  # NVML answers this for MIG devices; a whole GPU may be refused
    dev = Device(0)
    assert attrs.multiprocessor_count == dev.properties.multiprocessor_count
    assert abs(attrs.memory_size_mb - nv.memory_info.total // 2**20) <= 1024


@pytest.mark.gpu
def test_clock_event_reasons_are_known_and_match_nvidia_smi(nv):
    supported = nv.supported_clock_event_reasons
    current = nv.current_clock_event_reasons
    assert all(isinstance(r, ClocksEventReasons) for r in supported + current)
    assert set(current) <= set(supported), (current, supported)
    smi = _smi(nv, "clocks_event_reasons.supported")
    if _smi_known(smi):
        from cuda_core.system._clocks import _EVENT_REASONS

        bits = {member: bit for bit, member in _EVENT_REASONS.items()}
        assert sum(bits[r] for r in supported) == int(smi, 16), (supported, smi)


@pytest.mark.gpu
def test_auto_boost_is_a_pair_of_bools_or_not_supported(nv):
    try:
        pair = nv.is_auto_boosted_clocks_enabled
    except system.NotSupportedError:
        return
    assert isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(v, bool) for v in pair)


@pytest.mark.gpu
def test_fans_and_cooler(nv):
    try:
        n = nv.num_fans
    except system.NotSupportedError:
        with pytest.raises(system.NotSupportedError):
            nv.get_fan(0)
        return
    assert n >= 0
    if n == 0:
        with pytest.raises(ValueError, match="fan must be a fan index, but this device has no fans"):
            nv.get_fan(0)
        return
    fan = nv.get_fan(0)
    assert 0 <= fan.speed <= 200 and fan.speed_rpm >= 0
    lo, hi = fan.min_max_speed
    assert 0 <= lo <= hi
    assert fan.control_policy.value in ("temperature_controlled", "manual")
    with pytest.raises(ValueError, match=f"fan must be a fan index from 0 to {n - 1}"):
        nv.get_fan(n)
    smi = _smi(nv, "fan.speed")
    if _smi_known(smi):
        assert abs(int(float(smi)) - fan.speed) <= 10
    cooler = nv.cooler
    assert cooler.signal_type is None or isinstance(cooler.signal_type, CoolerControl)
    assert all(isinstance(t, CoolerTarget) for t in cooler.target)


@pytest.mark.gpu
def test_dynamic_pstates(nv):
    try:
        info = nv.dynamic_pstates_info
    except system.NotSupportedError:
        return
    assert len(info) == 8
    for i in range(len(info)):
        u = info[i]
        assert isinstance(u.is_present, bool)
        if u.is_present:
            assert 0 <= u.percentage <= 100


def _cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.extend(range(int(lo), int(hi or lo) + 1))
    return out


@pytest.mark.gpu
def test_cpu_and_memory_affinity_match_sysfs(nv):
    cpus = nv.get_cpu_affinity()
    assert cpus and all(0 <= c < (os.cpu_count() or 1) for c in cpus) and cpus == sorted(cpus)
    assert set(cpus) <= set(nv.get_cpu_affinity("socket"))
    sysfs = f"/sys/bus/pci/devices/{nv.pci_bus_id.lower()[-12:]}"
    if os.path.exists(f"{sysfs}/local_cpulist"):
        with open(f"{sysfs}/local_cpulist") as f:
            assert cpus == _cpulist(f.read())
    nodes = nv.get_memory_affinity()
    assert all(n >= 0 for n in nodes)
    if os.path.exists(f"{sysfs}/numa_node"):
        with open(f"{sysfs}/numa_node") as f:
            node = int(f.read())
        if node >= 0:
            assert nodes == [node]
    near = list(system.Device.get_all_devices_with_cpu_affinity(cpus[0]))
    assert nv in near
    assert all(isinstance(d, system.Device) for d in near)


@pytest.mark.gpu
def test_field_values_agree_with_other_queries(nv):
    before = time.time() * 1e6
    values = nv.get_field_values(
        [FieldId.DEV_NVLINK_LINK_COUNT, FieldId.DEV_PCIE_REPLAY_COUNTER, FieldId.DEV_POWER_INSTANT,
         (FieldId.DEV_NVLINK_SPEED_MBPS_COMMON, 0)]
    )  # fmt: skip
    assert len(values) == 4
    assert [v.field_id for v in values] == [
        FieldId.DEV_NVLINK_LINK_COUNT, FieldId.DEV_PCIE_REPLAY_COUNTER, FieldId.DEV_POWER_INSTANT,
        FieldId.DEV_NVLINK_SPEED_MBPS_COMMON,
    ]  # fmt: skip
    for v in values:
        try:
            v.value
        except system.NvmlError:
            continue
        # The CPU clock in microseconds (0 where NVML does not stamp a static field).
        assert v.timestamp == 0 or abs(v.timestamp - before) < 600e6, (v, v.timestamp, before)
        assert v.latency_usec >= 0
    try:
        links = values[0].value
    except system.NotSupportedError:
        links = 0
    assert nv.get_nvlink_count() == links
    # Links 0 .. count - 1 (what get_nvlinks gives) all answer state queries.
    for link in nv.get_nvlinks():
        assert isinstance(link.state, bool)
    try:
        assert values[1].value == nv.pci_info.replay_counter
    except system.NotSupportedError:
        pass
    try:
        instant = values[2].value
    except system.NotSupportedError:
        instant = None
    if instant is not None:
        assert 0 < instant < 5_000_000  # milliwatts
        assert 0.2 < instant / max(nv.power_usage, 1) < 5


@pytest.mark.gpu
def test_clear_field_values_answers_like_cuda_core(nv, ref):
    # NVLink traffic counters are the clearable fields; clearing them disturbs nothing else.
    ids = [(FieldId.DEV_NVLINK_COUNT_XMIT_PACKETS, 0)]
    _compare(lambda: nv.clear_field_values(ids), lambda: ref.clear_field_values(ids), "clear_field_values")
    assert nv.name  # NVML still answers


@pytest.mark.gpu
def test_inforom_matches_nvidia_smi(nv):
    try:
        image = nv.inforom.image_version
    except system.NotSupportedError:
        pytest.skip("this board has no InfoROM")
    assert isinstance(image, str) and image
    smi = _smi(nv, "inforom.img")
    if _smi_known(smi):
        assert image == smi
    for obj, field in (("oem", "inforom.oem"), ("ecc", "inforom.ecc"), ("power", "inforom.pwr")):
        smi = _smi(nv, field)
        try:
            version = nv.inforom.get_version(obj)
        except system.NotSupportedError:
            assert not _smi_known(smi), (obj, smi)
            continue
        if _smi_known(smi):
            assert version == smi, (obj, version, smi)
    assert isinstance(nv.inforom.configuration_checksum, int)
    try:
        stamp, duration = nv.inforom.bbx_flush_time
    except system.NvmlError as exc:  # no flush in this run yet, or no BBX object: NVML says so
        assert str(exc).startswith("nvmlDeviceGetLastBBXFlushTime: NVML_ERROR_"), exc
    else:
        assert stamp >= 0 and duration >= 0


@pytest.mark.gpu
def test_mig_mode_matches_nvidia_smi(nv):
    mig = nv.mig
    assert mig.is_mig_device is False  # a whole GPU's handle
    try:
        mode = mig.mode
    except system.NotSupportedError:
        return  # a GPU without MIG
    smi = _smi(nv, "mig.mode.current")
    if _smi_known(smi):
        assert mode == (smi == "Enabled"), smi
    if not mode:
        assert list(mig.get_all_devices()) == []
    with pytest.raises(system.NvmlError):
        mig.get_device_by_index(10_000)  # misuse: a clear NVML error ...
    assert nv.name  # ... and NVML keeps working


@pytest.mark.gpu
def test_repair_status_is_two_bools(nv):
    try:
        status = nv.repair_status
    except system.NotSupportedError:
        return
    assert isinstance(status.channel_repair_pending, bool)
    assert isinstance(status.tpc_repair_pending, bool)


@pytest.mark.gpu
def test_thermal_settings_read_near_the_gpu_temperature(nv):
    try:
        settings = nv.temperature.get_thermal_settings("gpu")
    except (system.NotSupportedError, system.InvalidArgumentError):
        return
    assert 0 <= len(settings) <= 3
    temp = nv.temperature.get_sensor()
    for i in range(len(settings)):
        s = settings[i]
        assert isinstance(s.controller, ThermalController) and isinstance(s.target, ThermalTarget)
        if s.target is ThermalTarget.GPU:
            assert abs(s.current_temp - temp) <= 15


@pytest.mark.gpu
def test_clock_offsets_are_ordered(nv):
    try:
        off = nv.get_clock("sm").get_offsets(0)
    except (system.NotSupportedError, system.InvalidArgumentError):
        return
    assert off.min_offset_mhz <= off.clock_offset_mhz <= off.max_offset_mhz


@pytest.mark.gpu
def test_pci_link_facts_match_nvidia_smi(nv):
    pci = nv.pci_info
    assert 1 <= pci.link_generation <= pci.max_link_generation
    assert 1 <= pci.current_link_generation <= pci.max_link_generation
    assert pci.rx_throughput >= 0 and pci.tx_throughput >= 0
    assert pci.replay_counter >= 0
    for field, value in (
        ("pcie.link.gen.max", pci.link_generation),
        ("pcie.link.gen.gpumax", pci.max_link_generation),
        ("pcie.link.width.max", pci.max_link_width),
    ):
        smi = _smi(nv, field)
        if _smi_known(smi):
            assert int(smi) == value, (field, smi, value)


@pytest.mark.gpu
def test_misuse_gives_clear_errors_and_nvml_keeps_working(nv):
    with pytest.raises(ValueError, match="link must be"):
        nv.get_nvlink(nv.get_nvlink_count())
    with pytest.raises(ValueError, match="fan must be"):
        nv.get_fan(nv.num_fans)
    try:
        values = nv.get_field_values([(FieldId.DEV_NVLINK_SPEED_MBPS_COMMON, 10_000), 60_000])
    except system.NvmlError as exc:  # NVML may refuse the whole request ...
        assert str(exc).startswith("nvmlDeviceGetFieldValues: NVML_ERROR_"), exc
    else:  # ... or the unknown field alone
        assert len(values) == 2
        with pytest.raises(system.NvmlError, match="field 60000"):
            values[1].value
        with pytest.raises(system.NvmlError):
            values.validate()
    with pytest.raises(system.NvmlError) as info:
        system.Device(index=system.Device.get_device_count() + 5).addressing_mode
    assert str(info.value).startswith("nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_")
    assert nv.memory_info.total > 0 and nv.get_clock("sm").get_max_mhz() > 0
