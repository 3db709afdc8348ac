"""What the texture wing's owners share: the destroy calls of their driver objects, and Owner.

Owners (``OpaqueArray``, ``MipmappedArray``, ``TextureObject``, ``SurfaceObject``) hold an
:class:`~cuda_core._handles._owned.OwnedHandle` of their driver object; one built on another (a
texture on an array, a mip level on its mipmapped array) holds that one's handle in ``deps``.
``close()`` drops the owner's reference, so the driver object is destroyed when the last user
lets go. These handles are not released at interpreter exit (the process's GPU objects die
with it).
"""

from __future__ import annotations

from typing import Any

from .. import _links
from .._compat import driver
from .._handles._owned import OwnedHandle

__all__: list[str] = []  # private module


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

    _ref: OwnedHandle | None
    _device_id: int  # the ordinal of the device it was created on

    @property
    def handle(self) -> int:
        """The raw driver handle as an ``int`` (``0`` after :meth:`close`)."""
        r = self._ref
        return 0 if r is None else r.value  # type: ignore[no-any-return]

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

    def _live(self) -> OwnedHandle:
        r = self._ref
        if r is None:
            raise RuntimeError(
                f"{type(self).__name__} has been closed; it cannot be used after close()"
            )
        return r

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close()
