"""Handles of the cold kinds of driver object: one implementation that both backends share.

A cold kind is made and destroyed off the hot paths: a loaded library, an NVRTC or NVVM
program, an nvJitLink (or driver) link state, a graph, an executable graph, a graph node's
user object, a CUDA array or mipmapped array, a texture or surface object, a memory pool, a
graphics resource, an import of external memory, an external semaphore
(``_external``). (An owned context has a handle of its own: ``_owned_context``.) Each such
object is owned by one :class:`OwnedHandle`, which

* destroys it exactly once: at :meth:`~OwnedHandle.release`, or when the handle is collected
  (a ``weakref.finalize`` that references only the raw value and the destroy function, never
  the handle or the Python object that owns the handle);
* holds the handles its object depends on (``deps``: a texture object its array's handle, a
  mip level its mipmapped array's), so that they outlive it;
* never raises from :meth:`~OwnedHandle.release` or its finalizer: a failed destroy (an
  exception, or a ``cuda.bindings`` result whose status is not success) is a
  :class:`~cuda_core.CUDAWarning` naming the call, the handle and the error
  (``CUDA_ERROR_DEINITIALIZED`` and interpreter exit stay silent). :meth:`~OwnedHandle.take`
  hands the value to a caller that destroys it and raises instead.

A borrowed value (``destroy=None``: a mip level of a mipmapped array, a graph the driver owns)
is never destroyed; its handle still holds its dependencies.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .._errors import warn_release_failure
from .._utils import make_error

__all__: list[str] = []  # private module

# The kinds, with the call that destroys each (docs/dev/architecture.rst, "Lifetimes"), named
# in the warning a failed destroy gives.
KINDS = {
    "library": "cuLibraryUnload",  # ObjectCode
    "nvrtc program": "nvrtcDestroyProgram",  # Program
    "graph": "cuGraphDestroy",  # GraphBuilder, GraphDefinition
    "graph exec": "cuGraphExecDestroy",  # Graph
    "user object": "cuUserObjectRelease",  # a host callback a graph node keeps
    "array": "cuArrayDestroy",  # OpaqueArray
    "mipmapped array": "cuMipmappedArrayDestroy",  # MipmappedArray
    "texture object": "cuTexObjectDestroy",  # TextureObject
    "surface object": "cuSurfObjectDestroy",  # SurfaceObject
    "memory pool": "cuMemPoolDestroy",  # pool resources (peer access revoked first)
    "ipc file descriptor": "close",  # os.close (IPCAllocationHandle: a pool's shareable handle)
    "graphics resource": "cuGraphicsUnregisterResource",  # GraphicsResource
    "external memory": "cuDestroyExternalMemory",  # ExternalMemory (after its mappings)
    "external semaphore": "cuDestroyExternalSemaphore",  # ExternalSemaphore
    "nvjitlink handle": "nvJitLinkDestroy",  # Linker.link
    "driver link state": "cuLinkDestroy",  # Linker.link where nvJitLink is missing
    "nvvm program": "nvvmDestroyProgram",  # Program.compile of NVVM IR
}


def _destroy_once(destroy: Callable[[Any], object], box: list[Any], kind: str) -> None:
    value, box[0] = box[0], None
    if value is None:
        return
    call = KINDS.get(kind) or getattr(destroy, "__name__", "") or "destroy"
    try:
        result = destroy(value)
    except Exception as exc:  # reported, never raised (a finalizer, or a close that must not)
        warn_release_failure(f"the {kind}", value, exc, call)
        return
    # A cuda.bindings call returns its status instead of raising: (CUresult,), (nvrtcResult,).
    if type(result) is tuple and result and result[0]:
        warn_release_failure(f"the {kind}", value, make_error(result[0], call), call)


class OwnedHandle:
    """Owns (or, with ``destroy=None``, borrows) one driver object of a cold kind.

    Parameters
    ----------
    kind : str
        One of :data:`KINDS` (for messages and the lifetimes table; it names the destroy call
        in the warning a failure gives).
    value : object, optional
        The raw driver value (``CUgraph``, an ``int`` address, ...); ``None`` until
        :meth:`adopt` gives one (an NVRTC program is made on first use).
    destroy : callable, optional
        Destroys the value; ``None`` for a borrowed value.
    deps : tuple, optional
        Handles this object depends on, kept alive as long as this handle.
    at_exit : bool
        Whether the finalizer still runs at interpreter exit.
    """

    __slots__ = ("__weakref__", "_box", "_destroy", "deps", "kind")

    def __init__(
        self,
        kind: str,
        value: Any = None,
        destroy: Callable[[Any], object] | None = None,
        deps: tuple[Any, ...] = (),
        *,
        at_exit: bool = True,
    ) -> None:
        self.kind = kind
        self.deps = deps
        self._box: list[Any] = [value]
        self._destroy = destroy
        if destroy is not None:
            weakref.finalize(self, _destroy_once, destroy, self._box, kind).atexit = at_exit

    @property
    def value(self) -> Any:
        """The raw driver value; ``None`` once released (or before :meth:`adopt`)."""
        return self._box[0]

    @property
    def is_released(self) -> bool:
        """Whether the value was released (or never given)."""
        return self._box[0] is None

    def adopt(self, value: Any) -> None:
        """Take ownership of ``value`` (made after this handle), releasing any earlier one."""
        self.release()
        self._box[0] = value

    def take(self) -> Any:
        """Hand the value over to the caller, who destroys it now and sees any error; the
        finalizer then finds nothing. ``None`` once released."""
        value, self._box[0] = self._box[0], None
        return value

    def release(self) -> None:
        """Destroy the value now (a borrowed one is only forgotten); idempotent. The finalizer
        then finds nothing to destroy."""
        destroy = self._destroy
        if destroy is None:
            self._box[0] = None
        else:
            _destroy_once(destroy, self._box, self.kind)

    def __repr__(self) -> str:
        value = self._box[0]
        state = "released" if value is None else f"0x{int(value):x}"
        return f"<OwnedHandle {self.kind} {state}>"
