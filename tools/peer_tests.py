#!/usr/bin/env python3
"""Run NVIDIA's own ``cuda.core`` test suite against ``cuda_core`` and against ``cuda.core``.

Usage::

    python3 tools/peer_tests.py FOLDER OUTDIR [--gpu] [--only PATTERN ...] [--timeout S] [--jobs N] [--no-peer]

FOLDER holds a copy of NVIDIA's test tree laid out as in their repository (this repository
holds none of it; keep it in the git-ignored ``.devcarry/peer_tests``)::

    FOLDER/cuda_core/tests/conftest.py, test_*.py, helpers/, graph/, ...
    FOLDER/cuda_python_test_helpers/cuda_python_test_helpers/__init__.py

Every test file runs twice, each time in its own pytest process and scratch copy of FOLDER:

* **peer**: the files unmodified, with NVIDIA's ``cuda.core`` (tells whether a test works here
  at all, and is the reference);
* **ours**: every ``.py`` file with its ``cuda.core`` references rewritten to ``cuda_core`` (the
  rewrite of ``tools/peer_examples.py``, on Python tokens), this repository first on
  ``PYTHONPATH``.

A small pytest plugin (written into the scratch copy, loaded with ``-p``) does two things:

* It records each test's outcome (passed, failed, error, skipped, xfailed, xpassed) and each
  module that failed to collect, with the first line of the error.
* Without an NVIDIA driver (this CPU machine) NVIDIA's session fixture ``session_setup`` fails in
  ``cuInit``; the plugin lets the session go on, and a test or module that then fails *because
  no driver or device is there* is reported as skipped, "needs a GPU". Nothing else changes:
  with a driver present (``--gpu``) the plugin only records.

Ours only: NVIDIA's shared harness (``conftest.py``, ``helpers/``, ``cuda_python_test_helpers``)
imports ``CUDAError`` and ``handle_return`` from ``cuda.core._utils.cuda_utils``, which
``cuda_core`` offers at the same path (``cuda_core._utils.cuda_utils``, for code outside it).
A few private names test modules need at module level are not part of that, so for the ours
run they are bridged to our equivalents (``_SynchronousMemoryResource``, ``Stream_accept``, and
the probes ``_decide_nvjitlink_or_driver`` and ``_can_load_generated_ptx``), or nothing in those
modules would run. The bridge is a ``sitecustomize.py`` in the ours scratch copy (on
``PYTHONPATH``), so it holds in every process of the run, the children that the IPC tests spawn
included; it then runs the environment's own ``sitecustomize``, if any. Every other private name
is left as it is, so a test that reaches into ``cuda.core`` internals fails with ours and says so
in its note.

Written under OUTDIR: ``table.txt`` (one row per test: peer outcome, ours outcome, verdict, the
error line of ours, else of the peer), ``results.json`` and ``logs.txt`` (pytest's output of
every run). Verdicts: ``ok`` (both pass), ``GAP`` (the peer passes and ours does not: a drop-in
failure to triage), ``ours only``, ``both skip``, ``both fail``, ``differ`` (neither passes,
for different reasons). The exit status is 1 when any test is a ``GAP``, else 0.

``--gpu`` is the form for a GPU machine: it refuses to run (exit 2) unless a driver and a device
are found, so a GPU run can never quietly turn into a run of skips.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer_examples import environment_line, rewrite_source

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path("cuda_core") / "tests"
PLUGIN = "_peer_tests_plugin"
RESULTS_ENV = "PEER_TESTS_RESULTS"
SIDE_ENV = "PEER_TESTS_SIDE"
NEEDS_GPU = "needs a GPU"

# The plugin, written into each scratch copy. It imports nothing from this repository, so the
# peer run never sees cuda_core.
PLUGIN_SOURCE = '''\
"""Records outcomes; without a driver, turns 'no driver' failures into skips (tools/peer_tests.py)."""

import json
import multiprocessing
import os
import sys

import pytest

_OUT = os.environ["PEER_TESTS_RESULTS"]
_NO_DRIVER_MARKS = (
    'is an NVIDIA driver library',  # cuda.pathfinder: libcuda not found
    "CUDA_ERROR_DRIVER_NOT_FOUND",
    "CUDA_ERROR_NO_DEVICE",
    "CUDA_ERROR_STUB_LIBRARY",
    "CUDADriverNotFoundError",
)


def _driver_state():
    """'' when a driver and a device are there, else why not."""
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return f"cuInit: {err.name}"
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count < 1:
            return "no CUDA device"
    except Exception as exc:  # the driver library itself is missing
        return f"{type(exc).__name__}: {exc}"
    return ""


NO_GPU = _driver_state()


def _is_no_driver(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = f"{type(exc).__name__}: {exc}"
        if any(m in text for m in _NO_DRIVER_MARKS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _first_line(text):
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return ""


def _error_line(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # (path, lineno, "Skipped: reason")
        return _first_line(longrepr[2])
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    if crash:
        return _first_line(crash)
    lines = [ln for ln in str(longrepr).splitlines() if ln.startswith("E ")]
    return _first_line(lines[0][1:] if lines else longrepr)


def _record(**rec):
    with open(_OUT, "a") as f:
        f.write(json.dumps(rec) + "\\n")


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    try:
        return (yield)
    except Exception as exc:
        if NO_GPU and fixturedef.argname == "session_setup" and _is_no_driver(exc):
            # NVIDIA's session fixture: cuInit, then the spawn start method. Without a driver
            # only the second half can run; each test that needs the driver says so itself.
            multiprocessing.set_start_method("spawn", force=True)
            fixturedef.cached_result = (None, fixturedef.cache_key(request), None)
            return None
        raise


def _skip_for_no_driver(report, excinfo):
    if NO_GPU and report.failed and excinfo is not None and _is_no_driver(excinfo.value):
        report.outcome = "skipped"
        report.longrepr = (str(report.fspath), 0, f"Skipped: needs a GPU ({NO_GPU[:120]})")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _skip_for_no_driver(report, call.excinfo)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    if NO_GPU and report.failed and any(m in str(report.longrepr) for m in _NO_DRIVER_MARKS):
        report.outcome = "skipped"
        report.longrepr = (str(collector.path), 0, f"Skipped: needs a GPU ({NO_GPU[:120]})")
    return report


def pytest_collectreport(report):
    if report.failed or (report.skipped and report.nodeid.endswith(".py")):
        _record(kind="collect", nodeid=report.nodeid, outcome="error" if report.failed else "skipped",
                message=_error_line(report))


_state = {}


def pytest_runtest_logreport(report):
    st = _state.setdefault(report.nodeid, {"outcome": None, "message": ""})
    xfail = hasattr(report, "wasxfail")
    if report.when == "setup":
        if report.failed:
            st.update(outcome="error", message=_error_line(report))
        elif report.skipped:
            st.update(outcome="xfailed" if xfail else "skipped", message=_error_line(report))
    elif report.when == "call":
        if report.passed:
            st["outcome"] = "xpassed" if xfail else "passed"
        elif report.skipped:
            st.update(outcome="xfailed" if xfail else "skipped", message=_error_line(report))
        else:
            st.update(outcome="failed", message=_error_line(report))
    elif report.when == "teardown":
        if report.failed and st["outcome"] in (None, "passed"):
            st.update(outcome="error", message="teardown: " + _error_line(report))
        _record(kind="test", nodeid=report.nodeid, outcome=st["outcome"] or "error", message=st["message"])
'''


# The ours side's sitecustomize.py, written into its scratch copy (on PYTHONPATH): it bridges the
# private test-plumbing names in every Python process of the run, the pytest process and the children that
# NVIDIA's IPC tests spawn (``multiprocessing`` with ``spawn`` starts a fresh interpreter, which
# imports the test module again to unpickle its target, and with it ``helpers``). A bridge made in
# the plugin alone reached the pytest process only: every spawned child died in its first import.
SITECUSTOMIZE_SOURCE = '''\
"""tools/peer_tests.py, ours side: bridges the private names NVIDIA's test modules need."""

