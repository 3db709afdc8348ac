"""Program: CUDA C++ (NVRTC), PTX (nvJitLink) or NVVM IR (libNVVM) to an ObjectCode.

Compiled results go through the compile cache (``_cache.py``) by default: a hit builds no
NVRTC program and loads no compiler library.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from cuda import pathfinder
from cuda.bindings import nvrtc

from .._errors import NVRTCError, NVVMError
from .._handles._owned import OwnedHandle
from .._utils import (
    ValueRuntimeError,
    arg_error,
    check_cleanup,
    check_or_create_options,
    handle_return,
    run_once,
)
from ..typing import CompilerBackendType
from . import _cache
from ._libraries import nvrtc_version_cached, require
from ._linker import Linker, _link_inputs
from ._object_code import ObjectCode
from ._option_checks import arch_refusal
from ._options import ProgramOptions

__all__ = ["Program", "ProgramOptions"]

_CODE_TYPES = {
    "c++": CompilerBackendType.NVRTC,
    "ptx": CompilerBackendType.NVJITLINK,
    "nvvm": CompilerBackendType.NVVM,
}
# Options whose compile writes files (timings, traces, precompiled headers): a hit of the
# default cache would skip that, so these compiles bypass it.
_SIDE_EFFECT_OPTIONS = ("time", "fdevice_time_trace", "pch", "create_pch")
_R = nvrtc.nvrtcResult
_PCH_STATUS = {
    _R.NVRTC_SUCCESS: "created",
    _R.NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED: "not_attempted",
}
_TARGETS = {
    "c++": ("ptx", "cubin", "ltoir"),
    "ptx": ("cubin",),
    "nvvm": ("ptx", "ltoir"),
}


def _nvrtc_log(prog: Any) -> str:
    size = handle_return(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    if size <= 1:
        return ""
    buf = b" " * size
    handle_return(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.rstrip(b"\x00").decode(errors="replace")


def _failure(status: Any, log: str, options: list[str]) -> str:
    """The explanation of a failed NVRTC compile: NVRTC refuses an unknown ``-arch`` with only
    "invalid value for --gpu-architecture" (kept in the log), so name what it does take."""
    if status != _R.NVRTC_ERROR_INVALID_OPTION:
        return "compilation failed"
    version = ".".join(map(str, nvrtc_version_cached()))
    why = arch_refusal(options, f"NVRTC {version}", refused="--gpu-architecture" in log)
    return f"compilation failed: {why}" if why else "compilation failed"


def _nvrtc_output(prog: Any, target_type: str) -> bytes:
    get_size, get = {
        "ptx": (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX),
        "cubin": (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN),
        "ltoir": (nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR),
    }[target_type]
    size = handle_return(get_size(prog), get_size.__name__)
    buf = b" " * size
    handle_return(get(prog, buf), get.__name__)
    if target_type == "ptx":
        buf = buf.rstrip(b"\x00")
    return buf


class Program:
    """A program to compile: CUDA C++, PTX or NVVM IR source.

    Parameters
    ----------
    code : str or bytes
        The source. NVVM IR may be text or bitcode (bytes).
    code_type : {"c++", "ptx", "nvvm"}
        ``"c++"`` compiles with NVRTC, ``"ptx"`` with nvJitLink (the driver's linker where
        nvJitLink is missing), ``"nvvm"`` with libNVVM.
    options : ProgramOptions or dict, optional
        Compiler options. ``arch`` defaults to the current device's architecture.

    Raises
    ------
    TypeError
        ``code`` is not str/bytes.
    RuntimeError
        ``code_type`` is unknown (``"Unsupported code_type='fortran' (supported_code_types=
        ('c++', 'ptx', 'nvvm'))"``, as in ``cuda.core``; also a ``ValueError``).
    ValueError
        ``extra_sources`` given for C++ or PTX code (only NVVM takes it).

    Warns
    -----
    UserWarning
        ``numba_debug`` asked of PTX code, which the linker compiles: it is ignored.

    Examples
    --------
    >>> prog = Program('extern "C" __global__ void k(int *p) { *p = 1; }', "c++",
    ...                options=ProgramOptions(arch="sm_90"))
    >>> prog.compile("ptx").code_type
    'ptx'
    """

    __slots__ = (
        "__weakref__",
        "_code",
        "_code_type",
        "_holder",
        "_options",
        "_pch_status",
    )

    def __init__(
        self,
        code: str | bytes,
        code_type: str = "c++",
        options: ProgramOptions | dict | None = None,
    ) -> None:
        ct = code_type.lower() if isinstance(code_type, str) else code_type
        if ct not in _CODE_TYPES:
            # cuda.core's message, all of it (code matches it whole); it names the choices
            raise ValueRuntimeError(
                f"Unsupported code_type={ct!r} (supported_code_types={tuple(_CODE_TYPES)})"
            )
        if isinstance(code, (bytearray, memoryview)):
            code = bytes(code)
        if not isinstance(code, (str, bytes)):
            lead = (
                "NVVM IR code must be provided as str, bytes, or bytearray"
                if ct == "nvvm"
                else f"Expected type str, but got {type(code).__name__}"
            )
            raise arg_error("code", "a str or bytes", type(code).__name__, exc=TypeError, lead=lead)
        if ct != "nvvm" and isinstance(code, bytes):
            code = code.decode()
        self._code: str | bytes = code
        self._code_type: str = ct
        self._options: ProgramOptions = check_or_create_options(ProgramOptions, options, "options")
        if ct != "nvvm" and self._options.extra_sources is not None:
            which = "NVRTC backend (C++ code_type)" if ct == "c++" else "PTX backend."
            raise ValueError(
                f"extra_sources is not supported by the {which}: only NVVM IR programs "
                "(code_type='nvvm') compile extra modules"
            )
        if ct == "ptx" and self._options.numba_debug:
            warnings.warn(
                "numba_debug is ignored for code_type='ptx', which is processed by the linker; "
                "it applies only to the NVVM and NVRTC compilation backends.",
                UserWarning,
                stacklevel=2,
            )
        # owns the nvrtcProgram, made on first use
        self._holder = OwnedHandle("nvrtc program", None, nvrtc.nvrtcDestroyProgram)
        self._pch_status: str | None = None

    # ------------------------------------------------------------------------------------------

    @property
    def backend(self) -> CompilerBackendType:
        """CompilerBackendType: The compiler used, a ``str``: ``"NVRTC"``, ``"nvJitLink"`` (or
        ``"driver"`` where nvJitLink is missing) or ``"NVVM"``."""
        if self._code_type == "ptx":
            return Linker.which_backend()
        return _CODE_TYPES[self._code_type]

    @property
    def pch_status(self) -> str | None:
        """str or None: What the last :meth:`compile` did about a precompiled header.

        ``"created"`` (written), ``"not_attempted"`` (NVRTC chose not to, or was not asked),
        ``"failed"`` (an error prevented it); ``None`` when no precompiled header was asked for
        (``pch`` or ``create_pch``), before the first compile, and for PTX and NVVM programs.
        Compiles that ask for one bypass the default compile cache. Where the PCH heap is too
        small for ``create_pch``, :meth:`compile` enlarges it and compiles again.
        """
        return self._pch_status

    @property
    def code(self) -> str | bytes:
        """str or bytes: The source given to the constructor."""
        return self._code

    @property
    def code_type(self) -> str:
        """str: ``"c++"``, ``"ptx"`` or ``"nvvm"``."""
        return self._code_type

    @property
    def options(self) -> ProgramOptions:
        """ProgramOptions: The options this program compiles with."""
        return self._options

    @property
    def handle(self) -> Any:
        """The ``nvrtcProgram`` of a C++ program (created on first access; owned by this object).

        ``None`` for PTX and NVVM programs, which create their compiler handle per compile.
        Once closed: ``nvrtcProgram(0)`` for a C++ program, as in ``cuda.core``.
        """
        if self._code_type != "c++":
            return None
        if self._holder is None:
            return nvrtc.nvrtcProgram(0)
        if self._holder.value is None:
            self._holder.adopt(self._create_nvrtc_program())
        return self._holder.value

    @property
    def is_closed(self) -> bool:
        """bool: Whether :meth:`close` was called."""
        return self._holder is None

    def close(self) -> None:
        """Destroy the compiler handle, if any; later calls do nothing."""
        if self._holder is None:
            return
        self._holder.release()
        self._holder = None  # type: ignore[assignment]

    def __enter__(self) -> Program:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self.is_closed else ""
        return f"<Program backend={str(self.backend)!r}{state}>"  # cuda.core's format

    def _check_open(self) -> None:
        if self._holder is None:
            raise RuntimeError("Program has been closed. Make a new Program to compile again")

    def _name(self) -> str:
        return self._options.name or "default_program"

    # ------------------------------------------------------------------------------------------

    def compile(
        self,
        target_type: str,
        name_expressions: Sequence[str | bytes] = (),
        logs: Any = None,
        *,
        cache: Any = None,
    ) -> ObjectCode:
        """Compile the program and return its :class:`ObjectCode`.

        Parameters
        ----------
        target_type : {"ptx", "cubin", "ltoir"}
            The output: C++ takes all three, PTX ``"cubin"``, NVVM ``"ptx"``/``"ltoir"``.
        name_expressions : sequence of str or bytes, optional
            C++ names to instantiate and look up, e.g. ``("vector_add<float>",)``; a lone
            string is taken as one name (``cuda.core`` would split it into characters). Their lowered
            (mangled) names go into :attr:`ObjectCode.symbol_mapping`, so
            ``get_kernel("vector_add<float>")`` works.
        logs : file-like object, optional
            Anything with ``write(str)``; receives the compiler log when there is one (nothing on a cache hit).
        cache : ProgramCacheResource, bool or None, optional
            ``None`` (the default) uses the process's default compile cache (memory and disk;
            see :func:`cuda_core.utils.get_default_program_cache`), ``False`` skips caching,
            and a :class:`~cuda_core.utils.ProgramCacheResource` uses that cache.

        Returns
        -------
        ObjectCode
            The compiled code, not yet loaded into the driver.

        Raises
        ------
        NVRTCError
            The C++ source did not compile; the message holds the whole log (for an ``arch``
            NVRTC refuses, also the architectures it compiles for and this GPU's).
        LinkerError, NVVMError
            PTX or NVVM input failed (nvJitLink's refusal of an ``arch`` says the same).
        ValueError
            ``target_type`` is not valid for this code type, an option is not valid for
            the backend, or ``"cubin"`` was asked for with a virtual ``arch`` (``compute_XX``).
        """
        self._check_open()
        targets = _TARGETS[self._code_type]
        if target_type not in targets:
            backend = {"c++": "NVRTC", "ptx": "PTX", "nvvm": "NVVM"}[self._code_type]
            raise arg_error(
                "target_type",
                f"one of {', '.join(map(repr, targets))} for {self._code_type!r} code",
                target_type,
                lead=f'Unsupported target_type="{target_type}" for {backend}',
            )
        # A lone string is one expression, not a sequence of one-character names.
        names = (
            (name_expressions,)
            if isinstance(name_expressions, (str, bytes))
            else tuple(name_expressions)
        )
        for n in names:
            if not isinstance(n, (str, bytes)):
                raise arg_error(
                    "name_expressions",
                    "a sequence of str or bytes",
                    name_expressions,
                    exc=TypeError,
                )
        if names and self._code_type != "c++":
            raise ValueError("name_expressions can only be used with code_type='c++'")
        arch = self._options.arch
        if target_type == "cubin" and arch is not None and not arch.startswith("sm_"):
            raise ValueError(
                f'target_type "cubin" needs a real architecture, arch="sm_XX" (got arch={arch!r}, '
                f'a virtual architecture: NVRTC makes no cubin for it); pass arch="sm_{arch.partition("_")[2]}" '
                'or compile to "ptx"'
            )

        if cache is None and any(getattr(self._options, f) for f in _SIDE_EFFECT_OPTIONS):
            cache = False
        self._pch_status = None
        store = _cache.resolve_cache(cache)
        if store is None:
            return self._compile(target_type, names, logs)
        key = _cache.make_program_cache_key(
            code=self._code,
            code_type=self._code_type,
            options=self._options,
            target_type=target_type,
            name_expressions=names,
        )
        return _cache.lookup_or_compile(store, key, lambda: self._compile(target_type, names, logs))

    def _compile(self, target_type: str, names: tuple[str | bytes, ...], logs: Any) -> ObjectCode:
        if self._code_type == "c++":
            return self._compile_nvrtc(target_type, names, logs)
        if self._code_type == "ptx":
            return self._compile_ptx(target_type, logs)
        return self._compile_nvvm(target_type, logs)

    def _create_nvrtc_program(self) -> Any:
        code = self._code.encode() if isinstance(self._code, str) else self._code
        return handle_return(
            nvrtc.nvrtcCreateProgram(code, self._name().encode(), 0, [], []), "nvrtcCreateProgram"
        )

    def _compile_nvrtc(
        self, target_type: str, names: tuple[str | bytes, ...], logs: Any
    ) -> ObjectCode:
        require("nvrtc", "Program.compile() of C++ code")
        flags = self._options.as_bytes("nvrtc", target_type)
        want_pch = bool(self._options.pch or self._options.create_pch)
        for attempt in (0, 1):
            prog = self._create_nvrtc_program()
            try:
                encoded = [n.encode() if isinstance(n, str) else n for n in names]
                for n in encoded:
                    handle_return(nvrtc.nvrtcAddNameExpression(prog, n), "nvrtcAddNameExpression")
                (status,) = nvrtc.nvrtcCompileProgram(prog, len(flags), flags)
                log = _nvrtc_log(prog)
                if status != _R.NVRTC_SUCCESS:
                    options = [f.decode() for f in flags]
                    raise NVRTCError(
                        "nvrtcCompileProgram",
                        status.name,
                        _failure(status, log, options),
                        int(status),
                        log=log,
                        options=options,
                        program_name=self._name(),
                    )
                if want_pch:
                    (pch,) = nvrtc.nvrtcGetPCHCreateStatus(prog)
                    if (
                        pch == _R.NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED
                        and attempt == 0
                        and self._options.create_pch
                    ):
                        need = handle_return(
                            nvrtc.nvrtcGetPCHHeapSizeRequired(prog), "nvrtcGetPCHHeapSizeRequired"
                        )
                        handle_return(nvrtc.nvrtcSetPCHHeapSize(need), "nvrtcSetPCHHeapSize")
                        continue
                    self._pch_status = _PCH_STATUS.get(pch, "failed")
                if log and logs is not None:
                    logs.write(log)
                mapping = {}
                for orig, n in zip(names, encoded):
                    mapping[orig] = handle_return(
                        nvrtc.nvrtcGetLoweredName(prog, n), "nvrtcGetLoweredName"
                    )
                data = _nvrtc_output(prog, target_type)
            finally:
                check_cleanup(
                    nvrtc.nvrtcDestroyProgram(prog), "nvrtcDestroyProgram", "an NVRTC program", prog
                )
            return ObjectCode._init(data, target_type, name=self._name(), symbol_mapping=mapping)
        raise AssertionError("unreachable")  # pragma: no cover

    def _compile_ptx(self, target_type: str, logs: Any) -> ObjectCode:
        flags = self._options.as_bytes("nvjitlink", target_type)
        code = self._code.encode() if isinstance(self._code, str) else self._code
        data, info = _link_inputs(
            flags, [(code, "ptx", self._name())], target_type, "Program.compile() of PTX"
        )
        if info and logs is not None:
            logs.write(info)
        return ObjectCode._init(data, target_type, name=self._name())

    def _compile_nvvm(self, target_type: str, logs: Any) -> ObjectCode:
        require("nvvm", "Program.compile() of NVVM IR")
        from cuda.bindings import nvvm  # optional library, imported on first NVVM use (import time)

        flags = [f.decode() for f in self._options.as_bytes("nvvm", target_type)]
        code = self._code.encode() if isinstance(self._code, str) else self._code
        owner = OwnedHandle("nvvm program", nvvm.create_program(), nvvm.destroy_program)
        prog = owner.value
        try:
            try:
                nvvm.add_module_to_program(prog, code, len(code), self._name())
                for extra_name, extra in self._options._extra:
                    nvvm.add_module_to_program(prog, extra, len(extra), extra_name)
                if self._options.use_libdevice:
                    libdevice = _libdevice()
                    nvvm.lazy_add_module_to_program(prog, libdevice, len(libdevice), "libdevice")
                nvvm.verify_program(prog, len(flags), flags)
                nvvm.compile_program(prog, len(flags), flags)
            except nvvm.nvvmError as exc:
                status = getattr(exc, "status", None)
                try:
                    name = "NVVM_" + nvvm.Result(int(status)).name  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    name = "NVVM_ERROR"
                raise NVVMError(
                    "nvvmCompileProgram",
                    name,
                    f"compilation of {self._name()!r} failed",
                    int(status) if status is not None else None,
                    log=_nvvm_log(prog),
                    options=flags,
                ) from None
            log = _nvvm_log(prog)
            if log and logs is not None:
                logs.write(log)
            size = nvvm.get_compiled_result_size(prog)
            ba = bytearray(size)
            nvvm.get_compiled_result(prog, ba)
            buf = bytes(ba)
        finally:
            owner.release()
        if target_type == "ptx":
            buf = buf.rstrip(b"\x00")
        return ObjectCode._init(buf, target_type, name=self._name())


@run_once
def _libdevice() -> bytes:
    """The bitcode of libdevice (NVIDIA's math library for NVVM IR), read once."""
    try:
        path = pathfinder.find_bitcode_lib("device")
    except Exception as exc:
        raise RuntimeError(f"use_libdevice: libdevice was not found ({exc})") from exc
    with open(path, "rb") as f:
        return f.read()


def _nvvm_log(prog: int) -> str:
    from cuda.bindings import nvvm  # optional library, imported on first NVVM use (import time)

    try:
        size = nvvm.get_program_log_size(prog)
        if size <= 1:
            return ""
        buf = bytearray(size)
        nvvm.get_program_log(prog, buf)
    except Exception:
        return ""
    return bytes(buf).rstrip(b"\x00").decode(errors="replace")
