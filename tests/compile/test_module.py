"""ObjectCode factories and lazy loading (CPU tier); Kernel, attributes, occupancy (GPU tier)."""

from __future__ import annotations

import ctypes
import pickle
import types

import pytest

from cuda_core._compile._object_code import Kernel, KernelAttributes, KernelOccupancy, ObjectCode
from cuda_core._compile._program import Program, ProgramOptions
from cuda_core._errors import CUDAError
from tests.helpers import gpu_skip_reason

SRC = r"""
template <typename T>
__global__ void add(T* a, const T* b, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}
extern "C" __global__ void mixed(char c, int i, double d, float* out) {
    __shared__ float buf[256];
    buf[threadIdx.x] = c + i + d;
    __syncthreads();
    out[threadIdx.x] = buf[255 - threadIdx.x];
}
"""
NAMES = ("add<float>", "add<double>")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_CORE_CACHE_DIR", str(tmp_path / "cache"))


FACTORIES = [
    (ObjectCode.from_cubin, "cubin"),
    (ObjectCode.from_ptx, "ptx"),
    (ObjectCode.from_ltoir, "ltoir"),
    (ObjectCode.from_fatbin, "fatbin"),
    (ObjectCode.from_object, "object"),
    (ObjectCode.from_library, "library"),
]


@pytest.mark.parametrize(("factory", "code_type"), FACTORIES)
def test_factories_from_bytes_and_path(factory, code_type, tmp_path):
    o = factory(b"\x01\x02payload", name="n", symbol_mapping={"f<int>": b"_Z1fIiEvv"})
    assert (o.code, o.code_type, o.name) == (b"\x01\x02payload", code_type, "n")
    assert o.symbol_mapping == {"f<int>": b"_Z1fIiEvv"}
    assert (
        repr(o) == f"<ObjectCode handle=0x0 code_type='{code_type}'>"
    )  # cuda.core's format; not loaded
    p = tmp_path / f"x.{code_type}"
    p.write_bytes(b"abc")
    o2 = factory(str(p))
    assert o2.code == str(p) and o2.name == "" and o2.symbol_mapping == {}
    assert repr(o2) == f"<ObjectCode handle=0x0 code_type='{code_type}'>"
    o3 = factory(p)  # os.PathLike
    assert o3.code == str(p)
    o4 = pickle.loads(pickle.dumps(o))
    assert (o4.code, o4.code_type, o4.name, o4.symbol_mapping) == (
        o.code,
        o.code_type,
        o.name,
        o.symbol_mapping,
    )


def test_factory_argument_errors():
    with pytest.raises(TypeError, match="module must be"):
        ObjectCode.from_cubin(123)
    with pytest.raises(TypeError, match="symbol_mapping must be"):
        ObjectCode.from_cubin(b"x", symbol_mapping=[1])
    with pytest.raises(RuntimeError, match="from_cubin"):
        ObjectCode()
    with pytest.raises(RuntimeError, match="get_kernel"):
        Kernel()
    with pytest.raises(RuntimeError):
        KernelAttributes()
    with pytest.raises(RuntimeError):
        KernelOccupancy()


def test_unloadable_code_types_say_to_link():
    with pytest.raises(RuntimeError, match="link it with Linker"):
        ObjectCode.from_ltoir(b"x").get_kernel("k")


def test_get_module_of_unloadable_code_says_to_link():
    with pytest.raises(RuntimeError, match="link it with Linker"):
        ObjectCode.from_ltoir(b"x").get_module()


READ_ONLY = (
    "max_threads_per_block",
    "shared_size_bytes",
    "const_size_bytes",
    "local_size_bytes",
    "num_regs",
    "ptx_version",
    "binary_version",
    "cache_mode_ca",
    "cluster_size_must_be_set",
    "required_cluster_width",
    "required_cluster_height",
    "required_cluster_depth",
    "non_portable_cluster_size_allowed",
    "cluster_scheduling_policy_preference",
)


def test_kernel_attributes_are_properties_with_device_views():
    for name in READ_ONLY:
        prop = KernelAttributes.__dict__[name]
        assert isinstance(prop, property) and prop.fset is None and prop.__doc__, name
    for name in ("max_dynamic_shared_size_bytes", "preferred_shared_memory_carveout"):
        assert KernelAttributes.__dict__[name].fset is not None, name
    assert not hasattr(KernelAttributes, "set_max_dynamic_shared_size_bytes")
    # Views are plain objects over one cache; making them needs no driver.
    a = Kernel.from_handle(0).attributes
    v1 = a[1]
    assert isinstance(v1, KernelAttributes) and v1._device == 1 and a._device is None
    assert v1._cache is a._cache and v1[2]._cache is a._cache
    for bad in ("0", 1.0, True, None):
        with pytest.raises(TypeError, match="device must be a Device or an int"):
            a[bad]


