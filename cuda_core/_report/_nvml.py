"""The NVML part of ``python -m cuda_core`` and :func:`cuda_core.show_config`.

:func:`collect` gathers, per GPU NVML sees, the clocks (current and maximum, SM and memory),
memory (total, used, free), power (draw and limit), temperature and NVLink (links, links up,
version, common speed), and the peer-to-peer matrix between the GPUs (read, write, atomics,
NVLink; :func:`cuda_core.system.get_p2p_status`). Every query is made on its own: one that
fails is reported (``None`` and an entry under ``errors``), never raised, so the report always
completes. Where NVML cannot be used at all, the dict says why and :func:`format_lines` prints
that as one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import system
from ..system import get_p2p_status

__all__: list[str] = []  # private: used by _config

# The P2P capabilities reported, with the letter the text matrix shows for each.
P2P_CAPABILITIES = (("read", "R"), ("write", "W"), ("atomics", "A"), ("nvlink", "N"))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def collect() -> dict[str, Any]:
    """The NVML facts as a dict of plain (JSON-ready) values; never raises."""
    out: dict[str, Any] = {
        "available": False, "error": None, "nvml_version": None, "driver_version": None,
        "gpus": [], "p2p": None,
    }  # fmt: skip
    try:
        out["nvml_version"] = ".".join(str(p) for p in system.get_nvml_version())
        out["driver_version"] = ".".join(str(p) for p in system.get_kernel_mode_driver_version())
        count = system.Device.get_device_count()
    except Exception as exc:  # no NVML, an old cuda-bindings, a broken driver: say why
        out["error"] = str(getattr(exc, "explanation", "") or exc) or type(exc).__name__
        return out
    out["available"] = True
    devices = []
    for index in range(count):
        try:
            dev = system.Device(index=index)
        except Exception as exc:  # one GPU NVML cannot open is reported, not fatal
            out["gpus"].append({"index": index, "error": _describe(exc)})
            continue
        devices.append((index, dev))
        out["gpus"].append(_gpu(index, dev))
    out["p2p"] = _p2p(devices)
    return out


def _gpu(index: int, dev: Any) -> dict[str, Any]:
    errors: dict[str, str] = {}

    def get(key: str, query: Callable[[], Any]) -> Any:
        try:
            return query()
        except Exception as exc:  # "not supported" and kin: reported per fact
            errors[key] = _describe(exc)
            return None

    facts: dict[str, Any] = {
        "index": index,
        "name": get("name", lambda: dev.name),
        "uuid": get("uuid", lambda: dev.uuid),
        "pci_bus_id": get("pci_bus_id", lambda: dev.pci_bus_id),
    }
    facts["clocks_mhz"] = {}
    for domain in ("sm", "memory"):
        clock = dev.get_clock(domain)  # makes no NVML call
        facts["clocks_mhz"][domain] = {
            "current": get(f"clocks.{domain}.current", clock.get_current_mhz),
            "max": get(f"clocks.{domain}.max", clock.get_max_mhz),
        }
    mem = get("memory", lambda: dev.memory_info)
    facts["memory_bytes"] = (
        None if mem is None else {"total": mem.total, "used": mem.used, "free": mem.free}
    )
    facts["power_mw"] = {
        "draw": get("power.draw", lambda: dev.power_usage),
        "limit": get("power.limit", lambda: dev.power_limit),
    }
    facts["temperature_c"] = get("temperature", lambda: dev.temperature.get_sensor())
    facts["nvlink"] = get("nvlink", lambda: _nvlink(dev))
    facts["errors"] = errors
    return facts


def _nvlink(dev: Any) -> dict[str, Any]:
    links = list(dev.get_nvlinks())
    up = [link for link in links if link.state]
    version = None
    if up:
        major, minor = up[0].version
        version = f"{major}.{minor}"
    speed = None
    if up:
        from ..system.typing import FieldId  # only where NVML (and so FieldId) exists

        values = dev.get_field_values([FieldId.DEV_NVLINK_SPEED_MBPS_COMMON])
        try:
            speed = int(values[0].value)
        except Exception:  # the common speed is a nicety; a board may not report it
            speed = None
    return {"links": len(links), "up": len(up), "version": version, "speed_mbps": speed}


def _p2p(devices: list[tuple[int, Any]]) -> dict[str, Any]:
    indices = [index for index, _ in devices]
    matrix: dict[str, list[list[str | None]]] = {}
    for cap, _ in P2P_CAPABILITIES:
        rows: list[list[str | None]] = []
        for ia, a in devices:
            row: list[str | None] = []
            for ib, b in devices:
                if ia == ib:
                    row.append(None)
                    continue
                try:
                    row.append(str(get_p2p_status(a, b, cap).value))
                except Exception as exc:  # reported in the cell, not fatal
                    row.append(f"error: {_describe(exc)}")
            rows.append(row)
        matrix[cap] = rows
    return {
        "devices": indices,
        "capabilities": [cap for cap, _ in P2P_CAPABILITIES],
        "status": matrix,
    }


# ---------------------------------------------------------------------------------------------
# Formatting.


def _num(value: Any, fmt: str = "{}") -> str:
    return "n/a" if value is None else fmt.format(value)


def format_lines(info: dict[str, Any]) -> list[str]:
    """The text lines for the dict :func:`collect` returns."""
    if not info["available"]:
        return [f"NVML: not available ({info['error']})"]
    lines = [
        f"NVML {info['nvml_version']} (kernel driver {info['driver_version']}): {len(info['gpus'])} GPUs"
    ]
    for g in info["gpus"]:
        if "error" in g:
            lines.append(f"  [nvml {g['index']}] cannot be opened: {g['error']}")
            continue
        lines.append(f"  [nvml {g['index']}] {_num(g['name'])}, PCI {_num(g['pci_bus_id'])}")
        sm, memclk = g["clocks_mhz"]["sm"], g["clocks_mhz"]["memory"]
        lines.append(
            f"      clocks: SM {_num(sm['current'])} of {_num(sm['max'])} MHz, "
            f"memory {_num(memclk['current'])} of {_num(memclk['max'])} MHz"
        )
        m = g["memory_bytes"]
        if m is None:
            lines.append("      memory: n/a")
        else:
            mib = 2**20
            lines.append(
                f"      memory: {m['total'] // mib} MiB total, {m['used'] // mib} MiB used, "
                f"{m['free'] // mib} MiB free"
            )
        p = g["power_mw"]
        watts = "{:.1f}"
        lines.append(
            f"      power: {_num(None if p['draw'] is None else p['draw'] / 1000, watts)} W drawn of a "
            f"{_num(None if p['limit'] is None else p['limit'] / 1000, watts)} W limit; "
            f"temperature {_num(g['temperature_c'])} C"
        )
        lines.append(f"      NVLink: {_nvlink_text(g['nvlink'])}")
        if g["errors"]:
            lines.append(f"      not answered: {', '.join(sorted(g['errors']))}")
    lines.extend(_p2p_lines(info["p2p"]))
    return lines


def _nvlink_text(n: dict[str, Any] | None) -> str:
    if n is None:
        return "n/a"
    if n["links"] == 0:
        return "none"
    text = f"{n['links']} links, {n['up']} up"
    if n["version"]:
        text += f", version {n['version']}"
    if n["speed_mbps"]:
        text += f", {n['speed_mbps']} MB/s per link"
    return text


def _p2p_lines(p2p: dict[str, Any] | None) -> list[str]:
    if not p2p or len(p2p["devices"]) < 2:
        return ["  P2P: fewer than two GPUs, no pairs"]
    letters = dict(P2P_CAPABILITIES)
    names = [f"GPU{i}" for i in p2p["devices"]]
    width = max(max(len(n) for n in names), len(P2P_CAPABILITIES)) + 2
    legend = ", ".join(f"{letter} {cap}" for cap, letter in P2P_CAPABILITIES)
    lines = [f"  P2P ({legend}; X the GPU itself, - none, ? unknown):"]
    lines.append(("    " + " " * width + "".join(n.ljust(width) for n in names)).rstrip())
    for r, name in enumerate(names):
        cells = []
        for c in range(len(names)):
            if r == c:
                cells.append("X")
                continue
            statuses = {cap: p2p["status"][cap][r][c] for cap in p2p["capabilities"]}
            if any(s is None or s.startswith("error") for s in statuses.values()):
                cells.append("?")
                continue
            ok = "".join(letters[cap] for cap, s in statuses.items() if s == "ok")
            cells.append(ok or "-")
        lines.append("    " + name.ljust(width) + "".join(c.ljust(width) for c in cells).rstrip())
    return lines
