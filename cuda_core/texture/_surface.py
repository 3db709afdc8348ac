"""SurfaceObject: a bindless surface (``CUsurfObject``) for typed loads and stores."""

from __future__ import annotations

from typing import Any

from .. import _links
from .._compat import driver
from .._errors import invalid_value
from .._handles._owned import OwnedHandle
from .._utils import arg_error, handle_return
from ._ref import Owner, destroy_surface
from ._texture import ResourceDescriptor

__all__ = ["SurfaceObject"]


class SurfaceObject(Owner):
    """A bindless surface (``CUsurfObject``): kernels read and write an :class:`OpaqueArray`
    through it with ``surf1Dread``/``surf2Dwrite``... (x in bytes, y and z in elements).

    Made by :meth:`Device.create_surface_object <cuda_core.Device.create_surface_object>`
    from an array created with ``is_surface_load_store=True``; pass :attr:`handle` (a 64-bit
    ``cudaSurfaceObject_t``) to the kernel. It keeps the array alive; ``cuSurfObjectDestroy``
    runs once it is closed or collected.
    """

    __slots__ = ("_resource",)
    _resource: ResourceDescriptor

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "SurfaceObject cannot be instantiated directly; use Device.create_surface_object()"
        )

    @property
    def resource(self) -> ResourceDescriptor:
        """The :class:`ResourceDescriptor` this surface accesses."""
        return self._resource

    def __repr__(self) -> str:
        state = "closed" if self._ref is None else f"handle=0x{self.handle:x}"
        return f"SurfaceObject({state})"


def _create_surface_object(device: Any, resource: Any) -> SurfaceObject:
    """Create a :class:`SurfaceObject` (``cuSurfObjectCreate``) in the current context."""
    if not isinstance(resource, ResourceDescriptor):
        raise arg_error("resource", "a ResourceDescriptor", type(resource).__name__, exc=TypeError)
    if resource.kind != "opaque_array":
        raise invalid_value(
            "cuSurfObjectCreate",
            f"a surface needs a ResourceDescriptor.from_opaque_array() "
            f"(got a {resource.kind!r} resource; for a mipmapped array use get_level(i))",
        )
    if not resource.source.is_surface_load_store:
        raise invalid_value(
            "cuSurfObjectCreate",
            f"the array was not created with is_surface_load_store=True, "
            f"so it cannot back a surface (got {resource.source!r})",
        )
    res, keep, _ = resource._driver_desc()
    h = handle_return(driver.cuSurfObjectCreate(res), "cuSurfObjectCreate")
    self = object.__new__(SurfaceObject)
    self._ref = OwnedHandle("surface object", int(h), destroy_surface, (keep,), at_exit=False)
    self._resource, self._device_id = resource, device._id
    return self


_links.textures.create_surface_object = (
    _create_surface_object  # Device.create_surface_object makes one
)