def test_integer_attribute_values_answer_the_0x_method_call_with_a_warning():
    from cuda_core._kernel_attributes import _callable_int

    view = Kernel.from_handle(0).attributes
    v = _callable_int(view, "num_regs", 40)
    assert v == 40 and v + 2 == 42 and isinstance(v, int) and repr(v) == "40"
    assert type(pickle.loads(pickle.dumps(v))) is int
    with pytest.warns(
        DeprecationWarning,
        match=r"KernelAttributes\.num_regs\(\) is deprecated.*the property KernelAttributes\.num_regs",
    ) as rec:
        assert v() == 40
    assert rec[0].filename == __file__


@pytest.mark.skipif(gpu_skip_reason() is None, reason="a GPU is present")
def test_kernel_attribute_without_driver_is_a_clear_error():
    from cuda_core._errors import CUDADriverNotFoundError

    a = Kernel.from_handle(0).attributes
    with pytest.raises(CUDADriverNotFoundError):
        _ = a.num_regs
    with pytest.raises(CUDADriverNotFoundError):
        a[0].max_dynamic_shared_size_bytes = 1024


def test_compiled_object_code_needs_no_driver_until_used():
    o = Program(SRC, options=ProgramOptions(arch="sm_90")).compile("cubin", name_expressions=NAMES)
    assert repr(o) == "<ObjectCode handle=0x0 code_type='cubin'>"  # not loaded: no driver asked
    assert o.code[:4] == b"\x7fELF"
    assert set(o.symbol_mapping) == set(NAMES)
    o.close()
    o.close()
    assert o.is_closed


@pytest.mark.skipif(gpu_skip_reason() is None, reason="a GPU is present")
def test_loading_without_driver_is_a_clear_error():
    from cuda_core._errors import CUDADriverNotFoundError

    o = ObjectCode.from_cubin(b"\x7fELF")
    with pytest.raises((CUDADriverNotFoundError, CUDAError)):
        o.get_kernel("k")


_B2D = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)


def test_max_potential_block_size_argument_checks():
    # Checked before the kernel or the driver is touched, so no GPU is needed.
    from cuda.bindings import driver

    occ = Kernel.from_handle(0).occupancy
    b2d = _B2D(lambda block_size: 0)
    # cuda.core takes an int or a driver.CUoccupancyB2DSize, not a Python callable.
    for bad in ("x", 1.5, None, True, ..., lambda block_size: 0, b2d):
        with pytest.raises(TypeError, match="dynamic_shared_memory_needed"):
            occ.max_potential_block_size(bad, 0)
    wrapped = driver.CUoccupancyB2DSize(_ptr=ctypes.cast(b2d, ctypes.c_void_p).value)
    for bad_limit in ("0", 1.0, None, False):
        with pytest.raises(TypeError, match="block_size_limit"):
            occ.max_potential_block_size(0, bad_limit)
        with pytest.raises(TypeError, match="block_size_limit"):
            occ.max_potential_block_size(wrapped, bad_limit)


def test_b2d_wrapper_forms_give_the_callback_address():
    # The crash: for CUoccupancyB2DSize(_ptr=address), the form cuda.core documents, int() of the
    # wrapper reads the callback's first code bytes; only getPtr() is the function.
    from cuda.bindings import driver

    from cuda_core._kernel import _b2d_address

    b2d = _B2D(lambda block_size: 0)
    address = ctypes.cast(b2d, ctypes.c_void_p).value
    by_pointer = driver.CUoccupancyB2DSize(_ptr=address)
    by_value = driver.CUoccupancyB2DSize(address)
    assert int(by_pointer) != address  # what used to reach the driver
    assert _b2d_address(by_pointer) == address
    assert _b2d_address(by_value) == address
    assert _b2d_address(driver.CUoccupancyB2DSize()) == 0


# --- GPU tier --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mod(dev):
    return Program(SRC, options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin", name_expressions=NAMES, cache=False
    )


@pytest.mark.gpu
def test_lazy_load_and_get_kernel(mod):
    from cuda.bindings import driver

    k = mod.get_kernel("add<float>")
    assert isinstance(k, Kernel) and isinstance(k.handle, driver.CUkernel)
    assert isinstance(mod.handle, driver.CUlibrary) and "handle=" in repr(mod)
    assert mod.get_kernel("add<float>") is k
    assert mod.get_kernel("add<double>") != k
    assert mod.get_kernel("mixed") is not None
    assert mod.get_kernel(mod.symbol_mapping["add<float>"]) == k  # the mangled name works too
    assert Kernel.from_handle(int(k.handle), mod) == k
    assert hash(Kernel.from_handle(int(k.handle))) == hash(k)


