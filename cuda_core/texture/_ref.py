"""ResourceRef: the holder of one raw texture/surface/array handle, destroyed exactly once.

Owners (``OpaqueArray``, ``MipmappedArray``, ``TextureObject``, ``SurfaceObject``) hold a
strong reference to a ``ResourceRef``; objects built on another one (a texture on an array, a
mip level on its mipmapped array) hold that one's ref in ``deps``. ``close()`` drops the
owner's reference, so the driver object is destroyed when the last user lets go (CPython frees
it at once). The ``weakref.finalize`` references only the raw handle and the destroy function,
never an owner; it is not run at interpreter exit (the process's GPU objects die with it).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .. import _links
from .._compat import driver

__all__: list[str] = []  # private module


def _release(destroy: Callable[[int], object], handle: int) -> None:
    try:
        destroy(handle)
    except Exception:  # a finalizer never raises (driver gone, context destroyed)
        pass


class ResourceRef:
    """Owns (or, with ``destroy=None``, borrows) the raw handle ``handle``; keeps ``deps`` alive."""

    __slots__ = ("__weakref__", "deps", "handle")

    def __init__(
        self, handle: int, destroy: Callable[[int], object] | None, deps: tuple[Any, ...] = ()
    ) -> None:
        self.handle = handle
        self.deps = deps
        if destroy is not None:
            weakref.finalize(self, _release, destroy, handle).atexit = False


def destroy_array(h: int) -> object:
    return driver.cuArrayDestroy(driver.CUarray(h))


def destroy_mipmapped_array(h: int) -> object:
    return driver.cuMipmappedArrayDestroy(driver.CUmipmappedArray(h))


def destroy_texture(h: int) -> object:
    return driver.cuTexObjectDestroy(driver.CUtexObject(h))


def destroy_surface(h: int) -> object:
    return driver.cuSurfObjectDestroy(driver.CUsurfObject(h))


class Owner:
    """Base of the four owning classes: ``close()``, ``is_closed``, ``handle``, ``with``."""

    __slots__ = ("__weakref__", "_device_id", "_ref")

    _ref: ResourceRef | None
    _device_id: int  # the ordinal of the device it was created on

    @property
    def handle(self) -> int:
        """The raw driver handle as an ``int`` (``0`` after :meth:`close`)."""
        r = self._ref
        return 0 if r is None else r.handle

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._ref is None

    @property
    def device(self) -> Any:
        """The :class:`~cuda_core.Device` this object was created on."""
        return None if self._device_id < 0 else _links.Device(self._device_id)

    def close(self) -> None:
        """Release this object's reference to the driver object; idempotent.

        The driver object is destroyed when no other object (a texture or surface built on
        it, a mip level) still uses it.
        """
        self._ref = None

    def _live(self) -> ResourceRef:
        r = self._ref
        if r is None:
            raise RuntimeError(
                f"the {type(self).__name__} is closed; it cannot be used after close()"
            )
        return r

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close()