import importlib.machinery
import importlib.util
import os
import sys


def _bridge_private_harness_names():
    """Ours only: private names NVIDIA's test modules use at module level, mapped to ours.

    (cuda.core._utils.cuda_utils, which the harness imports, needs no bridge: cuda_core has
    it at the same path, for all code outside cuda.core.)
    """
    import cuda_core
    from cuda.bindings import driver, nvrtc

    # NVIDIA's test_launcher.py imports its private synchronous resource at module level; ours
    # is public under another name. Without this, no test of that module would run at all.
    import cuda_core._memory._legacy as legacy

    legacy._SynchronousMemoryResource = cuda_core.SynchronousMemoryResource
    # helpers/buffers.py (imported by most memory tests) resolves stream arguments with a
    # private function; ours is _stream.as_stream.
    import cuda_core._stream as stream_mod

    stream_mod.Stream_accept = lambda obj, *a, **k: None if obj is None else stream_mod.as_stream(obj)
    # Module-level probes of test_program.py and test_object_protocols.py (which backend links
    # PTX; whether the driver is new enough to load NVRTC's PTX), answered with our public facts.
    import cuda_core._compile._linker as linker_mod
    import cuda_core._compile._program as program_mod

    linker_mod._decide_nvjitlink_or_driver = lambda: cuda_core.Linker.which_backend() == "driver"

    def _can_load_generated_ptx():
        err, drv = driver.cuDriverGetVersion()
        err2, major, minor = nvrtc.nvrtcVersion()
        return int(err) == 0 and int(err2) == 0 and drv >= major * 1000 + minor * 10

    program_mod._can_load_generated_ptx = _can_load_generated_ptx
    cuda_core.Program._can_load_generated_ptx = staticmethod(_can_load_generated_ptx)


