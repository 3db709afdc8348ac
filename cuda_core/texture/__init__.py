"""Textures and surfaces: CUDA arrays and the bindless texture and surface objects built on them.

The names of NVIDIA's ``cuda.core.texture`` (1.2)::

    from cuda_core.texture import OpaqueArrayOptions, ResourceDescriptor, TextureObjectOptions

    arr = dev.create_opaque_array(OpaqueArrayOptions(shape=(w, h), format="float32", num_channels=1))
    arr.copy_from(host_image, stream=s)
    tex = dev.create_texture_object(resource=ResourceDescriptor.from_opaque_array(arr),
                                    options=TextureObjectOptions(filter_mode="linear"))
    launch(s, config, kernel, tex.handle, out.data.ptr)

The enumerations (:class:`~cuda_core.typing.ArrayFormatType`,
:class:`~cuda_core.typing.AddressModeType`, :class:`~cuda_core.typing.FilterModeType`,
:class:`~cuda_core.typing.ReadModeType`) live in :mod:`cuda_core.typing`.
"""

from __future__ import annotations

from ._array import OpaqueArray as OpaqueArray
from ._array import OpaqueArrayOptions as OpaqueArrayOptions
from ._array import _create_opaque_array as _create_opaque_array
from ._mipmapped_array import MipmappedArray as MipmappedArray
from ._mipmapped_array import MipmappedArrayOptions as MipmappedArrayOptions
from ._mipmapped_array import _create_mipmapped_array as _create_mipmapped_array
from ._surface import SurfaceObject as SurfaceObject
from ._surface import _create_surface_object as _create_surface_object
from ._texture import ResourceDescriptor as ResourceDescriptor
from ._texture import TextureObject as TextureObject
from ._texture import TextureObjectOptions as TextureObjectOptions
from ._texture import _create_texture_object as _create_texture_object

__all__ = [
    "MipmappedArray",
    "MipmappedArrayOptions",
    "OpaqueArray",
    "OpaqueArrayOptions",
    "ResourceDescriptor",
    "SurfaceObject",
    "TextureObject",
    "TextureObjectOptions",
]
