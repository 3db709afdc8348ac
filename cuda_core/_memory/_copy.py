"""Batched memory operations: copies with transfer hints (Host, CopyOptions, copy_batch, Buffer
copies with options) and managed-memory prefetch/discard batches.

``cuMemcpyBatchAsync`` (CUDA 12.8+; :mod:`cuda_core._compat` gives it its 13.x form) queues
any number of pointer-to-pointer copies on a stream, each with attributes: how the source may
be read (in stream order, during the call, or at any time) and location hints for managed
memory, plus a request to overlap with compute. ``copy_batch`` and ``Buffer.copy_to/copy_from``
with ``options`` use it, so the attributes are honoured on any CUDA 12.8 or newer driver. The driver
refuses the legacy default stream and streams in graph capture: both are refused here first
with a ``TypeError`` that says so. ``prefetch_batch``, ``discard_batch`` and
``discard_prefetch_batch`` are the CUDA 13 ``cuMem*BatchAsync`` calls on managed memory (the
legacy default stream is refused; capture is left to the driver). Without CUDA 13 (bindings
or driver), ``prefetch_batch`` queues one ``cuMemPrefetchAsync`` per buffer, as ``cuda.core``
does on CUDA 12, and the discards raise :class:`NotImplementedError`.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

from .. import _links
from .._compat import driver, has, require_cuda13
from .._stream_ops import capture_status, closed_error, on_stream, stream_context
from .._utils import TypeValueError, arg_error, handle_return

__all__ = ["Host"]  # CopyOptions, the enums and copy_batch are public in cuda_core.utils

_LEGACY = int(driver.CU_STREAM_LEGACY)
_CAPTURE_NONE = driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE
_LOC = driver.CUmemLocationType


class Host:
    """The host (CPU) as a memory location, for location hints (the counterpart of a Device).

    ``Host()`` is any host memory; ``Host(numa_id=N)`` NUMA node ``N``; ``Host.numa_current()``
    (``Host(is_numa_current=True)``) the NUMA node of the calling thread. Like ``Device``,
    equal arguments give the same object: ``Host() is Host()``.
    """

    __slots__ = ("_is_numa_current", "_numa_id")
    _instances: ClassVar[dict[tuple[int | None, bool], Host]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    _numa_id: int | None
    _is_numa_current: bool

    def __new__(cls, numa_id: int | None = None, is_numa_current: bool = False) -> Host:
        if numa_id is not None and (
            isinstance(numa_id, bool) or not isinstance(numa_id, int) or numa_id < 0
        ):
            raise arg_error(  # cuda.core: ValueError
                "numa_id",
                "None or a non-negative int",
                numa_id,
                exc=TypeValueError,
                lead=f"numa_id must be a non-negative int, got {numa_id!r}",
            )
        is_numa_current = bool(is_numa_current)  # any truth value, as in cuda.core
        if numa_id is not None and is_numa_current:
            raise ValueError("numa_id and is_numa_current are mutually exclusive: give one of them")
        key = (numa_id, is_numa_current)
        with cls._lock:
            host = cls._instances.get(key)
            if host is None:
                host = object.__new__(cls)
                host._numa_id = numa_id
                host._is_numa_current = is_numa_current
                cls._instances[key] = host
        return host

    @classmethod
    def numa_current(cls) -> Host:
        """The NUMA node of the calling thread (resolved by the driver at each use)."""
        return cls(is_numa_current=True)

    @property
    def numa_id(self) -> int | None:
        """The NUMA node, or ``None`` (any host memory, or the current node)."""
        return self._numa_id

    @property
    def is_numa_current(self) -> bool:
        """Whether this is the calling thread's NUMA node."""
        return self._is_numa_current

    def __repr__(self) -> str:
        if self._is_numa_current:
            return "Host.numa_current()"
        return "Host()" if self._numa_id is None else f"Host(numa_id={self._numa_id})"

    def _location(self) -> driver.CUmemLocation:
        loc = driver.CUmemLocation()
        if self._is_numa_current:
            loc.type = _LOC.CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT
        elif self._numa_id is not None:
            loc.type = _LOC.CU_MEM_LOCATION_TYPE_HOST_NUMA
            loc.id = self._numa_id
        else:
            loc.type = _LOC.CU_MEM_LOCATION_TYPE_HOST
        return loc


