"""LinkerOptions: the options of :class:`~cuda_core.Linker` (``cuda.core`` 1.x's fields) and
the flags each linker backend gets from them."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from .._utils import arg_error, as_flag, options_repr, suggest_fields
from ._options import _as_list, check_counts, device_arch, normalize_arch

__all__ = ["LinkerOptions"]


def _tf(v: bool) -> str:
    return "true" if v else "false"


@suggest_fields
@dataclass
class LinkerOptions:
    """Options of :class:`Linker`, with the fields of ``cuda.core`` 1.x.

    Parameters
    ----------
    name : str, optional
        A name for messages and for the linked ObjectCode (default ``"<default linker>"``).
    arch : str, optional
        Target, ``"sm_90"`` or ``"90"``; defaults to the current device's architecture.
    max_register_count : int, optional
        ``-maxrregcount``.
    time, verbose : bool, optional
        Print timings / verbose information into the info log.
    link_time_optimization : bool, optional
        Link-time optimisation of LTO-IR inputs (``-lto``).
    ptx : bool, optional
        Emit PTX (``-ptx``); set automatically by ``link("ptx")``.
    optimization_level : int, optional
        ``-O0`` to ``-O4``.
    debug, lineinfo : bool, optional
        Debug information (``-g``), line information (``-lineinfo``).
    ftz, prec_div, prec_sqrt, fma : bool, optional
        Floating-point behaviour.
    kernels_used, variables_used : str or sequence of str, optional
        Names kept alive when unused code is removed.
    optimize_unused_variables : bool, optional
        ``-optimize-unused-variables``.
    ptxas_options : str or sequence of str, optional
        ``-Xptxas`` options.
    split_compile, split_compile_extended : int, optional
        Threads for split compilation.
    no_cache : bool, optional
        Disable nvJitLink's own cache (``-no-cache``).
    numba_debug : bool, optional
        Accepted for compatibility with ``cuda.core`` and ignored: it is a compiler option
        (``ProgramOptions(numba_debug=True)``) that no linker takes. Setting it warns
        (``DeprecationWarning``).
    incremental : bool, optional
        Incremental (relocatable) link (``-r``, ``cuda.core`` 1.3): the result may still
        reference code that is not linked in yet and goes, as an input, into another
        :class:`Linker`. A native result is a relocatable cubin; with
        ``link_time_optimization=True``, ``link("ltoir")`` keeps LTO-IR for the final link.
        Needs nvJitLink 13.2 or newer: :class:`Linker` raises ``NotImplementedError`` naming
        the version where it is older (or missing).

    Raises
    ------
    TypeError, ValueError
        A field of the wrong type or value.
    """

    name: str | None = "<default linker>"
    arch: str | None = None
    max_register_count: int | None = None
    time: bool | None = None
    verbose: bool | None = None
    link_time_optimization: bool | None = None
    ptx: bool | None = None
    optimization_level: int | None = None
    debug: bool | None = None
    lineinfo: bool | None = None
    ftz: bool | None = None
    prec_div: bool | None = None
    prec_sqrt: bool | None = None
    fma: bool | None = None
    kernels_used: str | list[str] | tuple[str, ...] | None = None
    variables_used: str | list[str] | tuple[str, ...] | None = None
    optimize_unused_variables: bool | None = None
    ptxas_options: str | list[str] | tuple[str, ...] | None = None
    split_compile: int | None = None
    split_compile_extended: int | None = None
    no_cache: bool | None = None
    numba_debug: bool | None = None
    incremental: bool | None = None

    def __repr__(self) -> str:
        # Only what was set.
        return options_repr(self)

    def __post_init__(self) -> None:
        if self.name is not None and not isinstance(self.name, str):
            raise arg_error("name", "a str or None", self.name, exc=TypeError)
        if self.arch is not None:
            self.arch = normalize_arch(self.arch)
        for f in (
            "time",
            "verbose",
            "link_time_optimization",
            "ptx",
            "debug",
            "lineinfo",
            "ftz",
            "prec_div",
            "prec_sqrt",
            "fma",
            "optimize_unused_variables",
            "no_cache",
            "numba_debug",
            "incremental",
        ):
            setattr(self, f, as_flag(getattr(self, f)))  # any truth value, as in cuda.core
        check_counts(self, ("max_register_count", "split_compile", "split_compile_extended"))
        lvl = self.optimization_level
        if lvl is not None and (
            isinstance(lvl, bool) or not isinstance(lvl, int) or not 0 <= lvl <= 4
        ):
            raise arg_error("optimization_level", "an int from 0 to 4 or None", lvl)
        if self.numba_debug is not None:
            warnings.warn(
                "LinkerOptions.numba_debug has no effect (no linker takes it); "
                "set ProgramOptions.numba_debug on the compile instead",
                DeprecationWarning,
                stacklevel=3,
            )

    def as_bytes(self, backend: str = "nvjitlink") -> list[bytes]:
        """The exact nvJitLink flags of these options.

        Parameters
        ----------
        backend : {"nvjitlink"}
            Only nvJitLink takes flags (the driver's linker takes JIT options).

        Returns
        -------
        list of bytes

        Raises
        ------
        ValueError
            An unknown backend, or ``arch`` not set and no GPU present.
        """
        if backend.lower() != "nvjitlink":
            raise arg_error(
                "backend",
                '"nvjitlink"',
                backend,
                lead=f"as_bytes() only supports 'nvjitlink' backend, got {backend!r}",
            )
        out = [f"-arch={self.arch if self.arch is not None else device_arch('LinkerOptions')}"]
        add = out.append
        if self.max_register_count is not None:
            add(f"-maxrregcount={self.max_register_count}")
        if self.time:
            add("-time")
        if self.verbose:
            add("-verbose")
        if self.link_time_optimization:
            add("-lto")
        if self.ptx:
            add("-ptx")
        if self.optimization_level is not None:
            add(f"-O{self.optimization_level}")
        if self.debug:
            add("-g")
        if self.lineinfo:
            add("-lineinfo")
        for f, flag in (
            ("ftz", "-ftz"),
            ("prec_div", "-prec-div"),
            ("prec_sqrt", "-prec-sqrt"),
            ("fma", "-fma"),
        ):
            v = getattr(self, f)
            if v is not None:
                add(f"{flag}={_tf(v)}")
        out.extend(
            f"-kernels-used={k}" for k in _as_list("kernels_used", self.kernels_used, (str,))
        )
        out.extend(
            f"-variables-used={k}" for k in _as_list("variables_used", self.variables_used, (str,))
        )
        if self.optimize_unused_variables:
            add("-optimize-unused-variables")
        out.extend(f"-Xptxas={p}" for p in _as_list("ptxas_options", self.ptxas_options, (str,)))
        if self.split_compile is not None:
            add(f"-split-compile={self.split_compile}")
        if self.split_compile_extended is not None:
            add(f"-split-compile-extended={self.split_compile_extended}")
        if self.no_cache:
            add("-no-cache")
        if self.incremental:
            add("-r")
        return [f.encode() for f in out]


# ---------------------------------------------------------------------------------------------
