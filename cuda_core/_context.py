"""Context: a CUDA context, borrowed (primary, current) or owned (made by Device.create_context).

A borrowed context (:attr:`Device.context`, :attr:`Stream.context`) is never destroyed by
cuda_core. An owned one is made by :meth:`Device.create_context`: a green context over a
partition of the device's SMs (``cuGreenCtxCreate``, with :class:`ContextOptions`) or a plain
one (``cuCtxCreate``, without options). It owns the streams and events made in it: they go
through its ContextHandle (its idle pools), and :meth:`Context.close` closes them, drops the
pools and destroys the context (``cuGreenCtxDestroy`` / ``cuCtxDestroy``).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _links
from ._compat import driver
from ._device_resources import (
    DeviceResources,
    SMResource,
    WorkqueueResource,
    require_green_contexts,
)
from ._handles._contexts import CtxScope, context_handle
from ._handles._owned_context import OwnedContext, owner_of
from ._utils import arg_error, check_or_create_options, handle_return, note_failed_rollback

if TYPE_CHECKING:
    from ._device import Device
    from ._stream import Stream, StreamOptions

__all__ = ["Context", "ContextOptions"]

_GREEN_FLAGS = int(
    getattr(getattr(driver, "CUgreenCtxCreate_flags", None), "CU_GREEN_CTX_DEFAULT_STREAM", 1)
)


@dataclass
class ContextOptions:
    """Options for :meth:`Device.create_context`.

    Attributes
    ----------
    resources : DeviceResourcesType
        The resources of the new green context: a sequence of :class:`SMResource` (groups of
        one :meth:`SMResource.split`) and at most one :class:`WorkqueueResource`. Checked by
        :meth:`Device.create_context`.
    """

    resources: Sequence[SMResource | WorkqueueResource]


class Context:
    """A CUDA context.

    Borrowed from :attr:`Device.context` or :attr:`Stream.context` (never destroyed by
    cuda_core), or owned: made by :meth:`Device.create_context` (a green context with
    :class:`ContextOptions`, else a plain one) and destroyed by :meth:`close`. Not constructed
    directly. Two ``Context`` objects are equal when they wrap the same driver context.
    """

    __slots__ = ("__weakref__", "_device_id", "_handle", "_int", "_owned")

    _handle: driver.CUcontext | None  # None once closed
    _int: int
    _device_id: int  # the ordinal of its device; -1 until asked
    _owned: OwnedContext | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "Context objects cannot be instantiated directly. Use Device.context, Stream.context or Device.create_context()"
        )

    @classmethod
    def _from_ctx(cls, handle: driver.CUcontext, device: Device | None = None) -> Context:
        owner = owner_of(int(handle))
        if owner is not None:
            return _context_of(owner)
        self = object.__new__(cls)
        self._handle = handle
        self._int = int(handle)
        self._device_id = -1 if device is None else device._id
        self._owned = None
        return self

    @classmethod
    def _create(cls, device: Device, options: Any) -> Context:
        """A new owned context on ``device``, not made current (see Device.create_context)."""
        if options is None:
            green = None
            resources: list[Any] = []
            ctx = _create_plain(device)
        else:
            if isinstance(options, dict) and "resources" not in options:
                raise arg_error(
                    "options", "a ContextOptions or a dict with 'resources'", options, exc=TypeError
                )
            opts = check_or_create_options(ContextOptions, options, "options")
            resources = _check_resources(opts.resources, device.device_id)
            require_green_contexts()
            desc = handle_return(
                driver.cuDevResourceGenerateDesc(resources, len(resources)),
                "cuDevResourceGenerateDesc",
            )
            green = handle_return(
                driver.cuGreenCtxCreate(desc, driver.CUdevice(device.device_id), _GREEN_FLAGS),
                "cuGreenCtxCreate",
            )
            try:
                ctx = handle_return(driver.cuCtxFromGreenCtx(green), "cuCtxFromGreenCtx")
            except BaseException as exc:
                note_failed_rollback(exc, driver.cuGreenCtxDestroy(green), "cuGreenCtxDestroy")
                raise
        return _context_of(OwnedContext(ctx, green, resources, device.device_id))

    @property
    def handle(self) -> driver.CUcontext | None:
        """The driver handle (``cuda.bindings.driver.CUcontext``); ``None`` once closed."""
        return self._handle

    @property
    def device(self) -> Device:
        """The :class:`Device` this context belongs to."""
        if self._device_id < 0:
            with CtxScope(self._live(), self._int):
                self._device_id = int(handle_return(driver.cuCtxGetDevice(), "cuCtxGetDevice"))
        return _links.Device(self._device_id)  # type: ignore[no-any-return]

    def _live(self) -> driver.CUcontext:
        if self._handle is None:
            raise RuntimeError("Context has been closed")
        return self._handle

    def _context_handle(self) -> Any:
        """The ContextHandle its streams and events are made through (an owned context's own)."""
        owned = self._owned
        return owned.ctxh if owned is not None else context_handle(int(self._live()))

    @property
    def is_green(self) -> bool:
        """Whether this is a green context (made from device resources)."""
        owned = self._owned
        return owned is not None and owned.green is not None

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` destroyed this context (always ``False`` for a borrowed one)."""
        return self._handle is None

    @property
    def resources(self) -> DeviceResources:
        """The resources provisioned for this context (a green context's own partition, the
        whole device's for any other context).

        Raises
        ------
        RuntimeError
            The context is closed.
        """
        self._live()
        owned = self._owned
        if owned is not None and owned.green is not None:
            return DeviceResources._of(self.device.device_id, "green", owned.green)
        return DeviceResources._of(self.device.device_id)

    def close(self) -> None:
        """Destroy an owned context (idempotent; a borrowed context is left alone).

        The streams and events made in it are closed first (work already queued still
        completes); using them afterwards raises ``RuntimeError``.

        Raises
        ------
        RuntimeError
            The context is current on the calling thread: make another one current first.
        CUDAError
            The driver failed to destroy the context.
        """
        owned = self._owned
        if owned is None:
            return
        if self._handle is None:
            return
        err, cur = driver.cuCtxGetCurrent()
        if not err and int(cur) == self._int:
            raise RuntimeError(
                "Cannot close a CUDA context while it is current. Restore a previous context "
                "before closing this context: make another context current on this thread first "
                "(e.g. Device.set_current(), or the context set_current() returned)"
            )
        self._handle = None
        owned.destroy()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def create_stream(self, options: StreamOptions | dict | None = None) -> Stream:
        """Create a new stream in this context.

        On a green context the stream runs its kernels on the context's SMs only. It belongs to
        the context: :meth:`close` closes it.

        Raises
        ------
        RuntimeError
            The context is closed.
        ValueError
            A blocking stream (``StreamOptions(nonblocking=False)``) was asked of a green
            context: its streams are non-blocking (``cuGreenCtxStreamCreate``'s rule).
        """
        # A context creates streams, which report their context: _stream imports this module.
        from . import _stream

        Stream, StreamOptions = _stream.Stream, _stream.StreamOptions

        self._live()
        owned = self._owned
        dev = self.device
        if owned is not None:
            if owned.green is not None and options is not None:
                opts = check_or_create_options(StreamOptions, options, "options")
                if not opts.nonblocking:
                    raise ValueError(
                        "Green context streams must be non-blocking. Use "
                        "StreamOptions(nonblocking=True) or omit the option (True is the "
                        f"default): got StreamOptions(nonblocking={opts.nonblocking!r})"
                    )
                options = opts
            stream = Stream._create(dev, options, ctxh=owned.ctxh)
            owned.adopt(stream._h)
            return stream  # type: ignore[no-any-return]
        if dev._ctx is not None and dev._ctx_int == self._int:
            return Stream._create(dev, options)
        with CtxScope(self._live(), self._int):
            return Stream._create(dev, options, use_current=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        return self._int == other._int

    def __hash__(self) -> int:
        return hash(("Context", self._int))

    def __repr__(self) -> str:
        if self._handle is None:
            return f"<Context handle=0x{self._int:x} closed>"
        try:  # cuda.core's format
            dev = self.device.device_id
        except Exception:
            return f"<Context handle=0x{self._int:x}>"
        return f"<Context handle=0x{self._int:x} device={dev}>"


def adopt_child(handle: Any, ctxh: Any) -> Any:
    """Make the stream or event handle ``handle``, made through ``ctxh``, a child of the owned
    context of ``ctxh``, if any (released with it); returns the handle."""
    owner = owner_of(ctxh.address)
    if owner is not None:
        owner.adopt(handle)
    return handle


# The Context object that stands for each owned context now, by address (made again when the
# user's one was collected while the context lives on through its streams and events).
_wrappers: weakref.WeakValueDictionary[int, Context] = weakref.WeakValueDictionary()


def _context_of(owned: OwnedContext) -> Context:
    """The Context object of an owned context."""
    ctx = _wrappers.get(owned.address)
    if ctx is None or ctx._owned is not owned:  # (a new context at a dead one's address)
        ctx = object.__new__(Context)
        ctx._handle = None if owned.closed else owned.ctx
        ctx._int = owned.address
        ctx._device_id = owned.device_id
        ctx._owned = owned
        _wrappers[owned.address] = ctx
        weakref.finalize(ctx, owned.orphan, owned.new_user())
    return ctx


def _create_plain(device: Device) -> Any:
    """``cuCtxCreate`` on ``device``, popped again so that the caller's context stays current."""
    dev = driver.CUdevice(device.device_id)
    ctx = handle_return(driver.cuCtxCreate(None, 0, dev), "cuCtxCreate")
    handle_return(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
    return ctx


def _check_resources(resources: Any, device_id: int) -> list[Any]:
    """The driver structs of ``ContextOptions.resources``, checked."""
    rule = "a non-empty sequence of SMResource (from SMResource.split) and at most one WorkqueueResource"
    if resources is None:
        raise ValueError(f"ContextOptions.resources must be provided for a green context: {rule}")
    if not isinstance(resources, Sequence) or isinstance(resources, (str, bytes)) or not resources:
        raise arg_error(
            "ContextOptions.resources",
            rule,
            resources,
            exc=TypeError if not isinstance(resources, Sequence) else ValueError,
        )
    out = []
    queues = 0
    for r in resources:
        if isinstance(r, SMResource):
            if not r._usable:
                raise arg_error(
                    "ContextOptions.resources",
                    "real split results, not a dry-run SMResource (split(..., dry_run=True) only reports sizes)",
                    r,
                )
            if r.device_id != device_id:
                raise arg_error("ContextOptions.resources", f"resources of device {device_id}", r)
            if not r.sm_count:
                raise arg_error("ContextOptions.resources", "SM resources with at least one SM", r)
            out.append(r._res)
        elif isinstance(r, WorkqueueResource):
            queues += 1
            if r._device_id != device_id:
                raise arg_error("ContextOptions.resources", f"resources of device {device_id}", r)
            out.append(r._config)
        else:
            raise arg_error("ContextOptions.resources", rule, resources, exc=TypeError)
    if queues > 1:
        raise arg_error("ContextOptions.resources", rule, resources)
    return out
