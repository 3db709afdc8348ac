"""GraphMemoryResource: memory allocated by graphs (``cuMemAllocAsync`` while capturing)."""

from __future__ import annotations

import threading
from typing import Any

from .. import _links
from .._compat import driver
from .._stream_ops import capture_status, live_handle, on_stream, stream_context
from .._utils import arg_error, handle_return, make_error
from ._buffer import Buffer
from ._resource import MemoryResource, check_size

__all__ = ["GraphMemoryResource"]

_GA = driver.CUgraphMem_attribute
_ACTIVE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE


def _stream_of(stream: Any) -> Any:
    """The Stream of ``stream`` (a GraphBuilder or a stream); it is required."""
    if stream is None:
        raise arg_error(
            "stream", "a capturing Stream or a GraphBuilder that is building", None, exc=TypeError
        )
    return _links.as_stream(stream)


def _capturing_stream(stream: Any) -> Any:
    """The Stream of ``stream``, which must be capturing a graph (an invalidated capture is
    refused too, as in cuda.core)."""
    s = _stream_of(stream)
    if capture_status(s) != _ACTIVE:
        raise RuntimeError(
            "GraphMemoryResource cannot perform memory operations on a non-capturing stream. "
            "Allocate while a GraphBuilder is building (between begin_building() and "
            "end_building()), and from another memory resource outside graphs"
        )
    return s


def _zero_only(name: str, value: Any) -> None:
    """A high watermark can only be reset (set to 0), as in cuda.core: ``AttributeError``."""
    if value != 0:
        raise AttributeError(
            f"Attribute '{name}' may only be set to zero (got {value!r}). Setting it to 0 resets "
            "the watermark to the current usage"
        )


_READ_ONLY = frozenset({"reserved_mem_current", "used_mem_current"})


class GraphMemoryResourceAttributes:
    """Graph memory statistics of a device (``cuDeviceGetGraphMemAttribute``), read live."""

    __slots__ = ("_dev",)
    _dev: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "GraphMemoryResourceAttributes cannot be created directly; use GraphMemoryResource.attributes"
        )

    @classmethod
    def _init(cls, device_id: int) -> GraphMemoryResourceAttributes:
        self = object.__new__(cls)
        self._dev = driver.CUdevice(device_id)
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _READ_ONLY:  # cuda.core's wording (its tests match it)
            raise AttributeError(
                f"attribute '{name}' of 'GraphMemoryResourceAttributes' objects is not writable "
                "(it reports the driver's count)"
            )
        object.__setattr__(self, name, value)

    def _get(self, attr: Any) -> int:
        return int(
            handle_return(
                driver.cuDeviceGetGraphMemAttribute(self._dev, attr), "cuDeviceGetGraphMemAttribute"
            )
        )

    def _reset(self, attr: Any, value: Any, name: str) -> None:
        _zero_only(name, value)
        handle_return(
            driver.cuDeviceSetGraphMemAttribute(self._dev, attr, driver.cuuint64_t(0)),
            "cuDeviceSetGraphMemAttribute",
        )

    @property
    def reserved_mem_current(self) -> int:
        """Bytes of backing memory currently reserved for graph allocations on the device."""
        return self._get(_GA.CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT)

    @property
    def reserved_mem_high(self) -> int:
        """High watermark of :attr:`reserved_mem_current`; set it to 0 to reset it (any other value
        raises ``AttributeError``, as in cuda.core)."""
        return self._get(_GA.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)

    @reserved_mem_high.setter
    def reserved_mem_high(self, value: int) -> None:
        self._reset(_GA.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, value, "reserved_mem_high")

    @property
    def used_mem_current(self) -> int:
        """Bytes of graph memory currently in use (allocated by graphs and not freed)."""
        return self._get(_GA.CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)

    @property
    def used_mem_high(self) -> int:
        """High watermark of :attr:`used_mem_current`; set it to 0 to reset it (any other value
        raises ``AttributeError``, as in cuda.core)."""
        return self._get(_GA.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)

    @used_mem_high.setter
    def used_mem_high(self, value: int) -> None:
        self._reset(_GA.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, value, "used_mem_high")

    def __repr__(self) -> str:
        return (
            f"GraphMemoryResourceAttributes(reserved_mem_current={self.reserved_mem_current}, "
            f"reserved_mem_high={self.reserved_mem_high}, used_mem_current={self.used_mem_current}, "
            f"used_mem_high={self.used_mem_high})"
        )