def _chain_next_sitecustomize():
    """Run the sitecustomize this file shadows (the environment's own), if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    later = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get("PEER_TESTS_SIDE") == "ours":
    _bridge_private_harness_names()
_chain_next_sitecustomize()
'''


# -- running -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One test (or one module that did not collect) on one side."""

    outcome: str  # passed failed error skipped xfailed xpassed; "-" when not run
    message: str = ""


@dataclass
class Row:
    """One test: both outcomes and the verdict."""

    test: str
    peer: Outcome = field(default_factory=lambda: Outcome("-"))
    ours: Outcome = field(default_factory=lambda: Outcome("-"))
    verdict: str = ""


def find_test_files(folder: Path) -> list[Path]:
    """NVIDIA's test modules under FOLDER/cuda_core/tests, relative to that folder (no cython/)."""
    base = folder / TESTS
    return sorted(
        p.relative_to(base)
        for p in base.rglob("test_*.py")
        if "cython" not in p.relative_to(base).parts
    )


def prepare_side(folder: Path, dest: Path, *, ours: bool) -> None:
    """Copy FOLDER to *dest*; for ours, rewrite every ``.py`` file; add the plugin and an ini."""
    shutil.copytree(folder, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if ours:
        for py in dest.rglob("*.py"):
            text = py.read_text()
            new = rewrite_source(text)
            if new != text:
                py.write_text(new)
    (dest / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE)
    if ours:
        (dest / "sitecustomize.py").write_text(SITECUSTOMIZE_SOURCE)
    # NVIDIA's pytest.ini asks for pytest-benchmark; ours keeps only what decides collection.
    (dest / TESTS / "pytest.ini").write_text("[pytest]\nnorecursedirs = cython\n")


def _environment(side_dir: Path, scratch: Path, results: Path, *, ours: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["CUDA_CORE_CACHE_DIR"] = str(scratch / "cuda_core_cache")
    env[RESULTS_ENV] = str(results)
    env[SIDE_ENV] = "ours" if ours else "peer"
    path = [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT
    ]
    path.insert(0, str(side_dir))
    if ours:
        path.insert(0, str(ROOT))
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def run_file(
    side_dir: Path, rel: Path, *, scratch: Path, ours: bool, timeout: float
) -> tuple[list[dict], str]:
    """Run one test module in its own pytest process: the plugin's records of it and the log.

    Each run has its own results file and pytest base folder, so files may run side by side.
    """
    tag = f"{'ours' if ours else 'peer'}-{str(rel).replace('/', '_')}"
    results = scratch / f"results-{tag}.jsonl"
    results.unlink(missing_ok=True)
    cmd = [
        sys.executable, "-X", "faulthandler", "-m", "pytest", str(rel),
        "-p", PLUGIN, "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-rN",
        "--rootdir", str(side_dir / TESTS), "-c", str(side_dir / TESTS / "pytest.ini"),
        "--basetemp", str(scratch / f"pytest-{tag}"),
    ]  # fmt: skip
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=side_dir / TESTS, env=_environment(side_dir, scratch, results, ours=ours),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout, check=False,
        )  # fmt: skip
        rc, out = proc.returncode, proc.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        rc, out = (
            None,
            (exc.stdout or b"").decode("utf-8", "replace")
            + f"\n[timed out after {timeout:.0f} s]\n",
        )
    side = "ours (cuda_core, imports rewritten)" if ours else "peer (cuda.core, unmodified)"
    text = (
        f"{'=' * 100}\n== {rel} :: {side} :: rc={rc} :: {time.monotonic() - start:.1f} s\n{out}\n"
    )
    records = (
        [json.loads(ln) for ln in results.read_text().splitlines()] if results.exists() else []
    )
    if rc is None:
        records.append(
            {
                "kind": "collect",
                "nodeid": str(rel),
                "outcome": "error",
                "message": f"timed out after {timeout:.0f} s",
            }
        )
    elif not records and rc not in (0, 5):
        tail = [ln for ln in out.splitlines() if ln.strip()][-1:] or [f"pytest exited {rc}"]
        records.append(
            {"kind": "collect", "nodeid": str(rel), "outcome": "error", "message": tail[0][:300]}
        )
    return records, text


def merge(peer: list[dict], ours: list[dict]) -> list[Row]:
    """One row per test id seen on either side; a module that did not collect stands in for its tests."""

    def index(records: list[dict]) -> tuple[dict[str, Outcome], dict[str, Outcome]]:
        tests, modules = {}, {}
        for r in records:
            target = tests if r["kind"] == "test" else modules
            target[r["nodeid"]] = Outcome(r["outcome"], r.get("message", ""))
        return tests, modules

    def lookup(
        nodeid: str, tests: dict[str, Outcome], modules: dict[str, Outcome], ran: bool
    ) -> Outcome:
        if nodeid in tests:
            return tests[nodeid]
        for mod, out in modules.items():
            if nodeid == mod or nodeid.startswith(mod + "::"):
                return out
        return Outcome("absent") if ran else Outcome("-")

    ptests, pmods = index(peer)
    otests, omods = index(ours)
    ids = list(dict.fromkeys([*ptests, *otests]))
    ids += [
        m
        for m in dict.fromkeys([*pmods, *omods])
        if not any(i == m or i.startswith(m + "::") for i in ids)
    ]
    rows = []
    for nodeid in ids:
        row = Row(
            nodeid, lookup(nodeid, ptests, pmods, bool(peer)), lookup(nodeid, otests, omods, True)
        )
        row.verdict = verdict(row.peer, row.ours)
        rows.append(row)
    return rows


def verdict(peer: Outcome, ours: Outcome) -> str:
    """One word (or two) on the pair of outcomes; see the module docstring."""
    good = ("passed", "xfailed")
    if ours.outcome in good:
        return "ok" if peer.outcome in good else ("ours ok" if peer.outcome == "-" else "ours only")
    if peer.outcome in good:
        return "GAP"
    if peer.outcome == "-":
        return "ours fail" if ours.outcome != "skipped" else "ours skip"
    if peer.outcome == ours.outcome == "skipped":
        return "both skip"
    if peer.outcome == ours.outcome or {peer.outcome, ours.outcome} <= {"failed", "error"}:
        return "both fail"
    return "differ"


# -- reporting ---------------------------------------------------------------------------------


def _note(row: Row) -> str:
    ours, peer = row.ours.message[:160], row.peer.message[:160]
    if row.verdict in ("ok", "both skip") and ours == peer:
        return ours
    if ours and peer and ours != peer:
        return f"ours: {ours} | peer: {peer}"
    return ours or peer


def counts(rows: list[Row]) -> dict[str, int]:
    """The totals the table ends with."""
    good = ("passed", "xfailed")
    out = {
        "tests": len(rows),
        "peer pass": sum(r.peer.outcome in good for r in rows),
        "ours pass": sum(r.ours.outcome in good for r in rows),
        "both skip": sum(r.verdict == "both skip" for r in rows),
        "GAP": sum(r.verdict == "GAP" for r in rows),
    }
    out["needs a GPU (both)"] = sum(
        r.verdict == "both skip" and NEEDS_GPU in r.peer.message for r in rows
    )
    return out


def format_table(rows: list[Row], *, mode: str) -> str:
    """The rows as a fixed-width text table with the totals last."""
    table = [("test", "peer", "ours", "verdict", "error (ours, else peer) / note")]
    table += [(r.test, r.peer.outcome, r.ours.outcome, r.verdict, _note(r)) for r in rows]
    widths = [max(len(t[i]) for t in table) for i in range(4)]
    out = [
        f"# {environment_line()}",
        f"# mode: {mode}; peer: NVIDIA's tests unmodified with cuda.core; ours: imports rewritten to cuda_core",
    ]
    out += ["  ".join(c.ljust(w) for c, w in zip(t[:4], widths)) + "  " + t[4] for t in table]
    by_verdict: dict[str, int] = {}
    for r in rows:
        by_verdict[r.verdict] = by_verdict.get(r.verdict, 0) + 1
    c = counts(rows)
    out += [
        "",
        "; ".join(f"{k}: {v}" for k, v in c.items()),
        "verdicts: " + ", ".join(f"{k}: {v}" for k, v in sorted(by_verdict.items())),
    ]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="copy of NVIDIA's test tree (holds cuda_core/tests)")
    ap.add_argument("outdir", type=Path, help="where table.txt, results.json and logs.txt go")
    ap.add_argument(
        "--gpu",
        action="store_true",
        help="GPU machine: refuse to run without a driver and a device",
    )
    ap.add_argument(
        "--only",
        nargs="*",
        default=None,
        help="run only test files whose path contains one of these",
    )
    ap.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per test file and side (default 900)"
    )
    ap.add_argument("--jobs", type=int, default=1, help="test files run side by side (default 1)")
    ap.add_argument(
        "--no-peer", action="store_true", help="do not run the unmodified tests with cuda.core"
    )
    args = ap.parse_args(argv)
    if not (args.folder / TESTS / "conftest.py").is_file():
        print(f"no {TESTS}/conftest.py under {args.folder}", file=sys.stderr)
        return 2
    files = find_test_files(args.folder)
    if args.only:
        files = [f for f in files if any(s in str(f) for s in args.only)]
    if not files:
        print(f"no test files to run under {args.folder / TESTS}", file=sys.stderr)
        return 2
    if args.gpu:
        probe = subprocess.run(
            [sys.executable, "-c", "from cuda.bindings import driver as d; "
             "assert d.cuInit(0)[0] == d.CUresult.CUDA_SUCCESS and d.cuDeviceGetCount()[1] > 0"],
            capture_output=True, check=False,
        )  # fmt: skip
        if probe.returncode != 0:
            print("--gpu: no NVIDIA driver or no device found here", file=sys.stderr)
            return 2
    args.outdir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    mode = "GPU" if args.gpu else "no GPU required"
    with (
        tempfile.TemporaryDirectory(prefix="peer_tests_") as tmp,
        open(args.outdir / "logs.txt", "w") as log,
    ):
        scratch = Path(tmp)
        sides = {"ours": scratch / "ours"}
        if not args.no_peer:
            sides["peer"] = scratch / "peer"
        for name, path in sides.items():
            prepare_side(args.folder, path, ours=name == "ours")

        def both_sides(rel: Path) -> tuple[Path, list[Row], str]:
            peer, peer_log = (
                ([], "")
                if args.no_peer
                else run_file(sides["peer"], rel, scratch=scratch, ours=False, timeout=args.timeout)
            )
            ours, ours_log = run_file(
                sides["ours"], rel, scratch=scratch, ours=True, timeout=args.timeout
            )
            return rel, merge(peer, ours), peer_log + ours_log

        table = ""
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for rel, new, text in (
                f.result() for f in as_completed(pool.submit(both_sides, r) for r in files)
            ):
                log.write(text)
                rows += new
                c = counts(new)
                print(
                    f"-- {rel}: {c['tests']} tests: peer pass {c['peer pass']}, "
                    f"ours pass {c['ours pass']}, GAP {c['GAP']}",
                    file=sys.stderr,
                    flush=True,
                )
                rows.sort(key=lambda r: r.test)
                table = format_table(rows, mode=mode)
                (args.outdir / "table.txt").write_text(table)  # what ran survives a kill
                (args.outdir / "results.json").write_text(
                    json.dumps([asdict(r) for r in rows], indent=1) + "\n"
                )
    print(table, end="")
    return 1 if any(r.verdict == "GAP" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
