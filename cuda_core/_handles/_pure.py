"""The pure-Python backend of the handle layer, on ``cuda.bindings``.

Its protocol, the one both backends implement, is code: :mod:`cuda_core._handles._protocol`.
The native backend (``cuda_core/_handles/_csrc``, module ``cuda_core._handles._native``) implements the
same names with the same behaviour; :mod:`cuda_core._handles._backend` chooses one at import.
Both run the whole test suite: ``tests/handles/test_handles.py`` runs the same cases against
each, and ``tests/handles/test_protocol.py`` checks that each provides every protocol member.

This module is the backend module: it states the module functions and re-exports the handle
classes, one module per concept:

* contexts, streams and events: :mod:`cuda_core._handles._pure_streams`
* allocations: :mod:`cuda_core._handles._pure_memory`
* launch configurations: :mod:`cuda_core._handles._pure_launch`
* interop readers (DLPack capsules, PyTorch tensors): :mod:`cuda_core._handles._pure_interop`
* ``HOST_COPY_FN``'s body: :mod:`cuda_core._handles._pure_host_copy`
* what they share (the error funnel, the current-context scope):
  :mod:`cuda_core._handles._pure_common`
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._compat import driver
from . import _pure_common, _pure_launch
from ._protocol import ABI_VERSION as ABI_VERSION
from ._pure_host_copy import HOST_COPY_ADDRESS as HOST_COPY_ADDRESS
from ._pure_interop import AMBIGUOUS as AMBIGUOUS
from ._pure_interop import ViewInfo as ViewInfo
from ._pure_interop import dlpack_view as dlpack_view
from ._pure_interop import read_capsule as read_capsule
from ._pure_interop import record_wait as record_wait
from ._pure_interop import set_order_event as set_order_event
from ._pure_interop import torch_setup as torch_setup
from ._pure_interop import torch_view as torch_view
from ._pure_launch import LaunchConfigHandle as LaunchConfigHandle
from ._pure_memory import Allocation as Allocation
from ._pure_memory import pool_allocate as pool_allocate
from ._pure_streams import ContextHandle as ContextHandle
from ._pure_streams import EventHandle as EventHandle
from ._pure_streams import StreamHandle as StreamHandle

__all__: list[str] = []  # private module


def bind(
    addresses: Any,
    make_error: Callable[[int, str], Exception],
    context_of: Callable[[int], ContextHandle],
) -> None:
    """Take the error funnel and the context registry (the entry points are ``cuda.bindings``'
    own here); ``addresses`` may hold ``cuLaunchKernelEx``, which launches are then called
    through with ``ctypes``."""
    _pure_common._make_error = make_error
    _pure_common._context_of = context_of
    addr = (addresses or {}).get("cuLaunchKernelEx", 0)
    _pure_launch._launch_fn = _pure_launch._LAUNCH_PROTO(addr) if addr else None


def ctx_get_device() -> int:
    """The current context's device ordinal (>= 0), or ``-status``."""
    err, dev = driver.cuCtxGetDevice()
    return -int(err) if err else int(dev)


def types_match(args: tuple[Any, ...], types: tuple[type, ...]) -> bool:
    """Whether ``args`` has exactly the types ``types``, in order."""
    return len(args) == len(types) and all(type(a) is t for a, t in zip(args, types))
