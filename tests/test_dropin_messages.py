"""Errors begin as ``cuda.core``'s: the same class, the message starting with its wording.

Code and tests written for ``cuda.core`` match the start of its messages (``pytest.raises(...,
match=r"^Invalid split count")``); ours begin with the same words and then say more (the value,
the rule, the remedy). Each case here is a situation NVIDIA's test suite (or ``cuda.core`` 1.2.2
itself, run on this machine) shows a message for, checked with ``cuda.core``'s class and
pattern. This file holds the situations reached without a GPU; those that need one are in
``test_dropin_messages_gpu.py``.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from cuda_core import (
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    Buffer,
    CUDAError,
    Host,
    Linker,
    LinkerOptions,
    NVRTCError,
    ObjectCode,
    Program,
    ProgramOptions,
    SMResourceOptions,
)
from cuda_core._errors import LinkerError, NVVMError
from cuda_core.graph import GraphBuilder
from cuda_core.utils import CopyOptions, StridedMemoryView, copy_batch
from tests.memory.test_memory import HostIntResource


def _builder(kind: str = "primary", *, building: bool = False, ended: bool = False) -> GraphBuilder:
    """A builder in a given state, on a stream that needs no driver (nothing here asks one)."""
    b = GraphBuilder._from_stream(LEGACY_DEFAULT_STREAM, kind=kind)
    b._building = building
    b._ended = ended
    return b


# ------------------------------------------------------------------------------------------------
# graph builders


def test_split_count_below_two():
    with pytest.raises(ValueError, match=r"^Invalid split count: expecting >= 2, got 1") as info:
        _builder(building=True).split(1)
    assert "(got 1)" in str(info.value)  # and ours: the rule and the value


def test_split_needs_building():
    with pytest.raises(
        RuntimeError, match=r"^Graph builder must be building before it can be split\."
    ):
        _builder().split(2)


def test_join_needs_two_builders_of_the_right_type():
    with pytest.raises(ValueError, match=r"^Must join with at least two graph builders"):
        GraphBuilder.join(_builder(building=True))
    with pytest.raises(TypeError, match=r"^All arguments must be GraphBuilder instances"):
        GraphBuilder.join(_builder(building=True), object())


def test_begin_building_twice_or_after_the_end():
    with pytest.raises(RuntimeError, match=r"^Graph builder is already building\."):
        _builder(building=True).begin_building()
    with pytest.raises(
        RuntimeError, match=r"^Cannot resume building after building has ended\."
    ) as info:
        _builder(ended=True).begin_building()
    assert "new GraphBuilder" in str(info.value)  # and ours: the remedy


def test_end_building_when_not_building():
    with pytest.raises(RuntimeError, match=r"^Graph builder is not building\."):
        _builder().end_building()


@pytest.mark.parametrize("building", [False, True])
def test_complete_before_the_graph_is_built(building):
    with pytest.raises(RuntimeError, match=r"^Graph has not finished building\.") as info:
        _builder(building=building).complete()
    assert "end_building()" in str(info.value)
    with pytest.raises(RuntimeError, match=r"^Graph has not finished building\."):
        _builder(building=building).debug_dot_print("unused.dot")


def test_a_closed_builder():
    b = _builder()
    b.close()
    for use in (b.complete, lambda: b.graph_definition, b.begin_building):
        with pytest.raises(RuntimeError, match=r"^Graph builder has been closed\."):
            use()


def test_graph_definition_before_begin_and_during_capture():
    with pytest.raises(RuntimeError, match="before begin_building"):
        _builder().graph_definition  # noqa: B018
    with pytest.raises(RuntimeError, match="capture is in"):
        _builder(building=True).graph_definition  # noqa: B018
    with pytest.raises(RuntimeError, match="forked"):
        _builder("forked", building=True).graph_definition  # noqa: B018


def test_adding_to_a_builder_that_is_not_building():
    with pytest.raises(RuntimeError, match=r"^Cannot add callback when graph is not being built"):
        _builder().callback(print)
    with pytest.raises(
        RuntimeError, match=r"^Cannot create a condition when graph is not being built"
    ):
        _builder().create_condition()
    with pytest.raises(ValueError, match=r"^Child graph has not finished building\."):
        _builder(building=True).embed(_builder(building=True))
    # ours stays a RuntimeError too, as before
    with pytest.raises(RuntimeError, match=r"^Child graph has not finished building\."):
        _builder(building=True).embed(_builder())


def test_conditionals_check_the_condition_first():
    for method in ("if_then", "if_else", "while_loop"):
        with pytest.raises(TypeError, match="GraphCondition"):
            getattr(_builder(), method)(42)
    with pytest.raises(TypeError, match="GraphCondition"):
        _builder().switch([1, 2, 3], 4)


def test_host_callbacks():
    with pytest.raises(ValueError, match="user_data is only supported") as info:
        _builder(building=True).callback(print, user_data=b"hello")
    assert "functools.partial" in str(info.value)
    with pytest.raises(TypeError, match=r"^callback must be callable, got int"):
        _builder(building=True).callback(3)


# ------------------------------------------------------------------------------------------------
# compiling: Program, ProgramOptions, Linker (no GPU: arch is given)

_K = 'extern "C" __global__ void k() {}'
_PTX = ".version 7.0\n.target sm_70\n.address_size 64\n"


def test_program_unknown_code_type_is_cuda_cores_whole_message():
    msg = r"^Unsupported code_type='fortran' \(supported_code_types=\('c\+\+', 'ptx', 'nvvm'\)\)$"
    with pytest.raises(RuntimeError, match=msg):
        Program("goto 100", "FORTRAN")


def test_program_code_of_the_wrong_type():
    with pytest.raises(
        TypeError, match="NVVM IR code must be provided as str, bytes, or bytearray"
    ):
        Program(42, "nvvm")
    with pytest.raises(TypeError, match=r"^Expected type str, but got int"):
        Program(12345, "c++")


def test_a_closed_program():
    p = Program(_K, "c++", ProgramOptions(arch="sm_90"))
    p.close()
    with pytest.raises(RuntimeError, match=r"^Program has been closed"):
        p.compile("ptx")


def test_target_types_a_backend_cannot_make():
    p = Program("x", "nvvm", ProgramOptions(arch="sm_90"))
    with pytest.raises(ValueError, match=r'^Unsupported target_type="cubin" for NVVM'):
        p.compile("cubin")
    with pytest.raises(ValueError):
        Program(_K, "c++", ProgramOptions(arch="sm_90")).compile("invalid_target")


def test_extra_sources_outside_nvvm():
    opts = ProgramOptions(arch="sm_90", extra_sources=[("helper", _K)])
    with pytest.raises(ValueError, match=r"^extra_sources is not supported by the NVRTC backend"):
        Program(_K, "c++", opts)
    with pytest.raises(ValueError, match=r"^extra_sources is not supported by the PTX backend"):
        Program(_PTX, "ptx", opts)


def test_numba_debug_is_ignored_for_ptx_with_a_warning():
    with pytest.warns(UserWarning, match=r"^numba_debug is ignored for code_type='ptx'"):
        Program(_PTX, "ptx", ProgramOptions(arch="sm_90", numba_debug=True))


@pytest.mark.parametrize(
    ("extra_sources", "exc", "pattern"),
    [
        (42, TypeError, r"^extra_sources must be a sequence of 2-tuples"),
        (["not_a_tuple"], TypeError, "^Each extra module must be a 2-tuple"),
        ([(42, b"source")], TypeError, "^Module name at index 0 must be a string"),
        ([("mod", 42)], TypeError, "^Module source at index 0 must be str"),
        ([("mod", b"")], ValueError, "^Module source for 'mod'.*cannot be empty"),
    ],
)
def test_extra_sources_checks(extra_sources, exc, pattern):
    with pytest.raises(exc, match=pattern):
        ProgramOptions(name="test", arch="sm_80", extra_sources=extra_sources)


@pytest.mark.parametrize(
    ("define_macro", "pattern"),
    [
        (("ONLY_NAME",), r"^Expected define_macro tuple\[str, str\], got \('ONLY_NAME',\)"),
        (("MY_MACRO", 99), r"^Expected define_macro tuple"),
        ([42], r"^Expected define_macro .*got \[42\]"),
        ([("ONLY_NAME",)], r"^Expected define_macro tuple"),
        ([("MACRO", "1"), 42], r"^Expected define_macro.*got 42"),
    ],
)
def test_malformed_define_macro(define_macro, pattern):
    # cuda.core's RuntimeError (ours is a TypeError too), raised when the options are made
    with pytest.raises(RuntimeError, match=pattern) as info:
        ProgramOptions(name="test", arch="sm_80", define_macro=define_macro).as_bytes("nvrtc")
    assert isinstance(info.value, TypeError)
    assert "define_macro must be a str, a (name, value) tuple" in str(info.value)


def test_options_as_bytes_for_an_unknown_backend():
    with pytest.raises(ValueError, match=r"^Unknown backend 'invalid'"):
        ProgramOptions(arch="sm_80").as_bytes("invalid")
    with pytest.raises(ValueError, match=r"^as_bytes\(\) only supports 'nvjitlink' backend"):
        LinkerOptions(arch="sm_80").as_bytes("driver")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"relocatable_device_code": True},
        {"std": "c++17"},
        {"time": "timing.csv"},
        {"split_compile": 2},
        {"builtin_move_forward": False},
        {"define_macro": "M"},
    ],
    ids=lambda kw: next(iter(kw)),
)
def test_options_nvvm_cannot_take(kwargs):
    name = next(iter(kwargs))
    msg = rf"^The following options are not supported by NVVM backend: {name}$"
    with pytest.raises(CUDAError, match=msg):
        ProgramOptions(arch="sm_80", **kwargs).as_bytes("nvvm")


def test_program_options_name_none_is_the_default_name():
    assert ProgramOptions(name=None, arch="sm_90").name == "default_program"


def test_options_cuda_core_takes_for_ptx_input():
    opts = ProgramOptions(arch="sm_90", time=True, split_compile=True)
    assert b"-time" in opts.as_bytes("nvjitlink")


def test_linker_needs_object_codes_and_refuses_when_closed():
    with pytest.raises(ValueError, match=r"^At least one ObjectCode object must be provided"):
        Linker()
    obj = ObjectCode.from_ptx(_PTX.encode())
    linker = Linker(obj, options=LinkerOptions(arch="sm_90"))
    with pytest.raises(ValueError, match=r"^Unsupported target type: exe"):
        linker.link("exe")
    linker.close()
    with pytest.raises(RuntimeError, match=r"^Linker has been closed"):
        linker.link("cubin")


def test_compile_errors_are_the_bindings_errors_cuda_core_raises():
    nvvm = pytest.importorskip("cuda.bindings.nvvm")
    nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")
    assert issubclass(NVVMError, nvvm.nvvmError)
    assert issubclass(LinkerError, nvjitlink.nvJitLinkError)


def test_a_failed_nvrtc_compile_has_cuda_cores_compilation_log():
    bad = 'extern "C" __global__ void k() { undefined_symbol(); }'
    with Program(bad, "c++", ProgramOptions(arch="sm_90")) as p:
        with pytest.raises(NVRTCError, match="compilation log") as info:
            p.compile("ptx", cache=False)
    assert "undefined_symbol" in str(info.value)


# ------------------------------------------------------------------------------------------------
# memory: hosts, copy options, batched copies, buffers (host-only buffers need no driver)


def test_host_numa_id():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match=r"^numa_id must be a non-negative int"):
            Host(numa_id=bad)
    with pytest.raises(ValueError, match="mutually exclusive"):
        Host(numa_id=0, is_numa_current=True)


def test_copy_options_enums():
    with pytest.raises(ValueError, match=r"^invalid src_access_order: 'invalid_order'"):
        CopyOptions(src_access_order="invalid_order")
    with pytest.raises(ValueError, match=r"^invalid overlap_mode: 'invalid_mode'"):
        CopyOptions(overlap_mode="invalid_mode")


def test_copy_batch_arguments():
    mr = HostIntResource()
    a, b, c = mr.allocate(8), mr.allocate(8), mr.allocate(16)
    s = LEGACY_DEFAULT_STREAM
    cases = [
        ((s, a, [b]), {}, TypeError, "sequence of Buffers"),
        ((s, 42, [b]), {}, TypeError, "must be a sequence of Buffer"),
        ((s, [], []), {}, ValueError, "empty buffers sequence"),
        ((s, [a, 42], [b, c]), {}, TypeError, "expected Buffer, got int"),
        ((s, [a, b], [c, None]), {}, TypeError, "expected Buffer, got NoneType"),
        ((s, [a, b], [c]), {}, ValueError, "does not match dsts length"),
        ((s, [a], [b]), {"options": [CopyOptions()] * 3}, ValueError, "options length"),
        ((s, [a], [b]), {"options": 42}, TypeError, "options must be CopyOptions"),
        ((s, [a], [b]), {"options": ["nope"]}, TypeError, "each options element must be"),
        ((s, [a], [b]), {}, TypeError, "^copy_batch does not accept LEGACY_DEFAULT_STREAM"),
    ]
    for args, kwargs, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            copy_batch(*args, **kwargs)


def test_buffer_copies_and_fills():
    mr = HostIntResource()
    a = mr.allocate(8)
    with pytest.raises(ValueError, match=r"^owner and memory resource cannot be both specified"):
        Buffer.from_handle(0x1000, 8, mr=mr, owner=object())
    with pytest.raises(TypeError, match=r"^Buffer.copy_to: options must be CopyOptions, got int"):
        a.copy_to(mr.allocate(8), stream=PER_THREAD_DEFAULT_STREAM, options=42)
    with pytest.raises(TypeError, match=r"^value must be an int or support the buffer protocol"):
        a.fill(object(), stream=PER_THREAD_DEFAULT_STREAM)
    with pytest.raises(ValueError, match=r"^value must be 1, 2, or 4 bytes, got 3"):
        a.fill(b"abc", stream=PER_THREAD_DEFAULT_STREAM)
    with pytest.raises(OverflowError):  # cuda.core converts to uint8 (ours: also a ValueError)
        a.fill(256, stream=PER_THREAD_DEFAULT_STREAM)
    with pytest.raises(ValueError, match=r"^buffer size \(6\) must be divisible by 4"):
        mr.allocate(6).fill(b"abcd", stream=PER_THREAD_DEFAULT_STREAM)


# ------------------------------------------------------------------------------------------------
# objects only a factory makes


@pytest.mark.parametrize(
    ("qualname", "pattern"),
    [
        ("cuda_core._device_properties.DeviceProperties", r"^DeviceProperties cannot be instantiated directly\."),
        ("cuda_core.DeviceResources", r"^DeviceResources cannot be instantiated directly\."),
        ("cuda_core.SMResource", r"^SMResource cannot be instantiated directly\."),
        ("cuda_core.WorkqueueResource", r"^WorkqueueResource cannot be instantiated directly\."),
        ("cuda_core.GraphicsResource", r"^GraphicsResource objects cannot be instantiated directly\."),
        ("cuda_core.graph.Graph", r"^directly constructing a Graph instance is not supported"),
    ],
)  # fmt: skip
def test_factory_only_classes(qualname, pattern):
    module, _, name = qualname.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    with pytest.raises(RuntimeError, match=pattern):
        cls()


# ------------------------------------------------------------------------------------------------
# views


def test_views_of_objects_without_the_protocol():
    with pytest.raises(
        AttributeError, match=r"^'int' object has no attribute '__array_interface__'"
    ):
        StridedMemoryView.from_array_interface(3)
    with pytest.raises(AttributeError, match=r"^'int' object has no attribute '__dlpack_device__'"):
        StridedMemoryView.from_dlpack(3, stream_ptr=-1)
    with pytest.raises(
        AttributeError, match=r"^'int' object has no attribute '__cuda_array_interface__'"
    ):
        StridedMemoryView.from_cuda_array_interface(3, stream_ptr=-1)
    with pytest.raises(
        BufferError, match=r"^the input object does not support any data exchange protocol"
    ):
        StridedMemoryView.from_any_interface(3, stream_ptr=-1)
    with pytest.raises(TypeError, match=r"^Argument 'stream_ptr' has incorrect type"):
        StridedMemoryView.from_dlpack(np.arange(3), stream_ptr="x")


def test_array_interface_strides_that_are_not_whole_items():
    x = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "i4"), ("b", "f8")])
    with pytest.raises(ValueError, match=r"^strides must be divisible by itemsize"):
        StridedMemoryView.from_array_interface(x["b"]).strides  # noqa: B018


def test_from_buffer_checks():
    mr = HostIntResource()
    with pytest.raises(ValueError, match=r"^itemsize .+ does not match dtype.itemsize .+"):
        StridedMemoryView.from_buffer(mr.allocate(10), (5,), dtype=np.int16, itemsize=1)
    with pytest.raises(ValueError, match="itemsize or dtype must be specified"):
        StridedMemoryView.from_buffer(mr.allocate(10), (5,))
    with pytest.raises(ValueError, match=r"Expected at least 40 bytes, got 20 bytes\."):
        StridedMemoryView.from_buffer(mr.allocate(20), (5, 4), strides=(4, 1), dtype=np.int16)
    with pytest.raises(ValueError, match="negative memory offsets"):
        StridedMemoryView.from_buffer(mr.allocate(20), (5, 4), strides=(-4, 1), dtype=np.uint8)
    view = StridedMemoryView.from_buffer(mr.allocate(16), (16,), itemsize=1, dtype=None)
    with pytest.raises(BufferError, match="dtype"):
        view.__dlpack__()


def test_a_host_view_is_dlpack_cpu_device_zero():
    view = StridedMemoryView.from_array_interface(np.arange(3))
    assert view.__dlpack_device__() == (1, 0)  # kDLCPU, 0: whatever device_id says


# ------------------------------------------------------------------------------------------------
# system, checkpoint, device resources, the missing driver


def test_system_device_needs_exactly_one_selector():
    from cuda_core import system

    with pytest.raises(ValueError, match=r"^Handle requires only one of"):
        system.Device(index=0, uuid="ignored")
    with pytest.raises(ValueError, match=r"^Handle requires either a device"):
        system.Device()


def test_checkpoint_process_pid():
    import cuda_core

    for bad, exc, pattern in (
        ("abc", TypeError, "pid must be an int"),
        (True, TypeError, "pid must be an int"),
        (0, ValueError, "pid must be a positive int"),
        (-1, ValueError, "pid must be a positive int"),
    ):
        with pytest.raises(exc, match=pattern):
            cuda_core.checkpoint.Process(bad)  # an attribute of the package, as in cuda.core


def test_sm_resource_options_groups():
    def groups(**kw):
        return SMResourceOptions(**kw)._groups()

    with pytest.raises(ValueError, match="count is scalar"):
        groups(count=8, coscheduled_sm_count=(8, 8))
    with pytest.raises(ValueError, match="expected 2"):
        groups(count=(8, 8), coscheduled_sm_count=(8, 8, 8))
    with pytest.raises(ValueError, match=r"^count must be non-negative"):
        groups(count=-1)
    with pytest.raises(ValueError, match=r"^count sequence must not be empty"):
        groups(count=())


def test_a_missing_driver_is_the_loader_error_cuda_core_lets_through():
    from cuda.pathfinder import DynamicLibNotFoundError

    from cuda_core import CUDADriverNotFoundError

    assert issubclass(CUDADriverNotFoundError, DynamicLibNotFoundError)
    assert issubclass(CUDADriverNotFoundError, CUDAError)


def test_kernel_arguments_of_an_unsupported_type():
    from cuda_core._kernel_arg_handler import ParamHolder

    with pytest.raises(TypeError, match=r"^the argument is of unsupported type: <class 'str'>"):
        ParamHolder(["not_a_valid_kernel_arg"])


def test_kernel_helpers_only_a_kernel_makes_and_unloadable_code():
    from cuda_core._kernel import KernelOccupancy
    from cuda_core._kernel_attributes import KernelAttributes

    with pytest.raises(RuntimeError, match=r"^KernelAttributes cannot be instantiated directly\."):
        KernelAttributes()
    with pytest.raises(RuntimeError, match=r"^KernelOccupancy cannot be instantiated directly\."):
        KernelOccupancy()
    with pytest.raises(RuntimeError, match=r'^Unsupported code type "ltoir"'):
        ObjectCode.from_ltoir(b"x").get_kernel("k")


def test_narrow_floats_without_ml_dtypes_are_not_implemented():
    from cuda_core._interop import _dlpack

    with pytest.raises(
        NotImplementedError, match=r"^Support for bfloat16 within cuda-core requires"
    ):
        _dlpack.dlpack_to_dtype(_dlpack.kDLBfloat, 16, 2)  # no NumPy type, ml_dtypes or not
