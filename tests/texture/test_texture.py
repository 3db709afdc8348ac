"""Textures and surfaces: options, lifetimes and checks on the CPU; sampling, linear fetches from
pinned host memory, surface writes, mip levels and misuse on the GPU (compared with NumPy)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import cuda_core
from cuda_core import CUDAError, LaunchConfig, Program, ProgramOptions, launch
from cuda_core._handles._owned import OwnedHandle
from cuda_core.texture import (
    MipmappedArray,
    MipmappedArrayOptions,
    OpaqueArray,
    OpaqueArrayOptions,
    ResourceDescriptor,
    SurfaceObject,
    TextureObject,
    TextureObjectOptions,
)
from cuda_core.texture._surface import _create_surface_object
from cuda_core.texture._texture import _address_modes
from cuda_core.typing import AddressModeType, ArrayFormatType, FilterModeType, ReadModeType
from tests.helpers.tex_kernels import SURF_WRITE, TEX_FETCH1D, TEX_SAMPLE

# -- options -------------------------------------------------------------------------------------


def test_public_module():
    assert cuda_core.texture.__all__ == sorted(cuda_core.texture.__all__)
    for name in cuda_core.texture.__all__:
        assert getattr(cuda_core.texture, name).__doc__


@pytest.mark.parametrize(
    "fmt", ["float32", np.float32, np.dtype("float32"), ArrayFormatType.FLOAT32]
)
def test_array_options_accept_format_spellings(fmt):
    o = OpaqueArrayOptions(shape=[4, 4], format=fmt, num_channels=1)
    assert o.format is ArrayFormatType.FLOAT32 and o.shape == (4, 4)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"shape": 4}, TypeError, "shape must be a tuple"),
        ({"shape": (4, 4, 4, 4)}, ValueError, "rank must be 1, 2 or 3"),
        ({"shape": (0, 4)}, ValueError, r"shape\[0\] must be >= 1"),
        ({"format": "float64"}, ValueError, "format must be"),
        ({"format": np.int64}, ValueError, "format must be"),
        ({"format": np.dtype(">f4")}, ValueError, "format must be"),
        ({"num_channels": 3}, ValueError, "num_channels must be 1, 2 or 4"),
        ({"num_channels": True}, ValueError, "num_channels must be 1, 2 or 4"),
    ],
)
def test_array_options_errors(kwargs, exc, match):
    base = {"shape": (4, 4), "format": "float32", "num_channels": 1, **kwargs}
    with pytest.raises(exc, match=match):
        OpaqueArrayOptions(**base)


def test_mipmap_options():
    o = MipmappedArrayOptions(shape=(8, 8), format="uint8", num_channels=4, num_levels=4)
    assert o.format is ArrayFormatType.UINT8 and o.num_levels == 4
    with pytest.raises(ValueError, match="num_levels"):
        MipmappedArrayOptions(shape=(8, 8), format="uint8", num_channels=4, num_levels=0)


def test_texture_options_normalise_modes():
    o = TextureObjectOptions(
        address_mode=("wrap", "clamp"), filter_mode="linear", read_mode="normalized_float"
    )
    assert o.filter_mode is FilterModeType.LINEAR and o.read_mode is ReadModeType.NORMALIZED_FLOAT
    assert _address_modes(o.address_mode) == (
        AddressModeType.WRAP,
        AddressModeType.CLAMP,
        AddressModeType.CLAMP,
    )
    assert _address_modes("mirror") == (AddressModeType.MIRROR,) * 3
    with pytest.raises(ValueError, match="filter_mode must be"):
        TextureObjectOptions(filter_mode=1)
    with pytest.raises(ValueError, match="address_mode must be"):
        _address_modes(())
    with pytest.raises(ValueError, match="address_mode must be"):
        _address_modes("bogus")


@pytest.mark.parametrize(
    "cls", [OpaqueArray, MipmappedArray, TextureObject, SurfaceObject, ResourceDescriptor]
)
def test_direct_construction_names_the_factory(cls):
    with pytest.raises(RuntimeError, match=r"create_|from_"):
        cls()


def test_resource_descriptor_type_checks():
    with pytest.raises(TypeError, match="array must be an OpaqueArray"):
        ResourceDescriptor.from_opaque_array(object())
    with pytest.raises(TypeError, match="buffer must be a Buffer"):
        ResourceDescriptor.from_linear(object(), format="float32", num_channels=1)


# -- lifetimes (no driver: a fake destroy function) ---------------------------------------------


def _fake_array(destroyed, surface=False, fmt=ArrayFormatType.FLOAT32, handle=0x1234):
    ref = OwnedHandle("array", handle, destroyed.append, at_exit=False)
    return OpaqueArray._make(ref, (4, 4), fmt, 1, surface, None)


def test_close_is_idempotent_and_destroys_once():
    destroyed = []
    arr = _fake_array(destroyed)
    assert not arr.is_closed and arr.handle == 0x1234 and arr.size_bytes == 64
    with arr:
        pass
    assert arr.is_closed and arr.handle == 0 and destroyed == [0x1234]
    arr.close()
    gc.collect()
    assert destroyed == [0x1234]
    assert "closed" in repr(arr)


def test_dependent_keeps_the_storage_alive():
    destroyed = []
    arr = _fake_array(destroyed)
    user = OwnedHandle(
        "texture object", 0x99, destroyed.append, (arr._ref,), at_exit=False
    )  # what a texture on it holds
    arr.close()
    assert destroyed == []
    del user
    assert destroyed == [0x99, 0x1234]


def test_surface_needs_a_load_store_array():
    arr = _fake_array([])
    with pytest.raises(CUDAError, match="is_surface_load_store=True") as info:
        _create_surface_object(None, ResourceDescriptor.from_opaque_array(arr))
    assert isinstance(info.value, ValueError)


def test_linear_filtering_of_an_integer_array_is_refused():
    arr = _fake_array([], fmt=ArrayFormatType.INT32)
    from cuda_core.texture._texture import _create_texture_object

    desc = ResourceDescriptor.from_opaque_array(arr)
    with pytest.raises(ValueError, match="linear"):
        _create_texture_object(None, desc, TextureObjectOptions(filter_mode="linear"))
    with pytest.raises(ValueError, match="normalized_float"):
        _create_texture_object(None, desc, {"read_mode": "normalized_float"})


def test_copy_checks_the_size_first():
    arr = _fake_array([])
    with pytest.raises(ValueError, match="at least the array's size_bytes"):
        arr.copy_from(np.zeros(3, np.float32), stream=None)
    arr.close()
    with pytest.raises(RuntimeError, match="closed"):
        arr.copy_to(np.zeros(16, np.float32), stream=None)


def test_kernels_compile_for_sm90():
    opts = ProgramOptions(std="c++17", arch="sm_90")
    for src in (TEX_SAMPLE, SURF_WRITE, TEX_FETCH1D):
        assert Program(src, "c++", opts).compile("cubin").code[:4] == b"\x7fELF"


# -- GPU tier ------------------------------------------------------------------------------------


def _kernel(dev, src, name):
    prog = Program(src, "c++", ProgramOptions(std="c++17", arch=f"sm_{dev.arch}"))
    return prog.compile("cubin").get_kernel(name)


def _sample(dev, s, tex, xs, ys):
    n = len(xs)
    xs, ys = np.asarray(xs, np.float32), np.asarray(ys, np.float32)
    bx, by, bo = (
        dev.allocate(4 * n, stream=s),
        dev.allocate(4 * n, stream=s),
        dev.allocate(4 * n, stream=s),
    )
    bx.copy_from(xs, stream=s)
    by.copy_from(ys, stream=s)
    launch(
        s,
        LaunchConfig(grid=(n + 127) // 128, block=128),
        _kernel(dev, TEX_SAMPLE, "sample2d"),
        tex.handle,
        bx,
        by,
        bo,
        np.int32(n),
    )
    out = np.empty(n, np.float32)
    bo.copy_to(out, stream=s)
    return out


def _image(dev, s, h=6, w=8):
    img = (np.arange(h * w, dtype=np.float32).reshape(h, w) * 1.5) ** 1.3
    arr = dev.create_opaque_array(
        OpaqueArrayOptions(shape=(w, h), format="float32", num_channels=1)
    )
    arr.copy_from(img, stream=s)
    back = np.zeros_like(img)
    arr.copy_to(back, stream=s)
    assert np.array_equal(back, img)
    return img, arr


@pytest.mark.gpu
def test_point_and_linear_sampling_match_numpy(dev):
    s = dev.create_stream()
    img, arr = _image(dev, s)
    h, w = img.shape
    xs = np.array([0.5, 3.5, 7.5, -3.0, 12.0, 2.25, 5.9, 0.0, 7.99])
    ys = np.array([0.5, 2.5, 5.5, 1.5, -2.0, 4.75, 0.1, 3.3, 5.99])
    res = ResourceDescriptor.from_opaque_array(arr)
    with dev.create_texture_object(resource=res) as tex:  # point, clamp, texel coordinates
        got = _sample(dev, s, tex, xs, ys)
    ix = np.clip(np.floor(xs).astype(int), 0, w - 1)
    iy = np.clip(np.floor(ys).astype(int), 0, h - 1)
    assert np.array_equal(got, img[iy, ix])

    tex = dev.create_texture_object(
        resource=res, options=TextureObjectOptions(filter_mode="linear")
    )
    got = _sample(dev, s, tex, xs, ys)
    bx, by = xs - 0.5, ys - 0.5  # texel centres are at +0.5
    x0, y0 = np.floor(bx).astype(int), np.floor(by).astype(int)
    a, b = bx - x0, by - y0

    def t(y, x):
        return img[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)]

    want = (
        (1 - a) * (1 - b) * t(y0, x0)
        + a * (1 - b) * t(y0, x0 + 1)
        + (1 - a) * b * t(y0 + 1, x0)
        + a * b * t(y0 + 1, x0 + 1)
    )
    # The hardware rounds each weight to 8 fractional bits (error <= 1/256 per axis), so a
    # result is off by at most 2/256 of the largest difference between neighbouring texels.
    step = max(np.abs(np.diff(img, axis=0)).max(), np.abs(np.diff(img, axis=1)).max())
    assert np.all(np.abs(got - want) <= 2 * step / 256 + 1e-4 * np.abs(want))
    assert not np.array_equal(got, img[iy, ix])  # really interpolated
    tex.close()
    tex.close()
    assert tex.is_closed and tex.handle == 0


@pytest.mark.gpu
def test_a_legacy_pinned_buffer_backs_a_linear_texture(dev):
    from cuda_core import LegacyPinnedMemoryResource

    mr = LegacyPinnedMemoryResource()
    n = 300
    vals = np.arange(n, dtype=np.float32) * 0.75 - 20
    s = dev.create_stream()
    buf = mr.allocate(4 * n, stream=s)
    assert mr.device_id == -1 and buf.device_id == -1  # host memory (cuda.core 1.3)
    buf.copy_from(vals, stream=s)
    res = ResourceDescriptor.from_linear(buf, format="float32", num_channels=1)
    out = dev.allocate(4 * n, stream=s)
    with dev.create_texture_object(resource=res) as tex:
        cfg = LaunchConfig(grid=(n + 127) // 128, block=128)
        launch(s, cfg, _kernel(dev, TEX_FETCH1D, "fetch1d"), tex.handle, out, np.int32(n))
        got = np.empty(n, np.float32)
        out.copy_to(got, stream=s)
    assert np.array_equal(got, vals)
    out.close(s)
    buf.close()
    s.close()


@pytest.mark.gpu
def test_wrap_with_normalized_coordinates(dev):
    s = dev.create_stream()
    img, arr = _image(dev, s)
    h, w = img.shape
    opts = TextureObjectOptions(address_mode="wrap", normalized_coords=True)
    tex = dev.create_texture_object(
        resource=ResourceDescriptor.from_opaque_array(arr), options=opts
    )
    u = np.array([0.01, 0.5, 1.2, -0.3, 2.99])
    v = np.array([0.01, 0.99, -0.45, 1.6, 0.4])
    got = _sample(dev, s, tex, u, v)
    ix = np.floor((u - np.floor(u)) * w).astype(int) % w
    iy = np.floor((v - np.floor(v)) * h).astype(int) % h
    assert np.array_equal(got, img[iy, ix])
    arr.close()  # the texture keeps the array's storage alive
    assert np.array_equal(_sample(dev, s, tex, u, v), got)


@pytest.mark.gpu
def test_surface_written_by_a_kernel_reads_back(dev):
    s = dev.create_stream()
    w, h = 19, 7
    arr = dev.create_opaque_array(
        {"shape": (w, h), "format": "float32", "num_channels": 1, "is_surface_load_store": True}
    )
    surf = dev.create_surface_object(resource=ResourceDescriptor.from_opaque_array(arr))
    assert surf.device == dev and surf.resource.source is arr
    launch(
        s,
        LaunchConfig(grid=((w + 15) // 16, (h + 15) // 16), block=(16, 16)),
        _kernel(dev, SURF_WRITE, "surf_fill"),
        surf.handle,
        np.int32(w),
        np.int32(h),
        np.float32(0.25),
    )
    got = np.empty((h, w), np.float32)
    arr.copy_to(got, stream=s)
    assert np.array_equal(got, np.arange(h * w, dtype=np.float32).reshape(h, w) + 0.25)
    # and through a device Buffer
    buf = dev.allocate(arr.size_bytes, stream=s)
    arr.copy_to(buf, stream=s)
    got2 = np.empty_like(got)
    buf.copy_to(got2, stream=s)
    assert np.array_equal(got2, got)
    surf.close()
    arr.close()


@pytest.mark.gpu
def test_mipmap_level_written_and_read_back(dev):
    s = dev.create_stream()
    opts = MipmappedArrayOptions(
        shape=(16, 8), format="float32", num_channels=1, num_levels=3, is_surface_load_store=True
    )
    with dev.create_mipmapped_array(opts) as mip:
        level = mip.get_level(1)
        assert level.shape == (8, 4) and level.format is ArrayFormatType.FLOAT32
        data = np.arange(32, dtype=np.float32).reshape(4, 8) - 3
        level.copy_from(data, stream=s)
        got = np.zeros_like(data)
        level.copy_to(got, stream=s)
        assert np.array_equal(got, data)
        surf = dev.create_surface_object(
            resource=ResourceDescriptor.from_opaque_array(mip.get_level(2))
        )
        launch(
            s,
            LaunchConfig(grid=1, block=(16, 16)),
            _kernel(dev, SURF_WRITE, "surf_fill"),
            surf.handle,
            np.int32(4),
            np.int32(2),
            np.float32(100),
        )
        got2 = np.zeros((2, 4), np.float32)
        mip.get_level(2).copy_to(got2, stream=s)
        assert np.array_equal(got2, np.arange(8, dtype=np.float32).reshape(2, 4) + 100)
        tex = dev.create_texture_object(resource=ResourceDescriptor.from_mipmapped_array(mip))
        with pytest.raises(ValueError, match="level must be in"):
            mip.get_level(3)
    assert mip.is_closed
    level.copy_to(got, stream=s)  # a level keeps the mipmapped array's storage alive
    assert np.array_equal(got, data)
    tex.close()


@pytest.mark.gpu
def test_misuse_raises_and_the_process_keeps_working(dev):
    s = dev.create_stream()
    ints = dev.create_opaque_array(OpaqueArrayOptions(shape=(8, 8), format="int32", num_channels=1))
    res = ResourceDescriptor.from_opaque_array(ints)
    with pytest.raises(CUDAError, match="linear"):  # the array has no float format to filter
        dev.create_texture_object(resource=res, options=TextureObjectOptions(filter_mode="linear"))
    with pytest.raises(CUDAError, match="is_surface_load_store"):
        dev.create_surface_object(resource=res)
    with pytest.raises(CUDAError, match="num_levels"):
        dev.create_mipmapped_array(
            MipmappedArrayOptions(shape=(8, 8), format="float32", num_channels=1, num_levels=9)
        )
    with pytest.raises(ValueError, match="size_bytes"):
        ints.copy_from(np.zeros(10, np.int32), stream=s)
    tex = dev.create_texture_object(resource=res)  # point sampling of int32 is fine
    assert tex.handle != 0
    data = np.arange(64, dtype=np.int32)
    ints.copy_from(data, stream=s)
    back = np.zeros_like(data)
    ints.copy_to(back, stream=s)
    assert np.array_equal(back, data)
