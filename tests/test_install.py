"""A base install without the compiler libraries: the error names the library, its user and the fix.

Each case runs in a subprocess whose ``cuda.pathfinder`` loader is made to fail for the named
libraries before anything loads them, as on a machine where ``pip install cudacore`` was run
without the ``[cu13]`` extra.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_core._compat import BINDINGS_MAJOR
from tests.helpers import gpu_skip_reason

ROOT = Path(__file__).resolve().parent.parent
REMEDY = f'pip install "cudacore[cu{BINDINGS_MAJOR}]"'

_HIDE = """
import cuda.pathfinder as _pf
_real = _pf.load_nvidia_dynamic_lib
def _fake(name, _missing={missing!r}):
    if name in _missing:
        raise _pf.DynamicLibNotFoundError(f"Failure finding lib{{name}}.so: simulated by the test")
    return _real(name)
_pf.load_nvidia_dynamic_lib = _fake
"""


def run_without(
    missing: tuple[str, ...], body: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run *body* in a fresh interpreter where the libraries in *missing* cannot be loaded."""
    script = _HIDE.format(missing=missing) + textwrap.dedent(body)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


_CATCH = """
import json
from cuda.pathfinder import DynamicLibNotFoundError
from cuda_core import CompilerLibraryNotFoundError, CUDAError, Program, ProgramOptions
def report(fn):
    try:
        fn()
    except CompilerLibraryNotFoundError as exc:
        print(json.dumps({{"msg": str(exc), "library": exc.library, "remedy": exc.remedy,
                           "legacy": isinstance(exc, DynamicLibNotFoundError) and isinstance(exc, RuntimeError),
                           "cuda_error": isinstance(exc, CUDAError)}}))
    else:
        print(json.dumps(None))
report(lambda: {call})
"""


def _caught(missing: tuple[str, ...], call: str) -> dict:
    proc = run_without(missing, _CATCH.format(call=call))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out is not None, "no CompilerLibraryNotFoundError was raised"
    return out


def test_missing_nvrtc_names_library_user_and_remedy():
    out = _caught(
        ("nvrtc",),
        'Program("__global__ void k(){}", "c++", ProgramOptions(arch="sm_90")).compile("ptx")',
    )
    assert REMEDY in out["msg"]
    assert "NVRTC" in out["msg"] and f"libnvrtc.so.{BINDINGS_MAJOR}" in out["msg"]
    assert "Program.compile() of C++ code" in out["msg"]
    assert out["library"].startswith("NVRTC")
    assert out["remedy"] == REMEDY
    assert out["legacy"], "must still be caught by handlers of DynamicLibNotFoundError/RuntimeError"
    assert out["cuda_error"]


def test_missing_nvvm_names_library_user_and_remedy():
    out = _caught(("nvvm",), 'Program("x", "nvvm", ProgramOptions(arch="sm_90")).compile("ptx")')
    assert REMEDY in out["msg"]
    assert "libNVVM" in out["msg"] and "Program.compile() of NVVM IR" in out["msg"]


def test_missing_nvjitlink_and_driver_names_remedy_and_is_a_driver_error():
    if gpu_skip_reason() is None:
        pytest.skip("with a driver, linking falls back to the driver's linker")
    body = """
    import warnings
    from cuda_core import CompilerLibraryNotFoundError, CUDADriverNotFoundError, Linker, LinkerOptions
    from cuda_core import Program, ProgramOptions
    ptx = Program('extern "C" __global__ void k(){}', "c++",
                  ProgramOptions(arch="sm_90", relocatable_device_code=True)).compile("ptx")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "linking with the driver" warning before the error
        try:
            Linker(ptx, options=LinkerOptions(arch="sm_90")).link("cubin")
        except CompilerLibraryNotFoundError as exc:
            assert isinstance(exc, CUDADriverNotFoundError)
            print(exc)
    """
    proc = run_without(("nvJitLink",), body)
    assert proc.returncode == 0, proc.stderr
    assert REMEDY in proc.stdout
    assert "nvJitLink" in proc.stdout and "Linker.link()" in proc.stdout


