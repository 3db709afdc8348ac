"""cuda_core.system.Device's wider NVML queries on a GPU, each answer compared with a second
source: NVIDIA's ``cuda.core.system`` on the same GPU (the same value, or the same NVML error
class where NVML refuses the query), ``nvidia-smi --query-gpu``, sysfs and CUDA's device
attributes. Misuse (an index NVML does not have) must give a clear error and leave NVML working.
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
from cuda_core.system._board import DeviceAttributes
from cuda_core.system.typing import (
    AddressingMode,
    ClocksEventReasons,
    CoolerControl,
    CoolerTarget,
    ThermalController,
    ThermalTarget,
)

nvml = pytest.importorskip("cuda.bindings.nvml")
FieldId = nvml.FieldId

pytestmark = pytest.mark.gpu

# -- helpers ---------------------------------------------------------------------------------


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
def sysdev() -> system.Device:
    from cuda_core import Device

    return Device(0).to_system_device()


@pytest.fixture(scope="module")
def ref(sysdev):
    """cuda.core.system's Device for the same GPU, or a skip where cuda.core cannot give one."""
    ref_system = pytest.importorskip("cuda.core.system")
    if not getattr(ref_system, "CUDA_BINDINGS_NVML_IS_COMPATIBLE", False):
        pytest.skip("cuda.core.system cannot use this cuda-bindings' NVML")
    return ref_system.Device(uuid=sysdev.uuid)


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


