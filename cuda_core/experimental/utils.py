"""``cuda_core.experimental.utils``: :mod:`cuda_core.utils` under its pre-1.0 import path.

Code written for ``cuda.core.experimental`` imports its views from here
(``from cuda.core.experimental.utils import StridedMemoryView``); the names are the same
objects as in :mod:`cuda_core.utils`.
"""

from __future__ import annotations

from cuda_core.utils import CopyOptions as CopyOptions
from cuda_core.utils import FileStreamProgramCache as FileStreamProgramCache
from cuda_core.utils import InMemoryProgramCache as InMemoryProgramCache
from cuda_core.utils import MemcpyOverlapMode as MemcpyOverlapMode
from cuda_core.utils import MemcpySrcAccessOrder as MemcpySrcAccessOrder
from cuda_core.utils import ProgramCache as ProgramCache
from cuda_core.utils import ProgramCacheResource as ProgramCacheResource
from cuda_core.utils import StridedMemoryView as StridedMemoryView
from cuda_core.utils import args_viewable_as_strided_memory as args_viewable_as_strided_memory
from cuda_core.utils import copy_batch as copy_batch
from cuda_core.utils import discard_batch as discard_batch
from cuda_core.utils import discard_prefetch_batch as discard_prefetch_batch
from cuda_core.utils import get_default_program_cache as get_default_program_cache
from cuda_core.utils import make_program_cache_key as make_program_cache_key
from cuda_core.utils import prefetch_batch as prefetch_batch

__all__ = [
    "CopyOptions",
    "FileStreamProgramCache",
    "InMemoryProgramCache",
    "MemcpyOverlapMode",
    "MemcpySrcAccessOrder",
    "ProgramCache",
    "ProgramCacheResource",
    "StridedMemoryView",
    "args_viewable_as_strided_memory",
    "copy_batch",
    "discard_batch",
    "discard_prefetch_batch",
    "get_default_program_cache",
    "make_program_cache_key",
    "prefetch_batch",
]
