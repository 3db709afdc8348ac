"""``cuda_core.experimental.utils``: :mod:`cuda_core.utils` under its pre-1.0 import path.

Code written for ``cuda.core.experimental`` imports its views from here
(``from cuda.core.experimental.utils import StridedMemoryView``); the names are those of
``cuda_core.utils.__all__`` (star-imported, so the list lives there) and the same objects.
"""

from __future__ import annotations

import cuda_core.utils as _core_utils
from cuda_core.utils import *  # noqa: F403  (the names of cuda_core.utils.__all__)

__all__: list[str] = []
__all__ += _core_utils.__all__
