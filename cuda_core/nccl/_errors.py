"""The two errors of :mod:`cuda_core.nccl`: NCCL reported a failure, or NCCL is not installed.

Both are :class:`~cuda_core.CUDAError` subclasses, so they keep ``.api``, ``.name`` and
``.code`` and survive pickling (a failure in a worker process reaches its parent intact).
"""

from __future__ import annotations

from typing import Any

from .._errors import CUDAError, _DynamicLibNotFoundError, library_not_found

__all__ = ["NCCLError", "NCCLNotFoundError", "NCCLTimeoutError"]

REMEDY = 'pip install "cudacore[nccl]"'


class NCCLError(CUDAError):
    """NCCL reported a failure.

    The message reads ``"<ncclCall>: nccl<Status>: <explanation>"``, e.g.
    ``"ncclAllReduce: ncclInvalidArgument: invalid argument ..."``; the explanation ends with
    what NCCL last logged for the communicator, when it logged anything.

    Attributes
    ----------
    api : str
        The NCCL call that failed, e.g. ``"ncclAllReduce"``.
    name : str
        The status name, e.g. ``"ncclInvalidArgument"``.
    code : int or None
        The numeric ``ncclResult_t``.
    """


class NCCLNotFoundError(CUDAError, ImportError, _DynamicLibNotFoundError):  # type: ignore[misc]  # ImportError.name is the status name here
    """nccl4py or the NCCL library (``libnccl.so.2``) could not be loaded.

    ``import cuda_core.nccl`` always works; this is raised by the first call that needs NCCL.
    The message names what is missing and the remedy, ``pip install "cudacore[nccl]"``. It is an
    ``ImportError`` (the usual test for an optional dependency) and a ``RuntimeError`` (what
    ``cuda.pathfinder`` raises for a library it cannot find), so handlers of either catch it.

    Attributes
    ----------
    library : str
        What is missing, e.g. ``"nccl4py (NVIDIA's Python bindings for NCCL)"``.
    needed_by : str
        ``"cuda_core.nccl"``.
    remedy : str
        The command that installs it.
    detail : str
        What the import or the loader said ("" when nothing).
    """

    library: str
    needed_by: str
    remedy: str
    detail: str

    def __init__(self, library: str, what: str, detail: str = "") -> None:
        library_not_found(self, library, what, "cuda_core.nccl", REMEDY, detail)


class NCCLTimeoutError(NCCLError):
    """An NCCL operation did not complete within its communicator's timeout; the communicator
    was aborted.

    Raised on every rank whose collective (or ``init``, ``finalize``, ``close``) waited longer
    than the timeout -- usually because another rank died, hung, or did not call the same
    collective. The message reads ``"<ncclCall>: timeout: rank <r> of <n> ranks (device <d>):
    ..."``. The communicator is unusable after it (every later call raises this error again,
    ``close()`` is free); the process, its memory and streams are not: build a new communicator
    from a new unique id.

    Attributes
    ----------
    api : str
        The NCCL call that did not complete, e.g. ``"ncclAllReduce"``.
    rank, nranks, device_id : int
        This rank, the number of ranks and this rank's GPU.
    timeout : float
        The communicator's timeout, in seconds.
    """

    rank: int
    nranks: int
    device_id: int
    timeout: float

    def __init__(self, api: str, rank: int, nranks: int, device_id: int, timeout: float) -> None:
        self.rank, self.nranks, self.device_id, self.timeout = rank, nranks, device_id, timeout
        super().__init__(
            api,
            "timeout",
            f"rank {rank} of {nranks} ranks (device {device_id}): not complete after "
            f"{timeout:g} s, the communicator's timeout; the communicator was aborted (its "
            "unfinished work stopped, their results undefined). Another rank probably died, "
            "hangs or did not make the same call; build a new communicator from a new unique id "
            "to go on (set the limit with timeout= or nccl.set_default_timeout())",
            None,
        )


def status_error(api: str, code: int, bindings: Any, comm: Any, where: str) -> NCCLError:
    """The :class:`NCCLError` for an asynchronous status ``code`` NCCL reported for ``api``."""
    err = nccl_error(api, _Status(code), bindings, comm)
    err.explanation = f"{where}: {err.explanation}; the communicator was aborted"
    err.args = (err._format(),)
    return err


class _Status(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"NCCL status {status}")
        self.status = status


def nccl_error(api: str, exc: Any, bindings: Any, comm: Any = None) -> NCCLError:
    """The :class:`NCCLError` for ``exc``, an ``NCCLError`` of ``nccl.bindings`` raised by ``api``."""
    code = getattr(exc, "status", None)
    name = "ncclError"
    explanation = str(exc)
    if isinstance(code, int):
        try:
            name = "nccl" + bindings.Result(code).name
            explanation = bindings.get_error_string(code)
        except Exception:  # a status this nccl4py does not know: keep its own text
            pass
    if comm is not None:
        try:
            last = bindings.get_last_error(comm)
        except Exception:  # an older library without ncclGetLastError: nothing more to say
            last = ""
        if last:
            explanation += f"; NCCL said: {last.strip()}"
    return NCCLError(api, name, explanation, code)


def closed() -> RuntimeError:
    """What any use of a closed or aborted communicator raises."""
    return RuntimeError("Communicator has been closed; it cannot be used after close() or abort()")
