"""How a Buffer shows itself to others: DLPack export, the buffer protocol, pointer attributes."""

from __future__ import annotations

import ctypes
from typing import Any

from .._compat import driver
from .._handles._driver import ensure_driver
from .._interop import _dlpack
from .._stream_ops import closed_error
from .._utils import arg_error, handle_return

__all__: list[str] = []  # private module

_c_char = ctypes.c_char


def query_pointer_attrs(ptr: int) -> tuple[int, bool, bool, bool]:
    """(device_id, device accessible, host accessible, managed) of memory that has no resource,
    from the driver's pointer attributes."""
    PA = driver.CUpointer_attribute
    keys = [
        PA.CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        PA.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        PA.CU_POINTER_ATTRIBUTE_IS_MANAGED,
    ]
    ensure_driver()
    values = handle_return(
        driver.cuPointerGetAttributes(len(keys), keys, ptr), "cuPointerGetAttributes"
    )
    mtype, ordinal, managed = (int(getattr(v, "value", v) or 0) for v in values)
    MT = driver.CUmemorytype
    if managed:
        return (int(ordinal), True, True, True)
    if mtype == int(MT.CU_MEMORYTYPE_DEVICE):
        return (int(ordinal), True, False, False)
    if mtype == int(MT.CU_MEMORYTYPE_HOST):
        return (-1, True, True, False)
    return (-1, False, True, False)  # memory CUDA does not know: pageable host memory


def dlpack_device(buf: Any) -> tuple[int, int]:
    """``Buffer.__dlpack_device__``."""
    if buf._ptr is None:
        raise closed_error()
    dev, dev_ok, host_ok, managed = buf._pointer_attrs()
    if managed:
        return (_dlpack.kDLCUDAManaged, dev if dev >= 0 else 0)
    if dev_ok and not host_ok:
        return (_dlpack.kDLCUDA, dev)
    if dev_ok and host_ok:
        return (_dlpack.kDLCUDAHost, 0)
    return (_dlpack.kDLCPU, 0)


def dlpack(buf: Any, stream: Any, max_version: Any, dl_device: Any, copy: Any) -> Any:
    """``Buffer.__dlpack__``: a capsule of a 1-D ``uint8`` tensor that keeps ``buf`` alive."""
    ptr = buf._ptr
    if ptr is None:
        raise closed_error()
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int)):
        raise arg_error("stream", "None or an int", stream, exc=TypeError)
    if (
        copy
    ):  # refused before the driver is asked where the memory lives (export_args says the same)
        raise BufferError("Buffer.__dlpack__ cannot copy (copy=True was requested)")
    here = dlpack_device(buf)
    host_ok = dl_device is not None and buf._pointer_attrs()[2]
    dev_type, dev_id, versioned = _dlpack.export_args(
        "Buffer", here, max_version, dl_device, copy, host_ok
    )
    return _dlpack.make_capsule(
        ptr,
        buf._size,
        device_type=dev_type,
        device_id=dev_id,
        owner=buf,
        versioned=versioned,
    )


def host_view(buf: Any, flags: int) -> memoryview:
    """``Buffer.__buffer__``: a writable 1-D byte memoryview of host-accessible memory.

    The view keeps ``buf`` alive (through the ctypes array it is made from); it does not keep
    the memory from being freed by an explicit :meth:`Buffer.close`.
    """
    if type(flags) is not int:
        raise arg_error("flags", "an int", flags, exc=TypeError)
    ptr = buf._ptr
    if ptr is None:
        raise closed_error()
    if not buf._pointer_attrs()[2]:
        raise BufferError(
            "the buffer's memory is not host-accessible; copy it to the host (copy_to) or export "
            "it through DLPack to a device library"
        )
    size = buf._size
    if not size:
        return memoryview(bytearray())
    arr = (_c_char * size).from_address(ptr)
    arr._cuda_core_buffer = buf  # type: ignore[attr-defined]  # keep the Buffer alive
    return memoryview(arr).cast("B")


class BufferExport:
    """The export protocols of :class:`~cuda_core.Buffer` (DLPack and the Python buffer
    protocol), a base of Buffer; the work is done by the functions above."""

    __slots__ = ()

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device: ``(kDLCUDA=2, id)``, ``(kDLCUDAHost=3, 0)``, ``(kDLCUDAManaged=13, id)``
        or ``(kDLCPU=1, 0)`` for pageable host memory."""
        return dlpack_device(self)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export the buffer as a DLPack capsule: a 1-D ``uint8`` tensor of :attr:`size` elements.

        Parameters
        ----------
        stream : int, optional
            The consumer's stream. A buffer has no pending producer work of its own, so no
            synchronisation is added; order your writes before handing the buffer over.
        max_version : tuple of int, optional
            ``(major, minor)``: the highest DLPack version the consumer supports;
            ``>= (1, 0)`` gives a versioned capsule.
        dl_device : tuple of int, optional
            ``(device_type, device_id)``: the device the consumer wants; must be the buffer's
            own (or ``(kDLCPU, 0)`` for host-accessible memory).
        copy : bool, optional
            ``True`` is refused (no copy is made); ``False`` or ``None`` export the memory itself.

        Returns
        -------
        :class:`!PyCapsule`
            A DLPack capsule. It keeps this Buffer object alive until the consumer releases it.
            Closing the buffer while a consumer still uses the memory frees it under the
            consumer.

        Raises
        ------
        BufferError
            A copy or another device was requested.
        RuntimeError
            The buffer is closed.
        """
        return dlpack(self, stream, max_version, dl_device, copy)

    def __buffer__(self, flags: int, /) -> memoryview:
        """The Python buffer protocol (``memoryview(buf)`` on Python 3.12+) for host-accessible memory.

        Parameters
        ----------
        flags : int
            The ``inspect.BufferFlags`` of the request.

        Returns
        -------
        memoryview
            A writable 1-D ``uint8`` view of the memory that keeps the Buffer object alive.
            Closing the buffer frees the memory under the view: do not use it after close.

        Raises
        ------
        BufferError
            The memory is not host-accessible (plain device memory).
        RuntimeError
            The buffer is closed.
        """
        return host_view(self, flags)
