"""Peer copy bandwidth between GPU 0 and GPU 1, both directions, 1 MiB to 256 MiB (GB/s).

Columns, measured round-robin in one process run (each round times every column once, so a
noisy spell slows them alike), on buffers of the devices' current memory pools:

* ``cuda_core``: ``src.copy_to(dst, stream=s)`` with ``s`` a stream of the source device;
* ``cuda.core``: NVIDIA's ``cuda.core`` doing the same with its own objects (same pools);
* ``cuMemcpyPeerAsync``: ``cuda.bindings`` on the same pointers, stream and contexts;
* ``cuMemcpyAsync``: ``cuda.bindings``' unified-address copy on the same pointers and stream;
* ``torch .to()``: ``t.to("cuda:1")`` (or ``"cuda:0"``) of a PyTorch tensor on the source
  device (PyTorch's caching allocator; it enables peer access of the contexts itself).

A cell is the median over the rounds of ``bytes copied / seconds``, each round issuing
``reps`` copies back to back and then waiting for them (warm-up first). Two tables: the pools
without peer access (cuda_core then copies with ``cuMemcpyPeerAsync``; the unified copy is
refused), then with each pool granting the other device access (``peer_accessible_by``).
Every cuda_core copy is checked byte for byte after timing. The summary gives, at 256 MiB,
cuda_core divided by the best other column (target: >= 0.95). A column whose library is
missing says so. Run on a machine with two GPUs: ``python benchmarks/bench_peer_copy.py``
(``CUDA_CORE_BACKEND=python`` for the pure-Python backend).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _harness import environment_line, markdown_table

MIB = 1 << 20
SIZES = (1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB)
ROUNDS = 9
IMPLS = ("cuda_core", "cuda.core", "cuMemcpyPeerAsync", "cuMemcpyAsync", "torch .to()")
OURS = "cuda_core"
TARGET = 0.95

Op = tuple[Callable[[], object], Callable[[], object]]  # (issue one copy, wait for the copies)


def reps_for(nbytes: int) -> int:
    """Copies per round: about 1 GiB, at least 4, at most 256."""
    return max(4, min(256, (1 << 30) // nbytes))


def measure(ops: dict[str, Op | str], nbytes: int) -> dict[str, float | str]:
    """GB/s per column (a string says why a column has no number)."""
    reps = reps_for(nbytes)
    out: dict[str, float | str] = {}
    live: dict[str, Op] = {}
    for name, op in ops.items():
        if isinstance(op, str):
            out[name] = op
            continue
        issue, wait = op
        try:
            for _ in range(reps):  # warm-up: pools, lazy loading, peer mappings
                issue()
            wait()
            live[name] = op
        except Exception as exc:  # a column that cannot copy says why; the others go on
            out[name] = f"error: {type(exc).__name__}: {exc}"[:70]
    times: dict[str, list[float]] = {name: [] for name in live}
    for _ in range(ROUNDS):
        for name, (issue, wait) in live.items():
            wait()
            t0 = time.perf_counter()
            for _ in range(reps):
                issue()
            wait()
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        out[name] = reps * nbytes / statistics.median(ts) / 1e9
    return out


def checked(result: tuple[Any, ...], api: str) -> None:
    if result[0]:
        raise RuntimeError(f"{api} failed: {result[0]!r}")


class Setup:
    """Streams, contexts and buffers of both devices for one size, for every column."""

    def __init__(self, nbytes: int) -> None:
        from cuda.bindings import driver

        from cuda_core import Device

        self.driver = driver
        self.nbytes = nbytes
        self.devs = (Device(0), Device(1))
        for d in reversed(self.devs):
            d.set_current()  # device 0 ends up current
        self.streams = tuple(d.create_stream() for d in self.devs)
        self.mrs = tuple(d.memory_resource for d in self.devs)
        self.pattern = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
        self.bufs: dict[tuple[int, int], tuple[Any, Any]] = {}
        for a, b in ((0, 1), (1, 0)):
            src = self.mrs[a].allocate(nbytes, stream=self.streams[a])
            src.copy_from(self.pattern, stream=self.streams[a])  # done when it returns
            dst = self.mrs[b].allocate(nbytes, stream=self.streams[b])
            dst.fill(0, stream=self.streams[b])
            self.streams[b].sync()
            self.bufs[(a, b)] = (src, dst)

    def ours(self, a: int, b: int) -> Op:
        src, dst = self.bufs[(a, b)]
        s = self.streams[a]
        return (lambda: src.copy_to(dst, stream=s)), s.sync

    def peer_bindings(self, a: int, b: int) -> Op:
        driver = self.driver
        src, dst = self.bufs[(a, b)]
        s = self.streams[a]
        h, sp, dp, n = s.handle, src.handle, dst.handle, self.nbytes
        sctx, dctx = self.devs[a].context.handle, self.devs[b].context.handle
        copy = driver.cuMemcpyPeerAsync

        def issue() -> None:
            checked(copy(dp, dctx, sp, sctx, n, h), "cuMemcpyPeerAsync")

        return issue, s.sync

    def unified_bindings(self, a: int, b: int) -> Op:
        driver = self.driver
        src, dst = self.bufs[(a, b)]
        s = self.streams[a]
        h, sp, dp, n = s.handle, src.handle, dst.handle, self.nbytes
        copy = driver.cuMemcpyAsync

        def issue() -> None:
            checked(copy(dp, sp, n, h), "cuMemcpyAsync")

        return issue, s.sync

    def check(self) -> list[str]:
        """Every destination holds the pattern (after the cuda_core copies)."""
        bad = []
        for (a, b), (_, dst) in self.bufs.items():
            back = np.empty(self.nbytes, np.uint8)
            dst.copy_to(back, stream=self.streams[b])
            if back.tobytes() != self.pattern.tobytes():
                bad.append(f"GPU{a}->GPU{b}")
            dst.fill(0, stream=self.streams[b])
            self.streams[b].sync()
        return bad

    def close(self) -> None:
        for s in self.streams:
            s.sync()
        for src, dst in self.bufs.values():
            src.close()
            dst.close()
        for s in self.streams:
            s.sync()
            s.close()


class NvidiaCore:
    """NVIDIA's cuda.core doing the copy with its own Device, stream and buffers."""

    def __init__(self) -> None:
        self.reason = ""
        try:
            import cuda.core as cc  # type: ignore[import-not-found]

            self.cc: Any = cc
        except Exception as exc:
            self.cc = None
            self.reason = f"n/a (cuda.core not importable: {type(exc).__name__})"

    def op(self, a: int, b: int, nbytes: int, keep: list[Any]) -> Op | str:
        if self.cc is None:
            return self.reason
        cc = self.cc
        from cuda_core import Device

        devs = [cc.Device(i) for i in (0, 1)]
        streams = []
        for d in devs:
            d.set_current()
            streams.append(d.create_stream())
        src = devs[a].memory_resource.allocate(nbytes, stream=streams[a])
        dst = devs[b].memory_resource.allocate(nbytes, stream=streams[b])
        for s in streams:
            s.sync()
        Device(0).set_current()  # our objects expect device 0 current, as before
        keep.extend((src, dst, *streams))
        s = streams[a]
        return (lambda: src.copy_to(dst, stream=s)), s.sync


