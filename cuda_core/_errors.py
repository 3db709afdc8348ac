"""The exception hierarchy of cuda_core.

Every failure reported by the CUDA driver, NVRTC, nvJitLink or libNVVM is raised as a
:class:`CUDAError` (or a subclass) whose message reads ``"<api>: <ERROR_NAME>: <explanation>"``
and which keeps the numeric ``code``, the status ``name`` and the ``api`` that failed.
All of them survive pickling, so they cross process boundaries (multiprocessing, pytest-xdist).

A failure where no exception can propagate (a resource released by the garbage collector, a
finalizer, a driver callback) is a :class:`CUDAWarning` instead, issued by
:func:`warn_release_failure`, the one place both backends report through (the native one is
handed the class at import).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

try:  # what cuda.core raises for a failed libNVVM or nvJitLink call (the bindings' errors)
    from cuda.bindings.nvjitlink import nvJitLinkError as _nvJitLinkError
    from cuda.bindings.nvvm import nvvmError as _nvvmError
except ImportError:  # pragma: no cover - cuda-bindings without them

    class _nvvmError(Exception):  # type: ignore[no-redef]
        """Stand-in where cuda.bindings has no nvvm module."""

    class _nvJitLinkError(Exception):  # type: ignore[no-redef]
        """Stand-in where cuda.bindings has no nvjitlink module."""


try:  # what cuda.bindings raised for a missing library before cuda_core named it
    from cuda.pathfinder import DynamicLibNotFoundError as _DynamicLibNotFoundError
except ImportError:  # pragma: no cover - an old cuda-pathfinder
    _DynamicLibNotFoundError = RuntimeError  # type: ignore[misc,assignment]

__all__ = [
    "CUDADriverNotFoundError",
    "CUDAError",
    "CUDAWarning",
    "CompileError",
    "CompilerLibraryNotFoundError",
    "LinkerError",
    "NVRTCError",
    "NVVMError",
]


class CUDAError(Exception):
    """An error reported by a CUDA library.

    ``CUDAError("some message")``, the form ``cuda.core`` raises and code written for it may
    raise too, is a plain error with that message (kept in :attr:`api`, the first part).

    Attributes
    ----------
    code : int or None
        The numeric status (``CUresult``, ``nvrtcResult``, ...); ``None`` when the error did not
        come from a status code.
    name : str
        The status name, e.g. ``"CUDA_ERROR_OUT_OF_MEMORY"`` (for :class:`NVRTCError`, the
        program's name; the status name is always in :attr:`error_name`).
    error_name : str
        The status name, for every error (equal to :attr:`name` except for
        :class:`NVRTCError`).
    api : str
        The library call that failed, e.g. ``"cuMemAllocAsync"``.
    explanation : str
        The library's description of the status, plus any context cuda_core adds.
    """

    def __init__(
        self,
        api: str = "",
        name: str = "",
        explanation: str = "",
        code: int | None = None,
    ) -> None:
        self.api = api
        self.name = name
        self.error_name = name
        self.explanation = explanation
        self.code = code
        # Exception's own: a base beside this one (nvvmError, ...) builds its message otherwise
        Exception.__init__(self, self._format())

    def _format(self) -> str:
        parts = [p for p in (self.api, self.error_name, self.explanation) if p]
        return ": ".join(parts)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild through __new__ and restore the attribute dict: subclasses with other
        # constructor signatures pickle without writing their own __reduce__.
        return (_rebuild_error, (type(self), self.args, self.__dict__.copy()))


class CUDAWarning(RuntimeWarning):
    """A CUDA failure that cannot be raised, reported as a warning (``cuda.core`` 1.3).

    Ordinary calls raise. Some failures happen where no exception can propagate: while a
    resource is released by the garbage collector or a finalizer, in a driver callback, in the
    cleanup after an operation that already succeeded. Those are reported as this warning,
    naming the call that failed, the handle of the resource and the error; the resource may
    have leaked. ``CUDA_ERROR_DEINITIALIZED`` (the driver shutting down, at interpreter exit)
    is not reported.

    Make such failures fatal in tests with
    ``warnings.filterwarnings("error", category=cuda_core.CUDAWarning)``: a report from a
    destructor then reaches :func:`sys.unraisablehook` (pytest shows it as
    ``PytestUnraisableExceptionWarning``), since nothing can be raised into user code there.
    """


_DEINITIALIZED = "CUDA_ERROR_DEINITIALIZED"


def _handle_text(handle: Any) -> str:
    try:
        return f"0x{int(handle):x}"
    except (TypeError, ValueError):
        return repr(handle)


def warn_release_failure(what: str, handle: Any, error: BaseException, call: str = "") -> None:
    """Report that releasing ``what`` (its driver handle ``handle``) failed with ``error``, as a
    :class:`CUDAWarning` naming the call, the handle and the error; silent at interpreter
    exit and for ``CUDA_ERROR_DEINITIALIZED``.

    For a finalizer or a callback, which must not raise: the warning is issued (an escalated
    one, ``filterwarnings("error")``, propagates from here, so a finalizer hands it to
    :func:`sys.unraisablehook`). The handle in the message keeps independent failures apart
    under Python's once-per-message filter.
    """
    if sys.is_finalizing() or getattr(error, "error_name", None) == _DEINITIALIZED:
        return
    if isinstance(error, CUDAError) and error.api:
        detail = str(error)  # "<call>: <CUDA_ERROR_...>: <explanation>"
    else:
        detail = f"{call + ': ' if call else ''}{type(error).__name__}: {error}".rstrip(": ")
    warnings.warn(
        f"cuda_core could not release {what} {_handle_text(handle)}: {detail}",
        CUDAWarning,
        stacklevel=3,
    )


class _CooperativeLaunchTooLargeError(CUDAError, ValueError):
    """``CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`` from a launch: also the ``ValueError``
    ``cuda.core`` 1.2 raises for a cooperative grid larger than the device can hold at once (it
    checks the occupancy before launching; we let the driver decide and explain its answer)."""


class InvalidValueError(CUDAError, ValueError):
    """A request the driver would refuse with ``CUDA_ERROR_INVALID_VALUE``, caught first.

    Both a :class:`CUDAError` (what ``cuda.core`` raises, passing the request to the driver) and
    a ``ValueError`` (an argument error), with a message that says what is wrong.
    """


def invalid_value(api: str, explanation: str) -> InvalidValueError:
    """The :class:`InvalidValueError` for ``api`` refusing the request, explained."""
    return InvalidValueError(
        api, "CUDA_ERROR_INVALID_VALUE", explanation, 1
    )  # CUresult 1 (every CUDA version)


def _rebuild_error(cls: type[CUDAError], args: tuple[Any, ...], state: dict[str, Any]) -> CUDAError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class CUDADriverNotFoundError(CUDAError, _DynamicLibNotFoundError):
    """The NVIDIA driver library (libcuda) could not be loaded.

    Compilation (NVRTC, nvJitLink, libNVVM) keeps working without a driver; only operations
    that need a GPU raise this error. It derives from ``cuda.pathfinder``'s
    ``DynamicLibNotFoundError`` (a ``RuntimeError``), what ``cuda.core`` raises there, so
    handlers written for it catch this one too.
    """

    def __init__(self, detail: str = "") -> None:
        explanation = (
            "the NVIDIA driver (libcuda) was not found on this machine, so no GPU can be used. "
            "Compiling with Program, Linker and ObjectCode still works without it"
        )
        if detail:
            explanation += f" (loader said: {detail})"
        super().__init__("cuInit", "CUDA_ERROR_DRIVER_NOT_FOUND", explanation, None)


class CompilerLibraryNotFoundError(CUDAError, _DynamicLibNotFoundError):
    """A compiler library (NVRTC, nvJitLink or libNVVM) could not be loaded.

    The message names the library, what needs it and the remedy, usually
    ``pip install "cudacore[cu13]"``: the base install of ``cudacore`` does not bring the
    compiler libraries. It derives from ``cuda.pathfinder``'s ``DynamicLibNotFoundError`` (a
    ``RuntimeError``), the error raised for this before, so existing handlers still catch it.

    Attributes
    ----------
    library : str
        The library's name, e.g. ``"NVRTC (the CUDA C++ compiler)"``.
    needed_by : str
        What needs it, e.g. ``"Program.compile() of C++ code"``.
    remedy : str
        The command that installs it; where the environment mixes two CUDA majors (the wheels
        of both installed, as running both install commands leaves it), the commands that leave
        one major.
    detail : str
        What the loader said ("" when nothing).
    """

    def __init__(
        self,
        library: str,
        soname: str,
        needed_by: str,
        remedy: str,
        detail: str = "",
        why: str = "",
    ) -> None:
        library_not_found(self, library, soname, needed_by, remedy, detail, why)


def library_not_found(
    err: CUDAError,
    library: str,
    soname: str,
    needed_by: str,
    remedy: str,
    detail: str,
    why: str = "",
) -> None:
    """Fill in an error about a missing optional library: its attributes (``library``,
    ``needed_by``, ``remedy``, ``detail``) and the message that names the remedy. With ``why``
    (a cause the remedy is not a plain install for), the message gives it and ``remedy`` is
    a sentence of its own."""
    err.library = library  # type: ignore[attr-defined]
    err.needed_by = needed_by  # type: ignore[attr-defined]
    err.remedy = remedy  # type: ignore[attr-defined]
    err.detail = detail  # type: ignore[attr-defined]
    explanation = f"{library} was not found, and {needed_by} needs it; install it with: {remedy}"
    if why:
        explanation = f"{library} was not found, and {needed_by} needs it: {why}; {remedy}"
    if detail:
        explanation += f" (loader said: {detail})"
    # Not super(): a subclass may also derive from CUDADriverNotFoundError (another signature).
    CUDAError.__init__(err, soname, "LIBRARY_NOT_FOUND", explanation, None)


class _LinkerNotFoundError(CompilerLibraryNotFoundError, CUDADriverNotFoundError):
    """Neither nvJitLink nor the driver's linker is there: both errors' handlers catch it."""


class CompileError(CUDAError):
    """Compilation or linking failed; the full log is kept in :attr:`log`.

    Attributes
    ----------
    log : str
        The compiler's or linker's log.
    options : tuple of str
        The options passed to the compiler or linker.
    """

    def __init__(
        self,
        api: str = "",
        name: str = "",
        explanation: str = "",
        code: int | None = None,
        *,
        log: str = "",
        options: tuple[str, ...] | list[str] = (),
    ) -> None:
        self.log = log
        self.options = tuple(options)
        super().__init__(api, name, explanation, code)

    # What the log is headed with, as cuda.core heads it ("..., compilation log:" for NVRTC).
    _log_label = "log:"

    def _format(self) -> str:
        head = super()._format()
        if self.options:
            head += "\noptions: " + " ".join(self.options)
        if self.log:
            head += f"\n{self._log_label}\n" + self.log.rstrip()
        return head


class NVRTCError(CompileError):
    """NVRTC failed, usually because the source did not compile.

    The message holds the whole compiler log. :attr:`~CUDAError.name` is the program's name,
    :attr:`~CompileError.log` the compiler log, :attr:`~CompileError.options` the options passed
    to NVRTC and :attr:`~CUDAError.error_name` the NVRTC status name.
    """

    _log_label = "compilation log:"

    def __init__(
        self,
        api: str = "",
        error_name: str = "",
        explanation: str = "",
        code: int | None = None,
        *,
        log: str = "",
        options: tuple[str, ...] | list[str] = (),
        program_name: str = "",
    ) -> None:
        self.program_name = program_name
        super().__init__(api, error_name, explanation, code, log=log, options=options)
        # cuda.core's contract: ``.name`` of a compile error is the program's name.
        self.name = program_name or error_name

    def _format(self) -> str:
        text = super()._format()
        if self.program_name:
            first, _, rest = text.partition("\n")
            text = f"{first} (program {self.program_name!r})" + ("\n" + rest if rest else "")
        return text


class NVVMError(CompileError, _nvvmError):
    """libNVVM failed to compile NVVM IR; the message holds the whole log.

    Also a ``cuda.bindings.nvvm.nvvmError``, what ``cuda.core`` raises here; ``status`` is the
    ``nvvmResult`` (as :attr:`~CUDAError.code`).
    """

    _log_label = "NVVM program log:"

    @property
    def status(self) -> int | None:
        """The library's status code, as the ``cuda.bindings`` error has it."""
        return self.code


class LinkerError(CompileError, _nvJitLinkError):
    """nvJitLink (or the driver's linker) failed; the message holds the linker's error log.

    Also a ``cuda.bindings.nvjitlink.nvJitLinkError``, what ``cuda.core`` raises when nvJitLink
    fails; ``status`` is the status code (as :attr:`~CUDAError.code`).
    """

    _log_label = "Linker error log:"

    @property
    def status(self) -> int | None:
        """The library's status code, as the ``cuda.bindings`` error has it."""
        return self.code
