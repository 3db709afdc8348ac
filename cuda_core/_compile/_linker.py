"""Linker and LinkerOptions: link PTX, cubin, LTO-IR (and more) with nvJitLink.

Where nvJitLink is missing the driver's linker (``cuLink*``) is used instead, with a warning
that link-time optimisation is not available.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from typing import Any

from .._compat import driver
from .._errors import LinkerError
from .._handles._driver import driver_available, ensure_driver
from .._handles._owned import OwnedHandle
from .._logging import logger as _log
from .._utils import (
    arg_error,
    check_or_create_options,
    handle_return,
    make_error,
)
from ..typing import CompilerBackendType
from ._libraries import (
    linker_not_found,
    nvjitlink_available,
    nvjitlink_version,
    remedy,
    require_nvjitlink,
)
from ._linker_options import LinkerOptions as LinkerOptions
from ._object_code import ObjectCode
from ._option_checks import arch_refusal

__all__ = ["Linker", "LinkerOptions"]


def _read(code: bytes | str) -> bytes:
    if isinstance(code, str):
        with open(code, "rb") as f:
            return f.read()
    return code


def _nvjitlink_log(nvjitlink: Any, handle: int, which: str) -> str:
    try:
        size = getattr(nvjitlink, f"get_{which}_log_size")(handle)
        if size <= 1:
            return ""
        buf = bytearray(size)
        getattr(nvjitlink, f"get_{which}_log")(handle, buf)
    except Exception:
        return ""
    return bytes(buf).rstrip(b"\x00").decode(errors="replace")


# nvJitLink's statuses that blame the arch (13.x; 12.x reports an unknown arch as
# ERROR_INTERNAL or a ptxas error, caught where NVRTC does not list the arch).
_ARCH_STATUSES = ("ERROR_UNRECOGNIZED_ARCH", "ERROR_UNSUPPORTED_ARCH")


def _arch_refusal(nvjitlink: Any, opts: list[str], exc: BaseException) -> str:
    """What to add to a failed nvJitLink call's message where its ``-arch`` is to blame."""
    try:
        status = nvjitlink.Result(int(getattr(exc, "status", -1))).name
    except (TypeError, ValueError):
        status = ""
    version = nvjitlink_version()
    compiler = f"nvJitLink {version[0]}.{version[1]}" if version else "nvJitLink"
    return arch_refusal(opts, compiler, refused=status in _ARCH_STATUSES)


class _LinkResult:
    __slots__ = ("data", "error_log", "info_log")

    def __init__(self) -> None:
        self.data = b""
        self.error_log = ""
        self.info_log = ""


