"""Build hook for the optional compiled accelerator (everything else is in pyproject.toml).

``cuda_core._fastpath`` is a small C module that calls a few driver entry points directly
(see its source for why). It is optional: where no C compiler or Python headers are found the
build warns and cuda_core runs on its pure Python path.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("cuda_core._fastpath", ["cuda_core/_fastpath.c"], optional=True),
    ]
)
