"""ExternalMemory: argument checks before the driver (CPU tier), and imports of CUDA's own VMM
memory exported as a POSIX file descriptor (GPU tier: no Vulkan needed).

``cuMemCreate`` with ``CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`` and
``cuMemExportToShareableHandle`` give a descriptor of device memory that the driver also takes
as an opaque-fd import; where a driver refuses that, the GPU tests skip saying so.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from cuda_core import CUDAError, ExternalMemory
from cuda_core._compat import driver
from cuda_core._utils import handle_return
from cuda_core.texture import MipmappedArrayOptions


def _closed_fd() -> int:
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    return r


# -- CPU tier ---------------------------------------------------------------------------------


def test_not_constructible():
    with pytest.raises(RuntimeError, match=r"ExternalMemory.from_fd\(\)"):
        ExternalMemory()


@pytest.mark.parametrize("fd", ["3", 3.0, None, True])
def test_fd_must_be_an_int(fd):
    with pytest.raises(TypeError, match="fd must be an int"):
        ExternalMemory.from_fd(fd, 4096)


def test_a_negative_or_closed_fd_is_refused_before_the_driver():
    with pytest.raises(ValueError, match=r"fd must be an open file descriptor \(>= 0\) \(got -1\)"):
        ExternalMemory.from_fd(-1, 4096)
    fd = _closed_fd()
    with pytest.raises(
        ValueError, match=rf"fd must be an open file descriptor \(got {fd}\); Bad file"
    ):
        ExternalMemory.from_fd(fd, 4096)


def test_bad_size_or_handle_type_leaves_the_fd_with_the_caller():
    r, w = os.pipe()
    try:
        with pytest.raises(ValueError, match=r"size must be .*>= 1 \(got 0\)"):
            ExternalMemory.from_fd(r, 0)
        with pytest.raises(TypeError, match="size must be"):
            ExternalMemory.from_fd(r, "4096")
        with pytest.raises(
            ValueError, match=r"handle_type must be one of ('dmabuf_fd', )?'opaque_fd'"
        ):
            ExternalMemory.from_fd(r, 4096, handle_type="win32")
        with pytest.raises(TypeError, match="device must be a Device"):
            ExternalMemory.from_fd(r, 4096, device="0")
        os.fstat(r)  # still open: nothing took it
    finally:
        os.close(r)
        os.close(w)


def test_handle_kinds_name_their_destroy_calls():
    from cuda_core._handles._owned import KINDS

    assert KINDS["external memory"] == "cuDestroyExternalMemory"
    assert KINDS["external semaphore"] == "cuDestroyExternalSemaphore"


# -- GPU tier: CUDA's own memory exported as a file descriptor ----------------------------------


def _export_vmm(dev, size: int) -> tuple[int, int, object]:
    """``(fd, size rounded to the granularity, generic handle)`` of new VMM memory on ``dev``."""
    prop = driver.CUmemAllocationProp()
    prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = dev.device_id
    prop.requestedHandleTypes = (
        driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    )
    flag = driver.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED
    gran = handle_return(driver.cuMemGetAllocationGranularity(prop, flag))
    size = (size + gran - 1) // gran * gran
    h = handle_return(driver.cuMemCreate(size, prop, 0))
    fd = handle_return(
        driver.cuMemExportToShareableHandle(
            h, driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0
        )
    )
    return int(fd), size, h


@pytest.fixture
def exported(dev):
    """A fresh exported allocation: ``(fd, size)``; the VMM handle is released afterwards (the
    import keeps the memory alive on its own)."""
    fd, size, h = _export_vmm(dev, 1 << 21)
    yield fd, size
    handle_return(driver.cuMemRelease(h))


def _import(fd: int, size: int, **kw) -> ExternalMemory:
    try:
        return ExternalMemory.from_fd(fd, size, **kw)
    except CUDAError as exc:
        os.close(fd)
        pytest.skip(
            f"this driver does not import a cuMemCreate POSIX descriptor as an opaque fd: {exc}"
        )


@pytest.mark.gpu
def test_map_buffer_reads_and_writes_the_shared_memory(dev, exported):
    fd, size = exported
    s = dev.create_stream()
    mem = _import(fd, size)
    with pytest.raises(OSError):  # consumed: the import keeps a duplicate of its own
        os.fstat(fd)
    assert mem.size == size and mem.handle and not mem.is_closed and mem.handle_type == "opaque_fd"
    assert mem.device == dev and "ExternalMemory" in repr(mem)
    whole = mem.map_buffer()
    assert whole.size == size and whole.device_id == dev.device_id
    data = np.arange(size // 4, dtype=np.uint32)
    whole.copy_from(data, stream=s)
    part = mem.map_buffer(4096, 8192)  # a second mapping sees the same bytes
    got = np.empty(2048, np.uint32)
    part.copy_to(got, stream=s)
    s.sync()
    assert np.array_equal(got, data[1024:3072])
    part.fill(np.uint32(0xDEADBEEF), stream=s)
    back = np.empty_like(data)
    whole.copy_to(back, stream=s)
    s.sync()
    assert (back[1024:3072] == 0xDEADBEEF).all() and np.array_equal(back[:1024], data[:1024])
    part.close()
    mem.close()
    mem.close()
    assert mem.is_closed and mem.handle == 0
    whole.copy_to(back, stream=s)  # the open mapping keeps the import alive
    s.sync()
    assert back[0] == 0
    whole.close()


@pytest.mark.gpu
def test_a_range_past_the_import_is_refused_before_the_driver(dev, exported):
    fd, size = exported
    with _import(fd, size) as mem:
        with pytest.raises(
            ValueError, match=rf"offset \+ size must be at most the imported size, {size} bytes"
        ):
            mem.map_buffer(4096, size)
        with pytest.raises(ValueError, match="size must be"):
            mem.map_buffer(0, 0)
        with pytest.raises(ValueError, match="offset must be"):
            mem.map_buffer(-1, 16)
        with pytest.raises(ValueError, match="offset must be less than the imported size"):
            mem.map_mipmapped_array(MipmappedArrayOptions((16, 16), "float32", 1, 1), offset=size)
    with pytest.raises(RuntimeError, match="ExternalMemory has been closed"):
        mem.map_buffer(0, 16)


@pytest.mark.gpu
def test_a_refused_import_leaves_the_fd_with_the_caller(dev):
    r, w = os.pipe()  # open, but not memory: the driver refuses it
    try:
        with pytest.raises(CUDAError, match=r"cuImportExternalMemory: .*still the caller's"):
            ExternalMemory.from_fd(r, 4096)
        os.fstat(r)
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.gpu
def test_mipmapped_array_on_the_import_backs_a_texture(dev, exported):
    from cuda_core.texture import ResourceDescriptor

    fd, size = exported
    s = dev.create_stream()
    mem = _import(fd, size)
    arr = mem.map_mipmapped_array(MipmappedArrayOptions((32, 16), "float32", 1, 2))
    assert arr.num_levels == 2 and arr.shape == (32, 16) and arr.handle
    level = arr.get_level(0)
    img = np.arange(32 * 16, dtype=np.float32)
    level.copy_from(img, stream=s)
    back = np.zeros_like(img)
    level.copy_to(back, stream=s)
    s.sync()
    assert np.array_equal(back, img)
    tex = dev.create_texture_object(resource=ResourceDescriptor.from_mipmapped_array(arr))
    mem.close()
    arr.close()
    level.close()
    del level
    assert tex.handle  # the texture holds the array, which holds the import
    tex.close()


@pytest.mark.gpu
def test_imports_and_mappings_leak_no_device_memory(dev):
    s = dev.create_stream()

    def cycle() -> None:
        fd, size, h = _export_vmm(dev, 1 << 22)
        try:
            mem = _import(fd, size)
            bufs = [mem.map_buffer(i * 4096, 4096) for i in range(8)]
            bufs[0].fill(1, stream=s)
            s.sync()
            mem.close()  # before the buffers: they keep it until they go
            for b in bufs:
                b.close()
        finally:
            handle_return(driver.cuMemRelease(h))

    cycle()
    gc.collect()
    before = handle_return(driver.cuMemGetInfo())[0]
    for _ in range(50):
        cycle()
    gc.collect()
    after = handle_return(driver.cuMemGetInfo())[0]
    assert before - after < (2 << 20), f"free memory fell by {before - after} bytes over 50 imports"
