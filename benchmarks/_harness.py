"""Shared timing and table code for the benchmark scripts (scripts, not tests).

Every benchmark measures the host-side cost of one operation for several implementations
(``cuda_core``, NVIDIA's ``cuda.core``, CuPy, ...) in the same process run, and prints a table
of medians with ratios to a baseline column. Quote the ratios, not the absolute times, and
run twice to see the noise.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Row", "Suite", "environment_line", "markdown_table", "time_op"]


def time_op(
    fn: Callable[[], object], *, number: int = 1000, repeat: int = 15, warmup: int = 200
) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` rounds of ``number`` calls each."""
    for _ in range(warmup):
        fn()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        rounds = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            rounds.append((time.perf_counter() - t0) / number)
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(rounds)


@dataclass
class Row:
    """One operation: implementation name -> median seconds (or an error string)."""

    op: str
    results: dict[str, float | str] = field(default_factory=dict)


class Suite:
    """Collects rows and prints them as a table with ratios to ``baseline`` (and others)."""

    def __init__(self, title: str, impls: list[str], baseline: str = "cuda.core") -> None:
        self.title = title
        self.impls = impls
        self.baseline = baseline
        self.rows: list[Row] = []
        self._pending: dict[str, dict[str, Callable[[], object] | None]] = {}

    def run(self, op: str, impl: str, fn: Callable[[], object] | None, **kw: int) -> None:
        """Time ``fn`` for ``impl`` under the operation ``op``; ``None`` records "n/a"."""
        row = next((r for r in self.rows if r.op == op), None)
        if row is None:
            row = Row(op)
            self.rows.append(row)
        if fn is None:
            row.results[impl] = "n/a"
            return
        try:
            row.results[impl] = time_op(fn, **kw)
        except Exception as exc:  # a peer that cannot do the operation is reported, not fatal
            row.results[impl] = f"error: {type(exc).__name__}: {exc}"[:60]
            print(f"[{op} / {impl}] {row.results[impl]}", file=sys.stderr)

    def run_group(
        self,
        op: str,
        fns: dict[str, Callable[[], object] | None],
        *,
        number: int = 1000,
        repeat: int = 15,
        warmup: int = 200,
    ) -> None:
        """Time several implementations of ``op`` round-robin: each round times every one once.

        A noisy host then slows all of them alike instead of whichever ran during a slow spell,
        so the ratios hold better than with one implementation timed after another.
        """
        row = next((r for r in self.rows if r.op == op), None)
        if row is None:
            row = Row(op)
            self.rows.append(row)
        live = {}
        for impl, fn in fns.items():
            if fn is None:
                row.results[impl] = "n/a"
                continue
            try:
                for _ in range(warmup):
                    fn()
                live[impl] = fn
            except Exception as exc:
                row.results[impl] = f"error: {type(exc).__name__}: {exc}"[:60]
                print(f"[{op} / {impl}] {row.results[impl]}", file=sys.stderr)
        rounds: dict[str, list[float]] = {impl: [] for impl in live}
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(repeat):
                for impl, fn in live.items():
                    t0 = time.perf_counter()
                    for _ in range(number):
                        fn()
                    rounds[impl].append((time.perf_counter() - t0) / number)
        finally:
            if gc_was_enabled:
                gc.enable()
        for impl, times in rounds.items():
            row.results[impl] = statistics.median(times)

    def add(self, op: str, impl: str, fn: Callable[[], object] | None) -> None:
        """Register ``fn`` for a later :meth:`measure` (which times each operation round-robin)."""
        self._pending.setdefault(op, {})[impl] = fn

    def measure(self, **kw: int) -> None:
        """Time everything registered with :meth:`add`, one :meth:`run_group` per operation."""
        pending, self._pending = self._pending, {}
        for op, fns in pending.items():
            self.run_group(op, fns, **kw)

    def table(self, ratios_to: list[str] | None = None) -> str:
        """The table: one column of medians (microseconds) per implementation, then ratios."""
        ratios_to = ratios_to or [self.baseline]
        head = ["operation"] + [f"{i} (us)" for i in self.impls]
        for base in ratios_to:
            head += [f"{i}/{base}" for i in self.impls if i != base]
        lines = [head]
        for row in self.rows:
            cells = [row.op]
            for impl in self.impls:
                v = row.results.get(impl, "n/a")
                cells.append(f"{v * 1e6:.3f}" if isinstance(v, float) else "n/a")
            for base in ratios_to:
                b = row.results.get(base)
                for impl in self.impls:
                    if impl == base:
                        continue
                    v = row.results.get(impl)
                    ok = isinstance(v, float) and isinstance(b, float) and b > 0
                    cells.append(f"{v / b:.2f}" if ok else "n/a")  # type: ignore[operator]
            lines.append(cells)
        return markdown_table(self.title, lines)


def markdown_table(title: str, lines: list[list[str]]) -> str:
    """``## title`` and a Markdown table of ``lines`` (the first is the header), padded."""
    widths = [max(len(r[c]) for r in lines) for c in range(len(lines[0]))]
    out = [f"## {title}", ""]
    for n, r in enumerate(lines):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
        if n == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def environment_line() -> str:
    """One line naming the GPU, driver and package versions, printed above every table."""
    parts = [f"Python {sys.version.split()[0]}"]
    try:
        from cuda.bindings import driver

        driver.cuInit(0)
        _, ver = driver.cuDriverGetVersion()
        parts.append(f"driver CUDA {ver // 1000}.{ver % 1000 // 10}")
        _, dev = driver.cuDeviceGet(0)
        _, name = driver.cuDeviceGetName(128, dev)
        parts.append(name.split(b"\0")[0].decode())
    except Exception as exc:  # no driver: say so
        parts.append(f"no driver ({type(exc).__name__})")
    for mod in ("cuda.bindings", "cuda.core", "cupy", "torch"):
        try:
            m = __import__(mod, fromlist=["__version__"])
            parts.append(f"{mod} {getattr(m, '__version__', '?')}")
        except Exception:
            parts.append(f"{mod} absent")
    return "; ".join(parts)


def run_backend_child(bench: str, backend: str, cmd: list[str]) -> dict:
    """Run ``cmd`` (a benchmark's own child process) on ``backend`` and return the JSON of its
    last line; exit naming ``bench`` if the child failed (its output goes to stderr)."""
    env = {**os.environ, "CUDA_CORE_BACKEND": backend}
    env.pop("CUDA_CORE_NO_FASTPATH", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{bench}: the {backend} run failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run_rounds(
    jobs: dict[Any, Callable[[int], object]], number: int, repeat: int
) -> dict[Any, float]:
    """Median seconds per operation of each job (``job(n)`` makes ``n`` operations); rounds run
    round-robin over all jobs, so a slow spell of a shared machine hits all alike."""
    rounds: dict[Any, list[float]] = {key: [] for key in jobs}
    for _ in range(repeat):
        for key, job in jobs.items():
            t0 = time.perf_counter()
            job(number)
            rounds[key].append((time.perf_counter() - t0) / number)
    return {key: statistics.median(r) for key, r in rounds.items()}
