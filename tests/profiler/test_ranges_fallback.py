"""CPU tier: where ``nvtx`` is missing or broken, ranges stay off after one warning, also under
``-W error`` and where a warning handler itself opens a range. Needs no ``nvtx`` and no C
compiler (each case runs in a fresh interpreter: the decision is made once per process)."""

from __future__ import annotations

import re
import tomllib

from cuda_core.profiler._ranges import NVTX_EXTRA
from tests.profiler.conftest import ROOT, run_script

BROKEN_NVTX = """
import sys, types
class _BrokenNvtx:  # an nvtx whose import fails as a binary mismatch does
    def find_spec(self, name, path=None, target=None):
        if name == "nvtx":
            raise ValueError("numpy.dtype size changed, may indicate binary incompatibility")
sys.meta_path.insert(0, _BrokenNvtx())
"""

USE = """
from cuda_core import profiler
for _ in range(3):
    with profiler.range("x"):
        profiler.mark("m")
print(repr(profiler.range("x")))
"""


def test_a_broken_nvtx_turns_ranges_off_with_one_warning(tmp_path):
    run = run_script(BROKEN_NVTX + USE, tmp_path, python_flags=("-W", "always"))
    assert run.stdout.strip() == (
        "<cuda_core.profiler.Range: not recorded (the nvtx package failed to import "
        "(ValueError: numpy.dtype size changed, may indicate binary incompatibility))>"
    )
    assert run.stderr.count("UserWarning: cuda_core.profiler: the nvtx package failed") == 1


def test_under_w_error_only_the_first_range_raises(tmp_path):
    script = (
        BROKEN_NVTX
        + """
from cuda_core import profiler
try:
    profiler.range("first")
except UserWarning as exc:
    print("raised:", str(exc)[:48])
with profiler.range("second"):  # decided already: no warning, no error
    pass
print("then fine")
"""
    )
    run = run_script(script, tmp_path, python_flags=("-W", "error::UserWarning"))
    assert run.stdout.splitlines() == [
        "raised: cuda_core.profiler: the nvtx package failed to i",
        "then fine",
    ]


def test_a_warning_handler_that_opens_a_range_does_not_deadlock(tmp_path):
    script = (
        BROKEN_NVTX
        + """
import warnings
from cuda_core import profiler
shown = []
def show(message, category, filename, lineno, file=None, line=None):
    with profiler.range("inside the handler"):  # the lock must be free here
        shown.append(str(message)[:20])
warnings.showwarning = show
with profiler.range("x"):
    pass
print(shown)
"""
    )
    run = run_script(script, tmp_path, python_flags=("-W", "always"))
    assert run.stdout.strip() == "['cuda_core.profiler: ']"


def test_the_remedy_names_an_extra_that_brings_nvtx():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    extra = re.fullmatch(r'pip install "cudacore\[([\w-]+)\]"', NVTX_EXTRA)
    assert extra is not None
    assert [re.split(r"[<>=!~ ]", req)[0] for req in extras[extra.group(1)]] == ["nvtx"]
    assert any(re.split(r"[<>=!~ ]", req)[0] == "nvtx" for req in extras["test"])
