"""TMA tensor maps: options, validation before the driver, packing as a kernel argument, and
(GPU tier, sm_90+) a 2-D tile copied by cp.async.bulk.tensor checked bit for bit."""

from __future__ import annotations

import ctypes
import struct
import types

import numpy as np
import pytest
from cuda.bindings import driver

import cuda_core
from cuda_core import Program, ProgramOptions, TensorMapDescriptor, TensorMapDescriptorOptions
from cuda_core import _tensor_map as tmm
from cuda_core._kernel_arg_handler import ParamHolder
from cuda_core._tensor_map import TensorMapDataType, TensorMapOOBFill, TensorMapSwizzle
from cuda_core.utils import StridedMemoryView
from tests.helpers.tex_kernels import TMA_COPY, TMA_COPY_1D


def fake_view(shape=(64, 64), dtype=np.float32, ptr=0x10000, strides=None, accessible=True):
    """A device-accessible view-like object (never dereferenced: validation only)."""
    return types.SimpleNamespace(
        ptr=ptr,
        shape=shape,
        strides=strides,
        dtype=np.dtype(dtype),
        is_device_accessible=accessible,
        device_id=0,
        _dl_device_type=2,
        exporting_obj=None,
    )


@pytest.fixture
def encoded(monkeypatch):
    """Capture the driver call instead of making it; returns the list of calls."""
    calls = []

    def fake_encode(api, fn, *args):
        calls.append((api, args))
        return driver.CUtensorMap()

    monkeypatch.setattr(tmm, "_encode", fake_encode)
    return calls


# -- options ------------------------------------------------------------------------------------


def test_options_normalise_sequences_and_dtype():
    o = TensorMapDescriptorOptions(box_dim=[8, 16], element_strides=[1, 1], data_type="float32")
    assert o.box_dim == (8, 16)
    assert o.element_strides == (1, 1)
    assert o.data_type == np.dtype(np.float32)
    assert o.swizzle is TensorMapSwizzle.NONE
    assert (
        TensorMapDescriptorOptions((4,), data_type=TensorMapDataType.BFLOAT16).data_type
        is TensorMapDataType.BFLOAT16
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"box_dim": 8}, "box_dim must be a tuple of ints"),
        ({"box_dim": (8.0, 8)}, r"box_dim\[0\] must be an int"),
        ({"box_dim": (8, 8), "swizzle": "128B"}, "swizzle must be a TensorMapSwizzle"),
        ({"box_dim": (8, 8), "interleave": None}, "interleave must be a TensorMapInterleave"),
        ({"box_dim": (8, 8), "oob_fill": 1}, "oob_fill must be a TensorMapOOBFill"),
    ],
)
def test_options_type_errors(kwargs, match):
    with pytest.raises(TypeError, match=match):
        TensorMapDescriptorOptions(**kwargs)


def test_enums_are_the_driver_values():
    assert int(TensorMapDataType.FLOAT32) == int(
        driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32
    )
    assert int(TensorMapSwizzle.SWIZZLE_128B) == int(
        driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
    )


def test_direct_construction_names_the_factory():
    with pytest.raises(RuntimeError, match="as_tensor_map"):
        TensorMapDescriptor()


# -- validation before the driver -----------------------------------------------------------------


def test_tiled_passes_driver_order(encoded):
    view = fake_view(shape=(32, 64), strides=(80, 1))  # rows padded to 80 floats (320 bytes)
    d = TensorMapDescriptor._from_tiled(view, (8, 16), element_strides=(1, 2))
    api, args = encoded[0]
    assert api == "cuTensorMapEncodeTiled"
    dtype, rank, ptr, dims, strides, box, es = args[:7]
    assert int(dtype) == int(TensorMapDataType.FLOAT32) and rank == 2 and ptr == 0x10000

    def ints(values):  # the driver's cuuint64_t/cuuint32_t values as ints
        return [int(v) for v in values]

    assert (
        ints(dims) == [64, 32]
        and ints(strides) == [320]
        and ints(box) == [16, 8]
        and ints(es) == [2, 1]
    )
    assert "tiled" in repr(d) and "(32, 64)" in repr(d)


