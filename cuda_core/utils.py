"""Utilities that sit beside the core API, under the names NVIDIA's ``cuda.core.utils`` uses.

- :class:`StridedMemoryView` and :func:`args_viewable_as_strided_memory`: zero-copy views of
  arrays from NumPy, CuPy, PyTorch and any DLPack or ``__cuda_array_interface__`` producer.
- Batched memory operations: :func:`copy_batch` with :class:`CopyOptions`,
  :class:`MemcpySrcAccessOrder`, :class:`MemcpyOverlapMode`; :func:`prefetch_batch`,
  :func:`discard_batch`, :func:`discard_prefetch_batch` on managed memory.
- The explicit compile caches: :class:`InMemoryProgramCache`, :class:`FileStreamProgramCache`,
  :func:`make_program_cache_key`, and the default cache that ``Program.compile`` uses.
"""

from __future__ import annotations

from ._compile._cache import FileStreamProgramCache as FileStreamProgramCache
from ._compile._cache import InMemoryProgramCache as InMemoryProgramCache
from ._compile._cache import ProgramCache as ProgramCache
from ._compile._cache import ProgramCacheResource as ProgramCacheResource
from ._compile._cache import get_default_program_cache as get_default_program_cache
from ._compile._cache import make_program_cache_key as make_program_cache_key
from ._interop._memoryview import StridedMemoryView as StridedMemoryView
from ._interop._view_args import args_viewable_as_strided_memory as args_viewable_as_strided_memory
from ._memory._copy import CopyOptions as CopyOptions
from ._memory._copy import MemcpyOverlapMode as MemcpyOverlapMode
from ._memory._copy import MemcpySrcAccessOrder as MemcpySrcAccessOrder
from ._memory._copy import copy_batch as copy_batch
from ._memory._copy import discard_batch as discard_batch
from ._memory._copy import discard_prefetch_batch as discard_prefetch_batch
from ._memory._copy import prefetch_batch as prefetch_batch

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
