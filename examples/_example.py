"""Shared by the example scripts: what each needs, and how it says that something is missing.

An example either checks its result and exits 0 (1 on a wrong result), or exits with
:data:`MISSING` (3) after printing ONE line ``missing requirement [<key>]: <what> (<remedy>)``,
where ``<key>`` is ``gpu``, ``2gpus``, ``cc90``, ``cupy``, ``torch``, ``nccl`` or ``compiler``
(NVRTC or nvJitLink, which a base ``pip install cudacore`` leaves out). Each script ends with
``run_main(main)``, which turns a missing compiler library into that line. ``tests/test_examples.py``
turns the line into a skip where the requirement is really absent and a failure where it is not.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import NoReturn

MISSING = 3


def _pip(name: str) -> str:
    """The pip package of *name*; CuPy's wheel is built per CUDA major, that of cuda-bindings."""
    if name == "cupy":
        from cuda_core import system

        return f"cupy-cuda{system.get_bindings_version().split('.')[0]}x"
    return name


def missing(key: str, what: str) -> NoReturn:
    """Print the one line naming the missing requirement and exit with :data:`MISSING`."""
    print(f"missing requirement [{key}]: {what}")
    sys.exit(MISSING)


def need_gpu(count: int = 1, min_arch: int | None = None):
    """Device 0 (not yet current), or exit naming what is missing: a GPU, more GPUs, a newer GPU."""
    from cuda_core import CUDAError, Device, system

    try:
        n = system.get_num_devices()
    except CUDAError as exc:
        missing("gpu", f"an NVIDIA GPU and driver ({exc.error_name})")
    if n == 0:
        missing("gpu", "an NVIDIA GPU (the driver reports none)")
    if n < count:
        missing(f"{count}gpus", f"{count} GPUs (this machine has {n})")
    dev = Device(0)
    if min_arch is not None and int(dev.arch) < min_arch:
        missing(f"cc{min_arch}", f"a GPU of compute capability {min_arch // 10}.{min_arch % 10} or newer "
                                 f"(device 0 is sm_{dev.arch})")  # fmt: skip
    return dev


def need_module(name: str) -> ModuleType:
    """Import *name* (``"cupy"``, ``"torch"``) or exit naming it and how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(name, f"{name} (pip install {_pip(name)})")


def need_nccl() -> ModuleType:
    """``cuda_core.nccl`` with nccl4py and the NCCL library loadable, or exit naming the remedy."""
    from cuda_core import nccl

    try:
        nccl.library_info()
    except nccl.NCCLNotFoundError as exc:
        missing("nccl", f"nccl4py and the NCCL library ({exc.remedy})")
    return nccl


def run_main(main: Callable[[], int]) -> NoReturn:
    """Run an example's ``main()`` and exit with its status.

    A compiler library this install lacks (``CompilerLibraryNotFoundError``: NVRTC or nvJitLink
    after ``pip install cudacore`` without the ``[cu13]`` or ``[cu12]`` extra) ends the run with
    the one ``missing requirement [compiler]`` line naming the install command, not a traceback;
    so does a framework's own failure to find one (CuPy's NVRTC) where cuda_core finds none.
    """
    from cuda_core import CompilerLibraryNotFoundError, LinkerError

    try:
        status = main()
    except CompilerLibraryNotFoundError as exc:
        missing("compiler", f"{exc.library} was not found ({exc.remedy})")
    except LinkerError as exc:
        if exc.name != "LTO_UNAVAILABLE":
            raise
        # NVRTC without nvJitLink: the driver's linker links, but not LTO-IR.
        missing("compiler", exc.explanation)
    except Exception as exc:
        if type(exc).__name__ != "DynamicLibNotFoundError":
            raise
        _missing_compiler_of_a_framework()
        raise
    sys.exit(status)


def _missing_compiler_of_a_framework() -> None:
    """A framework (CuPy compiles its kernels with NVRTC) found no compiler library: where
    cuda_core finds none either, the same one line names the install that brings them."""
    from cuda_core import CompilerLibraryNotFoundError, system

    for probe in (system.get_nvrtc_version, system.get_nvjitlink_version):
        try:
            probe()
        except CompilerLibraryNotFoundError as ours:
            missing("compiler", f"{ours.library} was not found ({ours.remedy})")
