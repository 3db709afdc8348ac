#!/usr/bin/env python3
"""Run scripts written for NVIDIA's ``cuda.core`` against ``cuda_core`` and against ``cuda.core``.

Usage::

    python3 tools/peer_examples.py FOLDER OUTDIR [--timeout S] [--only NAME ...] [--no-peer]

For every ``*.py`` in FOLDER (scripts written for ``cuda.core``; this repository holds none of
them) the script runs twice, each in its own subprocess and scratch directory:

* **peer**: unmodified, with NVIDIA's ``cuda.core`` (tells whether the script works at all here);
* **ours**: with every reference to the ``cuda.core`` package rewritten to ``cuda_core`` (the
  one change the drop-in promise allows), with this repository first on ``PYTHONPATH``.

The rewrite works on Python tokens, so strings and comments are left alone:
``cuda.core`` / ``cuda.core.experimental`` / ``cuda.core.utils`` in ``import``/``from`` lines and
in attribute chains such as ``cuda.core.Device`` become ``cuda_core...``; ``from cuda import core``
becomes ``import cuda_core as core``.

Printed: a table (example, peer rc, ours rc, verdict, the error line of ours, else of the peer).
Written under OUTDIR, three files: ``table.txt`` (the same table), ``results.json`` (one record
per example) and ``logs.txt`` (the full output of every run, one section each).

Verdicts: ``ok`` both exit 0; ``GAP`` the peer exits 0 and ours does not (a drop-in failure);
``ours only`` ours exits 0 and the peer does not; ``both fail``; ``needs <pkg>`` a package the
script imports is not installed; a ``skipped`` note marks a 0 exit after the script said a
requirement (a GPU feature, CUDA_PATH, a package) was missing, so nothing was checked.
The exit status is 1 when any example is a ``GAP``, else 0.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_RC = 124

# A 0 exit after one of these lines means the script skipped its work.
_SKIP_LINE = re.compile(
    r"(requires? (at least|a valid|compute capability|numpy|cuda_path)|is not installed|"
    r"would be skipped|will be skipped|does not support)",
    re.IGNORECASE,
)
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_ERROR_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)|AssertionError)\b"
)


# -- the rewrite -------------------------------------------------------------------------------


def rewrite_source(source: str) -> str:
    """*source* with every code reference to the ``cuda.core`` package pointing at ``cuda_core``.

    Parameters
    ----------
    source : str
        Python source written for NVIDIA's ``cuda.core``.

    Returns
    -------
    str
        The same source where the token run ``cuda . core`` became ``cuda_core`` and
        ``from cuda import core [as X]`` became ``import cuda_core as core`` (or ``as X``).
        Strings and comments are not touched.
    """
    lines = source.splitlines(keepends=True)
    toks = [
        t
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    ]
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = [x.string for x in toks[i : i + 6]]
        if nxt[:4] == ["from", "cuda", "import", "core"]:
            n = 6 if nxt[4:5] == ["as"] and len(nxt) == 6 else 4
            edits.append((t.start, toks[i + n - 1].end, f"import cuda_core as {nxt[n - 1]}"))
            i += n
            continue
        if (
            t.type == tokenize.NAME
            and t.string == "cuda"
            and nxt[1:3] == [".", "core"]
            and toks[i + 2].type == tokenize.NAME
            and (i == 0 or toks[i - 1].string != ".")
        ):
            edits.append((t.start, toks[i + 2].end, "cuda_core"))
            i += 3
            continue
        i += 1
    for (srow, scol), (erow, ecol), text in reversed(edits):
        first, last = lines[srow - 1], lines[erow - 1]
        lines[srow - 1 : erow] = [first[:scol] + text + last[ecol:]]
    return "".join(lines)


# -- running -----------------------------------------------------------------------------------


@dataclass
class Run:
    """One run of one script."""

    rc: int | None = None  # None: not run
    seconds: float = 0.0
    output: str = ""
    error: str = ""  # the line that says what went wrong ("" when rc == 0)
    missing: str = ""  # a module the script imports that is not installed
    skipped: str = ""  # a 0 exit after the script said a requirement is missing


@dataclass
class Result:
    """Both runs of one example and the verdict."""

    example: str
    peer: Run = field(default_factory=Run)
    ours: Run = field(default_factory=Run)
    verdict: str = ""


def _error_line(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _ERROR_LINE.match(ln):
            return ln[:300]
    return (lines[-1] if lines else "")[:300]


def _run(script: Path, *, cwd: Path, env: dict[str, str], timeout: float) -> Run:
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", script.name],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
        rc, raw = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as exc:
        rc, raw = (
            TIMEOUT_RC,
            (exc.stdout or b"") + f"\n[timed out after {timeout:.0f} s]\n".encode(),
        )
    run = Run(rc=rc, seconds=time.monotonic() - start, output=raw.decode("utf-8", "replace"))
    if rc != 0:
        run.error = _error_line(run.output)
        m = _MISSING_MODULE.search(run.output)
        if m and m.group(1).split(".")[0] not in ("cuda", "cuda_core"):
            run.missing = m.group(1).split(".")[0]
    else:
        skip = next((ln.strip() for ln in run.output.splitlines() if _SKIP_LINE.search(ln)), "")
        run.skipped = skip[:200]
    return run


def _environment(scratch: Path, *, ours: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["MPLBACKEND"] = "Agg"
    env.setdefault("CUDA_CORE_CACHE_DIR", str(scratch / "cuda_core_cache"))
    path = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ours:
        path.insert(0, str(ROOT))
    else:  # the peer must not see this repository (it holds no cuda/ package, but be sure)
        path = [p for p in path if Path(p).resolve() != ROOT]
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def run_example(script: Path, *, timeout: float, peer: bool) -> Result:
    """Run *script* unmodified with ``cuda.core`` (unless ``peer`` is false) and rewritten with ours."""
    result = Result(example=script.name)
    with tempfile.TemporaryDirectory(prefix="peer_example_") as tmp:
        scratch = Path(tmp)
        if peer:
            peer_dir = scratch / "peer"
            peer_dir.mkdir()
            (peer_dir / script.name).write_text(script.read_text())
            result.peer = _run(
                peer_dir / script.name,
                cwd=peer_dir,
                env=_environment(scratch, ours=False),
                timeout=timeout,
            )
        ours_dir = scratch / "ours"
        ours_dir.mkdir()
        (ours_dir / script.name).write_text(rewrite_source(script.read_text()))
        result.ours = _run(
            ours_dir / script.name,
            cwd=ours_dir,
            env=_environment(scratch, ours=True),
            timeout=timeout,
        )
    result.verdict = verdict(result.peer, result.ours)
    return result


def verdict(peer: Run, ours: Run) -> str:
    """One word (or two) on the pair of runs; see the module docstring."""
    if ours.missing and (peer.rc is None or peer.missing == ours.missing):
        return f"needs {ours.missing}"
    if ours.rc == 0:
        if peer.rc is None or peer.rc == 0:
            return "ok" if peer.rc == 0 else "ours ok"
        return "ours only"
    if peer.rc == 0:
        return "GAP"
    return "both fail" if peer.rc is not None else "ours fail"


# -- reporting ---------------------------------------------------------------------------------


def _rc(run: Run) -> str:
    if run.rc is None:
        return "-"
    return "T/O" if run.rc == TIMEOUT_RC else str(run.rc)


def _note(r: Result) -> str:
    """The error line of ours, the peer's when it differs, or why a 0 exit checked nothing."""
    ours, peer = r.ours.error[:140], r.peer.error[:140]
    if ours and peer and ours.split(":")[0] != peer.split(":")[0]:
        return f"ours: {ours} | peer: {peer}"
    note = ours or peer
    skipped = r.ours.skipped or r.peer.skipped
    if not note and skipped:
        note = f"skipped itself: {skipped}"
    return note


