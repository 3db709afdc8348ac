"""``tools/peer_examples.py``: the import rewrite, the verdicts, and a run of small scripts.

The scripts here are written for this test (no NVIDIA example is in the repository); the runs
that need NVIDIA's ``cuda.core`` skip where it is not installed.
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
_spec = importlib.util.spec_from_file_location(
    "peer_examples_tool", ROOT / "tools" / "peer_examples.py"
)
assert _spec is not None and _spec.loader is not None
tool = importlib.util.module_from_spec(_spec)
sys.modules["peer_examples_tool"] = tool  # dataclasses look their module up
_spec.loader.exec_module(tool)

HAVE_PEER = importlib.util.find_spec("cuda.core") is not None


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("from cuda.core import Device, launch\n", "from cuda_core import Device, launch\n"),
        (
            "from cuda.core.experimental import (\n    Device,\n)\n",
            "from cuda_core.experimental import (\n    Device,\n)\n",
        ),
        (
            "from cuda.core.utils import StridedMemoryView\n",
            "from cuda_core.utils import StridedMemoryView\n",
        ),
        (
            "import cuda.core\nd = cuda.core.Device()\n",
            "import cuda_core\nd = cuda_core.Device()\n",
        ),
        ("import cuda.core as cc\n", "import cuda_core as cc\n"),
        ("import cuda.core.experimental as ce\n", "import cuda_core.experimental as ce\n"),
        ("from cuda import core\n", "import cuda_core as core\n"),
        ("from cuda import core as c2\n", "import cuda_core as c2\n"),
        ("if x:\n    from cuda.core import system\n", "if x:\n    from cuda_core import system\n"),
    ],
    ids=repr,
)
def test_rewrite_forms(before, after):
    assert tool.rewrite_source(before) == after


def test_rewrite_leaves_strings_comments_and_other_packages_alone():
    src = (
        "from cuda.pathfinder import get_cuda_path_or_home  # cuda.core needs it\n"
        "from cuda.bindings import driver\n"
        "msg = 'install cuda.core'\n"
        "doc = '''cuda.core.experimental'''\n"
        "x = obj.cuda.core\n"
    )
    assert tool.rewrite_source(src) == src


@pytest.mark.parametrize(
    ("peer", "ours", "verdict"),
    [
        ((0, ""), (0, ""), "ok"),
        ((0, ""), (1, ""), "GAP"),
        ((1, ""), (0, ""), "ours only"),
        ((1, ""), (1, ""), "both fail"),
        ((1, "cupy"), (1, "cupy"), "needs cupy"),
        ((None, ""), (0, ""), "ours ok"),
        ((None, ""), (1, ""), "ours fail"),
        ((None, ""), (1, "torch"), "needs torch"),
    ],
)
def test_verdicts(peer, ours, verdict):
    assert (
        tool.verdict(tool.Run(rc=peer[0], missing=peer[1]), tool.Run(rc=ours[0], missing=ours[1]))
        == verdict
    )


def test_error_line_is_the_exception_not_the_last_traceback_frame():
    out = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad value\nsome trailing print\n'
    assert tool._error_line(out) == "ValueError: bad value"
    assert tool._error_line("no exception here\n") == "no exception here"


SCRIPTS = {
    # works with both
    "a_ok.py": "from cuda.core import ProgramOptions\nassert ProgramOptions(arch='sm_90').arch == 'sm_90'\n",
    # a name cuda.core does not have and we do
    "b_ours_only.py": "from cuda.core import PreparedLaunch\n",
    # passes with cuda.core only (reads the package's own name)
    "c_gap.py": "import cuda.core\nimport sys\nsys.exit(0 if cuda.core.__name__.startswith('cuda.core') else 3)\n",
    # a missing third-party package
    "d_needs.py": "import surely_not_installed_pkg_xyz\n",
    # exits 0 after saying it could not do its work
    "e_skips.py": "import sys\nprint('this example requires at least 2 GPUs', file=sys.stderr)\nsys.exit(0)\n",
}


@pytest.mark.skipif(not HAVE_PEER, reason="NVIDIA's cuda.core is not installed here")
def test_run_writes_three_files_and_reports_each_verdict(tmp_path):
    folder = tmp_path / "examples"
    folder.mkdir()
    for name, src in SCRIPTS.items():
        (folder / name).write_text(src)
    out = tmp_path / "out"
    rc = tool.main([str(folder), str(out), "--timeout", "120"])
    assert rc == 1  # c_gap.py is a GAP
    assert sorted(p.name for p in out.iterdir()) == ["logs.txt", "results.json", "table.txt"]
    verdicts = {r["example"]: r["verdict"] for r in json.loads((out / "results.json").read_text())}
    assert verdicts == {
        "a_ok.py": "ok",
        "b_ours_only.py": "ours only",
        "c_gap.py": "GAP",
        "d_needs.py": "needs surely_not_installed_pkg_xyz",
        "e_skips.py": "ok",
    }
    table = (out / "table.txt").read_text()
    assert "skipped itself: this example requires at least 2 GPUs" in table
    assert "5 examples: peer exits 0 in 3, ours in 3" in table
    logs = (out / "logs.txt").read_text()
    assert "== c_gap.py :: ours (cuda_core, import rewritten) :: rc=3" in logs
    assert "ImportError: cannot import name 'PreparedLaunch'" in logs  # the peer's failure, in full


def test_run_without_the_peer(tmp_path):
    folder = tmp_path / "examples"
    folder.mkdir()
    (folder / "a_ok.py").write_text(SCRIPTS["a_ok.py"])
    (folder / "_private.py").write_text("raise SystemExit(9)\n")  # skipped: not an example
    out = tmp_path / "out"
    assert tool.main([str(folder), str(out), "--no-peer", "--only", "a_ok"]) == 0
    (record,) = json.loads((out / "results.json").read_text())
    assert (
        record["example"] == "a_ok.py"
        and record["verdict"] == "ours ok"
        and record["peer"]["rc"] is None
    )
    assert tool.main([str(tmp_path / "empty"), str(out)]) == 2