class MemcpySrcAccessOrder(enum.StrEnum):
    """How a copy may read its source (``CUmemcpySrcAccessOrder``)."""

    STREAM = "stream"
    """In stream order (the default)."""
    DURING_API_CALL = "during_api_call"
    """Out of stream order, all reads done when the call returns (ephemeral sources)."""
    ANY = "any"
    """Out of stream order, at any time (the source is not written by earlier work)."""


class MemcpyOverlapMode(enum.StrEnum):
    """Whether a copy asks to overlap with compute work (``CUmemcpyFlags``)."""

    DEFAULT = "default"
    PREFER_OVERLAP_WITH_COMPUTE = "prefer_overlap_with_compute"


_ORDER = {
    MemcpySrcAccessOrder.STREAM: driver.CUmemcpySrcAccessOrder.CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
    MemcpySrcAccessOrder.DURING_API_CALL: driver.CUmemcpySrcAccessOrder.CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL,
    MemcpySrcAccessOrder.ANY: driver.CUmemcpySrcAccessOrder.CU_MEMCPY_SRC_ACCESS_ORDER_ANY,
}


def _enum_value(enum_cls: Any, value: Any, field: str) -> Any:
    try:
        return enum_cls(value)
    except ValueError:
        choices = ", ".join(repr(m.value) for m in enum_cls)
        raise arg_error(
            field,
            f"a {enum_cls.__name__} or one of {choices}",
            value,
            lead=f"invalid {field}: {value!r}",
        ) from None


@dataclasses.dataclass
class CopyOptions:
    """Transfer hints for one copy (``copy_batch``, ``Buffer.copy_to/copy_from(options=...)``).

    Attributes
    ----------
    src_access_order : MemcpySrcAccessOrder or str
        How the source may be read; default ``"stream"`` (in stream order).
    src_location_hint, dst_location_hint : ~cuda_core.Device, Host or None
        Where the source / destination memory is expected to be. Honoured by the driver only
        for managed memory (on devices with concurrent managed access) and for pageable
        memory on devices that access it directly; ignored otherwise. ``None``: no hint.
    overlap_mode : MemcpyOverlapMode or str
        ``"prefer_overlap_with_compute"`` asks the driver to overlap the copy with compute
        work where the device can; default ``"default"``.
    """

    src_access_order: MemcpySrcAccessOrder | str = MemcpySrcAccessOrder.STREAM
    src_location_hint: Any = None
    dst_location_hint: Any = None
    overlap_mode: MemcpyOverlapMode | str = MemcpyOverlapMode.DEFAULT

    def __post_init__(self) -> None:
        Device = _links.Device

        self.src_access_order = _enum_value(
            MemcpySrcAccessOrder, self.src_access_order, "src_access_order"
        )
        self.overlap_mode = _enum_value(MemcpyOverlapMode, self.overlap_mode, "overlap_mode")
        for field in ("src_location_hint", "dst_location_hint"):
            value = getattr(self, field)
            if value is not None and not isinstance(value, (Device, Host)):
                raise arg_error(field, "a Device, a Host or None", value, exc=TypeError)

    def _attributes(self) -> driver.CUmemcpyAttributes:
        attrs = driver.CUmemcpyAttributes()
        attrs.srcAccessOrder = _ORDER[MemcpySrcAccessOrder(self.src_access_order)]
        for field, hint in (
            ("srcLocHint", self.src_location_hint),
            ("dstLocHint", self.dst_location_hint),
        ):
            if hint is not None:
                setattr(attrs, field, _location_of(hint))
        if self.overlap_mode == MemcpyOverlapMode.PREFER_OVERLAP_WITH_COMPUTE:
            attrs.flags = int(driver.CUmemcpyFlags.CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)
        return attrs


def _location_of(where: Any) -> driver.CUmemLocation:
    if isinstance(where, Host):
        return where._location()
    loc = driver.CUmemLocation()
    loc.type = _LOC.CU_MEM_LOCATION_TYPE_DEVICE
    loc.id = int(where)
    return loc


