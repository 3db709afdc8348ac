"""The protocol of the handle layer, in code: what every backend provides and every caller uses.

Two backends implement it: the native one (``cuda_core._handles._native``, built from
``cuda_core/_handles/_csrc``) and the pure-Python one (:mod:`cuda_core._handles._pure`, on
``cuda.bindings``). :mod:`cuda_core._handles._backend` picks one at import and exposes it as
``backend``, typed :class:`Backend`, so mypy checks every ``backend.X`` and every name taken
from it (``_StreamHandle = backend.StreamHandle``). Nothing here runs on a hot path: the
classes are ``typing.Protocol`` classes, used only by the type checker and by
``tests/handles/test_protocol.py``, which checks that both backends provide every member.

The rules every handle keeps:

* A handle owns one driver object and holds strong references to the handles it depends on
  (a stream its context, an allocation its context and deallocation stream, a launch config
  its stream), so a dependency can never be freed under it. It never references the Python
  object that owns it, so a ``weakref.finalize`` or the garbage collector can release it.
* Idle streams and events hang off their :class:`ContextHandle` and die with it.
* A released handle refuses every use with ``RuntimeError``; releasing twice is a no-op.
* Driver failures raise the exception ``make_error(status, api)`` returns (see
  :meth:`Backend.bind`).

A change to anything here (a name, a signature, a meaning) bumps :data:`ABI_VERSION` and
``CC_ABI_VERSION`` in ``cuda_core/_handles/_csrc/native.h`` together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import NotImplementedType
from typing import Any, Protocol, TypeVar

from ._protocol_entries import AllocEntry as AllocEntry
from ._protocol_entries import ClassMethod as ClassMethod
from ._protocol_entries import CloseEntry as CloseEntry
from ._protocol_entries import CopyEntry as CopyEntry
from ._protocol_entries import RecordEntry as RecordEntry
from ._protocol_entries import SyncEntry as SyncEntry
from ._protocol_entries import ViewEntry as ViewEntry
from ._protocol_launch import ARG_KINDS as ARG_KINDS
from ._protocol_launch import LaunchEntry as LaunchEntry
from ._protocol_launch import LaunchPlan as LaunchPlan
from ._protocol_launch import PreparedLaunchBase as PreparedLaunchBase

__all__: list[str] = []  # private module

ABI_VERSION = 18
"""The protocol's version. The native module's ``ABI_VERSION`` (``CC_ABI_VERSION`` in
``_csrc/native.h``) must equal it, or the native module is not used (a stale build)."""


class ContextHandle(Protocol):
    """A context (borrowed: cuda_core never destroys it) and its idle streams and events.

    ``ContextHandle(address, device=-1)``: ``device >= 0`` marks the primary context of that
    device, which is re-initialised (retained again) when found reset.
    """

    def __init__(self, address: int, device: int = -1) -> None: ...

    @property
    def address(self) -> int:
        """The context's address (a reset primary context gets a new one)."""
        ...

    @property
    def device(self) -> int:
        """The device ordinal of a primary context, else -1."""
        ...

    @property
    def generation(self) -> int:
        """The driver's id of the context (``cuCtxGetId``) as last checked."""
        ...

    def check(self) -> bool:
        """Whether the context is alive and the same one as before. A context found reset or
        destroyed drops its pools (their handles died with it; destroying them could hit new
        handles at the same addresses); a reset primary context is re-initialised and the
        check then passes with its new generation; any other dead context returns False."""
        ...

    def drop_pools(self) -> None:
        """Forget every idle handle, without destroying them (their context is gone)."""
        ...

    def pooled(self) -> tuple[int, int, int]:
        """(idle streams, clean idle events, recorded idle events): for tests."""
        ...

    def create_stream(self, flags: int, priority: int | None, /) -> StreamHandle:
        """An owned stream: an idle pooled one of the same flags and priority, else a new one
        (``cuStreamCreate[WithPriority]`` with this context current)."""
        ...

    def create_event(self, flags: int, /) -> EventHandle:
        """An owned event that was never recorded: a clean pooled one, else ``cuEventCreate``."""
        ...

    def record_event(self, flags: int, stream: StreamHandle, /) -> EventHandle:
        """An owned event recorded on ``stream`` now: a recorded pooled one first (recording it
        again makes its earlier work unobservable), then a clean one, then a new one."""
        ...