@pytest.mark.gpu
def test_kernel_from_a_bare_handle_keeps_the_library_it_was_loaded_from(dev):
    # As in cuda.core: Kernel.from_handle of a kernel loaded here keeps its library loaded
    # after every other reference is gone (a graph's kernel node is rebuilt that way).
    import gc
    import weakref

    code = Program(SRC, options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin", name_expressions=NAMES, cache=False
    )
    k = code.get_kernel("mixed")
    again = Kernel.from_handle(int(k.handle))
    gone = weakref.ref(code)
    del k, code
    gc.collect()
    assert gone() is not None  # kept by the kernel made from the bare handle
    assert again.attributes.max_threads_per_block > 0
    del again
    gc.collect()
    assert gone() is None  # and let go with it
    # A closed ObjectCode's kernels are forgotten: a bare handle of one keeps nothing.
    code = Program(SRC, options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin", name_expressions=NAMES, cache=False
    )
    address = int(code.get_kernel("mixed").handle)
    code.close()
    assert Kernel.from_handle(address)._module is None


@pytest.mark.gpu
def test_unknown_kernel_lists_kernels(mod):
    with pytest.raises(CUDAError) as ei:
        mod.get_kernel("nope")
    msg = str(ei.value)
    assert "cuLibraryGetKernel" in msg and "'nope'" in msg
    assert "mixed" in msg and "_Z3addIfEvPT_PKS0_m" in msg


@pytest.mark.gpu
def test_ptx_and_path_object_codes_load(dev, tmp_path):
    arch = f"sm_{dev.arch}"
    ptx = Program(SRC, options=ProgramOptions(arch=arch)).compile(
        "ptx", name_expressions=NAMES, cache=False
    )
    assert (
        ObjectCode.from_ptx(ptx.code, symbol_mapping=ptx.symbol_mapping).get_kernel("add<double>")
        is not None
    )
    cubin = Program(SRC, options=ProgramOptions(arch=arch)).compile("cubin", cache=False)
    p = tmp_path / "m.cubin"
    p.write_bytes(cubin.code)
    assert ObjectCode.from_cubin(str(p)).get_kernel("mixed") is not None


@pytest.mark.gpu
def test_arguments_info(mod):
    k = mod.get_kernel("add<float>")
    assert k.num_arguments == 3
    assert k.arguments_info == [(0, 8), (8, 8), (16, 8)]
    assert k._param_layout() == ((0, 8), (8, 8), (16, 8))
    assert k._param_layout() is k._param_layout()  # cached
    m = mod.get_kernel("mixed")
    info = m.arguments_info
    assert [(p.offset, p.size) for p in info] == [(0, 1), (4, 4), (8, 8), (16, 8)]


