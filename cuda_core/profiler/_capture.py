"""What a profiler captures, limited to parts of a run: ``cuProfilerStart`` / ``cuProfilerStop``.

A profiler started with ``--capture-range=cudaProfilerApi`` (Nsight Systems) or
``--profile-from-start off`` (Nsight Compute) records only between the two calls. Without a
profiler they do nothing. Both need a current context; each call checks for one first, so that
a missing one is named with its remedy whatever the driver would say.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from .._compat import driver
from .._errors import CUDAError
from .._handles._driver import ensure_driver
from .._utils import handle_return, make_error

__all__ = ["capture", "start", "stop"]

_INVALID_CONTEXT = driver.CUresult.CUDA_ERROR_INVALID_CONTEXT

_lock = threading.Lock()
_depth = 0  # capture() blocks open in this process, on any thread


def _require_context(api: str) -> None:
    ensure_driver()
    ctx = handle_return(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or not int(ctx):
        raise make_error(_INVALID_CONTEXT, api)


def start() -> None:
    """Start the profiler's capture (``cuProfilerStart``); nothing happens without a profiler.

    Starting again while started does nothing. Prefer :func:`capture`, which also stops.

    Raises
    ------
    CUDAError
        No context is current (``CUDA_ERROR_INVALID_CONTEXT``, with the remedy:
        ``Device.set_current()``), or the driver refuses.
    CUDADriverNotFoundError
        No NVIDIA driver.
    """
    _require_context("cuProfilerStart")
    handle_return(driver.cuProfilerStart(), "cuProfilerStart")


def stop() -> None:
    """Stop the profiler's capture (``cuProfilerStop``); nothing happens without a profiler.

    Raises
    ------
    CUDAError
        No context is current (``CUDA_ERROR_INVALID_CONTEXT``, with the remedy:
        ``Device.set_current()``), or the driver refuses.
    CUDADriverNotFoundError
        No NVIDIA driver.
    """
    _require_context("cuProfilerStop")
    handle_return(driver.cuProfilerStop(), "cuProfilerStop")


@contextlib.contextmanager
def capture() -> Iterator[None]:
    """Let the profiler capture this block only: :func:`start` on entry, :func:`stop` on exit.

    Also a decorator (``@capture()``), where each call of the function is captured. Blocks nest,
    on one thread or several: the capture starts when the first opens and stops when the last
    closes. The block's own exception is never hidden: a failed stop after it is added to it as
    a note. The count is the process's: ``cuProfilerStart``/``Stop`` act on the context current
    where the first block opens and the last closes, so open and close the blocks with the same
    context current (one GPU, or the same ``Device.set_current()`` on every thread).

    Raises
    ------
    CUDAError
        No context is current on entry or exit (``CUDA_ERROR_INVALID_CONTEXT``, with the
        remedy: ``Device.set_current()``), or the driver refuses.
    CUDADriverNotFoundError
        No NVIDIA driver.

    Examples
    --------
    Run the program under ``nsys profile --capture-range=cudaProfilerApi python app.py``:

    >>> from cuda_core import Device, profiler
    >>> Device().set_current()  # doctest: +SKIP
    >>> for i in range(100):  # doctest: +SKIP
    ...     if i == 10:
    ...         with profiler.capture():  # the profile holds iteration 10 only
    ...             step()
    ...     else:
    ...         step()
    """
    global _depth
    with _lock:
        if _depth == 0:
            start()
        _depth += 1
    try:
        yield
    except BaseException as exc:
        try:
            _leave()
        except CUDAError as err:
            exc.add_note(f"(and stopping the profiler's capture after it failed: {err})")
        raise
    _leave()


def _leave() -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            stop()
