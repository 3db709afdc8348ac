"""Host cost of cuda_core.profiler's ranges and marks where no profiler records them.

A range that nobody records should cost next to nothing, so that it can stay in the code. Each
configuration runs in a fresh process (the choice of where ranges go is made once per process):

* ``nvtx absent``: the ``nvtx`` package hidden from import (the fallback: one warning, no-ops);
* ``CUDA_CORE_NVTX=0``: ranges switched off, ``nvtx`` never imported;
* ``nvtx, no profiler``: ``nvtx`` installed, no tool attached (NVTX's own no-op state). Run the
  script under ``nsys profile --trace=nvtx`` and this column is "profiler attached" instead.

Rows, each timed as one call of a small Python function (the loop around it is the same for
all): an empty body (the floor), ``with contextlib.nullcontext()`` made once (the cheapest
context manager written in Python, for scale), ``with range("x"): pass``, the same with a range
made once and reused, with a colour and a domain, a call of a ``@range``-decorated empty
function, and ``mark("x")``; in the ``nvtx`` process also ``with nvtx.annotate("x"): pass``
(nvtx's own context manager) for comparison. The table gives the median per call in nanoseconds
(the call of the function included) and the ratio to the ``nullcontext`` row.

Run: ``python benchmarks/bench_profiler.py`` (no GPU needed).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import Suite, environment_line, markdown_table

OPS = (
    "empty body (floor)",
    "with nullcontext: pass (made once)",
    'with range("x"): pass',
    "with r: pass (r made once)",
    'with range("x", color="red", domain="d")',
    "@range-decorated empty function",
    'mark("x")',
    'with nvtx.annotate("x"): pass',
)
CONFIGS = {
    "nvtx absent": {},
    "CUDA_CORE_NVTX=0": {"CUDA_CORE_NVTX": "0"},
    "nvtx": {},
}

_HIDE_NVTX = """
import sys
class _HideNvtx:
    def find_spec(self, name, path=None, target=None):
        if name == "nvtx" or name.startswith("nvtx."):
            raise ImportError(f"No module named {name!r} (hidden by the benchmark)")
sys.meta_path.insert(0, _HideNvtx())
"""


def child(config: str) -> None:
    """Time the operations in this process; print one JSON line."""
    if config == "nvtx absent":
        exec(_HIDE_NVTX)
    import warnings

    from cuda_core import profiler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the fallback's one warning
        state = repr(profiler.range("x"))

    def floor() -> None:
        pass

    def with_range() -> None:
        with profiler.range("x"):
            pass

    null = contextlib.nullcontext()

    def with_null() -> None:
        with null:
            pass

    reused = profiler.range("x")

    def with_reused() -> None:
        with reused:
            pass

    def with_options() -> None:
        with profiler.range("x", color="red", domain="d"):
            pass

    @profiler.range
    def decorated() -> None:
        pass

    def marked() -> None:
        profiler.mark("x")

    ops: dict[str, Callable[[], object] | None] = dict(
        zip(OPS, (floor, with_null, with_range, with_reused, with_options, decorated, marked, None))
    )
    version = None
    if config == "nvtx":
        try:
            import nvtx
        except ImportError:
            print(json.dumps({"missing": True}))
            return
        from importlib.metadata import version as dist_version

        version = dist_version("nvtx")

        def annotated() -> None:
            with nvtx.annotate("x"):
                pass

        ops['with nvtx.annotate("x"): pass'] = annotated
    suite = Suite(config, list(ops), baseline=OPS[0])
    for op, fn in ops.items():
        suite.add("all", op, fn)
    suite.measure(number=20000, repeat=21, warmup=2000)
    print(json.dumps({"state": state, "nvtx": version, "results": suite.rows[0].results}))


def main() -> int:
    columns: dict[str, dict[str, float | str]] = {}
    for config, extra in CONFIGS.items():
        env = {**os.environ, **extra}
        if config != "CUDA_CORE_NVTX=0":
            env.pop("CUDA_CORE_NVTX", None)
        proc = subprocess.run(
            [sys.executable, __file__, "--child", config],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if proc.returncode != 0:
            print(f"[{config}] failed:\n{proc.stderr}", file=sys.stderr)
            return 1
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if out.get("missing"):
            print(f"[{config}] nvtx is not installed: column left out", file=sys.stderr)
            continue
        label = config
        if config == "nvtx":
            attached = "not recorded" not in out["state"]
            label = f"nvtx {out['nvtx']}, {'profiler attached' if attached else 'no profiler'}"
        columns[label] = out["results"]
    head = ["operation"] + [f"{c} (ns)" for c in columns]
    head += [f"{c}: x nullcontext" for c in columns]
    lines = [head]
    for op in OPS:
        cells = [op]
        for res in columns.values():
            v = res.get(op)
            cells.append(f"{v * 1e9:.0f}" if isinstance(v, float) else "n/a")
        for res in columns.values():
            v, base = res.get(op), res.get(OPS[1])
            ok = isinstance(v, float) and isinstance(base, float) and base > 0
            cells.append(f"{v / base:.2f}" if ok else "n/a")  # type: ignore[operator]
        lines.append(cells)
    print(environment_line())
    print()
    print(markdown_table("cuda_core.profiler: host cost per call, nothing recording", lines))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        sys.exit(main())
