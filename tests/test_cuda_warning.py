"""``CUDAWarning`` (cuda.core 1.3): failures that cannot be raised (finalizers, callbacks, cleanup
after a decided outcome) are reported as this warning, naming the call, the handle and the
error; ``CUDA_ERROR_DEINITIALIZED`` stays silent. The reports of each backend's finalizers:
``tests/handles`` (both backends, and the native one against the stub driver)."""

from __future__ import annotations

import warnings

import pytest
from cuda.bindings import driver

import cuda_core
from cuda_core import CUDAWarning
from cuda_core._errors import warn_release_failure
from cuda_core._memory._vmm_mapping import _Undo
from cuda_core._utils import check_cleanup, make_error, note_failed_rollback

_INVALID = driver.CUresult.CUDA_ERROR_INVALID_VALUE


def test_cuda_warning_is_a_runtime_warning_at_cuda_core_s_paths():
    assert issubclass(CUDAWarning, RuntimeWarning)
    assert cuda_core.CUDAWarning is CUDAWarning and "CUDAWarning" in cuda_core.__all__
    from cuda_core._utils import cuda_utils  # where cuda.core 1.3 defines it

    assert cuda_utils.CUDAWarning is CUDAWarning and "CUDAWarning" in cuda_utils.__all__


def test_a_report_names_the_call_the_handle_and_the_error():
    with pytest.warns(CUDAWarning) as record:
        warn_release_failure("a stream", 0xABC, make_error(_INVALID, "cuStreamDestroy"))
        warn_release_failure("an NVML event set", 7, OSError("gone"), "nvmlEventSetFree")
    first, second = (str(w.message) for w in record)
    assert first.startswith("cuda_core could not release a stream 0xabc: cuStreamDestroy: ")
    assert "CUDA_ERROR_INVALID_VALUE" in first
    assert (
        second
        == "cuda_core could not release an NVML event set 0x7: nvmlEventSetFree: OSError: gone"
    )


def test_independent_failures_are_not_collapsed_by_the_default_filter():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # once per location and message
        for handle in (1, 2, 1):
            warn_release_failure("an event", handle, make_error(_INVALID, "cuEventDestroy"))
    assert [str(w.message).split()[6] for w in caught] == ["0x1:", "0x2:"]


def test_the_driver_shutting_down_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        error = make_error(driver.CUresult.CUDA_ERROR_DEINITIALIZED, "cuMemFreeAsync")
        warn_release_failure("an allocation", 0x10, error)


def test_escalated_reports_raise_where_they_are_made():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CUDAWarning)
        with pytest.raises(CUDAWarning, match="cuGraphDestroy"):
            warn_release_failure("a graph", 1, make_error(_INVALID, "cuGraphDestroy"))


def test_a_cleanup_that_fails_after_the_outcome_is_decided_warns():
    check_cleanup((driver.CUresult.CUDA_SUCCESS,), "cuEventDestroy", "an event", 5)  # silent
    with pytest.warns(
        CUDAWarning, match=r"an ordering event 0x5: cuEventDestroy: CUDA_ERROR_INVALID_VALUE"
    ):
        check_cleanup((_INVALID,), "cuEventDestroy", "an ordering event", 5)


def test_a_failed_rollback_is_a_note_on_the_error_that_propagates():
    err = ValueError("the step that failed")
    note_failed_rollback(err, (driver.CUresult.CUDA_SUCCESS,), "cuGreenCtxDestroy")
    assert not getattr(err, "__notes__", None)
    note_failed_rollback(err, (_INVALID,), "cuGreenCtxDestroy")
    assert "cuGreenCtxDestroy: CUDA_ERROR_INVALID_VALUE" in err.__notes__[0]
    with pytest.raises(KeyError) as info:
        with _Undo() as undo:
            undo.add("cuMemUnmap", lambda: (_INVALID,))
            undo.add("cuMemAddressFree", lambda: (driver.CUresult.CUDA_SUCCESS,))
            raise KeyError("map failed")
    notes = info.value.__notes__
    assert len(notes) == 1 and "cuMemUnmap: CUDA_ERROR_INVALID_VALUE" in notes[0]
