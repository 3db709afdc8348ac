"""The test session never touches the user's compile cache (``~/.cache/cuda_core``)."""

from __future__ import annotations

import os
import subprocess
import sys

from cuda_core import Program, ProgramOptions
from cuda_core._compile._cache_paths import disk_cache_dir, stamp_dir
from tests.helpers import user_cache_dir, user_cache_snapshot


def test_session_compiles_into_its_temporary_cache(session_cache_dir):
    assert os.environ["CUDA_CORE_CACHE_DIR"] == session_cache_dir
    assert not os.path.abspath(session_cache_dir).startswith(user_cache_dir())
    assert disk_cache_dir() == os.path.abspath(session_cache_dir)
    stamps = stamp_dir()
    assert stamps is not None and stamps.startswith(os.path.abspath(session_cache_dir))


def test_compiling_here_and_in_a_subprocess_leaves_the_user_cache_alone(session_cache_dir):
    before = user_cache_snapshot()
    Program('extern "C" __global__ void hygiene(){}', options=ProgramOptions(arch="sm_90")).compile(
        "ptx"
    )
    code = (
        "from cuda_core import Program, ProgramOptions\n"
        "Program('extern \"C\" __global__ void hygiene2(){}', options=ProgramOptions(arch='sm_90')).compile('ptx')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert user_cache_snapshot() == before, "a compile wrote into the user's compile cache"
    assert os.listdir(os.path.join(session_cache_dir, "entries"))
