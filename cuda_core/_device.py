"""Device: a per-thread singleton per GPU ordinal (its attributes: ``_device_properties``)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from . import _links
from ._compat import driver
from ._context import Context, ContextOptions
from ._device_properties import DeviceProperties as DeviceProperties
from ._device_resources import DeviceResources
from ._errors import CUDAError
from ._event import _DISABLE_TIMING, Event, _new_object
from ._handles._backend import backend
from ._handles._contexts import CtxScope, context_handle
from ._handles._driver import ensure_driver
from ._links import device_count
from ._stream import Stream, _borrow, _foreign_handle_attrs
from ._utils import SET_CURRENT_HINT, arg_error, handle_return, ordinal_lead
from ._utils import ComputeCapability as ComputeCapability

if TYPE_CHECKING:
    from ._event import EventOptions
    from ._memory._buffer import Buffer
    from ._memory._resource import MemoryResource
    from ._stream import StreamOptions
    from .graph._builder import GraphBuilder
    from .texture._array import OpaqueArray, OpaqueArrayOptions
    from .texture._mipmapped_array import MipmappedArray, MipmappedArrayOptions
    from .texture._surface import SurfaceObject
    from .texture._texture import ResourceDescriptor, TextureObject, TextureObjectOptions

__all__ = ["ComputeCapability", "Device", "DeviceProperties"]

_SUCCESS = driver.CUresult.CUDA_SUCCESS
_INVALID_CONTEXT = driver.CUresult.CUDA_ERROR_INVALID_CONTEXT
_NEG_INVALID_CONTEXT = -int(_INVALID_CONTEXT)
_cuCtxGetCurrent = driver.cuCtxGetCurrent
_ctx_get_device = backend.ctx_get_device

_tls = threading.local()


class Device:
    """A CUDA device (GPU), a per-thread singleton per ordinal.

    ``Device(0) is Device(0)`` within a thread; each thread has its own objects. Creating a
    ``Device`` creates no context: call :meth:`set_current` before anything that needs one.

    Parameters
    ----------
    device_id : int or Device, optional
        The device ordinal. ``None`` means the device of the context current on this thread, or
        device 0 when none is current. A ``Device`` is returned as it is.

    Raises
    ------
    ValueError
        The ordinal is out of range (the message gives the valid range).
    CUDADriverNotFoundError
        No NVIDIA driver is installed.

    Examples
    --------
    >>> dev = Device()
    >>> dev.set_current()
    >>> s = dev.create_stream()
    """

    __slots__ = (
        "__weakref__",
        "_bound",
        "_cc",
        "_ctx",
        "_ctx_int",
        "_ctxh",
        "_cu_device",
        "_default_stream",
        "_id",
        "_mr",
        "_mr_gen",
        "_name",
        "_props",
    )

    _id: int
    _cu_device: driver.CUdevice
    _ctx: driver.CUcontext | None
    _ctx_int: int
    _ctxh: Any  # the primary context's ContextHandle (idle streams and events hang off it)
    _props: DeviceProperties | None
    _name: str | None
    _cc: ComputeCapability | None
    _default_stream: Stream | None
    _mr: MemoryResource | None
    _mr_gen: int  # the context generation the default resource was made in (0: set by the user)
    _bound: Context | None  # the context set_current(ctx) bound (None: the primary context)

    def __new__(cls, device_id: int | Device | None = None) -> Device:
        if device_id is None:
            ordinal: int
            try:
                ordinal = _ctx_get_device()
            except RuntimeError:  # no libcuda: ensure_driver() raises the clear error
                ensure_driver()
                raise
            if ordinal < 0:  # -status: no current context (device 0), or driver not started
                if ordinal != _NEG_INVALID_CONTEXT:
                    ensure_driver()
                    ordinal = _ctx_get_device()
                if ordinal < 0:
                    ordinal = 0
            device_id = ordinal
        elif type(device_id) is Device:
            return device_id
        try:
            return _tls.devices[device_id]
        except (AttributeError, KeyError, TypeError):
            return cls._slow_new(device_id)

    @classmethod
    def _slow_new(cls, device_id: Any) -> Device:
        if isinstance(device_id, Device):
            return device_id
        if isinstance(device_id, bool) or not isinstance(device_id, int):
            raise arg_error("device_id", "None, a Device or an int", device_id, exc=TypeError)
        count = device_count()
        if not 0 <= device_id < count:
            rule = (
                f"in range [0, {count})"
                if count
                else "a valid ordinal, but no CUDA device was found"
            )
            raise arg_error("device_id", rule, device_id, lead=ordinal_lead(device_id, count))
        devices = getattr(_tls, "devices", None)
        if devices is None:
            devices = _tls.devices = {}
        dev = devices.get(device_id)
        if dev is None:
            dev = object.__new__(cls)
            dev._id = device_id
            dev._cu_device = handle_return(driver.cuDeviceGet(device_id), "cuDeviceGet")
            dev._ctx = None
            dev._ctx_int = 0
            dev._ctxh = None
            dev._props = None
            dev._name = None
            dev._cc = None
            dev._default_stream = None
            dev._mr = None
            dev._mr_gen = 0
            dev._bound = None
            devices[device_id] = dev
        return dev

    # -- identity -----------------------------------------------------------------------------

    @property
    def device_id(self) -> int:
        """The device ordinal."""
        return self._id

    def __int__(self) -> int:
        return self._id

    def __index__(self) -> int:
        return self._id

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Device):
            return NotImplemented
        return self._id == other._id

    def __hash__(self) -> int:
        return hash(("Device", self._id))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Device, (self._id,))

    def __repr__(self) -> str:
        return f"<Device {self._id} ({self.name})>"

    @staticmethod
    def get_all_devices() -> tuple[Device, ...]:
        """Every CUDA device of this machine, in ordinal order (this thread's objects)."""
        return tuple(Device(i) for i in range(device_count()))

    # -- facts --------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The device's name, e.g. ``"NVIDIA H100 80GB HBM3"``."""
        if self._name is None:
            raw = handle_return(driver.cuDeviceGetName(256, self._cu_device), "cuDeviceGetName")
            self._name = raw.split(b"\0", 1)[0].decode()
        return self._name

    @property
    def uuid(self) -> str:
        """The device's UUID as ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``."""
        raw = handle_return(driver.cuDeviceGetUuid(self._cu_device), "cuDeviceGetUuid").bytes
        h = bytes(raw)[:16].hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    @property
    def pci_bus_id(self) -> str:
        """The PCI bus id, ``domain:bus:device.function`` in hexadecimal, e.g. ``"0000:3B:00.0"``."""
        raw = handle_return(driver.cuDeviceGetPCIBusId(32, self._cu_device), "cuDeviceGetPCIBusId")
        if isinstance(raw, bytes):
            raw = raw.split(b"\0", 1)[0].decode()
        return str(raw).split("\0", 1)[0]

    @property
    def compute_capability(self) -> ComputeCapability:
        """The compute capability as a ``ComputeCapability(major, minor)`` named tuple."""
        if self._cc is None:
            p = self.properties
            self._cc = ComputeCapability(p.compute_capability_major, p.compute_capability_minor)
        return self._cc

    @property
    def arch(self) -> str:
        """The architecture as a string of major and minor, e.g. ``"90"`` (use as ``f"sm_{arch}"``)."""
        major, minor = self.compute_capability
        return f"{major}{minor}"

    @property
    def properties(self) -> DeviceProperties:
        """Every device attribute as a cached read-only property (:class:`DeviceProperties`)."""
        if self._props is None:
            self._props = DeviceProperties._for(self._cu_device)
        return self._props

    @property
    def total_memory(self) -> int:
        """The device's memory in bytes."""
        return int(handle_return(driver.cuDeviceTotalMem(self._cu_device), "cuDeviceTotalMem"))

    def can_access_peer(self, peer: Device | int) -> bool:
        """Whether this device can access memory of *peer* directly (always true for itself)."""
        other = Device(peer)
        if other._id == self._id:
            return True
        ok = handle_return(
            driver.cuDeviceCanAccessPeer(self._cu_device, other._cu_device), "cuDeviceCanAccessPeer"
        )
        return bool(ok)

    # -- context ------------------------------------------------------------------------------

    def set_current(self, ctx: Context | None = None) -> Context | None:
        """Make this device's primary context (or *ctx*) current on the calling thread.

        The context made current is also the one this ``Device`` object's methods act on
        (:meth:`create_stream`, :meth:`create_event`, :meth:`sync`, :attr:`context`), from
        then on and whatever context is current when they are called.

        Parameters
        ----------
        ctx : Context, optional
            A context to make current instead of the primary context: it replaces the current
            one (one ``cuCtxSetCurrent``, so a failure leaves the previous context current). A
            context of another device is handed to that device's ``set_current`` (its
            ``Device`` object binds it), as in ``cuda.core`` 1.3.

        Returns
        -------
        Context or None
            With *ctx*, the context that was current before (``None`` if none was); it can be
            given back to ``set_current`` of any ``Device``. Without, ``None``.

        Raises
        ------
        TypeError
            *ctx* is not a :class:`Context`.
        RuntimeError
            *ctx* is closed.
        """
        if ctx is not None:
            if not isinstance(ctx, Context):
                raise arg_error("ctx", "a Context or None", ctx, exc=TypeError)
            handle = ctx._live()
            owner = ctx.device
            if owner._id != self._id:
                return owner.set_current(ctx)
            err, cur = _cuCtxGetCurrent()
            prev = cur if err == _SUCCESS and int(cur) != 0 else None
            handle_return(driver.cuCtxSetCurrent(handle), "cuCtxSetCurrent")
            # The primary context (a Context from Device.context, or one set_current returned)
            # binds as the primary context does; any other stays bound as given.
            self._bound = None if self._ctx is not None and ctx._int == self._ctx_int else ctx
            return None if prev is None else Context._from_ctx(prev)
        self._primary_ctx()
        self._ctxh.check()  # re-initialised by the handle if another library reset it
        handle_return(driver.cuCtxSetCurrent(self._scope()._ctx), "cuCtxSetCurrent")
        self._bound = None
        return None

    @staticmethod
    def _has_current() -> bool:
        err, cur = _cuCtxGetCurrent()
        return err == _SUCCESS and int(cur) != 0

    def _primary_ctx(self) -> driver.CUcontext:
        """Retain (once per Device object) and return this device's primary context."""
        if self._ctx is None:
            ctx = handle_return(
                driver.cuDevicePrimaryCtxRetain(self._cu_device), "cuDevicePrimaryCtxRetain"
            )
            self._ctxh = context_handle(int(ctx), self._id)
            self._ctx_int = int(ctx)
            self._ctx = ctx
        return self._ctx

    def _context_handle(self) -> Any:
        """The primary context's ContextHandle (needs :meth:`set_current` first); a context
        reset by another library is found and re-initialised by the handle itself."""
        h = self._ctxh
        if h is None:
            self._require_ctx()
            h = self._ctxh
        return h

    def _require_ctx(self, api: str = "") -> driver.CUcontext:
        """The primary context, or a CUDAError telling the user to call set_current() first.

        A device bound to a context of its own (``set_current(ctx)``) counts as set up: its
        primary context is retained here for what runs there (memory, the default stream)."""
        ctx = self._ctx
        if ctx is None:
            if self._bound is not None:
                return self._primary_ctx()
            raise CUDAError(
                api or "Device",
                "CUDA_ERROR_INVALID_CONTEXT",
                f"device {self._id} has no context yet; call Device({self._id}).set_current() first "
                f"({SET_CURRENT_HINT.split('; ')[0]})",
                int(_INVALID_CONTEXT),
            )
        return ctx

    def _scope(self) -> CtxScope:
        """A context manager that makes this device's primary context current for a block."""
        h = self._ctxh
        if h is None:
            self._require_ctx()
        elif h.address != self._ctx_int:  # re-initialised after a reset, at a new address
            self._ctx, self._ctx_int = driver.CUcontext(h.address), h.address
        return CtxScope(self._ctx, self._ctx_int)

    def _bound_scope(self, api: str) -> CtxScope:
        """A context manager that makes the context this device is bound to current for a
        block: the one ``set_current(ctx)`` bound, else the primary context."""
        b = self._bound
        if b is None:
            self._require_ctx(api)
            return self._scope()
        if b._handle is None:
            raise _bound_closed(self._id)
        return CtxScope(b._handle, b._int)

    @property
    def context(self) -> Context:
        """The :class:`Context` this device's methods act on: the primary context, or the one
        :meth:`set_current` was given (needs :meth:`set_current` first)."""
        b = self._bound
        if b is not None:
            return b
        return Context._from_ctx(self._require_ctx("Device.context"), self)

    @property
    def resources(self) -> DeviceResources:
        """The device's hardware resources (SMs, work queues) to partition into green contexts.

        Examples
        --------
        >>> groups, rest = dev.resources.sm.split(SMResourceOptions(count=[16, 16]))
        >>> ctx = dev.create_context(ContextOptions(resources=[groups[0]]))
        """
        return DeviceResources._of(self._id)

    def create_context(self, options: ContextOptions | dict | None = None) -> Context:
        """Create a new context on this device, owned by the returned :class:`Context`.

        The new context is not made current (use :meth:`set_current` with it). Streams made
        with :meth:`Context.create_stream` belong to it; :meth:`Context.close` destroys it.

        Parameters
        ----------
        options : ContextOptions or dict, optional
            With ``resources`` (SM groups from :meth:`SMResource.split`, a
            :class:`WorkqueueResource`): a green context over those resources
            (``cuGreenCtxCreate``, CUDA 12.4+). Without options (an extension of cuda_core):
            a plain context (``cuCtxCreate``).

        Returns
        -------
        Context
            The new owned context.

        Raises
        ------
        TypeError, ValueError
            Malformed options or resources (dry-run groups, another device's resources).
        CUDAError
            The driver refused the resources.
        NotImplementedError
            The driver or bindings are older than CUDA 12.4 (green contexts).
        """
        ensure_driver()
        return Context._create(self, options)

    def sync(self) -> None:
        """Wait until all work on this device's context is done.

        The context is the one :attr:`context` names (the primary context unless
        :meth:`set_current` was given another); it is made current for the call only, so this
        works whatever context is current on the calling thread (none, another device's) and
        leaves it current.
        """
        with self._bound_scope("Device.sync"):
            handle_return(driver.cuCtxSynchronize(), "cuCtxSynchronize")

    # -- factories ----------------------------------------------------------------------------

    @property
    def default_stream(self) -> Stream:
        """The default (legacy, synchronising) stream of this device's primary context.

        Once the device has a context (:meth:`set_current`), work queued on it runs on this
        device even on a thread where another device's context is current (the driver's token
        for it would otherwise mean the current context's stream). Before that, it is the
        legacy default stream of whatever context is current, as
        :data:`~cuda_core.LEGACY_DEFAULT_STREAM` is.
        """
        s = self._default_stream
        if s is None or s._h.ctx is not self._ctxh or s._h.is_released:
            s = self._default_stream = Stream._legacy_default(self)
        return s

    def create_stream(self, obj: Any = None, options: StreamOptions | dict | None = None) -> Stream:
        """Create a new stream on this device, or wrap a foreign stream.

        Parameters
        ----------
        obj : object, optional
            An object with ``__cuda_stream__`` (a PyTorch or CuPy stream, ...). The result
            borrows its handle, keeps *obj* alive and never destroys the stream.
        options : StreamOptions or dict, optional
            For a new stream: non-blocking (default ``True``) and priority.

        Returns
        -------
        Stream
            A new owned stream (closed by :meth:`Stream.close`), or a borrowed one. A new
            stream is made in the context :attr:`context` names (made current for the call
            only: the calling thread's current context is left as it is).
        """
        b = self._bound
        if b is None and self._ctx is None:
            self._require_ctx("Device.create_stream")
        if obj is not None:
            if options is not None:
                raise ValueError(
                    "obj and options cannot be both specified: options must be None when obj "
                    "is given (a borrowed stream keeps its own)"
                )
            attr = _foreign_handle_attrs.get(obj.__class__)
            if attr:  # a PyTorch/CuPy stream class seen before (Stream._from_foreign, inlined)
                return _borrow(Stream, getattr(obj, attr), obj)
            return Stream._from_foreign(obj)
        if b is not None:
            if b._handle is None:
                raise _bound_closed(self._id)
            return b.create_stream(options)
        return Stream._create(self, options)

    def create_event(self, options: EventOptions | dict | None = None) -> Event:
        """Create a new event on this device (see :class:`EventOptions`), in the context
        :attr:`context` names, whatever context is current on the calling thread."""
        b, h = self._bound, self._ctxh
        if options is None and b is None and h is not None:  # Event._create's usual case, inlined
            ev, f = _new_object(Event), _DISABLE_TIMING  # options=None: no timing
            ev._h, ev._device_id, ev._flags = h.create_event(f), self._id, f
            return ev
        if b is None:
            if self._ctx is None:
                self._require_ctx("Device.create_event")
            return Event._create(self, options)
        if b._handle is None:
            raise _bound_closed(self._id)
        return Event._create(self, options, b)

    def create_graph_builder(self) -> GraphBuilder:
        """A graph builder capturing on a new stream of this device."""
        return _links.graph_builder(self.create_stream(), True)

    @property
    def memory_resource(self) -> MemoryResource:
        """The resource :meth:`allocate` uses (default: the device's stream-ordered memory pool)."""
        mr = self._mr
        h = self._ctxh
        if mr is None or (self._mr_gen and h is not None and h.generation != self._mr_gen):
            # (Re)made when the context was reset since: its pool died with the context.
            mr = self._mr = _links.default_memory_resource(self)
            self._mr_gen = h.generation if h is not None else 0
        return mr

    @memory_resource.setter
    def memory_resource(self, mr: MemoryResource) -> None:
        if not isinstance(mr, _links.MemoryResource):
            raise arg_error("memory_resource", "a MemoryResource", mr, exc=TypeError)
        self._mr = mr
        self._mr_gen = 0

    def allocate(self, size: int, *, stream: Any = None) -> Buffer:
        """Allocate *size* bytes from :attr:`memory_resource`, ordered on *stream*.

        With no stream the allocation is ordered on the device's default stream.
        """
        if self._ctx is None:
            self._require_ctx("Device.allocate")
        if self._mr_gen:
            self._ctxh.check()  # a context reset by another library is found (and its pool remade)
        return self.memory_resource.allocate(
            size, stream=self.default_stream if stream is None else stream
        )

    def to_system_device(self) -> Any:  # a cuda_core.system.Device
        """The :class:`cuda_core.system.Device` (NVML's view) of this GPU, matched by UUID.

        Needs NVML but no CUDA context.

        Returns
        -------
        cuda_core.system.Device
            The NVML device with this device's UUID.

        Raises
        ------
        cuda_core.system.NvmlError
            NVML is missing (:class:`cuda_core.system.LibraryNotFoundError`) or does not know
            this UUID (:class:`cuda_core.system.NotFoundError`).
        """
        return _links.system_device(self.uuid)

    def create_opaque_array(self, options: OpaqueArrayOptions | dict) -> OpaqueArray:
        """Allocate a CUDA array (:class:`~cuda_core.texture.OpaqueArray`) on this device.

        Needs :meth:`set_current` first. ``options`` is an
        :class:`~cuda_core.texture.OpaqueArrayOptions` (or a dict of its fields). The array
        belongs to the caller (``close()`` or collection destroys it).
        """
        return self._in_primary("create_opaque_array", options)

    def create_mipmapped_array(self, options: MipmappedArrayOptions | dict) -> MipmappedArray:
        """Allocate a :class:`~cuda_core.texture.MipmappedArray` on this device.

        Needs :meth:`set_current` first. ``options`` is a
        :class:`~cuda_core.texture.MipmappedArrayOptions` (or a dict of its fields).
        """
        return self._in_primary("create_mipmapped_array", options)

    def create_texture_object(
        self, *, resource: ResourceDescriptor, options: TextureObjectOptions | dict | None = None
    ) -> TextureObject:
        """Create a bindless :class:`~cuda_core.texture.TextureObject` reading ``resource``.

        Needs :meth:`set_current` first. ``options`` (a
        :class:`~cuda_core.texture.TextureObjectOptions`, a dict or ``None`` for the defaults)
        sets addressing, filtering and read mode. Pass ``texture.handle`` to kernels.
        """
        return self._in_primary("create_texture_object", resource, options)

    def create_surface_object(self, *, resource: ResourceDescriptor) -> SurfaceObject:
        """Create a bindless :class:`~cuda_core.texture.SurfaceObject` on ``resource``.

        Needs :meth:`set_current` first. ``resource`` wraps an
        :class:`~cuda_core.texture.OpaqueArray` created with ``is_surface_load_store=True``.
        Pass ``surface.handle`` to kernels.
        """
        return self._in_primary("create_surface_object", resource)

    def _in_primary(self, factory: str, *args: Any) -> Any:
        """``textures.<factory>(self, *args)`` with the primary context current for the call."""
        if self._ctx is None:
            self._require_ctx(f"Device.{factory}")
        with self._scope():
            return getattr(_links.textures, factory)(self, *args)


def _bound_closed(device_id: int) -> RuntimeError:
    return RuntimeError(
        f"the context Device({device_id}).set_current(ctx) was given is closed; call "
        f"Device({device_id}).set_current() (or pass an open context) first"
    )


_links.Device = Device