class GraphMemoryResource(MemoryResource):
    """The memory graphs allocate on a device (one resource per device).

    Allocate from it while a :class:`GraphBuilder` is building (its stream is capturing): each
    :meth:`allocate` becomes an allocation node of the graph (``cuMemAllocAsync``), and closing
    the buffer before :meth:`GraphBuilder.end_building` becomes a free node. The graph then
    allocates and frees the memory each time it runs; the driver keeps the backing memory
    between runs (see :attr:`attributes`; :meth:`trim` gives unused memory back). A buffer
    closed after the capture frees the graph's allocation in stream order once the graph has
    run. Outside capture, :meth:`allocate` raises ``RuntimeError``; the pool resources
    (:class:`DeviceMemoryResource` and kin) raise inside a capture, as in cuda.core.

    Parameters
    ----------
    device_id : Device or int
        The device; ``GraphMemoryResource(d) is GraphMemoryResource(d)``.

    Examples
    --------
    >>> gmr = GraphMemoryResource(dev)                         # doctest: +SKIP
    >>> gb = dev.create_graph_builder().begin_building()       # doctest: +SKIP
    >>> buf = gmr.allocate(1024, stream=gb)                    # doctest: +SKIP
    >>> launch(gb, config, kernel, buf)                        # doctest: +SKIP
    >>> buf.close()                                            # doctest: +SKIP
    >>> graph = gb.end_building().complete()                   # doctest: +SKIP
    """

    _instances: dict[int, GraphMemoryResource] = {}  # noqa: RUF012
    _lock = threading.Lock()
    _dev_id: int

    def __new__(cls, device_id: Any) -> GraphMemoryResource:
        Device = _links.Device

        if isinstance(device_id, bool) or not isinstance(device_id, (int, Device)):
            raise arg_error("device_id", "a Device or an int ordinal", device_id, exc=TypeError)
        dev_id = Device(device_id).device_id
        with cls._lock:
            self = cls._instances.get(dev_id)
            if self is None:
                self = super().__new__(cls)
                self._dev_id = dev_id
                cls._instances[dev_id] = self
        return self

    def __init__(self, device_id: Any) -> None:
        pass  # set up once, in __new__

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """Allocate ``size`` bytes inside the graph being captured on ``stream``.

        Parameters
        ----------
        size : int
            Number of bytes (``>= 0``).
        stream : GraphBuilder or Stream
            Keyword-only and required: a graph builder that is building (or a capturing
            stream). It becomes the buffer's deallocation stream.

        Returns
        -------
        Buffer
            The graph's allocation; its address is valid while the graph runs.

        Raises
        ------
        TypeError
            No stream, or ``size`` is not an int.
        RuntimeError
            The stream is not capturing.
        CUDAError
            The driver refused (the message names the requested size).
        """
        s = _capturing_stream(stream)
        size = check_size(size)
        if not size:
            return Buffer._owned(0, 0, self, s, None)
        err, ptr = on_stream(s, stream_context(s), driver.cuMemAllocAsync, size, s.handle)
        if err:
            raise make_error(
                err, "cuMemAllocAsync", f"allocating {size} bytes of graph memory failed"
            )
        return Buffer._owned(int(ptr), size, self, s, None)

    def deallocate(self, ptr: Any, size: int, *, stream: Any = None) -> None:
        """Free graph memory, ordered on ``stream`` (``cuMemFreeAsync``).

        On a stream that is capturing (a building GraphBuilder) this adds a free node to the
        graph. On any other stream it frees, in stream order, memory that a launched graph
        allocated and left allocated (a graph completed with ``auto_free_on_launch``, or one
        whose buffer outlives it), as the driver allows and as in cuda.core.

        Parameters
        ----------
        ptr : int or cuda.bindings.driver.CUdeviceptr
            The address from :meth:`allocate`.
        size : int
            The size that was allocated (unused).
        stream : GraphBuilder or Stream
            Keyword-only and required.

        Raises
        ------
        TypeError
            No stream.
        CUDAError
            The driver refused (for example, the memory is not allocated at this point).
        """
        s = _stream_of(stream)
        handle_return(
            on_stream(s, stream_context(s), driver.cuMemFreeAsync, int(ptr or 0), live_handle(s)),
            "cuMemFreeAsync",
        )

    def close(self) -> None:
        """Nothing to release (the driver owns graph memory); kept for compatibility."""

    def trim(self) -> None:
        """Give the device's unused graph memory back to the system (``cuDeviceGraphMemTrim``)."""
        handle_return(
            driver.cuDeviceGraphMemTrim(driver.CUdevice(self._dev_id)), "cuDeviceGraphMemTrim"
        )

    @property
    def attributes(self) -> GraphMemoryResourceAttributes:
        """The device's graph memory statistics (live)."""
        return GraphMemoryResourceAttributes._init(self._dev_id)

    @property
    def device_id(self) -> int:
        """The device ordinal."""
        return self._dev_id

    @property
    def is_device_accessible(self) -> bool:
        """``True``."""
        return True

    @property
    def is_host_accessible(self) -> bool:
        """``False``."""
        return False

    def __repr__(self) -> str:
        return f"<GraphMemoryResource device={self._dev_id}>"
