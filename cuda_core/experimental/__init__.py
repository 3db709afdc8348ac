"""Compatibility namespace for code written against ``cuda.core.experimental``.

NVIDIA's ``cuda.core`` kept its API under ``cuda.core.experimental`` before 1.0, and many
examples still import from there. Everything here is the same object as in :mod:`cuda_core`,
so such code runs after changing ``cuda.core.experimental`` to ``cuda_core.experimental``::

    from cuda_core.experimental import Device, LaunchConfig, Program, launch, system
    from cuda_core.experimental.utils import StridedMemoryView
"""

from __future__ import annotations

from cuda_core import *
from cuda_core import __all__ as _core_all
from cuda_core import __version__ as __version__
from cuda_core import system as system

from . import utils as utils

__all__ = sorted({*_core_all, "system", "utils"})
