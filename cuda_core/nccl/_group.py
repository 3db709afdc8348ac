"""group: NCCL calls issued inside one ``with`` block run as one group (ncclGroupStart/End)."""

from __future__ import annotations

from typing import Any

from ._errors import nccl_error
from ._loader import load

__all__ = ["group"]


class group:  # lower case: used like a function, ``with nccl.group():``
    """Batch the NCCL calls issued inside a ``with`` block into one group.

    Needed when one thread drives several GPUs (communicators from
    :meth:`Communicator.init_all`): their collectives only complete together, so they must be
    issued inside one group. Also lets NCCL fuse several collectives of one communicator.
    Groups nest; NCCL runs the work when the outermost block ends.

    Raises
    ------
    NCCLNotFoundError
        nccl4py or the NCCL library is missing.
    NCCLError
        NCCL refused the group (raised on leaving the block, unless the block itself raised).

    Examples
    --------
    >>> with nccl.group():
    ...     for comm, view, s in zip(comms, views, streams):
    ...         comm.all_reduce(view, op="sum", stream=s)
    """

    __slots__ = ("_b",)

    def __enter__(self) -> group:
        _core, b = load()
        self._b = b
        try:
            b.group_start()
        except b.NCCLError as exc:
            raise nccl_error("ncclGroupStart", exc, b) from None
        return self

    def __exit__(self, exc_type: Any, *rest: object) -> None:
        b = self._b
        try:
            b.group_end()  # always: NCCL's group depth must come back down
        except b.NCCLError as exc:
            if exc_type is None:  # never hide the block's own exception behind this one
                raise nccl_error("ncclGroupEnd", exc, b) from None
