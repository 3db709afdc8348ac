"""Context: a CUDA context, as returned by :attr:`Device.context` and :attr:`Stream.context`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cuda.bindings import driver

from ._backend import backend
from ._utils import handle_return

if TYPE_CHECKING:
    from ._device import Device

__all__ = ["Context"]

# ContextHandle by context address: one handle per live context, so that every stream, event
# and allocation of a context shares its idle pools and generation. A handle that fails its
# check (the context was destroyed, its address reused) is replaced.
_handles: dict[int, Any] = {}


def context_handle(address: int, device: int = -1) -> Any:
    """The ContextHandle of the context at ``address`` (``device >= 0``: the primary context
    of that device, which the handle re-initialises when it finds it reset)."""
    h = _handles.get(address)
    if h is None or (device >= 0 and h.device < 0) or not h.check():
        h = _handles[address] = backend.ContextHandle(address, device)
    return h


class Context:
    """A CUDA context (borrowed: cuda_core never destroys a context it did not create).

    Obtained from :attr:`Device.context` or :attr:`Stream.context`; not constructed directly.
    Two ``Context`` objects are equal when they wrap the same driver context.
    """

    __slots__ = ("__weakref__", "_device", "_handle", "_int")

    _handle: driver.CUcontext
    _int: int
    _device: Device | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Context cannot be constructed directly; use Device.context or Stream.context")

    @classmethod
    def _from_ctx(cls, handle: driver.CUcontext, device: Device | None = None) -> Context:
        self = object.__new__(cls)
        self._handle = handle
        self._int = int(handle)
        self._device = device
        return self

    @property
    def handle(self) -> driver.CUcontext:
        """The driver handle (``cuda.bindings.driver.CUcontext``); ``int(handle)`` is its address."""
        return self._handle

    @property
    def device(self) -> Device:
        """The :class:`Device` this context belongs to."""
        if self._device is None:
            from ._device import Device  # a Device owns its context: _device imports this module

            handle_return(driver.cuCtxPushCurrent(self._handle), "cuCtxPushCurrent")
            try:
                dev_id = int(handle_return(driver.cuCtxGetDevice(), "cuCtxGetDevice"))
            finally:
                handle_return(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
            self._device = Device(dev_id)
        return self._device

    @property
    def is_green(self) -> bool:
        """Whether this is a green context (cuda_core creates none; always ``False``)."""
        return False

    @property
    def is_closed(self) -> bool:
        """Always ``False``: a borrowed context is never destroyed by cuda_core."""
        return False

    def close(self) -> None:
        """Nothing to release: cuda_core never destroys a context it did not create."""

    def create_stream(self, options: Any = None) -> Any:
        """Create a new stream in this context (see :meth:`Device.create_stream`)."""
        from ._stream import Stream  # a context creates streams, which report their context

        dev = self.device
        if dev._ctx is not None and dev._ctx_int == self._int:
            return dev.create_stream(options=options)
        handle_return(driver.cuCtxPushCurrent(self._handle), "cuCtxPushCurrent")
        try:
            return Stream._create(dev, options, use_current=True)
        finally:
            handle_return(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Context):
            return NotImplemented
        return self._int == other._int

    def __hash__(self) -> int:
        return hash(("Context", self._int))

    def __repr__(self) -> str:
        return f"<Context handle=0x{self._int:x}>"
