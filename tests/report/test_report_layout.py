"""``python -m cuda_core`` as it reads (issue 23): sections of aligned facts within 100 columns,
one verdict each; a base install and a mix of CUDA majors reported as what they are; bad flags
refused before anything runs; :func:`cuda_core.is_available`."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

import cuda_core
from cuda_core import Linker, LinkerOptions, ObjectCode
from cuda_core import __main__ as cli
from cuda_core._compat import BINDINGS_MAJOR
from cuda_core._compile import _libraries, _majors
from cuda_core._report import _environment, _text
from tests.helpers import gpu_skip_reason, report_fails_the_mix
from tests.test_install import run_without

_CU13 = {
    "cuda-toolkit": "13.5.0",
    "nvidia-cuda-nvrtc": "13.5.37",
    "nvidia-nvjitlink": "13.5.37",
    "nvidia-nvvm": "13.5.37",
    "nvidia-cufile": "1.20.0.107",
}
_CU12 = {
    "nvidia-cuda-nvrtc-cu12": "12.9.86",
    "nvidia-nvjitlink-cu12": "12.9.86",
    "nvidia-cuda-nvcc-cu12": "12.9.86",
}
_OTHERS = {"numpy": "2.4.6", "nvidia-cublas": "13.1.0.3"}  # not compiler wheels: never named


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cuda_core", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def info() -> dict:
    return _environment.collect()


def test_every_line_fits_100_columns_and_each_section_ends_in_one_verdict():
    proc = _run()
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= 100, max(lines, key=len)
    titles = ["Install", "Driver and GPUs", "Frameworks", "Self-check"]
    assert [ln for ln in lines if ln in titles] == titles
    for title in titles:
        body = lines[lines.index(title) + 1 :]
        body = body[: next(i for i, ln in enumerate([*body, ""]) if not ln.strip())]
        assert body[-1].startswith("  verdict          "), (title, body)
        assert sum(ln.startswith("  verdict ") for ln in body) == 1
    assert lines[-1] in ("OK: a setup the README documents",) or lines[-1].startswith("FAILED in: ")


def test_a_bad_flag_is_refused_before_anything_runs():
    proc = _run("--arch", "foo")
    assert proc.returncode == 2
    assert proc.stdout == ""  # no report printed first
    assert "argument --arch: arch must be of the form" in proc.stderr
    assert "(got 'foo')" in proc.stderr


def test_long_values_wrap_under_their_column_and_commands_continue_with_a_backslash():
    lines = _text.fact("NVIDIA driver", "word " * 60)
    assert len(lines) > 2 and max(map(len, lines)) <= 100
    assert lines[0].startswith("  NVIDIA driver    word ")
    assert all(ln.startswith(" " * 19 + "word") for ln in lines[1:])
    cmd = "pip uninstall -y " + " ".join(f"nvidia-package-number-{i}" for i in range(8))
    lines = _text.command(cmd)
    assert max(map(len, lines)) <= 100
    assert all(ln.endswith(" \\") for ln in lines[:-1]) and not lines[-1].endswith("\\")
    pasted = " ".join(ln.rstrip("\\").strip() for ln in lines)
    assert pasted == cmd


# -- a mix of CUDA majors ---------------------------------------------------------------------


def test_cuda_12_bindings_beside_cuda_13_wheels_is_a_harmful_mix_with_both_ways_out():
    mix = _majors.find_mix({**_CU13, **_CU12, **_OTHERS}, "12.9.10", 12)
    assert mix is not None and mix.harmful
    assert mix.other_major == 13
    text = mix.describe()
    assert "cuda-bindings 12.9.10 (CUDA 12)" in text and "CUDA 13 compiler wheels" in text
    assert "nvidia-cublas" not in text and "numpy" not in text
    # Keep 12: the 13 wheels go (cuFile's 1.x version goes with them), then the 12 extra.
    assert mix.keep(12) == (
        "pip uninstall -y cuda-toolkit nvidia-cuda-nvrtc nvidia-nvjitlink nvidia-nvvm "
        'nvidia-cufile && pip install "cudacore[cu12]"'
    )
    # Move to 13: the 13 extra (it replaces cuda-bindings), then the 12 wheels go.
    assert mix.keep(13) == (
        'pip install "cudacore[cu13]" && pip uninstall -y nvidia-cuda-nvrtc-cu12 '
        "nvidia-nvjitlink-cu12 nvidia-cuda-nvcc-cu12"
    )
    assert mix.keep(12) in mix.remedy() and mix.keep(13) in mix.remedy()


def test_cuda_13_bindings_beside_cuda_12_wheels_works_and_is_still_named():
    mix = _majors.find_mix({**_CU13, **_CU12}, "13.5.0", 13)
    assert mix is not None and not mix.harmful and mix.other_major == 12


@pytest.mark.parametrize(
    ("installed", "major"),
    [(_CU13, 13), (_CU12, 12), ({}, 13), ({}, 12), ({**_OTHERS, "nvidia-cufile": "1.2"}, 12)],
)
def test_one_major_is_no_mix(installed, major):
    assert _majors.find_mix(installed, f"{major}.0.0", major) is None


def test_the_first_compile_in_a_mix_names_the_mix_and_its_remedy(monkeypatch):
    mix = _majors.find_mix({**_CU13, **_CU12}, "12.9.10", 12)
    monkeypatch.setattr(_libraries, "mixed", lambda: mix)
    err = _libraries.library_not_found("nvrtc", "Program.compile() of C++ code")
    assert isinstance(err, cuda_core.CompilerLibraryNotFoundError)
    msg = str(err)
    assert "NVRTC (the CUDA C++ compiler) was not found, and Program.compile()" in msg
    assert mix.describe() in msg and mix.remedy() in msg
    assert err.remedy == mix.remedy()
    assert f'pip install "cudacore[cu{BINDINGS_MAJOR}]"' in msg  # each way out is a command


def test_the_report_fails_a_harmful_mix_and_sets_both_commands(info):
    mix = _majors.find_mix({**_CU13, **_CU12}, "12.9.10", 12)
    fake = copy.deepcopy(info)
    fake["pairing"]["bindings_major"] = 12
    fake["mixed_majors"] = {
        "bindings_major": 12,
        "other_major": 13,
        "harmful": True,
        "describe": mix.describe(),
        "keep": {"12": mix.keep(12), "13": mix.keep(13)},
    }
    lines = _text.format_report(fake)
    assert max(map(len, lines)) <= 100
    body = lines[lines.index("Install") + 1 :]
    assert body[body.index(f"  {'keep CUDA 12':<16} run:") + 1].startswith(
        " " * 19 + "pip uninstall"
    )
    ok, text = _text.section_verdicts(fake)["Install"]
    assert ok is False and "CUDA 12 and 13 wheels mixed" in text
    fake["mixed_majors"]["harmful"] = False
    assert _text.section_verdicts(fake)["Install"][0] is not False


def test_the_json_report_carries_the_mix(info):
    assert "mixed_majors" in info
    expected = _majors.mixed()
    assert (info["mixed_majors"] is None) is (expected is None)


# -- a base install ----------------------------------------------------------------------------


def test_the_hand_written_ptx_of_the_base_install_check_is_valid():
    # A base install's self-check loads this PTX (the driver compiles it); nvJitLink compiles
    # it here, so a typo cannot wait for a GPU to show.
    linker = Linker(ObjectCode.from_ptx(cli._PTX.encode()), options=LinkerOptions(arch="sm_90"))
    cubin = linker.link("cubin").code
    assert bytes(cubin).startswith(b"\x7fELF")


@report_fails_the_mix
def test_a_base_install_reports_what_it_can_do_and_exits_0():
    proc = run_without(
        ("nvrtc", "nvJitLink", "nvvm"),
        "import sys; from cuda_core.__main__ import main; sys.exit(main())",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "  verdict          base install: runs precompiled cubin and PTX, cannot compile" in out
    assert "FAILED" not in out
    if gpu_skip_reason() is None:
        assert "loaded as PTX, which the driver compiles" in out
        assert "verified 1000 results" in out


# -- is_available ------------------------------------------------------------------------------


def test_is_available_is_false_without_a_driver():
    if gpu_skip_reason() is None:
        pytest.skip("a GPU is present: test_is_available_with_a_gpu checks it")
    assert cuda_core.is_available() is False


def test_is_available_never_raises(monkeypatch):
    def broken() -> int:
        raise RuntimeError("the driver cannot answer")

    monkeypatch.setattr(_environment, "driver_version_int", broken)
    assert cuda_core.is_available() is False
    monkeypatch.setattr(_environment.system, "get_num_devices", lambda: 1)
    monkeypatch.setattr(_environment, "driver_version_int", lambda: BINDINGS_MAJOR * 1000)
    assert cuda_core.is_available() is True  # the check itself, with the driver's answers faked
    monkeypatch.setattr(_environment, "driver_version_int", lambda: (BINDINGS_MAJOR - 1) * 1000)
    assert cuda_core.is_available() is False  # a driver older than the bindings need


@pytest.mark.gpu
def test_is_available_with_a_gpu():
    if gpu_skip_reason() is not None:
        pytest.skip(gpu_skip_reason())
    assert cuda_core.is_available() is True
    proc = subprocess.run(
        [sys.executable, "-c", "import cuda_core; print(cuda_core.is_available())"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr
