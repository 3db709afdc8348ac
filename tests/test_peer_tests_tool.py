"""``tools/peer_tests.py``: verdicts, the merge of both runs, and a run of a small test tree.

The tree here is written for this test (NVIDIA's suite is not in the repository). It mimics the
shape of theirs: a ``conftest.py`` whose session fixture calls ``cuInit`` through the private
``cuda.core._utils.cuda_utils.handle_return``, and test modules written for ``cuda.core``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

# Tests of the project's own comparison tool: deselected by default (pyproject.toml addopts),
# run once in CI with `python -m pytest -m tools`.
pytestmark = pytest.mark.tools

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("peer_tests_tool", ROOT / "tools" / "peer_tests.py")
assert _spec is not None and _spec.loader is not None
tool = importlib.util.module_from_spec(_spec)
sys.modules["peer_tests_tool"] = tool  # dataclasses look their module up
_spec.loader.exec_module(tool)

HAVE_PEER = importlib.util.find_spec("cuda.core") is not None


def _driver_present() -> bool:
    try:
        from cuda.bindings import driver

        return (
            driver.cuInit(0)[0] == driver.CUresult.CUDA_SUCCESS and driver.cuDeviceGetCount()[1] > 0
        )
    except Exception:
        return False


Out = tool.Outcome


@pytest.mark.parametrize(
    ("peer", "ours", "expected"),
    [
        ("passed", "passed", "ok"),
        ("xfailed", "passed", "ok"),
        ("passed", "failed", "GAP"),
        ("passed", "skipped", "GAP"),
        ("passed", "error", "GAP"),
        ("failed", "passed", "ours only"),
        ("skipped", "skipped", "both skip"),
        ("failed", "error", "both fail"),
        ("skipped", "failed", "differ"),
        ("-", "passed", "ours ok"),
        ("-", "failed", "ours fail"),
        ("-", "skipped", "ours skip"),
    ],
)
def test_verdicts(peer, ours, expected):
    assert tool.verdict(Out(peer), Out(ours)) == expected


def test_merge_lets_a_module_that_did_not_collect_stand_for_its_tests():
    peer = [
        {"kind": "test", "nodeid": "test_a.py::test_one", "outcome": "passed"},
        {
            "kind": "test",
            "nodeid": "test_a.py::test_two",
            "outcome": "skipped",
            "message": "Skipped: needs a GPU",
        },
    ]
    ours = [
        {
            "kind": "collect",
            "nodeid": "test_a.py",
            "outcome": "error",
            "message": "ModuleNotFoundError: x",
        }
    ]
    rows = {r.test: r for r in tool.merge(peer, ours)}
    assert list(rows) == ["test_a.py::test_one", "test_a.py::test_two"]
    assert rows["test_a.py::test_one"].ours == Out("error", "ModuleNotFoundError: x")
    assert rows["test_a.py::test_one"].verdict == "GAP"
    assert rows["test_a.py::test_two"].verdict == "differ"
    # a module that failed on both sides is one row
    both = tool.merge([ours[0]], ours)
    assert [(r.test, r.verdict) for r in both] == [("test_a.py", "both fail")]
    # without a peer run the peer column is "-"
    assert (
        tool.merge([], [{"kind": "test", "nodeid": "t.py::x", "outcome": "passed"}])[0].verdict
        == "ours ok"
    )


CONFTEST = """\
import pytest
from cuda.bindings import driver
from cuda.core._utils.cuda_utils import CUDAError, handle_return


@pytest.fixture(scope="session", autouse=True)
def session_setup():
    handle_return(driver.cuInit(0))


@pytest.fixture
def bridged_error_class():
    return CUDAError
"""

TEST_CPU = """\
import multiprocessing

import pytest
import cuda.core
from cuda.core import ProgramOptions


def test_both_pass():
    assert ProgramOptions(arch="sm_90").arch == "sm_90"


def test_ours_only():
    from cuda.core import PreparedLaunch  # noqa: F401  (a name cuda.core does not have)