def _batch_stream(stream: Any, api: str, capture: bool = False) -> Any:
    """The stream of a batched operation; ``TypeError`` for what the driver refuses: the legacy
    default stream, and (unless ``capture``) graph builders and capturing streams."""

    if isinstance(stream, _links.GraphBuilder) and not capture:
        # cuda.core's wording first (its stream parameter is typed Stream), then why and what to do
        raise TypeError(
            "Argument 'stream' has incorrect type (expected Stream, got GraphBuilder): "
            f"{api}: a graph builder cannot take attributed or batched copies (a graph has no node "
            "for them); copy with Buffer.copy_to/copy_from without options instead"
        )
    s = _links.as_stream(stream)
    if s._h.is_released:
        raise RuntimeError("Stream has been closed; stream-ordered work cannot be queued on it")
    if s._h.address in (0, _LEGACY):
        with_options = "" if api.endswith("_batch") else " with options"
        raise TypeError(
            f"{api} does not accept LEGACY_DEFAULT_STREAM{with_options}: the legacy default "
            "stream cannot take batched operations (the driver refuses it); use "
            "PER_THREAD_DEFAULT_STREAM or a created stream"
        )
    if capture:
        return s
    if capture_status(s) != _CAPTURE_NONE:
        with_options = "" if api.endswith("_batch") else " with options"
        raise TypeError(
            f"{api} does not support graph capture{with_options}: the stream is capturing a "
            "graph, which cannot take attributed or batched copies; use GraphNode.memcpy or "
            "Buffer.copy_to without options instead"
        )
    return s


def _open_pair(dst: Any, src: Any, index: str) -> tuple[int, int, int]:
    if dst._ptr is None or src._ptr is None:
        raise closed_error()
    if dst._size != src._size:
        lead = (
            f"copy_batch: buffer size mismatch at index {index} (src={src._size}, dst={dst._size})"
            if index
            else f"buffer sizes mismatch between src and dst (sizes are: src={src._size}, "
            f"dst={dst._size})"
        )
        raise ValueError(
            f"{lead}: the destination has {dst._size} bytes, the source {src._size}; copies "
            "with options need buffers of equal size"
        )
    return dst._ptr, src._ptr, src._size


def batch_copy(s: Any, pairs: list[tuple[int, int, int]], options: list[CopyOptions]) -> None:
    """Queue the copies ``(dst, src, nbytes)`` with one ``CopyOptions`` each (``len(options)``
    is 1 for all, or ``len(pairs)``) on stream ``s`` in one ``cuMemcpyBatchAsync``."""
    live = [p for p in pairs if p[2]]
    if not live:
        return
    if len(options) == 1:
        attrs, idxs = [options[0]._attributes()], [0]
    else:
        kept = [o for p, o in zip(pairs, options) if p[2]]
        attrs, idxs = [o._attributes() for o in kept], list(range(len(live)))
    dsts = [driver.CUdeviceptr(d) for d, _, _ in live]
    srcs = [driver.CUdeviceptr(src) for _, src, _ in live]
    sizes = [n for _, _, n in live]
    ctx = stream_context(s)
    r = on_stream(
        s,
        ctx,
        driver.cuMemcpyBatchAsync,
        dsts,
        srcs,
        sizes,
        len(live),
        attrs,
        idxs,
        len(attrs),
        s.handle,
    )
    handle_return(r, "cuMemcpyBatchAsync")


