"""Host overhead of the basic objects: cuda_core vs NVIDIA's cuda.core vs CuPy, same run.

Measures ``Device()`` lookup, stream create+close, event create+close, ``Stream.record(event)``,
``Stream.record()`` whose new event is dropped right away (a common timing pattern) and
``Stream.sync()`` of an idle stream (nothing queued on it: the host cost of the call itself).
Run on a GPU machine: ``python benchmarks/bench_objects.py``. An implementation that is not
installed shows as n/a.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import Suite, environment_line

Ops = dict[str, Callable[[], object] | None]
OP_NAMES = (
    "Device() lookup", "stream create+close", "event create+close", "Stream.record(event)",
    "Stream.record() dropped", "Stream.sync() idle",
)  # fmt: skip


def device_ops(device_cls: Any) -> Ops:
    """The operations through a ``Device`` class with cuda.core's API (cuda_core's or NVIDIA's)."""
    dev = device_cls(0)
    dev.set_current()
    s = dev.create_stream()
    ev = dev.create_event()
    idle = dev.create_stream()  # never given work

    def stream_cycle() -> None:
        dev.create_stream().close()

    def event_cycle() -> None:
        dev.create_event().close()  # default: no timing

    return {
        "Device() lookup": lambda: device_cls(),
        "stream create+close": stream_cycle,
        "event create+close": event_cycle,
        "Stream.record(event)": lambda: s.record(ev),
        "Stream.record() dropped": lambda: s.record(),
        "Stream.sync() idle": lambda: idle.sync(),
    }


def cuda_core_ops() -> Ops:
    from cuda_core import Device

    return device_ops(Device)


def nvidia_ops() -> Ops:
    try:
        from cuda.core import Device
    except ImportError:
        try:
            from cuda.core.experimental import Device
        except ImportError:
            return dict.fromkeys(OP_NAMES)
    return device_ops(Device)


def cupy_ops() -> Ops:
    try:
        import cupy as cp
    except ImportError:
        return dict.fromkeys(OP_NAMES)
    s = cp.cuda.Stream(non_blocking=True)
    ev = cp.cuda.Event(disable_timing=True)
    idle = cp.cuda.Stream(non_blocking=True)

    def stream_cycle_del() -> None:  # CuPy has no close(); dropping the last reference destroys it
        st = cp.cuda.Stream(non_blocking=True)
        del st

    def event_cycle() -> None:
        e = cp.cuda.Event(disable_timing=True)
        del e

    return {
        "Device() lookup": lambda: cp.cuda.Device(),
        "stream create+close": stream_cycle_del,
        "event create+close": event_cycle,
        "Stream.record(event)": lambda: s.record(ev),
        "Stream.record() dropped": lambda: s.record(),
        "Stream.sync() idle": lambda: idle.synchronize(),
    }


def main() -> int:
    print(environment_line())
    impls = ["cuda_core", "cuda.core", "cupy"]
    suite = Suite("Basic objects: host time per operation", impls, baseline="cuda.core")
    makers = {"cuda_core": cuda_core_ops, "cuda.core": nvidia_ops, "cupy": cupy_ops}
    ops_by_impl: dict[str, Ops] = {}
    for impl, make in makers.items():
        try:
            ops_by_impl[impl] = make()
        except Exception as exc:  # an implementation that cannot start is reported as n/a
            print(f"[{impl}] unavailable: {type(exc).__name__}: {exc}", file=sys.stderr)
            ops_by_impl[impl] = {}
    for op in OP_NAMES:
        number = 20000 if op == "Device() lookup" else 2000
        fns = {impl: ops_by_impl[impl].get(op) for impl in impls}
        suite.run_group(op, fns, number=number, repeat=15, warmup=200)
    print(suite.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
