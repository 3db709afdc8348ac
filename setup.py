"""Build hook for the optional native backend (everything else is in pyproject.toml).

``cuda_core._handles._native`` is the native backend of cuda_core's handle layer, built from the C files
in ``cuda_core/_handles/_csrc`` (see ``native.h`` there). It is optional: where no C compiler or Python
headers are found the build warns and cuda_core runs its pure-Python backend
(``cuda_core/_handles/_pure.py``; ``CUDA_CORE_BACKEND=python`` selects it where the native one is
built). Set ``CUDA_CORE_REQUIRE_NATIVE=1`` to make a failed build an error (CI does, so a broken
native backend cannot pass unnoticed).
"""

import glob
import os

from setuptools import Extension, setup

_required = os.environ.get("CUDA_CORE_REQUIRE_NATIVE", "0").strip().lower() not in (
    "",
    "0",
    "false",
    "no",
)

setup(
    ext_modules=[
        Extension(
            "cuda_core._handles._native",
            sorted(glob.glob(os.path.join("cuda_core", "_handles", "_csrc", "*.c"))),
            depends=sorted(glob.glob(os.path.join("cuda_core", "_handles", "_csrc", "*.h"))),
            extra_compile_args=[
                "-std=c11",
                "-Wall",
                "-Wno-missing-field-initializers",
                # A function used without its header is a crash waiting (an int for a pointer).
                "-Werror=implicit-function-declaration",
                "-Werror=int-conversion",
            ],
            optional=not _required,
        ),
    ]
)
