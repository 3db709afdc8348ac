"""CPU tier: OwnedHandle, the handle of the cold kinds (no driver: fake destroy functions)."""

from __future__ import annotations

import gc
import sys
import warnings

import pytest
from cuda.bindings import driver

from cuda_core import CUDAWarning
from cuda_core._handles._owned import KINDS, OwnedHandle


def test_release_destroys_once_and_collection_then_does_nothing():
    destroyed = []
    h = OwnedHandle("graph", 0x10, destroyed.append)
    assert h.value == 0x10 and not h.is_released
    h.release()
    h.release()
    assert destroyed == [0x10] and h.is_released and h.value is None
    del h
    gc.collect()
    assert destroyed == [0x10]


def test_collection_destroys_and_adopt_replaces():
    destroyed = []
    h = OwnedHandle("nvrtc program", None, destroyed.append)  # made on first use
    assert h.is_released
    h.adopt(1)
    h.adopt(2)  # the first value is destroyed when replaced
    assert destroyed == [1]
    del h
    assert destroyed == [1, 2]  # CPython collects at once


def test_a_dependency_outlives_what_depends_on_it():
    destroyed = []
    array = OwnedHandle("array", 0xA, destroyed.append)
    texture = OwnedHandle("texture object", 0x7, destroyed.append, (array,))
    del array
    assert destroyed == []
    del texture
    assert destroyed == [0x7, 0xA]


def test_borrowed_is_never_destroyed_but_keeps_its_dependencies():
    destroyed = []
    parent = OwnedHandle("mipmapped array", 0xB, destroyed.append)
    level = OwnedHandle("array", 0xC, None, (parent,))
    level.release()
    assert level.is_released and destroyed == []
    del parent
    assert destroyed == []  # the level still holds it
    del level
    assert destroyed == [0xB]


def test_a_failing_destroy_never_raises_it_warns():
    def fail(value):
        raise RuntimeError("driver gone")

    h = OwnedHandle("library", 0x5, fail)
    with pytest.warns(CUDAWarning) as record:
        h.release()
    assert h.is_released
    assert "library released" in repr(h)
    assert str(record[0].message) == (
        "cuda_core could not release the library 0x5: cuLibraryUnload: RuntimeError: driver gone"
    )
    assert KINDS["graph exec"] == "cuGraphExecDestroy" and "ipc file descriptor" in KINDS


def test_a_failed_status_is_a_warning_naming_the_call_the_handle_and_the_error():
    # cuda.bindings returns its status: (CUresult,) is checked, not dropped.
    h = OwnedHandle("graph exec", 0x77, lambda v: (driver.CUresult.CUDA_ERROR_INVALID_VALUE,))
    with pytest.warns(
        CUDAWarning, match=r"the graph exec 0x77: cuGraphExecDestroy: CUDA_ERROR_INVALID_VALUE"
    ):
        h.release()
    ok = OwnedHandle("graph", 0x78, lambda v: (driver.CUresult.CUDA_SUCCESS,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok.release()  # success: nothing to say


def test_the_driver_shutting_down_is_not_reported():
    h = OwnedHandle("texture object", 0x9, lambda v: (driver.CUresult.CUDA_ERROR_DEINITIALIZED,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h.release()
    assert h.is_released


def test_a_failure_in_the_finalizer_warns_and_an_escalated_one_is_unraisable(monkeypatch):
    fails = lambda v: (driver.CUresult.CUDA_ERROR_INVALID_HANDLE,)  # noqa: E731
    h = OwnedHandle("surface object", 0x31, fails)
    with pytest.warns(CUDAWarning, match="the surface object 0x31: cuSurfObjectDestroy"):
        del h
        gc.collect()
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    h = OwnedHandle("surface object", 0x32, fails)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CUDAWarning)
        del h  # nothing is raised here: the finalizer hands it to the unraisable hook
        gc.collect()
    assert len(seen) == 1 and isinstance(seen[0].exc_value, CUDAWarning)
    assert "0x32" in str(seen[0].exc_value)


def test_take_hands_the_value_over_and_nothing_is_destroyed_later():
    destroyed = []
    h = OwnedHandle("graphics resource", 0x9, destroyed.append)
    assert h.take() == 0x9  # the caller destroys it now, seeing the driver's error
    assert h.is_released and h.take() is None
    h.release()
    del h
    gc.collect()
    assert destroyed == []


def _live(kind: str) -> list[OwnedHandle]:
    gc.collect()
    return [
        o
        for o in gc.get_objects()
        if isinstance(o, OwnedHandle) and o.kind == kind and not o.is_released
    ]


def test_a_link_releases_its_nvjitlink_handle_whether_it_fails_or_not():
    import pytest

    from cuda_core import Linker, LinkerOptions, ObjectCode, Program, ProgramOptions
    from cuda_core._compile._libraries import nvjitlink_available
    from cuda_core._errors import LinkerError

    if not nvjitlink_available():
        pytest.skip("nvJitLink is not installed")
    ptx = Program('extern "C" __global__ void k() {}', "c++", ProgramOptions(arch="sm_80")).compile(
        "ptx"
    )
    before = len(_live("nvjitlink handle"))
    out = Linker(ptx, options=LinkerOptions(arch="sm_80")).link("cubin")
    assert out.code_type == "cubin"
    bad = ObjectCode.from_ptx(b"this is not PTX")
    with pytest.raises(LinkerError) as info:
        Linker(bad, options=LinkerOptions(arch="sm_80")).link("cubin")
    # The traceback (held here) still references the frame that made the handle: only an
    # explicit release on the way out leaves it released.
    assert info.value.__traceback__ is not None
    assert len(_live("nvjitlink handle")) == before
    assert {"nvjitlink handle", "nvvm program", "driver link state", "graphics resource"} <= set(
        KINDS
    )