class StreamHandle(Protocol):
    """A stream: owned (pooled or destroyed at release) or borrowed (never destroyed).

    An owned stream is pooled at release when its work is done and its context is unchanged,
    destroyed when busy, and forgotten when its context is gone.
    """

    @classmethod
    def borrow(
        cls, address: int, ctx: ContextHandle | None = None, owner: Any = None
    ) -> StreamHandle:
        """A stream cuda_core does not own; ``owner`` is kept alive until release."""
        ...

    @property
    def address(self) -> int: ...

    @property
    def ctx(self) -> ContextHandle | None:
        """Its context's handle; ``None`` for a borrowed stream whose context is not known yet
        (see :meth:`context`; always for the default-stream tokens, which mean the current
        context's, unless given at :meth:`borrow`)."""
        ...

    def context(self) -> ContextHandle | None:
        """The handle of the context that work on this stream runs in: :attr:`ctx` when known
        (also after release). Else, for a borrowed stream, found once (``cuStreamGetCtx``, then
        the registry given to :meth:`Backend.bind`) and kept in :attr:`ctx`; for a
        default-stream token (0, ``CU_STREAM_LEGACY``, ``CU_STREAM_PER_THREAD``), the current
        context's (``cuCtxGetCurrent``), never kept, or ``None`` when no context is current.
        Finding a borrowed stream's once it is released: ``RuntimeError``; a failed
        ``cuStreamGetCtx``: the error funnel's exception; the registry answering anything but a
        ContextHandle of this backend: ``TypeError``."""
        ...

    @property
    def owner(self) -> Any:
        """What a borrowed stream keeps alive until release, or ``None``."""
        ...

    @property
    def is_owned(self) -> bool: ...

    @property
    def is_released(self) -> bool: ...

    def sync(self) -> None:
        """``cuStreamSynchronize``."""
        ...

    def query(self) -> bool:
        """Whether all work queued on the stream is done (``cuStreamQuery``)."""
        ...

    def record(self, event: EventHandle, /) -> None:
        """``cuEventRecord(event, self)``."""
        ...

    def wait(self, event: EventHandle, /) -> None:
        """``cuStreamWaitEvent(self, event)``: later work waits for the event, on the device."""
        ...

    def memcpy(self, dst: int, src: int, nbytes: int, /) -> None:
        """``cuMemcpyAsync`` (unified addressing, any direction), ordered on this stream."""
        ...

    def release(self) -> None:
        """Give the stream back once (pooled, destroyed or forgotten, see above)."""
        ...


class EventHandle(Protocol):
    """An event owned by cuda_core, pooled at release.

    A never-recorded event goes back to the clean pool, a recorded one to the recorded pool,
    which only :meth:`ContextHandle.record_event` draws from. An interprocess event
    (``CU_EVENT_INTERPROCESS``) and an adopted one are destroyed, never pooled: another
    process may hold it open and wait on its record.
    """

    @classmethod
    def adopt(cls, address: int, ctx: ContextHandle, flags: int) -> EventHandle:
        """Own an event opened elsewhere (``cuIpcOpenEventHandle``): destroyed, never pooled."""
        ...

    @property
    def address(self) -> int: ...

    @property
    def ctx(self) -> ContextHandle: ...

    @property
    def flags(self) -> int:
        """Its creation flags."""
        ...

    @property
    def recorded(self) -> bool:
        """Whether the event may have been recorded (by us, or by whoever had the handle)."""
        ...

    @property
    def is_released(self) -> bool: ...

    def record(self, stream: StreamHandle, /) -> None:
        """``cuEventRecord(self, stream)``."""
        ...

    def query(self) -> bool:
        """Whether the work recorded before the event is done (``cuEventQuery``)."""
        ...

    def sync(self) -> None:
        """``cuEventSynchronize``."""
        ...

    def expose(self) -> None:
        """The raw handle was handed out: whoever holds it may record it."""
        ...

    def release(self) -> None:
        """Give the event back once (pooled or destroyed, see above)."""
        ...