def test_gap():
    assert cuda.core.__name__.startswith("cuda.core")  # true only for NVIDIA's package


def test_needs_driver():
    cuda.core.Device().set_current()


def test_bridge_gives_the_package_error_class(bridged_error_class):
    assert issubclass(bridged_error_class, Exception)
    assert bridged_error_class.__module__.split(".")[0] == cuda.core.__name__.split(".")[0]


def _child(q):
    # What NVIDIA's helpers/__init__.py does first, in a process multiprocessing spawned
    from cuda.core._utils.cuda_utils import handle_return

    q.put(handle_return.__module__.split(".")[0])


def test_bridge_reaches_spawned_children():
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=_child, args=(q,))
    proc.start()
    try:
        got = q.get(timeout=60)
    finally:
        proc.join(timeout=60)
    assert got == cuda.core.__name__.split(".")[0]
    assert proc.exitcode == 0
"""

TEST_DRIVER_AT_IMPORT = """\
import cuda.core

DEVICE = cuda.core.Device()
DEVICE.set_current()


def test_never_collected_without_a_driver():
    assert DEVICE.device_id == 0
"""


@pytest.mark.skipif(not HAVE_PEER, reason="NVIDIA's cuda.core is not installed here")
@pytest.mark.parametrize("jobs", ["1", "2"])  # files one at a time, and side by side
def test_run_of_a_small_tree(tmp_path, jobs):
    tests = tmp_path / "tree" / "cuda_core" / "tests"
    tests.mkdir(parents=True)
    (tests / "conftest.py").write_text(CONFTEST)
    (tests / "test_cpu.py").write_text(TEST_CPU)
    (tests / "test_driver_at_import.py").write_text(TEST_DRIVER_AT_IMPORT)
    out = tmp_path / "out"
    rc = tool.main([str(tmp_path / "tree"), str(out), "--timeout", "300", "--jobs", jobs])
    assert rc == 1  # test_gap is a GAP
    assert sorted(p.name for p in out.iterdir()) == ["logs.txt", "results.json", "table.txt"]
    rows = {r["test"]: r for r in json.loads((out / "results.json").read_text())}
    verdicts = {k.split("::")[-1]: r["verdict"] for k, r in rows.items()}
    gpu = _driver_present()
    assert verdicts == {
        "test_both_pass": "ok",
        "test_ours_only": "ours only",
        "test_gap": "GAP",
        "test_needs_driver": "ok" if gpu else "both skip",
        "test_bridge_gives_the_package_error_class": "ok",
        "test_bridge_reaches_spawned_children": "ok",
    } | (
        {"test_never_collected_without_a_driver": "ok"}
        if gpu
        else {"test_driver_at_import.py": "both skip"}
    )
    if not gpu:
        assert rows["test_cpu.py::test_needs_driver"]["peer"]["message"].startswith(
            "Skipped: needs a GPU"
        )
        assert rows["test_driver_at_import.py"]["ours"]["outcome"] == "skipped"
    table = (out / "table.txt").read_text()
    assert "tests: 7; peer pass: " in table and "GAP: 1" in table
    logs = (out / "logs.txt").read_text()
    assert "== test_cpu.py :: ours (cuda_core, imports rewritten)" in logs


def test_refuses_a_folder_without_the_test_tree(tmp_path):
    assert tool.main([str(tmp_path), str(tmp_path / "out")]) == 2


@pytest.mark.skipif(_driver_present(), reason="checks the refusal on a machine without a GPU")
def test_gpu_mode_refuses_to_run_without_a_gpu(tmp_path):
    tests = tmp_path / "cuda_core" / "tests"
    tests.mkdir(parents=True)
    (tests / "conftest.py").write_text("")
    (tests / "test_x.py").write_text("def test_x():\n    pass\n")
    assert tool.main([str(tmp_path), str(tmp_path / "out"), "--gpu"]) == 2