def _smi(sysdev: system.Device, field: str) -> str | None:
    """One ``nvidia-smi --query-gpu`` field of this GPU, or None (no nvidia-smi, unknown field)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    out = subprocess.run(
        [exe, f"--query-gpu={field}", "--format=csv,noheader,nounits", "-i", sysdev.uuid],
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
    "repair_status": lambda d: [
        d.repair_status.channel_repair_pending,
        d.repair_status.tpc_repair_pending,
    ],
    "thermal_settings(gpu)": lambda d: [
        (s.controller, s.default_min_temp, s.default_max_temp, s.target)
        for s in (
            d.temperature.get_thermal_settings("gpu")[i]
            for i in range(len(d.temperature.get_thermal_settings("gpu")))
        )
    ],
    "clock(sm).get_offsets(0)": lambda d: [
        d.get_clock("sm").get_offsets(0).min_offset_mhz,
        d.get_clock("sm").get_offsets(0).max_offset_mhz,
    ],
    "pci_info.link_generation": lambda d: d.pci_info.link_generation,
    "pci_info.max_link_generation": lambda d: d.pci_info.max_link_generation,
    "pci_info.replay_counter": lambda d: d.pci_info.replay_counter,
    "field_values(link count, replay)": lambda d: d.get_field_values(
        [FieldId.DEV_NVLINK_LINK_COUNT, FieldId.DEV_PCIE_REPLAY_COUNTER]
    ).get_all_values(),
    "field_values(unknown id)": lambda d: (
        d.get_field_values([FieldId.DEV_NVLINK_LINK_COUNT, 60_000])[1].value
    ),
    "dynamic_pstates_info.is_present": lambda d: [
        d.dynamic_pstates_info[i].is_present for i in range(8)
    ],
}


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STABLE))
def test_matches_cuda_core(sysdev, ref, name):
    _compare(lambda: STABLE[name](sysdev), lambda: STABLE[name](ref), name)


def test_nvlink_count_matches_cuda_core(sysdev, ref):
    ours = sysdev.get_nvlink_count()
    try:
        theirs = ref.get_nvlink_count()
    except system.NotSupportedError:
        assert ours == 0  # a documented difference: no NVLink is a count of 0 here
    else:
        assert ours == theirs
    assert len(list(sysdev.get_nvlinks())) == ours


def test_clock_event_reasons_match_cuda_core(sysdev, ref):
    ours = [r.value for r in sysdev.supported_clock_event_reasons]
    try:
        theirs = [r.value for r in ref.supported_clock_event_reasons]
    except ValueError:
        # cuda.core 1.2.0 does not know the board_limit and reliability reasons (1.2.2 does)
        assert {"board_limit", "reliability"} & set(ours), ours
    else:
        assert ours == theirs


def test_addressing_mode_agrees_with_cuda_attributes(sysdev):
    from cuda_core import Device

    try:
        mode = sysdev.addressing_mode
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


def test_c2c_is_off_on_a_pcie_or_sxm_x86_machine(sysdev):
    try:
        enabled = sysdev.is_c2c_enabled
    except system.NotSupportedError:
        return  # NVML has no C2C answer for this GPU: the documented error
    assert isinstance(enabled, bool)
    if platform.machine() == "x86_64":
        assert enabled is False  # C2C links a GPU to a Grace (Arm) CPU


def test_attributes_match_cuda(sysdev):
    from cuda_core import Device

    try:
        attrs = sysdev.attributes
    except (system.NotSupportedError, system.InvalidArgumentError):
        return  # NVML answers this for MIG devices; a whole GPU may be refused
    dev = Device(0)
    assert attrs.multiprocessor_count == dev.properties.multiprocessor_count
    assert abs(attrs.memory_size_mb - sysdev.memory_info.total // 2**20) <= 1024


def test_clock_event_reasons_are_known_and_match_nvidia_smi(sysdev):
    supported = sysdev.supported_clock_event_reasons
    current = sysdev.current_clock_event_reasons
    assert all(isinstance(r, ClocksEventReasons) for r in supported + current)
    assert set(current) <= set(supported), (current, supported)
    smi = _smi(sysdev, "clocks_event_reasons.supported")
    if _smi_known(smi):
        from cuda_core.system._clocks import _EVENT_REASONS

        bits = {member: bit for bit, member in _EVENT_REASONS.items()}
        assert sum(bits[r] for r in supported) == int(smi, 16), (supported, smi)


def test_auto_boost_is_a_pair_of_bools_or_not_supported(sysdev):
    try:
        pair = sysdev.is_auto_boosted_clocks_enabled
    except system.NotSupportedError:
        return
    assert isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(v, bool) for v in pair)


def test_fans_and_cooler(sysdev):
    try:
        n = sysdev.num_fans
    except system.NotSupportedError:
        with pytest.raises(system.NotSupportedError):
            sysdev.get_fan(0)
        return
    assert n >= 0
    if n == 0:
        with pytest.raises(
            ValueError, match="fan must be a fan index, but this device has no fans"
        ):
            sysdev.get_fan(0)
        return
    fan = sysdev.get_fan(0)
    assert 0 <= fan.speed <= 200 and fan.speed_rpm >= 0
    lo, hi = fan.min_max_speed
    assert 0 <= lo <= hi
    assert fan.control_policy.value in ("temperature_controlled", "manual")
    with pytest.raises(ValueError, match=f"fan must be a fan index from 0 to {n - 1}"):
        sysdev.get_fan(n)
    smi = _smi(sysdev, "fan.speed")
    if _smi_known(smi):
        assert abs(int(float(smi)) - fan.speed) <= 10
    cooler = sysdev.cooler
    assert cooler.signal_type is None or isinstance(cooler.signal_type, CoolerControl)
    assert all(isinstance(t, CoolerTarget) for t in cooler.target)


def test_dynamic_pstates(sysdev):
    try:
        info = sysdev.dynamic_pstates_info
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


def test_cpu_and_memory_affinity_match_sysfs(sysdev):
    cpus = sysdev.get_cpu_affinity()
    assert cpus and all(0 <= c < (os.cpu_count() or 1) for c in cpus) and cpus == sorted(cpus)
    assert set(cpus) <= set(sysdev.get_cpu_affinity("socket"))
    sysfs = f"/sys/bus/pci/devices/{sysdev.pci_bus_id.lower()[-12:]}"
    if os.path.exists(f"{sysfs}/local_cpulist"):
        with open(f"{sysfs}/local_cpulist") as f:
            assert cpus == _cpulist(f.read())
    nodes = sysdev.get_memory_affinity()
    assert all(n >= 0 for n in nodes)
    if os.path.exists(f"{sysfs}/numa_node"):
        with open(f"{sysfs}/numa_node") as f:
            node = int(f.read())
        if node >= 0:
            assert nodes == [node]
    near = list(system.Device.get_all_devices_with_cpu_affinity(cpus[0]))
    assert sysdev in near
    assert all(isinstance(d, system.Device) for d in near)


def test_field_values_agree_with_other_queries(sysdev):
    before = time.time() * 1e6
    values = sysdev.get_field_values(
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
            _ = v.value
        except system.NvmlError:
            continue
        # The CPU clock in microseconds (0 where NVML does not stamp a static field).
        assert v.timestamp == 0 or abs(v.timestamp - before) < 600e6, (v, v.timestamp, before)
        assert v.latency_usec >= 0
    try:
        links = values[0].value
    except system.NotSupportedError:
        links = 0
    assert sysdev.get_nvlink_count() == links
    # Links 0 .. count - 1 (what get_nvlinks gives) all answer state queries.
    for link in sysdev.get_nvlinks():
        assert isinstance(link.state, bool)
    try:
        assert values[1].value == sysdev.pci_info.replay_counter
    except system.NotSupportedError:
        pass
    try:
        instant = values[2].value
    except system.NotSupportedError:
        instant = None
    if instant is not None:
        assert 0 < instant < 5_000_000  # milliwatts
        assert 0.2 < instant / max(sysdev.power_usage, 1) < 5


def test_clear_field_values_answers_like_cuda_core(sysdev, ref):
    # NVLink traffic counters are the clearable fields; clearing them disturbs nothing else.
    ids = [(FieldId.DEV_NVLINK_COUNT_XMIT_PACKETS, 0)]
    _compare(
        lambda: sysdev.clear_field_values(ids),
        lambda: ref.clear_field_values(ids),
        "clear_field_values",
    )
    assert sysdev.name  # NVML still answers


def test_inforom_matches_nvidia_smi(sysdev):
    try:
        image = sysdev.inforom.image_version
    except system.NotSupportedError:
        pytest.skip("this board has no InfoROM")
    assert isinstance(image, str) and image
    smi = _smi(sysdev, "inforom.img")
    if _smi_known(smi):
        assert image == smi
    for obj, field in (("oem", "inforom.oem"), ("ecc", "inforom.ecc"), ("power", "inforom.pwr")):
        smi = _smi(sysdev, field)
        try:
            version = sysdev.inforom.get_version(obj)
        except system.NotSupportedError:
            assert not _smi_known(smi), (obj, smi)
            continue
        if _smi_known(smi):
            assert version == smi, (obj, version, smi)
    assert isinstance(sysdev.inforom.configuration_checksum, int)
    try:
        stamp, duration = sysdev.inforom.bbx_flush_time
    except system.NvmlError as exc:  # no flush in this run yet, or no BBX object: NVML says so
        assert str(exc).startswith("nvmlDeviceGetLastBBXFlushTime: NVML_ERROR_"), exc
    else:
        assert stamp >= 0 and duration >= 0


def test_mig_mode_matches_nvidia_smi(sysdev):
    mig = sysdev.mig
    assert mig.is_mig_device is False  # a whole GPU's handle
    try:
        mode = mig.mode
    except system.NotSupportedError:
        return  # a GPU without MIG
    smi = _smi(sysdev, "mig.mode.current")
    if _smi_known(smi):
        assert mode == (smi == "Enabled"), smi
    if not mode:
        assert list(mig.get_all_devices()) == []
    with pytest.raises(system.NvmlError):
        mig.get_device_by_index(10_000)  # misuse: a clear NVML error ...
    assert sysdev.name  # ... and NVML keeps working


def test_repair_status_is_two_bools(sysdev):
    try:
        status = sysdev.repair_status
    except system.NotSupportedError:
        return
    assert isinstance(status.channel_repair_pending, bool)
    assert isinstance(status.tpc_repair_pending, bool)


def test_thermal_settings_read_near_the_gpu_temperature(sysdev):
    try:
        settings = sysdev.temperature.get_thermal_settings("gpu")
    except (system.NotSupportedError, system.InvalidArgumentError):
        return
    assert 0 <= len(settings) <= 3
    temp = sysdev.temperature.get_sensor()
    for i in range(len(settings)):
        s = settings[i]
        assert isinstance(s.controller, ThermalController) and isinstance(s.target, ThermalTarget)
        if s.target is ThermalTarget.GPU:
            assert abs(s.current_temp - temp) <= 15


def test_clock_offsets_are_ordered(sysdev):
    try:
        off = sysdev.get_clock("sm").get_offsets(0)
    except (system.NotSupportedError, system.InvalidArgumentError):
        return
    assert off.min_offset_mhz <= off.clock_offset_mhz <= off.max_offset_mhz


def test_pci_link_facts_match_nvidia_smi(sysdev):
    pci = sysdev.pci_info
    assert 1 <= pci.link_generation <= pci.max_link_generation
    assert 1 <= pci.current_link_generation <= pci.max_link_generation
    assert pci.rx_throughput >= 0 and pci.tx_throughput >= 0
    assert pci.replay_counter >= 0
    for field, value in (
        ("pcie.link.gen.max", pci.link_generation),
        ("pcie.link.gen.gpumax", pci.max_link_generation),
        ("pcie.link.width.max", pci.max_link_width),
    ):
        smi = _smi(sysdev, field)
        if _smi_known(smi):
            assert int(smi) == value, (field, smi, value)


def test_misuse_gives_clear_errors_and_nvml_keeps_working(sysdev):
    with pytest.raises(ValueError, match="link must be"):
        sysdev.get_nvlink(sysdev.get_nvlink_count())
    try:
        fans = sysdev.num_fans
    except system.NotSupportedError:
        fans = None
    if fans is not None:
        with pytest.raises(ValueError, match="fan must be"):
            sysdev.get_fan(fans)
    try:
        values = sysdev.get_field_values([(FieldId.DEV_NVLINK_SPEED_MBPS_COMMON, 10_000), 60_000])
    except system.NvmlError as exc:  # NVML may refuse the whole request ...
        assert str(exc).startswith("nvmlDeviceGetFieldValues: NVML_ERROR_"), exc
    else:  # ... or the unknown field alone
        assert len(values) == 2
        with pytest.raises(system.NvmlError, match="field 60000"):
            _ = values[1].value
        with pytest.raises(system.NvmlError):
            values.validate()
    with pytest.raises(system.NvmlError) as info:
        _ = system.Device(index=system.Device.get_device_count() + 5).addressing_mode
    assert str(info.value).startswith("nvmlDeviceGetHandleByIndex_v2: NVML_ERROR_")
    assert sysdev.memory_info.total > 0 and sysdev.get_clock("sm").get_max_mhz() > 0
