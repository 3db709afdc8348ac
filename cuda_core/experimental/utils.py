"""``cuda_core.experimental.utils``: :mod:`cuda_core.utils` under its pre-1.0 import path.

Code written for ``cuda.core.experimental`` imports its views from here
(``from cuda.core.experimental.utils import StridedMemoryView``); the names are the same
objects as in :mod:`cuda_core.utils`.
"""

from __future__ import annotations

from cuda_core.utils import *  # noqa: F403
from cuda_core.utils import __all__ as __all__
