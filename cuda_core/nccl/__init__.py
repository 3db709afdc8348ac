"""Collectives over several GPUs and machines with NCCL, on cuda_core's buffers, views and streams.

Built on NVIDIA's nccl4py (``pip install "cudacore[nccl]"`` brings it and the NCCL library).
Importing this module needs neither; the first call that does raises
:class:`NCCLNotFoundError` naming the remedy. One rank per GPU::

    from cuda_core import Device, nccl
    from cuda_core.utils import StridedMemoryView

    uid = nccl.exchange_unique_id(rank, world_size, master_addr, master_port)
    dev = Device(local_rank)
    dev.set_current()
    s = dev.create_stream()
    with nccl.Communicator.init(world_size, rank, uid, device=dev) as comm:
        buf = dev.allocate(4 * n, stream=s)
        grad = StridedMemoryView.from_buffer(buf, (n,), dtype="float32")
        comm.all_reduce(grad, op="sum", stream=s)  # in place, ordered on s

Faults end in errors, not hangs: a communicator is made non-blocking (a rank that never joins
ends in a timeout), its calls are watched, and a watchdog thread per communicator aborts it when NCCL reports an error or a collective has not completed within
its timeout (:func:`set_default_timeout`, ``CUDA_CORE_NCCL_TIMEOUT``, ``timeout=``); the next
call then raises :class:`NCCLTimeoutError` (or :class:`NCCLError`).

:meth:`Communicator.as_nccl4py` gives nccl4py's own communicator for everything else; its
methods take cuda_core's objects directly (DLPack, ``__cuda_stream__``).
"""

from __future__ import annotations

from ._communicator import Communicator as Communicator
from ._errors import NCCLError as NCCLError
from ._errors import NCCLNotFoundError as NCCLNotFoundError
from ._errors import NCCLTimeoutError as NCCLTimeoutError
from ._group import group as group
from ._loader import is_available as is_available
from ._loader import library_info as library_info
from ._rendezvous import exchange_unique_id as exchange_unique_id
from ._rendezvous import get_unique_id as get_unique_id
from ._timeout import get_default_timeout as get_default_timeout
from ._timeout import set_default_timeout as set_default_timeout

__all__ = [
    "Communicator",
    "NCCLError",
    "NCCLNotFoundError",
    "NCCLTimeoutError",
    "exchange_unique_id",
    "get_default_timeout",
    "get_unique_id",
    "group",
    "is_available",
    "library_info",
    "set_default_timeout",
]
