"""Device memory: Buffer and the memory resources (one file per resource).

``default_memory_resource(device)`` (not public) gives a :class:`Device` its starting resource.
"""

from __future__ import annotations

from . import (
    _buffer,
    _copy,
    _device_resource,
    _graph_resource,
    _ipc,
    _legacy,
    _managed,
    _managed_buffer,
    _pinned,
    _pool,
    _resource,
    _sync,
    _vmm,
)
from ._buffer import *  # noqa: F403
from ._copy import *  # noqa: F403
from ._device_resource import *  # noqa: F403
from ._device_resource import default_memory_resource
from ._graph_resource import *  # noqa: F403
from ._ipc import *  # noqa: F403
from ._legacy import *  # noqa: F403
from ._managed import *  # noqa: F403
from ._managed_buffer import *  # noqa: F403
from ._pinned import *  # noqa: F403
from ._pool import *  # noqa: F403
from ._resource import *  # noqa: F403
from ._sync import *  # noqa: F403
from ._vmm import *  # noqa: F403

__all__ = sorted(
    {
        *_buffer.__all__,
        *_copy.__all__,
        *_device_resource.__all__,
        *_graph_resource.__all__,
        *_ipc.__all__,
        *_legacy.__all__,
        *_managed.__all__,
        *_managed_buffer.__all__,
        *_pinned.__all__,
        *_pool.__all__,
        *_resource.__all__,
        *_sync.__all__,
        *_vmm.__all__,
    }
)

_ = default_memory_resource