def copy_batch(
    stream: Any, srcs: Sequence[Any], dsts: Sequence[Any], *, options: Any = None
) -> None:
    """Copy each ``srcs[i]`` into ``dsts[i]`` (Buffers of equal size), asynchronously, on ``stream``.

    One ``cuMemcpyBatchAsync``: the batch as a whole is stream-ordered; the copies in it may
    run concurrently and in any order, so no copy may write memory another one reads.

    Parameters
    ----------
    stream : Stream
        First and required. Not the legacy default stream (use ``PER_THREAD_DEFAULT_STREAM``)
        and not a stream capturing a graph (the driver refuses both).
    srcs, dsts : sequence of Buffer
        Sources and destinations, paired by index; equal lengths, equal sizes per pair.
    options : CopyOptions, sequence of CopyOptions, or None
        One for every copy, one per copy (paired by index), or ``None`` for the defaults.

    Raises
    ------
    TypeError
        A Buffer instead of a sequence, an element that is not a Buffer, a refused stream, or
        ``options`` of another type.
    ValueError
        An empty batch (as in ``cuda.core``), or the lengths or a pair's sizes differ.
    RuntimeError
        A buffer or the stream is closed.
    """
    Buffer = _links.Buffer

    if stream is None:  # cuda.core checks the stream's type before the buffers
        _links.as_stream(stream)
    for name, seq in (("srcs", srcs), ("dsts", dsts)):
        if (
            isinstance(seq, Buffer)
            or not isinstance(seq, Sequence)
            or isinstance(seq, (str, bytes))
        ):
            raise arg_error(
                name,
                "a sequence of Buffers",
                seq,
                "for one buffer use Buffer.copy_to",
                exc=TypeError,
                lead=f"copy_batch: {name} must be a sequence of Buffer, got {type(seq).__name__}",
            )
        if not seq:
            raise arg_error(
                name,
                "a non-empty sequence of Buffers (an empty batch is refused, as in cuda.core)",
                seq,
                lead="copy_batch: empty buffers sequence",
            )
        for i, b in enumerate(seq):
            if not isinstance(b, Buffer):
                raise arg_error(
                    f"{name}[{i}]",
                    "a Buffer",
                    b,
                    exc=TypeError,
                    lead=f"copy_batch: expected Buffer, got {type(b).__name__}",
                )
    if len(srcs) != len(dsts):
        raise ValueError(
            f"copy_batch: srcs length {len(srcs)} does not match dsts length {len(dsts)}: srcs "
            "and dsts must have the same length (they are paired by index)"
        )
    if options is None:
        opts = [CopyOptions()]
    elif isinstance(options, CopyOptions):
        opts = [options]
    elif isinstance(options, Sequence) and not isinstance(options, (str, bytes)):
        for o in options:
            if not isinstance(o, CopyOptions):
                raise arg_error(
                    "options",
                    "a CopyOptions, a sequence of them, or None",
                    options,
                    exc=TypeError,
                    lead="copy_batch: each options element must be CopyOptions, got "
                    f"{type(o).__name__}",
                )
        if len(options) != len(srcs):
            raise ValueError(
                f"copy_batch: options length {len(options)} does not match buffers length "
                f"{len(srcs)}: options must have one CopyOptions per copy"
            )
        opts = list(options)
    else:
        raise arg_error(
            "options",
            "a CopyOptions, a sequence of them, or None",
            options,
            exc=TypeError,
            lead="copy_batch: options must be CopyOptions or a sequence of CopyOptions, got "
            f"{type(options).__name__}",
        )
    s = _batch_stream(stream, "copy_batch")
    pairs = [_open_pair(d, src, str(i)) for i, (d, src) in enumerate(zip(dsts, srcs))]
    batch_copy(s, pairs, opts)


def copy_with_options(dst: Any, src: Any, stream: Any, options: Any, api: str) -> None:
    """``Buffer.copy_to/copy_from(..., options=...)``: one attributed copy between buffers."""
    Buffer = _links.Buffer

    if not isinstance(options, CopyOptions):
        raise arg_error(
            "options",
            "a CopyOptions or None",
            options,
            exc=TypeError,
            lead=f"{api}: options must be CopyOptions, got {type(options).__name__}",
        )
    if not isinstance(dst, Buffer) or not isinstance(src, Buffer):
        raise TypeError(f"{api}: options apply to copies between Buffers only")
    s = _batch_stream(stream, api)
    batch_copy(s, [_open_pair(dst, src, "")], [options])


def _buffers(buffers: Any, api: str) -> list[Any]:
    Buffer = _links.Buffer

    if (
        isinstance(buffers, Buffer)
        or not isinstance(buffers, Sequence)
        or isinstance(buffers, (str, bytes))
    ):
        raise arg_error(
            "buffers",
            "a sequence of Buffers",
            buffers,
            exc=TypeError,
            lead=f"{api}: buffers must be a sequence of Buffer, got {type(buffers).__name__}",
        )
    if not buffers:
        raise arg_error("buffers", f"a non-empty sequence of Buffers ({api} refuses an empty batch, as cuda.core)",
                        buffers, lead=f"{api}: empty buffers sequence")  # fmt: skip
    for i, b in enumerate(buffers):
        if not isinstance(b, Buffer):
            raise arg_error(
                f"buffers[{i}]",
                "a Buffer",
                b,
                exc=TypeError,
                lead=f"{api}: expected Buffer, got {type(b).__name__}",
            )
        if b._ptr is None:
            raise closed_error()
    return list(buffers)


def _locations(locations: Any, count: int) -> tuple[list[driver.CUmemLocation], list[int]]:
    """The driver's (locations, first-index) arrays: one location for all, or one per buffer."""
    Device = _links.Device

    if isinstance(locations, (Device, Host)):
        return [_location_of(locations)], [0]
    if isinstance(locations, Sequence) and not isinstance(locations, (str, bytes)):
        if len(locations) != count:
            raise ValueError(
                f"location length {len(locations)} does not match buffers length {count}: "
                f"locations must have one Device or Host per buffer ({count})"
            )
        for i, where in enumerate(locations):
            if not isinstance(where, (Device, Host)):
                raise arg_error(f"locations[{i}]", "a Device or a Host", where, exc=TypeError)
        return [_location_of(w) for w in locations], list(range(count))
    raise arg_error(
        "locations", "a Device, a Host, or a sequence of them", locations, exc=TypeError
    )


