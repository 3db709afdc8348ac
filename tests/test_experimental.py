"""``cuda_core.experimental``: code written for ``cuda.core.experimental`` imports from here.

Pre-1.0 ``cuda.core`` examples import ``from cuda.core.experimental import ...`` and
``from cuda.core.experimental.utils import StridedMemoryView, ...``; both forms must work after
the import line names ``cuda_core``, with the very objects of :mod:`cuda_core`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import cuda_core
import cuda_core.utils

with warnings.catch_warnings():  # its warning is checked in a fresh interpreter below
    warnings.simplefilter("ignore", DeprecationWarning)
    import cuda_core.experimental as exp

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


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *code.split("\0")], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_importing_it_warns_deprecation_once_at_the_importer():
    # cuda.core 0.5 to 0.7 warned so on import; 1.0 removed the namespace (ModuleNotFoundError).
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    import cuda_core.experimental\n"
        "    import cuda_core.experimental.utils\n"
        "    from cuda_core.experimental import Device\n"
        "print(len(w), w[0].category.__name__, w[0].filename)\n"
        "print(str(w[0].message))\n"
    )
    proc = _fresh(f"-c\0{code}")
    assert proc.returncode == 0, proc.stderr
    first, message = proc.stdout.splitlines()
    assert first == "1 DeprecationWarning <string>"
    # cuda.core's words, so a filter written for them matches ('.' matches '_'), and what to
    # import instead.
    assert re.match("The cuda.core.experimental namespace is deprecated", message), message
    assert message.startswith(
        "The cuda_core.experimental namespace is deprecated. Please import directly from "
        "cuda_core instead. For example, use 'from cuda_core import Device' instead of "
        "'from cuda_core.experimental import Device'."
    ), message


def test_a_filter_written_for_cuda_cores_warning_silences_it():
    code = (
        "import warnings\n"
        "warnings.filterwarnings('error')\n"
        "warnings.filterwarnings('ignore', message='The cuda.core.experimental namespace is "
        "deprecated', category=DeprecationWarning)\n"
        "from cuda_core.experimental import Device\n"
        "print('ok')\n"
    )
    proc = _fresh(f"-c\0{code}")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_importing_cuda_core_alone_does_not_warn():
    proc = _fresh("-W\0error\0-c\0import cuda_core, cuda_core.utils; print('ok')")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_utils_fallback_path_of_cuda_core_helpers():
    # Code outside cuda.core falls back to cuda.core.experimental._utils.cuda_utils.
    from cuda_core._utils import cuda_utils

    code = (
        "from cuda_core.experimental._utils.cuda_utils import handle_return, CUDAError\n"
        "import cuda_core.experimental._utils.cuda_utils as m\n"
        "import cuda_core._utils.cuda_utils as n\n"
        "print(m is n, CUDAError is n.CUDAError)\n"
    )
    proc = _fresh(f"-W\0ignore::DeprecationWarning\0-c\0{code}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True True"
    assert exp._utils.cuda_utils is cuda_utils
