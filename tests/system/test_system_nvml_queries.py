"""cuda_core.system.Device's wider NVML queries on the CPU tier: field values, clocks and
performance, thermal and cooling, InfoROM, MIG, repair status, attributes, addressing mode, C2C
and affinity.

Checked here: the arguments, the decoding of NVML's structures (built with
``cuda.bindings.nvml`` itself, as NVML fills them) and the error every query raises without
NVML. ``tests/system/test_system_nvml_compare.py`` checks the answers on a GPU.
"""

from __future__ import annotations

import pytest

from cuda_core import system
from cuda_core.system import _device_info
from cuda_core.system._board import DeviceAttributes
from cuda_core.system._clocks import ClockOffsets, GpuDynamicPstatesInfo
from cuda_core.system._field_values import FieldValues
from cuda_core.system._thermal import CoolerInfo, ThermalSettings
from cuda_core.system.typing import (
    CoolerControl,
    CoolerTarget,
    ThermalController,
    ThermalTarget,
)
from tests.helpers import no_nvml

nvml = pytest.importorskip("cuda.bindings.nvml")
np = pytest.importorskip("numpy")
FieldId = nvml.FieldId


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
    member = {
        0: "d_val",
        1: "ui_val",
        2: "ul_val",
        3: "ull_val",
        4: "sll_val",
        5: "si_val",
        6: "us_val",
    }
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
        _ = values[2].value
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
    for status, cls in (
        (2, system.InvalidArgumentError),
        (4, system.NoPermissionError),
        (999, system.UnknownError),
    ):
        values = FieldValues(_field_array([(int(FieldId.DEV_NVLINK_LINK_COUNT), 0, status, 1, 0)]))
        with pytest.raises(cls):
            _ = values[0].value


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
    assert (first.is_present, first.percentage, first.inc_threshold, first.dec_threshold) == (
        True,
        42,
        30,
        10,
    )
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
        _ = cooler.target


def test_value_objects_read_their_nvml_structures():
    a = nvml.DeviceAttributes()
    a.multiprocessor_count, a.memory_size_mb, a.shared_copy_engine_count = 132, 81559, 7
    attrs = DeviceAttributes(a)
    assert (attrs.multiprocessor_count, attrs.memory_size_mb, attrs.shared_copy_engine_count) == (
        132,
        81559,
        7,
    )
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
    import cuda.core

    from cuda_core.system import typing as ours
    from tests.test_api_parity import AUDITED_VERSION

    # Against the audited release the members are the same; an older cuda.core (1.2.0 lacks
    # ClocksEventReasons.BOARD_LIMIT and RELIABILITY) has a subset of ours, at the same values.
    exact = cuda.core.__version__ == AUDITED_VERSION
    for name in ref.__all__:
        ref_enum, our_enum = getattr(ref, name), getattr(ours, name)
        if name == "FieldId":
            assert our_enum is ref_enum is nvml.FieldId
            continue
        theirs = {m.name: m.value for m in ref_enum}
        mine = {m.name: m.value for m in our_enum}
        if exact:
            assert theirs == mine, name
        else:
            assert theirs.items() <= mine.items(), name


def test_clock_event_reason_bits_are_nvmls():
    # cuda.core 1.2.1 added BOARD_LIMIT and RELIABILITY; each member reads NVML's own bit.
    from cuda_core.system._clocks import _EVENT_REASONS
    from cuda_core.system.typing import ClocksEventReasons

    reasons = getattr(nvml, "ClocksEventReasons", None)
    if reasons is None:
        pytest.skip("these cuda-bindings have no nvml.ClocksEventReasons")
    bits = {member: bit for bit, member in _EVENT_REASONS.items()}
    theirs = {m.name.split("REASON_", 1)[1]: int(m.value) for m in reasons if int(m.value)}
    ours = {m.name: bits[m] for m in ClocksEventReasons if m.name != "NONE"}
    assert theirs.items() <= ours.items()  # older bindings may lack the newest reasons
    assert bits[ClocksEventReasons.BOARD_LIMIT] == 1 << 9
    assert bits[ClocksEventReasons.RELIABILITY] == 1 << 10
    assert ClocksEventReasons.BOARD_LIMIT.value == "board_limit"
    assert ClocksEventReasons.RELIABILITY.value == "reliability"


def test_field_id_is_the_bindings_enum():
    from cuda_core.system.typing import FieldId as Ours

    assert Ours is nvml.FieldId
    assert "FieldId" in system.typing.__all__
