"""Builds for the stub-driver runs: the stub library and the native module, compiled on the spot.

Shared by the CPU-tier tests (``tests/handles/test_native_stub.py``,
``tests/test_launcher_fastpath.py``) and ``benchmarks/bench_stub_launch.py``. Every output goes
into the folder the caller gives (a temporary one).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sysconfig
from collections.abc import Sequence
from pathlib import Path

__all__ = ["build_native", "build_shared", "build_stub", "compiler"]

HERE = Path(__file__).resolve().parent
CSRC = HERE.parents[2] / "cuda_core" / "_handles" / "_csrc"
STUB_SOURCE = HERE / "stub_cuda.c"
NATIVE_FLAGS = ("-std=c11", "-Wall", "-Werror", "-Wno-missing-field-initializers")


def compiler() -> str | None:
    """The C compiler: ``$CC`` where set (its first word), else ``cc``, else ``gcc``; ``None``
    where there is none."""
    cc = os.environ.get("CC", "").strip()
    if cc:
        return shutil.which(shlex.split(cc)[0])
    return shutil.which("cc") or shutil.which("gcc")


def build_shared(cc: str, sources: Sequence[Path | str], out: Path, flags: Sequence[str]) -> Path:
    """``cc -fPIC -shared flags sources -o out``; ``RuntimeError`` with the compiler's output
    when it fails."""
    cmd = [cc, "-fPIC", "-shared", *flags, *(str(s) for s in sources), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return out


def build_stub(cc: str, out_dir: Path, opt: str = "-O1") -> Path:
    """The stub driver library (``stub_cuda.c``) in ``out_dir``."""
    return build_shared(
        cc, [STUB_SOURCE], out_dir / "libstub_cuda.so", ["-std=c11", "-Wall", "-Werror", opt, "-g"]
    )


def build_native(cc: str, out_dir: Path, extra: Sequence[str] = (), opt: str = "-O1") -> Path:
    """``cuda_core._handles._native`` from the current sources, in ``out_dir``."""
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    sources = sorted(CSRC.glob("*.c"))
    flags = [*NATIVE_FLAGS, opt, "-g", *extra, f"-I{include}"]
    return build_shared(cc, sources, out_dir / f"_native{suffix}", flags)
