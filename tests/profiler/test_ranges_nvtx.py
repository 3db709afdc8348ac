"""CPU tier: the NVTX calls that ranges and marks make, seen by a tool attached the way Nsight
Systems attaches (NVTX's injection library, ``NVTX_INJECTION64_PATH``), and what happens where
nothing records them: ``nvtx`` missing, switched off, or no tool attached.

Each case runs in a fresh interpreter: where ranges go is decided once per process.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from cuda_core.profiler._ranges import NVTX_EXTRA
from tests.profiler.conftest import run_script

nvtx = pytest.importorskip("nvtx", reason="the nvtx package (the test extra) is not installed")

RECORDED = """
import threading
from cuda_core import profiler

with profiler.range("outer", color="red"):
    with profiler.range("inner", domain="cuda_core_test", color=0x123456):
        profiler.mark("tick", color="#8000ff00")

@profiler.range
def bare():
    return 1

@profiler.range("named", color=0x80FF8000)
def named(x, *, y):
    return x + y

class Model:
    @profiler.range(domain="cuda_core_test")
    def step(self):
        raise KeyError("boom")

assert bare() == 1 and named(1, y=2) == 3
assert bare.__name__ == "bare" and bare.__wrapped__ is not None
try:
    Model().step()
except KeyError:
    pass
else:
    raise SystemExit("the exception was swallowed")
try:
    with profiler.range("raises"):
        raise ValueError
except ValueError:
    pass

both_inside = threading.Barrier(2)
def worker(i):
    with profiler.range(f"thread {i}"):
        both_inside.wait()
        with profiler.range(f"thread {i} inner", domain="cuda_core_test"):
            both_inside.wait()
threads = [threading.Thread(target=worker, args=(i,)) for i in (1, 2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(repr(profiler.range("outer", color="red")))
print(profiler.range("outer", color="red") is profiler.range("outer", color=0xFF0000))
"""


def _by_thread(calls: list[list[str]]) -> dict[str, list[tuple[str, ...]]]:
    """The calls of each thread, without the thread column."""
    out: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    for call in calls:
        out[call[-1]].append(tuple(call[:-1]))
    return out


def test_ranges_and_marks_reach_the_attached_tool_in_order(recorder, tmp_path):
    run = run_script(RECORDED, tmp_path, recorder=recorder)
    assert run.stderr == ""
    assert run.stdout.splitlines() == [
        "<cuda_core.profiler.Range 'outer', color=0xFFFF0000>",
        "True",  # made once per name, colour and domain
    ]
    assert run.calls is not None, "NVTX never loaded the recorder"
    threads = _by_thread(run.calls)
    main = threads.pop("1")
    assert main[:5] == [
        ("push", "-", "outer", "0xFFFF0000"),  # a colour name, opaque
        ("push", "cuda_core_test", "inner", "0xFF123456"),  # 0xRRGGBB is made opaque
        ("mark", "-", "tick", "0x8000FF00"),  # '#AARRGGBB' as given
        ("pop", "cuda_core_test"),
        ("pop", "-"),
    ]
    # Without a colour, NVTX's default; the names, domains and order are what matter here.
    rest = [c if c[0] == "pop" or c[2] != "bare" else c[:3] for c in main[5:]]
    assert rest == [
        ("push", "-", "bare"),  # @range: the function's qualified name
        ("pop", "-"),
        ("push", "-", "named", "0x80FF8000"),
        ("pop", "-"),
        ("push", "cuda_core_test", "Model.step", main[9][3]),
        ("pop", "cuda_core_test"),  # popped although the method raised
        ("push", "-", "raises", main[11][3]),
        ("pop", "-"),  # and although the with block raised
    ]
    # Each thread pushed and popped its own ranges, nested, while both were inside one.
    assert sorted(threads) == ["2", "3"]
    for calls in threads.values():
        i = calls[0][2].split()[1]
        assert [c[:3] for c in calls] == [
            ("push", "-", f"thread {i}"),
            ("push", "cuda_core_test", f"thread {i} inner"),
            ("pop", "cuda_core_test"),
            ("pop", "-"),
        ]


NOT_RECORDED = """
import sys
from cuda_core import profiler

def f():
    return 7

first = profiler.range("first")
decorated = profiler.range("f")(f)
bare = profiler.range(f)
with profiler.range("second", color="red", domain="d") as second:
    profiler.mark("m")
print(first is second, decorated is f, bare is f, f() == 7)
print(repr(first))
print("nvtx" in sys.modules)
"""


def test_without_a_tool_ranges_are_one_shared_no_op_and_decorators_return_the_function(
    recorder, tmp_path
):
    # NVTX finds no tool at its first call: nothing reaches it, and nothing is wrapped.
    run = run_script(NOT_RECORDED, tmp_path)
    assert run.stderr == ""
    same, state, imported = run.stdout.splitlines()
    assert same == "True True True True"
    assert state == "<cuda_core.profiler.Range: not recorded (no profiler is attached)>"
    assert imported == "True"


def test_cuda_core_nvtx_0_records_nothing_and_imports_no_nvtx(recorder, tmp_path):
    run = run_script(NOT_RECORDED, tmp_path, recorder=recorder, env={"CUDA_CORE_NVTX": "0"})
    assert run.stderr == ""
    assert run.calls is None, "NVTX was reached"
    same, state, imported = run.stdout.splitlines()
    assert same == "True True True True"
    assert state == "<cuda_core.profiler.Range: not recorded (CUDA_CORE_NVTX turns them off)>"
    assert imported == "False"


def test_nvtx_disable_is_honoured(recorder, tmp_path):
    run = run_script(NOT_RECORDED, tmp_path, recorder=recorder, env={"NVTX_DISABLE": "1"})
    assert run.stderr == ""
    assert run.calls is None, "NVTX was reached"
    assert run.stdout.splitlines()[1].endswith("(nvtx is disabled (NVTX_DISABLE is set))>")


HIDE_NVTX = """
import sys
class _HideNvtx:
    def find_spec(self, name, path=None, target=None):
        if name == "nvtx" or name.startswith("nvtx."):
            raise ImportError(f"No module named {name!r} (hidden by the test)")
sys.meta_path.insert(0, _HideNvtx())
"""


def test_without_nvtx_ranges_warn_once_and_cost_nothing(recorder, tmp_path):
    # -W always: every warning is shown, so "once" is the profiler's own doing.
    script = HIDE_NVTX + NOT_RECORDED
    run = run_script(script, tmp_path, recorder=recorder, python_flags=("-W", "always"))
    assert run.calls is None, "NVTX was reached"
    same, state, imported = run.stdout.splitlines()
    assert same == "True True True True"
    assert state == "<cuda_core.profiler.Range: not recorded (the nvtx package is not installed)>"
    assert imported == "False"
    warned = re.findall(r"^<string>:(\d+): UserWarning: (.*)$", run.stderr, re.MULTILINE)
    assert len(warned) == 1, run.stderr
    line, text = warned[0]
    # At the user's first range, in the user's words of what to do.
    assert script.splitlines()[int(line) - 1] == 'first = profiler.range("first")'
    assert text.startswith("cuda_core.profiler: the nvtx package is not installed")
    assert NVTX_EXTRA in text and "CUDA_CORE_NVTX=0" in text
