"""profiler.capture(), start() and stop(): cuProfilerStart / cuProfilerStop.

CPU tier: without a driver each says so. GPU tier: they work with a current context, name the
missing one with its remedy, nest, and (where Nsight Systems' ``nsys`` is installed) limit what
it records to the captured block, where the named ranges show.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading

import pytest

from cuda_core import CUDADriverNotFoundError, CUDAError, profiler
from cuda_core._handles._driver import driver_available
from tests.profiler.conftest import ROOT

no_driver = pytest.mark.skipif(
    driver_available(), reason="an NVIDIA driver is present; the GPU tier covers these calls"
)


@no_driver
@pytest.mark.parametrize(
    "call",
    [profiler.start, profiler.stop, lambda: profiler.capture().__enter__()],
    ids=["start", "stop", "capture"],
)
def test_without_a_driver_each_says_so(call):
    with pytest.raises(CUDADriverNotFoundError) as info:
        call()
    text = str(info.value)
    assert "the NVIDIA driver (libcuda) was not found" in text
    assert "Compiling with Program, Linker and ObjectCode still works" in text


@no_driver
def test_a_capture_that_could_not_start_leaves_nothing_open():
    for _ in range(2):  # the failed entry did not count as an open block
        with pytest.raises(CUDADriverNotFoundError):
            with profiler.capture():
                pytest.fail("the block ran")


@pytest.mark.gpu
def test_start_stop_and_capture_with_a_current_context(dev):
    profiler.start()
    profiler.start()  # already started: no effect
    profiler.stop()
    with profiler.capture():
        with profiler.capture():  # nested: the outer one stops
            s = dev.create_stream()
        s.sync()
    profiler.stop()  # stopping again is harmless

    @profiler.capture()
    def captured(x):
        return x + 1

    assert captured(1) == 2 and captured(2) == 3


@pytest.mark.gpu
def test_the_block_s_exception_comes_out_unchanged(dev):
    with pytest.raises(KeyError, match="inside") as info:
        with profiler.capture():
            raise KeyError("inside")
    assert not getattr(info.value, "__notes__", None)
    with profiler.capture():  # the failed block closed
        pass


@pytest.mark.gpu
def test_without_a_current_context_the_remedy_is_named(dev):
    # A new thread has no current context (contexts are current per thread).
    errors: dict[str, BaseException] = {}

    def run():
        for name, call in (
            ("start", profiler.start),
            ("stop", profiler.stop),
            ("capture", lambda: profiler.capture().__enter__()),
        ):
            try:
                call()
            except BaseException as exc:
                errors[name] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert sorted(errors) == ["capture", "start", "stop"]
    for name, exc in errors.items():
        assert isinstance(exc, CUDAError), (name, exc)
        assert exc.name == "CUDA_ERROR_INVALID_CONTEXT"
        api = "cuProfilerStop" if name == "stop" else "cuProfilerStart"
        assert str(exc).startswith(f"{api}: CUDA_ERROR_INVALID_CONTEXT")
        assert "perhaps you forgot to call Device.set_current()?" in str(exc)
    with profiler.capture():  # the refused capture left nothing open here
        pass


NSYS_APP = """
from cuda_core import Device, profiler
dev = Device()
dev.set_current()
with profiler.range("cuda_core before capture"):
    dev.create_stream().sync()
with profiler.capture():
    with profiler.range("cuda_core inside capture", color="red", domain="cuda_core_test"):
        dev.create_stream().sync()
    profiler.mark("cuda_core mark inside capture")
with profiler.range("cuda_core after capture"):
    dev.create_stream().sync()
"""


def _nvtx_texts(db: str) -> list[str]:
    """The names of the NVTX events in an ``nsys export --type=sqlite`` file (plain text, or a
    registered string through ``textId``)."""
    con = sqlite3.connect(db)
    try:
        cols = {row[1] for row in con.execute("PRAGMA table_info(NVTX_EVENTS)")}
        if "textId" in cols:
            rows = con.execute(
                "SELECT COALESCE(e.text, s.value) FROM NVTX_EVENTS e "
                "LEFT JOIN StringIds s ON e.textId = s.id"
            )
        else:
            rows = con.execute("SELECT text FROM NVTX_EVENTS")
        return sorted({r[0] for r in rows if r[0]})
    finally:
        con.close()


@pytest.mark.gpu
def test_under_nsys_the_captured_block_shows_its_named_ranges(tmp_path):
    pytest.importorskip("nvtx", reason="the nvtx package (the test extra) is not installed")
    nsys = shutil.which("nsys")
    if nsys is None:
        pytest.skip("Nsight Systems (nsys) is not installed on this machine")
    rep = tmp_path / "profile"
    profile = [
        nsys, "profile", "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none",
        "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
        f"--output={rep}", "--force-overwrite=true",
        sys.executable, "-c", textwrap.dedent(NSYS_APP),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_CORE_NVTX", "NVTX_DISABLE")}
    proc = subprocess.run(profile, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = tmp_path / "profile.sqlite"
    export = [nsys, "export", "--type=sqlite", f"--output={db}", f"{rep}.nsys-rep"]
    proc = subprocess.run(export, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    texts = _nvtx_texts(str(db))
    ours = [t for t in texts if t.startswith("cuda_core ")]
    assert ours == ["cuda_core inside capture", "cuda_core mark inside capture"], json.dumps(texts)
