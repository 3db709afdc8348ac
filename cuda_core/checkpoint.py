"""Checkpoint and restore the GPU state of a CUDA process (as ``cuda.core.checkpoint``).

:class:`Process` wraps the driver's ``cuCheckpointProcess*`` API. The usual sequence, run from
another process (a checkpoint tool) against the process that uses the GPU::

    p = Process(pid)
    p.lock()          # RUNNING -> LOCKED: the process's CUDA calls block, its work drains
    p.checkpoint()    # LOCKED -> CHECKPOINTED: device memory copied to host, GPUs released
    ...               # e.g. CRIU dumps / restores the CPU side here
    p.restore()       # CHECKPOINTED -> LOCKED: GPUs re-acquired, device memory copied back
    p.unlock()        # LOCKED -> RUNNING: the process's CUDA calls proceed

Requirements (the driver's, not cuda_core's):

* Linux only, with an NVIDIA driver of the r570 branch or newer (CUDA 12.8+);
  :meth:`Process.restore` with a ``gpu_mapping`` (restoring onto other GPUs) needs r580+.
* ``cuda-bindings`` with the checkpoint API (12.9.3+, or 13.0.2+); restoring with a
  ``gpu_mapping`` needs ``cuda-bindings`` 13 (the 12.x bindings lack ``CUcheckpointGpuPair``).
* The caller needs the right to inspect the target (same user, or ``CAP_SYS_PTRACE``), and the
  calling process must be able to initialise CUDA.
* The target must be in the expected state for each step (see each method). Work in flight is
  drained by :meth:`Process.lock`, so the process should be idle or able to block; the driver
  may refuse processes using features it cannot checkpoint (for example CUDA IPC or MPS).

Where the driver or the bindings lack the API, the methods raise a :class:`RuntimeError`
(which is also a :class:`~cuda_core.CUDAError`); other failures raise
:class:`~cuda_core.CUDAError` with the driver's status (e.g. ``CUDA_ERROR_ILLEGAL_STATE`` when the
process is not in the state a step needs).

Examples
--------
>>> from cuda_core.checkpoint import Process
>>> p = Process(12345)  # doctest: +SKIP
>>> p.lock(timeout_ms=5000); p.checkpoint(); p.restore(); p.unlock()  # doctest: +SKIP
>>> p.state  # doctest: +SKIP
'running'
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping
from typing import Any

from ._compat import BINDINGS_TEXT, CUDA13, driver, driver_version, missing
from ._errors import CUDAError
from ._handles._driver import ensure_driver
from ._utils import handle_return
from .typing import ProcessStateType

__all__ = ["Process"]

_STATES: dict[str, ProcessStateType] = {
    "CU_PROCESS_STATE_RUNNING": "running",
    "CU_PROCESS_STATE_LOCKED": "locked",
    "CU_PROCESS_STATE_CHECKPOINTED": "checkpointed",
    "CU_PROCESS_STATE_FAILED": "failed",
}
_NEEDED = (
    "cuCheckpointProcessLock",
    "cuCheckpointProcessCheckpoint",
    "cuCheckpointProcessRestore",
    "cuCheckpointProcessUnlock",
    "cuCheckpointProcessGetState",
    "cuCheckpointProcessGetRestoreThreadId",
    "CUcheckpointLockArgs",
    "CUcheckpointRestoreArgs",
    "CUprocessState",
)
_MIN_DRIVER = (12, 8)  # the r570 driver branch
_UNSUPPORTED = "CUDA checkpointing is not supported by the installed NVIDIA driver"


class CheckpointNotSupportedError(CUDAError, RuntimeError):
    """The driver or ``cuda-bindings`` has no CUDA checkpoint API (a ``RuntimeError``)."""


def _unsupported(api: str, why: str, code: int | None = None) -> CheckpointNotSupportedError:
    return CheckpointNotSupportedError(api, "CUDA_ERROR_NOT_SUPPORTED", why, code)


_checked = False


def _check_support() -> None:
    global _checked
    if _checked:
        return
    absent = [name for name in _NEEDED if not hasattr(driver, name)]
    if absent:
        raise _unsupported(
            absent[0],
            f"cuda-bindings {BINDINGS_TEXT} lacks the CUDA checkpoint API "
            f"(missing {', '.join(absent)}); install cuda-bindings 12.9.3+ or 13.0.2+",
        )
    ensure_driver()
    version = driver_version()
    if version < _MIN_DRIVER:
        raise _unsupported(
            "cuCheckpointProcessLock",
            f"{_UNSUPPORTED}: it supports CUDA {version[0]}.{version[1]}; "
            "checkpointing needs CUDA 12.8 (driver r570) or newer",
        )
    _checked = True


def _call(fn: Any, *args: Any) -> Any:
    _check_support()
    api = fn.__name__
    try:
        result = fn(*args)
    except RuntimeError as exc:  # the driver library lacks the entry point
        raise _unsupported(api, f"{_UNSUPPORTED} ({exc})") from None
    status = result[0]
    if status == driver.CUresult.CUDA_ERROR_NOT_SUPPORTED:
        raise _unsupported(api, f"{_UNSUPPORTED}, or not for this process", int(status))
    return handle_return(result, api)


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (got {value!r})")
    if value < minimum:
        if minimum == 1:  # cuda.core's words first
            raise ValueError(f"{name} must be a positive int: {name} must be >= 1 (got {value!r})")
        raise ValueError(f"{name} must be >= {minimum} (got {value!r})")
    return value


class Process:
    """A CUDA process, named by its pid, that can be locked, checkpointed, restored and
    unlocked.

    Creating one checks only the argument; each method calls the driver. See the module
    documentation for the driver's requirements.

    Parameters
    ----------
    pid : int
        The process id of the CUDA process (> 0).

    Raises
    ------
    TypeError
        ``pid`` is not an int.
    ValueError
        ``pid`` is not positive.
    """

    __slots__ = ("_pid",)

    def __init__(self, pid: int) -> None:
        self._pid = _check_int("pid", pid, 1)

    @property
    def pid(self) -> int:
        """The process id."""
        return self._pid

    def __repr__(self) -> str:
        return f"Process(pid={self._pid})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Process) and other._pid == self._pid

    def __hash__(self) -> int:
        return hash((Process, self._pid))

    @property
    def state(self) -> ProcessStateType:
        """The checkpoint state, ``"running"``, ``"locked"``, ``"checkpointed"`` or ``"failed"``.

        Raises :class:`RuntimeError` for a state the driver reports that is none of these.
        """
        value = _call(driver.cuCheckpointProcessGetState, self._pid)
        name = getattr(value, "name", str(value))
        try:
            return _STATES[name]
        except KeyError:
            raise RuntimeError(
                f"unknown CUDA checkpoint process state {name} ({int(value)})"
            ) from None

    @property
    def restore_thread_id(self) -> int:
        """The id of the thread the driver uses to restore this process (for CRIU-style tools)."""
        return int(_call(driver.cuCheckpointProcessGetRestoreThreadId, self._pid))

    def lock(self, timeout_ms: int = 0) -> None:
        """Lock the process: its further CUDA calls block and its submitted work completes.

        The process must be ``"running"``; it is ``"locked"`` afterwards. If the timeout
        passes first, the process is left ``"running"`` and the driver's error is raised.

        Parameters
        ----------
        timeout_ms : int, optional
            How long to wait for the process's work to drain, in milliseconds; ``0`` (default)
            waits without limit.
        """
        timeout_ms = _check_int("timeout_ms", timeout_ms, 0)
        args = driver.CUcheckpointLockArgs()
        args.timeoutMs = timeout_ms
        _call(driver.cuCheckpointProcessLock, self._pid, args)

    def checkpoint(self) -> None:
        """Copy the locked process's device memory to host memory and release its GPUs.

        The process must be ``"locked"``; it is ``"checkpointed"`` afterwards.
        """
        _call(driver.cuCheckpointProcessCheckpoint, self._pid, None)

    def restore(self, gpu_mapping: Mapping[Any, Any] | None = None) -> None:
        """Re-acquire GPUs for a checkpointed process and copy its device memory back.

        The process must be ``"checkpointed"``; it is ``"locked"`` afterwards (call
        :meth:`unlock` to let it run).

        Parameters
        ----------
        gpu_mapping : mapping, optional
            Restore onto other GPUs: maps each checkpointed GPU's UUID to the UUID of the GPU
            to restore onto (``str`` as :attr:`cuda_core.Device.uuid` gives it, or
            ``CUuuid``). When given, it must cover every GPU the kernel driver sees;
            ``CUDA_VISIBLE_DEVICES`` does not shrink it. Needs driver r580 or newer (CUDA 13)
            and ``cuda-bindings`` 13; elsewhere a :class:`RuntimeError` (as for a missing
            checkpoint API) names what is missing.
        """
        keep: list[Any] = []  # ctypes buffers the CUuuid objects point into, alive for the call
        args = _restore_args(gpu_mapping, keep)
        _call(driver.cuCheckpointProcessRestore, self._pid, args)
        del keep

    def unlock(self) -> None:
        """Let a locked process run again: its blocked CUDA calls proceed.

        The process must be ``"locked"``; it is ``"running"`` afterwards.
        """
        _call(driver.cuCheckpointProcessUnlock, self._pid, None)


def _restore_args(gpu_mapping: Mapping[Any, Any] | None, keep: list[Any]) -> Any:
    if gpu_mapping is None:
        return None
    if not isinstance(gpu_mapping, Mapping):
        raise TypeError(
            f"gpu_mapping must be a mapping of GPU UUIDs to GPU UUIDs (got {gpu_mapping!r})"
        )
    if not gpu_mapping:
        return None
    uuids = [(_uuid(old, keep), _uuid(new, keep)) for old, new in gpu_mapping.items()]
    why = missing(
        "Process.restore with a gpu_mapping", bindings=CUDA13
    )  # the driver checks its own
    if why is not None:
        raise _unsupported("cuCheckpointProcessRestore", why)
    pairs = []
    for old_uuid, new_uuid in uuids:
        pair = driver.CUcheckpointGpuPair()
        pair.oldUuid = old_uuid
        pair.newUuid = new_uuid
        pairs.append(pair)
    args = driver.CUcheckpointRestoreArgs()
    args.gpuPairs = pairs
    args.gpuPairsCount = len(pairs)
    return args


def _uuid(value: Any, keep: list[Any]) -> Any:
    if isinstance(value, driver.CUuuid):
        return value
    if not isinstance(value, str):
        raise TypeError(f"a GPU UUID must be a str or CUuuid (got {value!r})")
    text = value[4:] if value[:4].upper() in ("GPU-", "MIG-") else value
    try:
        raw = bytes.fromhex(text.replace("-", ""))
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"a GPU UUID must be 32 hex digits, hyphens allowed (got {value!r})")
    buf = ctypes.create_string_buffer(raw, 16)
    keep.append(buf)
    return driver.CUuuid(ctypes.addressof(buf))