def test_options_object_and_dict(encoded):
    view = fake_view()
    TensorMapDescriptor._from_tiled(view, options=TensorMapDescriptorOptions(box_dim=(8, 8)))
    TensorMapDescriptor._from_tiled(
        view, options={"box_dim": (8, 8), "swizzle": TensorMapSwizzle.SWIZZLE_32B}
    )
    assert len(encoded) == 2
    with pytest.raises(ValueError, match="not both"):
        TensorMapDescriptor._from_tiled(view, (8, 8), options={"box_dim": (8, 8)})
    with pytest.raises(ValueError, match="box_dim is required"):
        TensorMapDescriptor._from_tiled(view)


@pytest.mark.parametrize(
    "view, kwargs, match",
    [
        (fake_view(shape=(8, 8)), {"box_dim": (16, 8)}, "box larger than the tensor"),
        (fake_view(ptr=0x10008), {"box_dim": (8, 8)}, "16-byte aligned"),
        (fake_view(accessible=False), {"box_dim": (8, 8)}, "device-accessible"),
        (fake_view(dtype=np.complex64), {"box_dim": (8, 8)}, "dtype must be one of"),
        (fake_view(dtype=np.int8), {"box_dim": (8, 16)}, "numpy.uint8"),
        (fake_view(shape=(2,) * 6), {"box_dim": (1,) * 6}, "rank must be in"),
        (fake_view(), {"box_dim": (8,)}, "tensor's rank"),
        (fake_view(), {"box_dim": (8, 300)}, r"box_dim\[1\] must be in \[1, 256\]"),
        (fake_view(), {"box_dim": (8, 2)}, "multiple of 16 bytes"),
        (fake_view(strides=(65, 1)), {"box_dim": (8, 8)}, "stride of dimension 0"),
        (fake_view(strides=(128, 2)), {"box_dim": (8, 8)}, "innermost stride"),
        (
            fake_view(),
            {"box_dim": (8, 8), "element_strides": (1, 9)},
            r"element_strides\[1\] must be in",
        ),
        (
            fake_view(),
            {"box_dim": (8, 64), "swizzle": TensorMapSwizzle.SWIZZLE_128B},
            "at most 128 bytes",
        ),
        (
            fake_view(dtype=np.int32),
            {"box_dim": (8, 8), "oob_fill": TensorMapOOBFill.NAN_REQUEST_ZERO_FMA},
            "integer data type",
        ),
        (fake_view(), {"box_dim": (8, 8), "data_type": np.float64}, "element size"),
    ],
)
def test_misuse_is_refused_before_the_driver(encoded, view, kwargs, match):
    with pytest.raises(ValueError, match=match):
        TensorMapDescriptor._from_tiled(view, **kwargs)
    assert encoded == []
    TensorMapDescriptor._from_tiled(fake_view(), (8, 8))  # and the next valid call works
    assert len(encoded) == 1


def test_host_memory_view_is_refused():
    view = StridedMemoryView.from_array_interface(np.zeros((16, 16), np.float32))
    with pytest.raises(ValueError, match="device-accessible"):
        view.as_tensor_map((8, 8))


def test_im2col_checks_and_order(encoded):
    view = fake_view(shape=(2, 16, 16, 8), dtype=np.float16)  # N, H, W, C
    TensorMapDescriptor._from_im2col(view, (-1, -1), (1, 1), 8, 32)
    api, args = encoded[0]
    assert api == "cuTensorMapEncodeIm2col"
    assert (
        [int(v) for v in args[3]] == [8, 16, 16, 2] and args[5] == [-1, -1] and args[7:9] == (8, 32)
    )
    with pytest.raises(ValueError, match="2 values"):
        TensorMapDescriptor._from_im2col(view, (0,), (0, 0), 8, 32)
    with pytest.raises(ValueError, match=r"in \[-128, 127\]"):
        TensorMapDescriptor._from_im2col(view, (-200, 0), (0, 0), 8, 32)
    with pytest.raises(ValueError, match="rank must be in"):
        TensorMapDescriptor._from_im2col(fake_view(), (), (), 8, 32)