class Torch:
    def __init__(self) -> None:
        self.reason = ""
        try:
            import torch

            self.torch: Any = torch
            if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
                self.reason = "n/a (torch sees fewer than two CUDA devices)"
        except Exception as exc:
            self.torch = None
            self.reason = f"n/a (torch not installed: {type(exc).__name__})"

    def op(self, a: int, b: int, nbytes: int, keep: list[Any]) -> Op | str:
        if self.reason:
            return self.reason
        torch = self.torch
        t = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{a}")
        target = f"cuda:{b}"
        keep.append(t)

        def wait() -> None:
            torch.cuda.synchronize(a)
            torch.cuda.synchronize(b)

        return (lambda: t.to(target)), wait


def release(objects: list[Any]) -> None:
    """Close the other libraries' buffers and streams (buffers first), drop the tensors."""
    for obj in objects:
        try:
            if hasattr(obj, "sync"):
                obj.sync()
            if hasattr(obj, "close"):
                obj.close()
        except Exception as exc:  # a benchmark reports, it does not stop
            print(f"could not release {obj!r}: {exc}", file=sys.stderr)
    objects.clear()


def fmt(v: float | str) -> str:
    return f"{v:.1f}" if isinstance(v, float) else v


def table(title: str, rows: list[tuple[str, dict[str, float | str]]]) -> str:
    head = ["copy", *[f"{i} (GB/s)" for i in IMPLS], f"{OURS}/best other"]
    lines = [head]
    for label, res in rows:
        lines.append([label, *[fmt(res.get(i, "n/a")) for i in IMPLS], fmt(ratio(res))])
    return markdown_table(title, lines)