@pytest.mark.gpu
def test_attributes_agree_with_driver(dev, mod):
    from cuda.bindings import driver

    k = mod.get_kernel("mixed")
    a = k.attributes
    fn = driver.cuKernelGetFunction(k.handle)[1]
    FA = driver.CUfunction_attribute
    for name, attr in [
        ("num_regs", FA.CU_FUNC_ATTRIBUTE_NUM_REGS),
        ("max_threads_per_block", FA.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        ("shared_size_bytes", FA.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        ("local_size_bytes", FA.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES),
        ("const_size_bytes", FA.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES),
        ("binary_version", FA.CU_FUNC_ATTRIBUTE_BINARY_VERSION),
        ("ptx_version", FA.CU_FUNC_ATTRIBUTE_PTX_VERSION),
    ]:
        err, expected = driver.cuFuncGetAttribute(attr, fn)
        assert err == driver.CUresult.CUDA_SUCCESS
        assert getattr(a, name) == expected, name
    # Properties (cuda.core 1.x), not methods.
    assert a.shared_size_bytes == 1024
    assert a.num_regs > 0
    assert 0 < a.max_threads_per_block <= 1024
    assert a.binary_version == int(dev.arch)
    assert isinstance(a.cache_mode_ca, bool)
    assert a.required_cluster_width == 0 and a.cluster_size_must_be_set is False
    assert isinstance(a.non_portable_cluster_size_allowed, bool)
    assert isinstance(a.cluster_scheduling_policy_preference, int)
    assert isinstance(a.preferred_shared_memory_carveout, int)
    # Code written for cuda.core 0.x calls the integer attributes, with or without a device.
    with pytest.warns(DeprecationWarning, match=r"KernelAttributes\.num_regs\(\)"):
        assert a.num_regs() == a.num_regs
    with pytest.warns(DeprecationWarning, match="max_threads_per_block"):
        assert a.max_threads_per_block(dev) == a[dev].max_threads_per_block
    with pytest.warns(DeprecationWarning):
        assert a.max_dynamic_shared_size_bytes(dev.device_id) == a.max_dynamic_shared_size_bytes
    # Per-device views share one cache.
    v0, vd = a[0], a[dev]
    assert isinstance(v0, KernelAttributes) and v0 is not a
    assert v0.num_regs == vd.num_regs == a.num_regs
    assert v0._cache is a._cache and vd._cache is a._cache
    assert k.attributes is a
    with pytest.raises(AttributeError):
        a.num_regs = 1  # read-only
    with pytest.raises(TypeError, match="device must be a Device or an int"):
        a["0"]


@pytest.mark.gpu
def test_set_max_dynamic_shared_size_bytes(dev, mod):
    from cuda.bindings import driver

    k = mod.get_kernel("add<double>")
    a = k.attributes
    before = a.max_dynamic_shared_size_bytes
    assert before >= 0
    a.max_dynamic_shared_size_bytes = 64 * 1024
    assert a.max_dynamic_shared_size_bytes == 64 * 1024
    assert a[dev].max_dynamic_shared_size_bytes == 64 * 1024  # the views share the cache
    cu_dev = driver.cuDeviceGet(dev.device_id)[1]
    FA = driver.CUfunction_attribute
    err, v = driver.cuKernelGetAttribute(
        FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.handle, cu_dev
    )
    assert err == driver.CUresult.CUDA_SUCCESS and v == 64 * 1024
    with pytest.raises(CUDAError):
        a.max_dynamic_shared_size_bytes = 1 << 30
    assert a.max_dynamic_shared_size_bytes == 64 * 1024  # a refused value changes nothing
    with pytest.raises(TypeError, match="value must be an int"):
        a.max_dynamic_shared_size_bytes = 1.5
    a[dev.device_id].preferred_shared_memory_carveout = 50
    err, v = driver.cuKernelGetAttribute(
        FA.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, k.handle, cu_dev
    )
    assert err == driver.CUresult.CUDA_SUCCESS
    assert a.preferred_shared_memory_carveout == v


@pytest.mark.gpu
def test_get_module(dev, mod):
    from cuda.bindings import driver

    m = mod.get_module()
    assert isinstance(m, driver.CUmodule) and int(m) != 0
    err, fn = driver.cuModuleGetFunction(m, b"mixed")
    assert err == driver.CUresult.CUDA_SUCCESS and int(fn) != 0


@pytest.mark.gpu
def test_occupancy_agrees_with_driver(dev, mod):
    from cuda.bindings import driver

    k = mod.get_kernel("add<float>")
    occ = k.occupancy
    fn = driver.cuKernelGetFunction(k.handle)[1]
    n = occ.max_active_blocks_per_multiprocessor(256, 0)
    assert n == driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, 256, 0)[1]
    assert n >= 1
    r = occ.max_potential_block_size(0, 0)
    _, grid, block = driver.cuOccupancyMaxPotentialBlockSize(fn, None, 0, 0)
    assert (r.min_grid_size, r.max_block_size) == (grid, block)
    assert r.max_block_size > 0
    smem = occ.available_dynamic_shared_memory_per_block(1, 128)
    assert smem == driver.cuOccupancyAvailableDynamicSMemPerBlock(fn, 1, 128)[1] and smem > 0
    cfg = types.SimpleNamespace(grid=(16, 1, 1), block=(128, 1, 1), shmem_size=0, cluster=(2, 1, 1))
    assert occ.max_potential_cluster_size(cfg) >= 2
    assert occ.max_active_clusters(cfg) >= 1
    with pytest.raises(TypeError, match="dynamic_shared_memory_needed"):
        occ.max_potential_block_size("x", 0)


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["pointer", "value"])
def test_max_potential_block_size_with_a_c_callback(dev, mod, form):
    # Regression: a ctypes callback wrapped as cuda.core documents crashed the interpreter.
    from cuda.bindings import driver

    seen: list[int] = []

    @_B2D
    def no_dynamic_smem(block_size):
        seen.append(block_size)
        return 0

    address = ctypes.cast(no_dynamic_smem, ctypes.c_void_p).value
    b2d = (
        driver.CUoccupancyB2DSize(_ptr=address)
        if form == "pointer"
        else driver.CUoccupancyB2DSize(address)
    )
    occ = mod.get_kernel("add<float>").occupancy
    for limit in (0, 128):
        seen.clear()
        r = occ.max_potential_block_size(b2d, limit)
        assert r == occ.max_potential_block_size(0, limit)  # the kernel's shared memory is constant
        assert isinstance(r.min_grid_size, int) and isinstance(r.max_block_size, int)
        assert r.max_block_size > 0 and (limit == 0 or r.max_block_size <= limit)
        assert seen, "the driver never called the callback"
        assert all(0 < b <= 1024 for b in seen)