# -- packing -------------------------------------------------------------------------------------


def test_descriptor_packs_as_128_bytes_64_aligned():
    cu = driver.CUtensorMap()
    raw = bytes(range(128))
    ctypes.memmove(cu.getPtr(), raw, 128)
    d = TensorMapDescriptor._wrap(cu, "tiled", None, (8, 8))
    h = ParamHolder((np.int32(7), d, np.int32(9)))
    assert h.offsets == (0, 64, 192)
    assert h.data == struct.pack("<i", 7) + b"\x00" * 60 + raw + struct.pack("<i", 9)
    assert h.pointers()[1] % 64 == 0
    assert h.pointers()[1] - h.pointers()[0] == 64


def test_public_names():
    assert {"TensorMapDescriptor", "TensorMapDescriptorOptions"} <= set(cuda_core.__all__)
    assert cuda_core.utils.StridedMemoryView.as_tensor_map.__doc__


def test_tma_kernel_compiles_for_sm90():
    opts = ProgramOptions(std="c++17", arch="sm_90")
    mod = Program(TMA_COPY, "c++", opts).compile("ptx", name_expressions=("tma_copy<8, 16>",))
    ptx = mod.code.decode() if isinstance(mod.code, bytes) else mod.code
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    assert (
        Program(TMA_COPY, "c++", opts)
        .compile("cubin", name_expressions=("tma_copy<8, 16>",))
        .code[:4]
        == b"\x7fELF"
    )


# -- GPU tier ------------------------------------------------------------------------------------


def _needs_sm90(dev):
    if dev.compute_capability.major < 9:
        pytest.skip("TMA needs compute capability 9.0 or later")


def _device_matrix(dev, s, host):
    buf = dev.allocate(host.nbytes, stream=s)
    buf.copy_from(host, stream=s)
    return buf, StridedMemoryView.from_buffer(buf, host.shape, dtype=host.dtype)


@pytest.mark.gpu
def test_tma_copies_a_tile_bit_for_bit(dev):
    _needs_sm90(dev)
    s = dev.create_stream()
    host = np.random.default_rng(1).standard_normal((64, 96)).astype(np.float32)
    host[3, 5] = np.float32(-0.0)
    host[7, 9] = np.float32(np.nan)
    _buf, view = _device_matrix(dev, s, host)
    tmap = view.as_tensor_map(box_dim=(8, 16))
    assert tmap.device == dev
    mod = Program(TMA_COPY, "c++", ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")).compile(
        "cubin", name_expressions=("tma_copy<8, 16>",)
    )
    ker = mod.get_kernel("tma_copy<8, 16>")
    out = dev.allocate(8 * 16 * 4, stream=s)
    for x0, y0 in ((0, 0), (16, 8), (80, 56)):  # (x, y) = (column, row) of the tile's corner
        cuda_core.launch(
            s, cuda_core.LaunchConfig(grid=1, block=128), ker, tmap, out, np.int32(x0), np.int32(y0)
        )
        got = np.empty((8, 16), np.float32)
        out.copy_to(got, stream=s)
        assert got.tobytes() == host[y0 : y0 + 8, x0 : x0 + 16].tobytes()
    # replace_address: the same map on another tensor of the same shape
    host2 = host * 2
    _buf2, view2 = _device_matrix(dev, s, host2)
    tmap.replace_address(view2)
    cuda_core.launch(
        s, cuda_core.LaunchConfig(grid=1, block=128), ker, tmap, out, np.int32(16), np.int32(0)
    )
    got = np.empty((8, 16), np.float32)
    out.copy_to(got, stream=s)
    assert got.tobytes() == host2[0:8, 16:32].tobytes()