def environment_line() -> str:
    """The versions that decide the outcome: Python and the packages the examples use."""
    from importlib import metadata

    parts = [f"python {sys.version.split()[0]}", f"CUDA_PATH={os.environ.get('CUDA_PATH', '')}"]
    for dist in (
        "cuda-core",
        "cudacore",
        "cuda-bindings",
        "numpy",
        "cupy-cuda13x",
        "cupy-cuda12x",
        "torch",
        "cffi",
    ):
        try:
            parts.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            continue
    return "; ".join(parts)


def format_table(results: list[Result]) -> str:
    """The results as a fixed-width text table."""
    rows = [("example", "peer", "ours", "verdict", "error (ours, else peer) / note")]
    for r in results:
        rows.append((r.example, _rc(r.peer), _rc(r.ours), r.verdict, _note(r)))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    out = [
        f"# {environment_line()}",
        "# peer: the unmodified script with NVIDIA's cuda.core; ours: the import rewritten to cuda_core",
    ]
    for row in rows:
        out.append(
            "  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
        )
    counts: dict[str, int] = {}
    for r in results:
        key = r.verdict.split()[0] if r.verdict.startswith("needs") else r.verdict
        counts[key] = counts.get(key, 0) + 1
    peer_ok = sum(r.peer.rc == 0 for r in results)
    ours_ok = sum(r.ours.rc == 0 for r in results)
    out.append("")
    out.append(
        f"{len(results)} examples: peer exits 0 in {peer_ok}, ours in {ours_ok}; "
        + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    )
    return "\n".join(out) + "\n"


