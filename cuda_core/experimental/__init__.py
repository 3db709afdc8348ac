"""Compatibility namespace for code written against ``cuda.core.experimental``.

NVIDIA's ``cuda.core`` kept its API under ``cuda.core.experimental`` before 1.0 (from 0.5 with
a ``DeprecationWarning`` on import; 1.0 removed it). Many examples still import from there, so
cuda_core keeps it, warning as ``cuda.core`` did while it had it. Everything here is the same
object as in :mod:`cuda_core`, so such code runs after changing ``cuda.core.experimental`` to
``cuda_core.experimental``::

    from cuda_core.experimental import Device, LaunchConfig, Program, launch, system
    from cuda_core.experimental.utils import StridedMemoryView

``cuda_core.experimental._utils`` is :mod:`cuda_core._utils`, for code that falls back to
``cuda.core.experimental._utils.cuda_utils`` (see :mod:`cuda_core._utils.cuda_utils`).

The names are those of ``cuda_core.__all__`` (one list, star-imported: type checkers read it
from there) plus ``system`` and ``utils``.
"""

from __future__ import annotations

import sys as _sys
import warnings as _warnings

import cuda_core as _cuda_core
import cuda_core._utils.cuda_utils as _cuda_utils
from cuda_core import *  # noqa: F403  (the names of cuda_core.__all__)
from cuda_core import __version__ as __version__
from cuda_core import _utils as _utils
from cuda_core import system as system

from . import utils as utils

__all__ = ["system", "utils"]
__all__ += _cuda_core.__all__

_sys.modules[f"{__name__}._utils"] = _utils
_sys.modules[f"{__name__}._utils.cuda_utils"] = _cuda_utils

# cuda.core's words (0.5 to 0.7), under this package's name: a filter written for them
# ("The cuda.core.experimental namespace is deprecated", a regex) matches this one too.
_warnings.warn(
    "The cuda_core.experimental namespace is deprecated. Please import directly from cuda_core "
    "instead. For example, use 'from cuda_core import Device' instead of "
    "'from cuda_core.experimental import Device'. (cuda.core 1.0 removed "
    "cuda.core.experimental; cuda_core keeps it, with the same objects, for code written "
    "before that.)",
    DeprecationWarning,
    stacklevel=2,
)