def ratio(res: dict[str, float | str]) -> float | str:
    ours = res.get(OURS)
    others = [v for k, v in res.items() if k != OURS and isinstance(v, float)]
    if not isinstance(ours, float) or not others:
        return "n/a"
    return ours / max(others)


def main() -> int:
    print(environment_line())
    try:
        from cuda_core import system
        from cuda_core._handles._backend import NATIVE, REASON

        n = system.get_num_devices()
    except Exception as exc:
        print(f"peer copy benchmark skipped: no usable GPU ({type(exc).__name__}: {exc})"[:200])
        return 0
    if n < 2:
        print(f"peer copy benchmark skipped: it needs two GPUs (this machine has {n})")
        return 0
    from cuda_core import Device

    d0, d1 = Device(0), Device(1)
    print(
        f"cuda_core backend: {'native' if NATIVE else 'pure Python'} ({REASON}); "
        f"{d0.name} -> {d1.name}; Device(0).can_access_peer(1) = {d0.can_access_peer(1)}, "
        f"Device(1).can_access_peer(0) = {d1.can_access_peer(0)}"
    )
    nvidia, torch = NvidiaCore(), Torch()
    failures: list[str] = []
    summary: list[str] = []
    for granted in (False, True):
        rows: list[tuple[str, dict[str, float | str]]] = []
        for nbytes in SIZES:
            setup = Setup(nbytes)
            mrs = setup.mrs
            if granted:
                mrs[0].peer_accessible_by = [1]
                mrs[1].peer_accessible_by = [0]
            else:
                mrs[0].peer_accessible_by = []
                mrs[1].peer_accessible_by = []
            keep: list[Any] = []
            for a, b in ((0, 1), (1, 0)):
                ops: dict[str, Op | str] = {
                    "cuda_core": setup.ours(a, b),
                    "cuda.core": nvidia.op(a, b, nbytes, keep),
                    "cuMemcpyPeerAsync": setup.peer_bindings(a, b),
                    "cuMemcpyAsync": setup.unified_bindings(a, b),
                    "torch .to()": torch.op(a, b, nbytes, keep),
                }
                res = measure(ops, nbytes)
                label = f"GPU{a}->GPU{b} {nbytes // MIB} MiB"
                rows.append((label, res))
                if nbytes == SIZES[-1]:
                    r = ratio(res)
                    met = isinstance(r, float) and r >= TARGET
                    state = "peer access granted" if granted else "no peer access"
                    summary.append(
                        f"{label}, {state}: cuda_core / best other = {fmt(r)} "
                        f"(target >= {TARGET}: {'met' if met else 'NOT met'})"
                    )
            # The timed copies ran last for cuMemcpyAsync and torch, so copy once more with ours.
            for a, b in ((0, 1), (1, 0)):
                issue, wait = setup.ours(a, b)
                setup.bufs[(a, b)][1].fill(0, stream=setup.streams[b])
                setup.streams[b].sync()
                issue()
                wait()
            bad = setup.check()
            failures += [
                f"{x} {nbytes // MIB} MiB ({'granted' if granted else 'no access'})" for x in bad
            ]
            release(keep)
            mrs[0].peer_accessible_by = []
            mrs[1].peer_accessible_by = []
            setup.close()
        title = (
            "Peer copies, pools granting each other access"
            if granted
            else "Peer copies, pools without peer access"
        )
        print()
        print(table(title, rows))
    print()
    print("At 256 MiB:")
    for line in summary:
        print(f"- {line}")
    if failures:
        print(f"FAILED: cuda_core copies differ from the source: {', '.join(failures)}")
        return 1
    print("Every cuda_core copy was checked byte for byte.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
