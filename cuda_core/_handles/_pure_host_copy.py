"""The pure-Python backend's ``HOST_COPY_FN`` body (``HOST_COPY_ADDRESS``, see
:mod:`cuda_core._handles._protocol`): a ctypes callback that copies bytes between host addresses.

The driver calls it on its own thread with a pointer to a record of three native-width fields
(``uintptr_t dst, uintptr_t src, size_t nbytes``). Unlike the native backend's compiled body it
takes the GIL to run; it is kept alive for the life of the process (the driver may call it until
then).
"""

from __future__ import annotations

import ctypes
import struct

from .._lifetime import immortal

__all__: list[str] = []  # private module

RECORD = struct.Struct("@PPN")
"""The record ``HOST_COPY_FN`` reads: dst, src, nbytes (``pack_host_copy_args`` packs one)."""


@immortal
@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _host_copy(record: int | None) -> None:
    if not record:
        return
    dst, src, nbytes = RECORD.unpack(ctypes.string_at(record, RECORD.size))
    if nbytes and dst != src:
        ctypes.memmove(dst, src, nbytes)


HOST_COPY_ADDRESS: int = ctypes.cast(_host_copy, ctypes.c_void_p).value or 0
