"""The NVML part of ``python -m cuda_core`` / ``show_config()`` (``cuda_core._report._nvml``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import cuda_core
from cuda_core import system
from cuda_core._report import _nvml as _nvml_report
from tests.helpers import no_nvml, report_fails_the_mix

pytestmark = report_fails_the_mix


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_core", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def text_run() -> subprocess.CompletedProcess[str]:
    return _run()


@pytest.fixture(scope="module")
def json_run() -> dict:
    proc = _run("--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


# -- CPU tier ----------------------------------------------------------------------------------


@no_nvml
def test_without_nvml_the_report_says_why_in_one_line(text_run, json_run):
    assert text_run.returncode == 0, text_run.stdout + text_run.stderr
    lines = [line for line in text_run.stdout.splitlines() if line.startswith("  NVML ")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("  NVML             not available, so cuda_core.system cannot")
    nv = json_run["nvml"]
    assert nv["available"] is False and nv["gpus"] == [] and nv["p2p"] is None
    assert "libnvidia-ml.so.1" in nv["error"]
    assert cuda_core.show_config(mode="dicts")["nvml"]["available"] is False


def test_collect_is_fast_and_never_raises():
    start = time.perf_counter()
    info = _nvml_report.collect()
    elapsed = time.perf_counter() - start
    assert elapsed < 30, elapsed
    assert set(info) == {"available", "error", "nvml_version", "driver_version", "gpus", "p2p"}
    assert info["available"] is (info["error"] is None)
    json.dumps(info)  # plain values only


@no_nvml
def test_failing_queries_are_reported_not_raised():
    # Without NVML every query of these devices fails (NVML cannot start): the collectors must
    # record each failure and go on, and the lines must still come out.
    a, b = system.Device._from_handle(1), system.Device._from_handle(2)
    gpu = _nvml_report._gpu(0, a)
    assert gpu["name"] is None and gpu["memory_bytes"] is None and gpu["nvlink"] is None
    assert gpu["clocks_mhz"]["sm"] == {"current": None, "max": None}
    assert "LibraryNotFoundError" in gpu["errors"]["temperature"]
    assert {"name", "memory", "power.draw", "power.limit", "temperature", "nvlink"} <= set(
        gpu["errors"]
    )
    p2p = _nvml_report._p2p([(0, a), (1, b)])
    assert p2p["devices"] == [0, 1]
    assert p2p["status"]["read"][0][0] is None and p2p["status"]["read"][0][1].startswith("error: ")
    info = {
        "available": True,
        "error": None,
        "nvml_version": "x",
        "driver_version": "y",
        "gpus": [gpu],
        "p2p": p2p,
    }
    lines = _nvml_report.format_lines(info)
    text = "\n".join(lines)
    assert "clocks: SM n/a of n/a MHz" in text and "memory: n/a" in text and "NVLink: n/a" in text
    assert "not answered:" in text
    assert lines[-2].split()[1:] == ["X", "?"] and lines[-1].split()[1:] == ["?", "X"]


def test_format_lines_of_two_gpus():
    def gpu(i: int) -> dict:
        return {
            "index": i, "name": "NVIDIA H200", "uuid": f"GPU-{i}", "pci_bus_id": f"00000000:{i:02x}:00.0",
            "clocks_mhz": {"sm": {"current": 345, "max": 1980}, "memory": {"current": 3201, "max": 3201}},
            "memory_bytes": {"total": 150 * 2**30, "used": 2**30, "free": 149 * 2**30},
            "power_mw": {"draw": 75_500, "limit": 700_000}, "temperature_c": 31,
            "nvlink": {"links": 18, "up": 18, "version": "4.0", "speed_mbps": 26562}, "errors": {},
        }  # fmt: skip

    status = {
        "read": [[None, "ok"], ["ok", None]],
        "write": [[None, "ok"], ["ok", None]],
        "atomics": [[None, "ok"], ["not supported", None]],
        "nvlink": [[None, "ok"], ["ok", None]],
    }
    info = {
        "available": True, "error": None, "nvml_version": "13.580.65.06", "driver_version": "580.65.06",
        "gpus": [gpu(0), gpu(1)],
        "p2p": {"devices": [0, 1], "capabilities": ["read", "write", "atomics", "nvlink"], "status": status},
    }  # fmt: skip
    lines = _nvml_report.format_lines(info)
    assert lines[0] == "NVML 13.580.65.06 (kernel driver 580.65.06): 2 GPUs"
    assert lines[1] == "  [nvml 0] NVIDIA H200, PCI 00000000:00:00.0"
    assert lines[2] == "      clocks: SM 345 of 1980 MHz, memory 3201 of 3201 MHz"
    assert lines[3] == "      memory: 153600 MiB total, 1024 MiB used, 152576 MiB free"
    assert lines[4] == "      power: 75.5 W drawn of a 700.0 W limit; temperature 31 C"
    assert lines[5] == "      NVLink: 18 links, 18 up, version 4.0, 26562 MB/s per link"
    assert lines[-4].startswith("  P2P (R read, W write, A atomics, N nvlink;")
    assert lines[-3].split() == ["GPU0", "GPU1"]
    assert lines[-2].split() == ["GPU0", "X", "RWAN"]
    assert lines[-1].split() == ["GPU1", "RWN", "X"]


def test_format_lines_of_one_gpu_without_nvlink():
    info = {
        "available": True, "error": None, "nvml_version": "1", "driver_version": "2",
        "gpus": [{"index": 0, "error": "InvalidArgumentError: nvmlDeviceGetHandleByIndex_v2: ..."}],
        "p2p": {"devices": [], "capabilities": [], "status": {}},
    }  # fmt: skip
    lines = _nvml_report.format_lines(info)
    assert lines[1].startswith("  [nvml 0] cannot be opened: InvalidArgumentError")
    assert lines[-1] == "  P2P: fewer than two GPUs, no pairs"
    assert (
        _nvml_report._nvlink_text({"links": 0, "up": 0, "version": None, "speed_mbps": None})
        == "none"
    )


# -- GPU tier ----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_json_report_has_the_nvml_facts_of_every_gpu(json_run):
    nv = json_run["nvml"]
    assert nv["available"] is True, nv["error"]
    assert nv["nvml_version"] == ".".join(str(p) for p in system.get_nvml_version())
    assert nv["driver_version"] == ".".join(str(p) for p in system.get_kernel_mode_driver_version())
    count = system.Device.get_device_count()
    assert [g["index"] for g in nv["gpus"]] == list(range(count))
    for g in nv["gpus"]:
        dev = system.Device(index=g["index"])
        assert g["name"] == dev.name and g["uuid"] == dev.uuid and g["pci_bus_id"] == dev.pci_bus_id
        assert g["memory_bytes"]["total"] == dev.memory_info.total
        assert 0 <= g["memory_bytes"]["used"] <= g["memory_bytes"]["total"]
        for domain in ("sm", "memory"):
            clocks = g["clocks_mhz"][domain]
            assert clocks["max"] == dev.get_clock(domain).get_max_mhz()
            assert 0 < clocks["current"] <= clocks["max"] + 50
        assert g["power_mw"]["limit"] == dev.power_limit
        assert 0 < g["power_mw"]["draw"] <= 2 * g["power_mw"]["limit"]
        assert 5 <= g["temperature_c"] <= 110
        assert g["nvlink"]["links"] == dev.get_nvlink_count()
        assert 0 <= g["nvlink"]["up"] <= g["nvlink"]["links"]
        for key in ("name", "memory", "temperature", "power.draw", "power.limit", "nvlink"):
            assert key not in g["errors"], g["errors"]
    p2p = nv["p2p"]
    assert p2p["devices"] == list(range(count))
    statuses = {s.value for s in system.typing.GpuP2PStatus}
    for cap in ("read", "write", "atomics", "nvlink"):
        rows = p2p["status"][cap]
        assert len(rows) == count and all(len(r) == count for r in rows)
        for i in range(count):
            assert rows[i][i] is None
            for j in range(count):
                if i != j:
                    assert rows[i][j] in statuses, rows[i][j]
                    a, b = system.Device(index=i), system.Device(index=j)
                    assert rows[i][j] == system.get_p2p_status(a, b, cap).value


@pytest.mark.gpu
def test_text_report_shows_the_nvml_lines(text_run):
    out = text_run.stdout
    assert text_run.returncode == 0, out + text_run.stderr
    dev = system.Device(index=0)
    assert f"  [nvml 0] {dev.name}, PCI {dev.pci_bus_id}" in out
    assert "      clocks: SM " in out and "      memory: " in out and " W drawn of a " in out
    assert "      NVLink: " in out
    assert "NVML: not available" not in out
    if system.Device.get_device_count() >= 2:
        assert "  P2P (R read, W write, A atomics, N nvlink;" in out
    else:
        assert "  P2P: fewer than two GPUs, no pairs" in out


@pytest.mark.gpu
def test_collect_is_quick_with_nvml():
    _nvml_report.collect()  # NVML starts once per process
    start = time.perf_counter()
    info = _nvml_report.collect()
    assert info["available"] is True
    assert time.perf_counter() - start < 5