def write_outputs(results: list[Result], outdir: Path, table: str) -> None:
    """``table.txt``, ``results.json`` and ``logs.txt`` under *outdir*."""
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "table.txt").write_text(table)
    records = []
    with open(outdir / "logs.txt", "w") as log:
        for r in results:
            for side, run in (
                ("peer (cuda.core, unmodified)", r.peer),
                ("ours (cuda_core, import rewritten)", r.ours),
            ):
                if run.rc is None:
                    continue
                log.write(
                    f"{'=' * 100}\n== {r.example} :: {side} :: rc={_rc(run)} :: {run.seconds:.1f} s\n"
                )
                log.write(run.output if run.output.endswith("\n") else run.output + "\n")
            rec = asdict(r)
            for side in ("peer", "ours"):
                rec[side].pop("output")
            records.append(rec)
    (outdir / "results.json").write_text(json.dumps(records, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="folder of scripts written for cuda.core")
    ap.add_argument("outdir", type=Path, help="where table.txt, results.json and logs.txt go")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per run (default 180)")
    ap.add_argument(
        "--only", nargs="*", default=None, help="run only these file names (with or without .py)"
    )
    ap.add_argument(
        "--no-peer", action="store_true", help="do not run the unmodified scripts with cuda.core"
    )
    args = ap.parse_args(argv)
    scripts = sorted(p for p in args.folder.glob("*.py") if not p.name.startswith("_"))
    if args.only:
        wanted = {n if n.endswith(".py") else n + ".py" for n in args.only}
        scripts = [p for p in scripts if p.name in wanted]
    if not scripts:
        print(f"no scripts to run in {args.folder}", file=sys.stderr)
        return 2
    results: list[Result] = []
    for script in scripts:
        print(f"-- {script.name}", file=sys.stderr, flush=True)
        results.append(run_example(script, timeout=args.timeout, peer=not args.no_peer))
        r = results[-1]
        print(
            f"   peer {_rc(r.peer)}, ours {_rc(r.ours)}: {r.verdict}", file=sys.stderr, flush=True
        )
        write_outputs(results, args.outdir, format_table(results))  # what ran survives a kill
    table = format_table(results)
    print(table, end="")
    return 1 if any(r.verdict == "GAP" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
