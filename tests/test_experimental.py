"""``cuda_core.experimental``: code written for ``cuda.core.experimental`` imports from here.

Pre-1.0 ``cuda.core`` examples import ``from cuda.core.experimental import ...`` and
``from cuda.core.experimental.utils import StridedMemoryView, ...``; both forms must work after
the import line names ``cuda_core``, with the very objects of :mod:`cuda_core`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cuda_core
import cuda_core.experimental as exp
import cuda_core.utils

ROOT = Path(__file__).resolve().parent.parent


def test_every_name_is_the_cuda_core_object():
    for name in cuda_core.__all__:
        assert getattr(exp, name) is getattr(cuda_core, name), name
    assert exp.system is cuda_core.system
    assert set(cuda_core.__all__) | {"system", "utils"} == set(exp.__all__)


def test_utils_is_a_submodule_with_the_same_names():
    import cuda_core.experimental.utils as exp_utils

    assert exp.utils is exp_utils
    assert exp_utils.__all__ == cuda_core.utils.__all__
    for name in cuda_core.utils.__all__:
        assert getattr(exp_utils, name) is getattr(cuda_core.utils, name), name


def test_pre_1_0_import_lines_work_in_a_fresh_interpreter():
    # The form an example uses first thing, before anything else imported cuda_core.
    code = (
        "from cuda_core.experimental import Device, LaunchConfig, Program, launch, system\n"
        "from cuda_core.experimental.utils import StridedMemoryView, args_viewable_as_strided_memory\n"
        "import cuda_core.experimental.utils as u\n"
        "import numpy as np\n"
        "v = StridedMemoryView.from_array_interface(np.arange(6, dtype=np.int16))\n"
        "print(v.shape, u.StridedMemoryView is StridedMemoryView)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(6,) True"


def test_strided_memory_view_is_also_at_the_top_level():
    # Later cuda.core releases export it from cuda.core itself (the TMA examples import it so).
    assert cuda_core.StridedMemoryView is cuda_core.utils.StridedMemoryView
    assert "StridedMemoryView" in cuda_core.__all__