class Allocation(Protocol):
    """Device memory freed once, stream-ordered.

    Pool memory (:meth:`Backend.pool_allocate`) is freed with ``cuMemFreeAsync`` on its
    deallocation stream handle; adopted memory by the Python callable ``free(ptr, size,
    stream)``. Freed at :meth:`close` or when collected (a failure then is a
    :class:`~cuda_core.CUDAWarning`); never after its context was reset (the memory died with it). A
    deallocation stream released since is replaced by the legacy default stream of the
    memory's context.
    """

    @classmethod
    def adopt(
        cls,
        ptr: int,
        size: int,
        free: Callable[[int, int, Any], object] | None,
        stream: Any,
        ctx: ContextHandle | None,
    ) -> Allocation:
        """Own memory freed by ``free(ptr, size, stream)``; ``free=None``: pool memory freed
        with ``cuMemFreeAsync`` on ``stream``, a :class:`StreamHandle`."""
        ...

    @property
    def ptr(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def stream(self) -> Any:
        """The deallocation stream: a :class:`StreamHandle` for pool memory, any object for
        adopted memory, or ``None``."""
        ...

    @property
    def ctx(self) -> ContextHandle | None: ...

    @property
    def is_open(self) -> bool:
        """Whether the memory is not freed yet."""
        ...

    def set_stream(self, stream: Any, /) -> None:
        """The stream the eventual free is ordered on (a :class:`StreamHandle` for pool
        memory, else ``TypeError``)."""
        ...

    def close(self, stream: Any = None) -> None:
        """Free the memory now (once), ordered on ``stream`` or the deallocation stream."""
        ...


class LaunchConfigHandle(Protocol):
    """A native ``CUlaunchConfig`` (and its attributes) bound to one stream handle.

    ``LaunchConfigHandle(stream, grid, block, shmem, cluster, cooperative, pss)``: ``stream``
    must be a live :class:`StreamHandle` of the same backend (``TypeError``, ``RuntimeError``).
    """

    def __init__(
        self,
        stream: StreamHandle,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shmem: int,
        cluster: tuple[int, int, int] | None,
        cooperative: bool,
        pss: bool,
    ) -> None: ...

    @property
    def stream(self) -> StreamHandle:
        """The stream launches are ordered on."""
        ...

    @property
    def values(self) -> tuple[Any, ...]:
        """What the stored struct hands the driver, read back from it: (grid in blocks, block,
        shared memory bytes, cluster or ``None``, cooperative, pss)."""
        ...

    def launch(self, function: int, params: int, /) -> int:
        """``cuLaunchKernelEx(config, function, params, NULL)``: the status (0: success).
        Refuses a released stream with ``RuntimeError``."""
        ...


class ViewInfo(Protocol):
    """The fields of a strided view; ``StridedMemoryView`` derives from the backend's class.

    Built by the interop readers (:meth:`Backend.read_capsule`, :meth:`Backend.dlpack_view`,
    :meth:`Backend.torch_view`); every field is writable.
    """

    ptr: int
    shape: tuple[int, ...]
    device_id: int
    is_device_accessible: bool
    readonly: bool
    exporting_obj: Any
    _capsule: Any
    """Keeps a producer's tensor alive."""
    _dl_device_type: int
    _dtype: Any
    """A DLPack dtype word from the readers (``code | bits << 8 | lanes << 16``, native byte
    order); Python builders store a NumPy dtype."""
    _raw_strides: tuple[int, ...] | None
    """Strides in elements as the producer gave them, or ``None``."""

    @property
    def strides(self) -> tuple[int, ...] | None:
        """``_raw_strides``."""
        ...


_Ctx = ContextHandle
_Stream = StreamHandle
_Event = EventHandle
_Alloc = Allocation
_Launch = LaunchConfigHandle
_View = ViewInfo
_Plan = LaunchPlan
_Entry = LaunchEntry
_PreparedBase = PreparedLaunchBase
_V = TypeVar("_V", bound=ViewInfo)


class Backend(Protocol):
    """A backend module: the handle classes, the interop readers and the functions below.

    Interop readers: the native ones are in ``cuda_core/_handles/_csrc/interop.c``, the pure
    ones in :mod:`cuda_core._handles._pure_interop`; ``tests/interop/test_interop_backends.py``
    runs both on the same cases.
    """

    @property
    def ABI_VERSION(self) -> int:
        """Equal to this module's :data:`ABI_VERSION` for a backend in use."""
        ...

    @property
    def AMBIGUOUS(self) -> str:
        """The message of a ``stream_ptr=None`` refusal."""
        ...

    @property
    def HOST_COPY_ADDRESS(self) -> int:
        """The address of a ``CUhostFn`` (``HOST_COPY_FN``'s body) that copies ``nbytes`` from
        ``src`` to ``dst``, read from the record its ``userData`` points at (``uintptr_t dst,
        uintptr_t src, size_t nbytes``, native widths, no padding); a NULL record or zero bytes
        copy nothing. Native: compiled code that never takes the GIL. Pure: a ctypes callback
        (it takes the GIL), kept alive for the life of the process."""
        ...

    @property
    def ContextHandle(self) -> type[_Ctx]: ...

    @property
    def StreamHandle(self) -> type[_Stream]: ...

    @property
    def EventHandle(self) -> type[_Event]: ...

    @property
    def Allocation(self) -> type[_Alloc]: ...

    @property
    def LaunchConfigHandle(self) -> type[_Launch]: ...

    @property
    def ViewInfo(self) -> type[_View]: ...

    def bind(
        self,
        addresses: Mapping[str, int],
        make_error: Callable[[int, str], Exception],
        context_of: Callable[[int], _Ctx],
        /,
    ) -> None:
        """Called once the driver is initialised: the driver's entry points by name, the
        error funnel ``make_error(status, api) -> Exception`` and the context registry
        ``context_of(address) -> ContextHandle`` (one handle per live context:
        :func:`cuda_core._handles._contexts.context_handle`), which
        :meth:`StreamHandle.context` asks. The native backend needs every name of
        ``entry_point_names()``; the pure one calls ``cuda.bindings`` and uses only
        ``cuLaunchKernelEx`` (through ``ctypes``) when given."""
        ...

    def ctx_get_device(self) -> int:
        """The current context's device ordinal (>= 0), or ``-status`` (no current context,
        no driver)."""
        ...

    def pool_allocate(self, pool: int, size: int, stream: _Stream, ctx: _Ctx | None) -> _Alloc:
        """``cuMemAllocFromPoolAsync(size, pool, stream)``, freed on ``stream`` later.

        A default-stream token (0, ``CU_STREAM_LEGACY``, ``CU_STREAM_PER_THREAD``) names the
        default stream of whichever context is current: with ``ctx`` given, both calls run
        with ``ctx`` current. A real stream is tried as it is and, where that fails, once more
        with ``ctx`` current. A stream capturing a graph (``cuStreamIsCapturing``: active or
        invalidated) is refused before anything is allocated, with the error of status
        ``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`` and api ``"cuStreamIsCapturing"``.
        """
        ...

    def types_match(self, args: tuple[Any, ...], types: tuple[type, ...], /) -> bool:
        """``len(args) == len(types)`` and each ``type(args[i]) is types[i]``."""
        ...

    def read_capsule(self, capsule: Any, /) -> _View:
        """A view of an unconsumed ``"dltensor_versioned"``/``"dltensor"`` capsule, not
        consuming it: ``ptr = data + byte_offset``, the capsule's device and read-only flag
        (versioned only). ``BufferError`` for a non-capsule, another name (a consumed capsule),
        a major version above 1, ``ndim`` outside 0..32, or ``ndim > 0`` with no shape."""
        ...

    def dlpack_view(self, cls: type[_V], obj: Any, stream_ptr: Any, /) -> _V:
        """``StridedMemoryView.from_dlpack``'s general path.

        Calls ``obj.__dlpack_device__()`` (an ``AttributeError`` from it becomes
        ``BufferError``; every other exception propagates), applies the device rule (CPU,
        CUDA, CUDA host, CUDA managed; others ``BufferError``) and ``stream_ptr`` (``None`` on
        CUDA is ``BufferError(AMBIGUOUS)``; ignored for CPU; 0 becomes 1), then calls
        ``obj.__dlpack__(stream=, max_version=(1, 0))`` once. Its only retry: a ``TypeError``
        (a producer older than DLPack 1.0) asks once more without ``max_version`` and
        remembers the type. Then the capsule is read as by :meth:`read_capsule`.
        """
        ...

    def torch_setup(self, tensor_type: type, exchange_api: Any, /) -> bool:
        """Native: reads ``tensor_type`` (exactly ``torch.Tensor``) through PyTorch's DLPack C
        exchange API (a capsule named ``"dlpack_exchange_api"``, major version 1) when it fits.
        Pure: always ``False``."""
        ...

    def torch_view(self, cls: type[_V], tensor: Any, stream_ptr: Any, /) -> _V | NotImplementedType:
        """A view of an exact ``torch.Tensor``. For a CUDA tensor, PyTorch's current stream is
        ordered before ``stream_ptr`` (an event recorded on it, waited on by the consumer); a
        host tensor, pinned or not, is CPU memory ordered on nothing (as ``cuda.core`` 1.2
        reports it). Else ``NotImplemented`` (not set up, another type, a negative or conjugate
        view, a stream value DLPack treats specially, no order event yet, a failed record), and
        the caller reads the tensor another way. Pure: always ``NotImplemented``."""
        ...

    def set_order_event(self, device_id: int, event: int, /) -> bool:
        """Keep the event :meth:`torch_view` orders through on a device (ordinals 0..63);
        ``False``: not kept."""
        ...

    def record_wait(self, event: int, producer: int, consumer: int, /) -> int:
        """``cuEventRecord(event, producer)`` then ``cuStreamWaitEvent(consumer, event)``
        under one lock: 0, ``-status`` when the record failed (nothing ordered), ``+status``
        when the wait failed."""
        ...


class NativeBackend(Backend, Protocol):
    """The native module: a :class:`Backend` that also names the entry points it needs, and the
    launch fast path (:class:`LaunchPlan`, :class:`LaunchEntry`, :class:`PreparedLaunchBase`)."""

    @property
    def ARG_KINDS(self) -> tuple[str, ...]:
        """Equal to this module's :data:`ARG_KINDS`."""
        ...

    @property
    def LaunchPlan(self) -> type[_Plan]: ...

    @property
    def LaunchEntry(self) -> type[_Entry]: ...

    @property
    def PreparedLaunchBase(self) -> type[_PreparedBase]: ...

    @property
    def ViewEntry(self) -> type[ViewEntry]:
        """``ViewEntry(fallback, kinds, dlpack_kind, torch_kind)``: the C entry of
        ``StridedMemoryView.from_dlpack`` (see :class:`ViewEntry`)."""
        ...

    @property
    def ClassMethod(self) -> type[ClassMethod]:
        """``ClassMethod(func)``: ``classmethod(func)`` that gives the same bound method
        again (see :class:`ClassMethod`)."""
        ...

    @property
    def RecordEntry(self) -> type[RecordEntry]:
        """``RecordEntry(fallback, stream_type, stream_slot, event_type, event_slot,
        flags_slot, refused)``: the C entry of ``Stream.record`` (see :class:`RecordEntry`)."""
        ...

    @property
    def SyncEntry(self) -> type[SyncEntry]:
        """``SyncEntry(fallback, stream_type, stream_slot)``: the C entry of ``Stream.sync``
        (see :class:`SyncEntry`)."""
        ...

    @property
    def CopyEntry(self) -> type[CopyEntry]:
        """``CopyEntry(fallback, buffer_type, ptr_slot, size_slot, stream_type, stream_slot,
        to)``: the C entry of ``Buffer.copy_from`` and ``copy_to`` (see :class:`CopyEntry`)."""
        ...

    @property
    def AllocEntry(self) -> type[AllocEntry]:
        """``AllocEntry(fallback, resource_type, pool_slot, stream_type, stream_slot,
        buffer_type, h_slot, ptr_slot, size_slot, mr_slot)``: the C entry of
        ``DeviceMemoryResource.allocate`` (see :class:`AllocEntry`)."""
        ...

    @property
    def CloseEntry(self) -> type[CloseEntry]:
        """``CloseEntry(fallback, buffer_type, h_slot, ptr_slot, mr_slot)``: the C entry of
        ``Buffer.close`` (see :class:`CloseEntry`)."""
        ...

    def launch_counters(self) -> tuple[int, int, int, int, int, int]:
        """Since the module loaded: launches made in C, launches handed to Python, and of
        those the ones whose values C began to pack and refused; then the same three for
        ``PreparedLaunch`` calls. Tests read which path ran."""
        ...

    def entry_point_names(self) -> tuple[str, ...]:
        """The driver symbols :meth:`Backend.bind` needs, every one of them."""
        ...

    def is_bound(self) -> bool:
        """Whether :meth:`Backend.bind` ran."""
        ...

    def set_warning_category(self, category: type[Warning], /) -> None:
        """The category a finalizer's failed release is reported as (``cuda_core.CUDAWarning``,
        handed over at import; ``RuntimeWarning`` before). The message names what was released,
        its driver handle and the error, whose text names the call; a failure with status
        ``CUDA_ERROR_DEINITIALIZED`` and any at interpreter exit stay silent, an escalated
        warning goes to :func:`sys.unraisablehook`. ``TypeError`` for a non-Warning class. The
        pure backend reports through :func:`cuda_core._errors.warn_release_failure`."""
        ...