def test_rank_one_passes_a_stride_slot(encoded):
    """A rank-1 map has no strides to give, but the driver refuses a null strides array."""
    TensorMapDescriptor._from_tiled(fake_view(shape=(1024,)), (128,))
    _api, args = encoded[0]
    assert args[1] == 1 and len(args[4]) == 1 and int(args[4][0]) % 16 == 0


@pytest.mark.gpu
def test_tma_rank_one_copies_a_tile(dev):
    _needs_sm90(dev)
    s = dev.create_stream()
    host = np.arange(1024, dtype=np.float32)
    _buf, view = _device_matrix(dev, s, host)
    tmap = view.as_tensor_map(box_dim=(128,))
    mod = Program(TMA_COPY_1D, "c++", ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")).compile(
        "cubin", name_expressions=("tma_copy_1d<128>",)
    )
    out = dev.allocate(128 * 4, stream=s)
    for x0 in (0, 384, 896):
        cuda_core.launch(
            s,
            cuda_core.LaunchConfig(grid=1, block=128),
            mod.get_kernel("tma_copy_1d<128>"),
            tmap,
            out,
            np.int32(x0),
        )
        got = np.empty(128, np.float32)
        out.copy_to(got, stream=s)
        assert got.tobytes() == host[x0 : x0 + 128].tobytes()


@pytest.mark.gpu
def test_tma_misuse_raises_and_the_process_keeps_working(dev):
    _needs_sm90(dev)
    s = dev.create_stream()
    buf = dev.allocate(64 * 64 * 4 + 16, stream=s)
    view = StridedMemoryView.from_buffer(buf, (64, 64), dtype=np.float32)
    with pytest.raises(ValueError, match="box larger than the tensor"):
        view.as_tensor_map(box_dim=(128, 16))
    raw = types.SimpleNamespace(
        ptr=int(buf.handle) + 4,
        shape=(64, 64),
        strides=None,
        dtype=np.dtype(np.float32),
        is_device_accessible=True,
        device_id=dev.device_id,
        _dl_device_type=2,
        exporting_obj=buf,
    )
    with pytest.raises(ValueError, match="16-byte aligned"):
        TensorMapDescriptor._from_tiled(raw, (8, 8))
    tmap = view.as_tensor_map(box_dim=(8, 16))  # still works
    assert len(tmap._bytes) == 128
    with pytest.raises(ValueError, match="shape"):
        tmap.replace_address(StridedMemoryView.from_buffer(buf, (32, 64), dtype=np.float32))


@pytest.mark.gpu
def test_replace_address_takes_any_dlpack_producer_without_a_warning(dev):
    # cuda.core takes "any object supporting DLPack or __cuda_array_interface__" here; ours
    # once built the view with the constructor cuda.core deprecates, warning the caller.
    import warnings

    _needs_sm90(dev)
    s = dev.create_stream()
    host = np.arange(64 * 96, dtype=np.float32).reshape(64, 96)
    _buf, view = _device_matrix(dev, s, host)
    _buf2, view2 = _device_matrix(dev, s, host + 1000)
    tmap = view.as_tensor_map(box_dim=(8, 16))

    class Producer:  # a DLPack producer that is not a StridedMemoryView (as a CuPy array is not)
        def __dlpack__(self, **kwargs):
            return view2.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return view2.__dlpack_device__()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tmap.replace_address(Producer())
    mod = Program(TMA_COPY, "c++", ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")).compile(
        "cubin", name_expressions=("tma_copy<8, 16>",)
    )
    ker = mod.get_kernel("tma_copy<8, 16>")
    out = dev.allocate(8 * 16 * 4, stream=s)
    cuda_core.launch(
        s, cuda_core.LaunchConfig(grid=1, block=128), ker, tmap, out, np.int32(16), np.int32(8)
    )
    got = np.empty((8, 16), np.float32)
    out.copy_to(got, stream=s)
    assert got.tobytes() == (host + 1000)[8:16, 16:32].tobytes()