def test_error_pickles_with_its_attributes():
    import pickle

    from cuda_core import CompilerLibraryNotFoundError

    err = CompilerLibraryNotFoundError(
        "NVRTC", "libnvrtc.so.13", "Program.compile()", REMEDY, "gone"
    )
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is CompilerLibraryNotFoundError
    assert str(back) == str(err)
    assert (back.library, back.needed_by, back.remedy) == ("NVRTC", "Program.compile()", REMEDY)


def test_ci_runs_the_readme_commands():
    """.ci/run installs with each of the README's install commands and runs its test command."""
    import re

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    section = re.search(r"## Set up\n(.*?)\n## ", readme, re.S)
    assert section is not None, "README.md has no '## Set up' section"
    blocks = re.findall(r"```bash\n(.*?)```", section.group(1), re.S)
    lines = [[x for x in b.splitlines() if x.strip()] for b in blocks]
    # One command per block: the two installs cannot be pasted together (issue 23).
    assert [len(x) for x in lines] == [1, 1, 1], lines
    commands = [x[0].split("#", 1)[0].strip() for x in lines]
    assert commands == [
        'pip install -e ".[cu13,test]"',
        'pip install -e ".[cu12,test]"',
        "python -m pytest",
    ]
    ci = (root / ".ci" / "run").read_text()
    for cmd in commands[:2]:
        assert f"python -m pip install --quiet -e {cmd.removeprefix('pip install -e ')}" in ci, cmd
    assert "python -m pytest -p no:cacheprovider" in ci
    assert ci.count('run_pytest "cu13') == 2 and ci.count('run_pytest "cu12') == 2


def test_the_install_page_gives_one_command_per_block():
    """docs/install.rst repeats the README's set-up: each literal block holds one command, so
    the two installs cannot be pasted together either (issue 23)."""
    import re

    page = (Path(__file__).resolve().parent.parent / "docs" / "install.rst").read_text()
    section = page.split("Installing\n----------\n", 1)[1].split("\n\n\n", 1)[0]
    blocks = re.findall(r"::\n\n((?:    .*\n)+)", section)
    commands = [[x.strip() for x in b.splitlines() if x.strip()] for b in blocks]
    assert commands[:3] == [
        ['pip install -e ".[cu13,test]"'],
        ['pip install -e ".[cu12,test]"'],
        ["python -m pytest"],
    ]


def test_the_tool_tests_are_out_of_the_default_run_and_in_ci_once():
    """The tests of tools/ are marked ``tools``, deselected by default, and run once by CI."""
    root = Path(__file__).resolve().parent.parent
    pyproject = (root / "pyproject.toml").read_text()
    assert "addopts = \"-rfE -m 'not tools'\"" in pyproject
    for name in ("test_peer_tests_tool.py", "test_peer_examples_tool.py"):
        assert "\npytestmark = pytest.mark.tools\n" in (root / "tests" / name).read_text(), name
    ci = (root / ".ci" / "run").read_text()
    assert ci.count("python -m pytest -p no:cacheprovider -m tools") == 1


def test_system_versions_of_a_missing_compiler_library_name_the_install_command():
    # system.get_nvrtc_version() and its kin on a base install: the error compiling gives (a
    # DynamicLibNotFoundError and a RuntimeError still), not the loader's bare one.
    proc = run_without(
        ("nvrtc", "nvJitLink", "nvvm"),
        """
        from cuda.pathfinder import DynamicLibNotFoundError
        from cuda_core import CompilerLibraryNotFoundError, system
        for name in ("nvrtc", "nvjitlink", "nvvm"):
            try:
                getattr(system, f"get_{name}_version")()
            except CompilerLibraryNotFoundError as exc:
                assert isinstance(exc, DynamicLibNotFoundError) and isinstance(exc, RuntimeError)
                print(name, exc.needed_by, "|", exc.remedy)
            else:
                print(name, "no error")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines == [
        f"{name} system.get_{name}_version() | {REMEDY}" for name in ("nvrtc", "nvjitlink", "nvvm")
    ], proc.stdout