def _ranges(bufs: list[Any]) -> tuple[list[driver.CUdeviceptr], list[int]]:
    return [driver.CUdeviceptr(b._ptr) for b in bufs], [b._size for b in bufs]


def prefetch_batch(stream: Any, buffers: Sequence[Any], locations: Any) -> None:
    """Prefetch managed-memory buffers to a location each, asynchronously, on ``stream``.

    One ``cuMemPrefetchBatchAsync`` (CUDA 13): the batch is stream-ordered; its operations may
    run in any order. Without CUDA 13 (``cuda-bindings`` 12.x or an older driver), one
    ``cuMemPrefetchAsync`` per buffer, in order, on ``stream``.

    Parameters
    ----------
    stream : Stream or GraphBuilder
        First and required; not the legacy default stream.
    buffers : sequence of Buffer
        Managed-memory buffers (e.g. from :class:`ManagedMemoryResource`).
    locations : ~cuda_core.Device, Host or sequence
        One target (a Device or Host) for every buffer, or a sequence of them, one per buffer
        (paired by index).

    Raises
    ------
    TypeError
        A Buffer instead of a sequence, an element or location of the wrong type, or the
        legacy default stream.
    ValueError
        An empty ``buffers`` (as in ``cuda.core``), or a sequence of locations of another length.
    RuntimeError
        A buffer or the stream is closed.
    CUDAError
        The driver refused (memory that is not managed, a device without concurrent managed access).
    """
    _prefetching("prefetch_batch", stream, buffers, locations)


def discard_prefetch_batch(stream: Any, buffers: Sequence[Any], locations: Any) -> None:
    """Discard managed-memory buffers' contents and prefetch them to a location each (no data
    moves: the pages are populated at the target). Arguments as in :func:`prefetch_batch`; one
    ``cuMemDiscardAndPrefetchBatchAsync``. Needs CUDA 13 (``cuda-bindings`` and driver):
    :class:`NotImplementedError` otherwise."""
    _prefetching("discard_prefetch_batch", stream, buffers, locations)


_BATCH_CALLS = {
    "prefetch_batch": "cuMemPrefetchBatchAsync",
    "discard_prefetch_batch": "cuMemDiscardAndPrefetchBatchAsync",
}


def _prefetching(api: str, stream: Any, buffers: Sequence[Any], locations: Any) -> None:
    bufs = _buffers(buffers, api)
    locs, idxs = _locations(locations, len(bufs))
    s = _batch_stream(stream, api, capture=True)
    name = _BATCH_CALLS[api]
    ctx = stream_context(s)
    if api == "prefetch_batch" and not has(name):  # CUDA 12: one prefetch per buffer, as cuda.core
        where = locs * len(bufs) if len(locs) == 1 else locs
        for b, loc in zip(bufs, where):
            if b._size:
                r = on_stream(s, ctx, driver.cuMemPrefetchAsync, b._ptr, b._size, loc, 0, s.handle)
                handle_return(r, "cuMemPrefetchAsync")
        return
    require_cuda13(api)
    dptrs, sizes = _ranges(bufs)
    r = on_stream(
        s, ctx, getattr(driver, name), dptrs, sizes, len(bufs), locs, idxs, len(locs), 0, s.handle
    )
    handle_return(r, name)


def discard_batch(stream: Any, buffers: Sequence[Any]) -> None:
    """Discard managed-memory buffers' contents, asynchronously, on ``stream``: later reads
    return indeterminate values until written or prefetched. One ``cuMemDiscardBatchAsync``;
    arguments and errors as in :func:`prefetch_batch`. Needs CUDA 13 (``cuda-bindings`` and
    driver): :class:`NotImplementedError` otherwise."""
    bufs = _buffers(buffers, "discard_batch")
    s = _batch_stream(stream, "discard_batch", capture=True)
    require_cuda13("discard_batch")
    dptrs, sizes = _ranges(bufs)
    r = on_stream(
        s, stream_context(s), driver.cuMemDiscardBatchAsync, dptrs, sizes, len(bufs), 0, s.handle
    )
    handle_return(r, "cuMemDiscardBatchAsync")
