"""Compatibility namespace for code written against ``cuda.core.experimental``.

NVIDIA's ``cuda.core`` kept its API under ``cuda.core.experimental`` before 1.0, and many
examples still import from there. Everything here is the same object as in :mod:`cuda_core`,
so such code runs after changing ``cuda.core.experimental`` to ``cuda_core.experimental``::

    from cuda_core.experimental import Device, LaunchConfig, Program, launch, system
"""

from __future__ import annotations

import importlib
import importlib.util

from cuda_core import *
from cuda_core import __all__ as _core_all
from cuda_core import __version__ as __version__
from cuda_core import system as system

__all__ = sorted({*_core_all, "system"})

if importlib.util.find_spec("cuda_core.utils") is not None:
    utils = importlib.import_module("cuda_core.utils")

    __all__ = sorted({*__all__, "utils"})