def _link_nvjitlink(
    flags: list[bytes],
    inputs: list[tuple[bytes | str, str, str]],
    target_type: str,
    res: _LinkResult,
) -> None:
    from cuda.bindings import nvjitlink  # optional library: imported only once known present

    opts = [f.decode() for f in flags]
    if target_type == "ptx" and "-ptx" not in opts:
        opts.append("-ptx")
    kinds = {
        "cubin": nvjitlink.InputType.CUBIN,
        "ptx": nvjitlink.InputType.PTX,
        "ltoir": nvjitlink.InputType.LTOIR,
        "fatbin": nvjitlink.InputType.FATBIN,
        "object": nvjitlink.InputType.OBJECT,
        "library": nvjitlink.InputType.LIBRARY,
    }
    try:
        owner = OwnedHandle(
            "nvjitlink handle", nvjitlink.create(len(opts), opts), nvjitlink.destroy
        )
    except nvjitlink.nvJitLinkError as exc:
        why = _arch_refusal(nvjitlink, opts, exc)
        raise LinkerError(
            "nvJitLinkCreate",
            "NVJITLINK_ERROR",
            f"{exc}: {why}" if why else str(exc),
            options=opts,
        ) from None
    handle = owner.value
    try:
        try:
            for code, kind, name in inputs:
                if isinstance(code, str):
                    nvjitlink.add_file(handle, int(kinds[kind]), code)
                else:
                    nvjitlink.add_data(handle, int(kinds[kind]), code, len(code), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            res.error_log = _nvjitlink_log(nvjitlink, handle, "error")
            res.info_log = _nvjitlink_log(nvjitlink, handle, "info")
            status = getattr(exc, "status", None)
            try:
                ename = "NVJITLINK_" + nvjitlink.Result(int(status)).name  # type: ignore[arg-type]
            except (TypeError, ValueError):
                ename = "NVJITLINK_ERROR"
            why = _arch_refusal(nvjitlink, opts, exc)
            raise LinkerError(
                "nvJitLinkComplete",
                ename,
                f"link failed: {why}" if why else "link failed",
                int(status) if status is not None else None,
                log=res.error_log,
                options=opts,
            ) from None
        res.info_log = _nvjitlink_log(nvjitlink, handle, "info")
        if target_type == "ptx":
            size = nvjitlink.get_linked_ptx_size(handle)
            ba = bytearray(size)
            nvjitlink.get_linked_ptx(handle, ba)
            out = bytes(ba).rstrip(b"\x00")
        elif target_type == "ltoir":
            size = nvjitlink.get_linked_ltoir_size(handle)
            ba = bytearray(size)
            nvjitlink.get_linked_ltoir(handle, ba)
            out = bytes(ba)
        else:
            size = nvjitlink.get_linked_cubin_size(handle)
            ba = bytearray(size)
            nvjitlink.get_linked_cubin(handle, ba)
            out = bytes(ba)
        res.data = out
    finally:
        owner.release()


def _link_driver(
    options: LinkerOptions | None,
    inputs: list[tuple[bytes | str, str, str]],
    target_type: str,
    res: _LinkResult,
) -> None:
    if target_type != "cubin":
        raise ValueError("the driver's linker can only produce cubin (nvJitLink is not available)")
    ensure_driver()
    J = driver.CUjit_option
    size = 1 << 16
    err_buf, info_buf = bytearray(size), bytearray(size)
    keys = [
        J.CU_JIT_ERROR_LOG_BUFFER,
        J.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        J.CU_JIT_INFO_LOG_BUFFER,
        J.CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
    ]
    vals: list[Any] = [err_buf, size, info_buf, size]
    if options is not None:
        if options.max_register_count is not None:
            keys.append(J.CU_JIT_MAX_REGISTERS)
            vals.append(options.max_register_count)
        if options.optimization_level is not None:
            keys.append(J.CU_JIT_OPTIMIZATION_LEVEL)
            vals.append(options.optimization_level)
        if options.debug:
            keys.append(J.CU_JIT_GENERATE_DEBUG_INFO)
            vals.append(1)
        if options.lineinfo:
            keys.append(J.CU_JIT_GENERATE_LINE_INFO)
            vals.append(1)
    kinds = {
        "cubin": driver.CUjitInputType.CU_JIT_INPUT_CUBIN,
        "ptx": driver.CUjitInputType.CU_JIT_INPUT_PTX,
        "fatbin": driver.CUjitInputType.CU_JIT_INPUT_FATBINARY,
        "object": driver.CUjitInputType.CU_JIT_INPUT_OBJECT,
        "library": driver.CUjitInputType.CU_JIT_INPUT_LIBRARY,
    }
    owner = OwnedHandle(
        "driver link state",
        handle_return(driver.cuLinkCreate(len(keys), keys, vals), "cuLinkCreate"),
        driver.cuLinkDestroy,
    )
    state = owner.value

    def logs() -> None:
        res.error_log = bytes(err_buf).split(b"\x00", 1)[0].decode(errors="replace")
        res.info_log = bytes(info_buf).split(b"\x00", 1)[0].decode(errors="replace")

    try:
        for code, kind, name in inputs:
            data = _read(code)
            if kind == "ptx" and not data.endswith(b"\x00"):
                data += b"\x00"
            r = driver.cuLinkAddData(
                state, kinds[kind], data, len(data), name.encode(), 0, None, None
            )
            if r[0] != driver.CUresult.CUDA_SUCCESS:
                logs()
                e = make_error(r[0], "cuLinkAddData")
                raise LinkerError(e.api, e.error_name, e.explanation, e.code, log=res.error_log)
        r = driver.cuLinkComplete(state)
        logs()
        if r[0] != driver.CUresult.CUDA_SUCCESS:
            e = make_error(r[0], "cuLinkComplete")
            raise LinkerError(e.api, e.error_name, e.explanation, e.code, log=res.error_log)
        ptr, n = r[1], r[2]
        res.data = ctypes.string_at(int(ptr), int(n))
    finally:
        owner.release()


def _link_inputs(
    flags: list[bytes], inputs: list[tuple[bytes | str, str, str]], target_type: str, needed_by: str
) -> tuple[bytes, str]:
    """Link ``(code, code_type, name)`` inputs with nvJitLink flags; return (output, info log)."""
    res = _LinkResult()
    if nvjitlink_available():
        _link_nvjitlink(flags, inputs, target_type, res)
    else:
        _require_driver_linker(needed_by)
        _warn_no_lto()
        _link_driver(None, inputs, target_type, res)
    return res.data, res.info_log


def _require_driver_linker(needed_by: str) -> None:
    """Without nvJitLink the driver links; without a driver too, say which install fixes it."""
    if not driver_available():
        raise linker_not_found(needed_by)
    _log.debug("nvJitLink not found: linking with the driver's cuLink* linker (no LTO)")


_warned_no_lto = False


def _warn_no_lto() -> None:
    # Once per process, as cuda.core 1.2 warns (RuntimeWarning) when nvJitLink is unusable.
    global _warned_no_lto
    if _warned_no_lto:
        return
    _warned_no_lto = True
    warnings.warn(
        "nvJitLink is not available; linking with the CUDA driver's linker instead, "
        "so link-time optimisation (LTO-IR input) is not available",
        RuntimeWarning,
        stacklevel=3,
    )


INCREMENTAL_SINCE = (13, 2)
"""The first nvJitLink that links incrementally (``-r``: ``LinkerOptions(incremental=True)``)."""
LTOIR_OUTPUT_SINCE = (13, 3)
"""The first nvJitLink that returns linked LTO-IR (``Linker.link("ltoir")``)."""


def _require_ltoir_output() -> None:
    require_nvjitlink(LTOIR_OUTPUT_SINCE, 'Linker.link("ltoir")')
    from cuda.bindings import nvjitlink

    if not hasattr(nvjitlink, "get_linked_ltoir"):  # a cuda-bindings older than the library
        raise NotImplementedError(
            'Linker.link("ltoir") requires a cuda-bindings with nvjitlink.get_linked_ltoir '
            "(13.3 or newer); upgrade cuda-bindings"
        )


class _ClosedLinkerError(RuntimeError, ValueError):
    """Use of a closed Linker: a RuntimeError as in cuda.core (and a ValueError, as before)."""


class Linker:
    """Links object codes into one cubin or PTX with nvJitLink.

    Parameters
    ----------
    *object_codes : ObjectCode
        Inputs: PTX, cubin, LTO-IR, fatbin, object or library code.
    options : LinkerOptions or dict, optional
        Link options; ``arch`` defaults to the current device's architecture.

    Raises
    ------
    TypeError
        An input is not an :class:`ObjectCode`.
    ValueError
        No input was given.
    NotImplementedError
        ``options.incremental`` with an nvJitLink older than 13.2 (or none).

    Examples
    --------
    >>> linked = Linker(a_ltoir, b_ltoir, options=LinkerOptions(arch="sm_90",
    ...                 link_time_optimization=True)).link("cubin")
    """

    __slots__ = ("__weakref__", "_closed", "_error_log", "_info_log", "_inputs", "_options")

    def __init__(
        self, *object_codes: ObjectCode, options: LinkerOptions | dict | None = None
    ) -> None:
        if not object_codes:
            raise ValueError(
                "At least one ObjectCode object must be provided: Linker needs at least one "
                "ObjectCode to link"
            )
        for i, oc in enumerate(object_codes):
            if not isinstance(oc, ObjectCode):
                raise arg_error(f"object_codes[{i}]", "an ObjectCode", oc, exc=TypeError)
        self._inputs = object_codes
        self._options = check_or_create_options(LinkerOptions, options, "options")
        if self._options.incremental:
            require_nvjitlink(INCREMENTAL_SINCE, "LinkerOptions(incremental=True)")
        self._error_log: str | None = None  # None until link() ran
        self._info_log: str | None = None
        self._closed = False

    @property
    def backend(self) -> CompilerBackendType:
        """CompilerBackendType: ``"nvJitLink"``, or ``"driver"`` where nvJitLink is missing."""
        return self.which_backend()

    @classmethod
    def which_backend(cls) -> CompilerBackendType:
        """The linker this process uses, without creating a Linker.

        Returns
        -------
        CompilerBackendType
            ``NVJITLINK`` where libnvJitLink loads, else ``DRIVER`` (the driver's ``cuLink*``
            linker, which cannot take LTO-IR). The member is a ``str`` equal to
            ``"nvJitLink"`` or ``"driver"``.
        """
        return (
            CompilerBackendType.NVJITLINK if nvjitlink_available() else CompilerBackendType.DRIVER
        )

    @property
    def handle(self) -> int | None:
        """None: nvJitLink handles live only for the duration of :meth:`link`; ``0`` once closed
        (as ``cuda.core`` reports a closed linker's handle)."""
        return 0 if self._closed else None

    @property
    def is_closed(self) -> bool:
        """bool: Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Release the linker; idempotent."""
        self._closed = True

    def __enter__(self) -> Linker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def link(self, target_type: str) -> ObjectCode:
        """Link the inputs into one :class:`ObjectCode`.

        Parameters
        ----------
        target_type : {"cubin", "ptx", "ltoir"}
            The output. ``"ltoir"`` (``cuda.core`` 1.3) keeps the linked code as LTO-IR, for
            another link (an incremental LTO chain, see ``LinkerOptions.incremental``): it
            needs ``link_time_optimization=True`` and nvJitLink 13.3 or newer, and takes no
            direct PTX or cubin input (they carry no LTO-IR, and nvJitLink would leave them out
            of the result without a word).

        Returns
        -------
        ObjectCode
            Named after ``options.name``.

        Raises
        ------
        LinkerError
            The link failed; the message holds the linker's error log (for an ``arch`` nvJitLink
            refuses, also the architectures NVRTC compiles for and this GPU's).
        ValueError
            ``target_type`` is invalid; ``"ltoir"`` without ``link_time_optimization`` or with a
            PTX or cubin input.
        NotImplementedError
            ``"ltoir"`` with an nvJitLink older than 13.3 (or none).
        RuntimeError
            The linker is closed (the exception is also a ``ValueError``).
        """
        if self._closed:
            raise _ClosedLinkerError("Linker has been closed. Make a new Linker to link again")
        if target_type not in ("cubin", "ptx", "ltoir"):
            raise arg_error(
                "target_type",
                '"cubin", "ptx" or "ltoir"',
                target_type,
                lead=f"Unsupported target type: {target_type}",
            )
        if target_type == "ltoir":
            self._check_ltoir_output()
        name = self._options.name or "<default linker>"
        inputs = [
            (
                oc.code if isinstance(oc.code, bytes) else os.fspath(oc.code),
                oc.code_type,
                oc.name or f"input{i}",
            )
            for i, oc in enumerate(self._inputs)
        ]
        res = _LinkResult()
        try:
            if nvjitlink_available():
                _link_nvjitlink(self._options.as_bytes("nvjitlink"), inputs, target_type, res)
            else:
                _require_driver_linker("Linker.link()")
                if (
                    any(kind == "ltoir" for _, kind, _ in inputs)
                    or self._options.link_time_optimization
                ):
                    raise LinkerError(
                        "cuLinkCreate",
                        "LTO_UNAVAILABLE",
                        f"LTO-IR needs nvJitLink, which is not available; install it with: {remedy()}",
                    )
                _warn_no_lto()
                _link_driver(self._options, inputs, target_type, res)
        finally:
            self._error_log, self._info_log = res.error_log, res.info_log
        mapping: dict = {}
        for oc in self._inputs:
            mapping.update(oc._sym_map)
        return ObjectCode._init(res.data, target_type, name=name, symbol_mapping=mapping)

    def _check_ltoir_output(self) -> None:
        if not self._options.link_time_optimization:
            raise ValueError(
                'link("ltoir") requires link_time_optimization=True in LinkerOptions '
                "(linked LTO-IR is what link-time optimisation keeps)"
            )
        direct = [
            f"{oc.name or f'input{i}'} ({oc.code_type})"
            for i, oc in enumerate(self._inputs)
            if oc.code_type in ("ptx", "cubin")
        ]
        if direct:
            raise ValueError(
                f'link("ltoir") cannot take PTX or cubin inputs: {", ".join(direct)}; they carry '
                "no LTO-IR and would be left out of the result. Compile them to LTO-IR "
                '(Program.compile("ltoir")) or link them in the final link'
            )
        _require_ltoir_output()

    def get_error_log(self) -> str:
        """str: The error log of the last :meth:`link` ("" when it succeeded or before it ran).

        Raises ``RuntimeError`` on a closed linker that never linked, as ``cuda.core`` does.
        """
        return self._log(self._error_log)

    def get_info_log(self) -> str:
        """str: The information log of the last :meth:`link` (same rules as :meth:`get_error_log`)."""
        return self._log(self._info_log)

    def _log(self, log: str | None) -> str:
        if log is None:
            if self._closed:
                raise _ClosedLinkerError(
                    "Linker has been closed. It never linked, so it has no log"
                )
            return ""
        return log
