"""ProgramOptions: the compiler options of :class:`~cuda_core.Program` and their flags.

:meth:`ProgramOptions.as_bytes` turns the dataclass into the exact flags a backend takes
(NVRTC, nvJitLink for PTX input, libNVVM for NVVM IR). An option a backend cannot take raises
a ``ValueError`` naming it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._utils import arg_error, as_flag, options_repr, suggest_fields
from ._cache_paths import bundled_headers_dir
from ._option_checks import (
    _NVRTC_MIN_VERSION,
    UnsupportedOptionError,
    _check_nvrtc_version,
    _extra_sources,
    _macros,
)
from ._option_checks import _as_list as _as_list
from ._option_checks import check_counts as check_counts
from ._option_checks import device_arch as device_arch
from ._option_checks import normalize_arch as normalize_arch

__all__ = ["ProgramOptions"]

_BACKENDS = ("nvrtc", "nvjitlink", "nvvm")


def _tf(v: bool) -> str:
    return "true" if v else "false"


@suggest_fields
@dataclass
class ProgramOptions:
    """Options of :class:`~cuda_core.Program`, with the fields of ``cuda.core`` 1.x.

    Fields are in ``cuda.core``'s order; every field but ``name`` defaults to ``None`` (the
    compiler's default). Boolean switches emit their flag when ``True``; ``true/false`` flags
    (``ftz``, ``prec_div``, ...) emit the value given. An option the backend cannot take (for
    example ``extra_sources`` with NVRTC, or an option newer than the installed NVRTC) raises a
    ``ValueError`` naming it (for NVVM, also the ``CUDAError`` ``cuda.core`` raises, worded as
    its: ``"The following options are not supported by NVVM backend: std"``); a switch left at
    ``False`` is ignored by every backend.

    Parameters
    ----------
    name : str, optional
        The program's name, used in compiler messages and as the ObjectCode's name
        (default ``"default_program"``; ``None`` means the same).
    arch : str, optional
        Target architecture, ``"sm_90"``, ``"90"`` or ``"compute_90"``. Defaults to the current
        device's architecture; without a GPU pass it explicitly.
    relocatable_device_code, extensible_whole_program : bool, optional
        ``--relocatable-device-code``, ``--extensible-whole-program``.
    debug, lineinfo : bool, optional
        Device debug information (``--device-debug``), line information (``--generate-line-info``).
    device_code_optimize : bool, optional
        ``True`` gives ``--dopt=on`` (optimise device code even with ``debug``); NVRTC has no
        ``off`` form, so ``False`` adds no flag.
    ptxas_options : str or sequence of str, optional
        Options passed to ptxas (``--ptxas-options``).
    max_register_count : int, optional
        ``--maxrregcount``.
    ftz, prec_sqrt, prec_div, fma : bool, optional
        Floating-point behaviour (``--ftz``, ``--prec-sqrt``, ``--prec-div``, ``--fmad``).
    use_fast_math, extra_device_vectorization : bool, optional
        ``--use_fast_math``, ``--extra-device-vectorization``.
    link_time_optimization, gen_opt_lto : bool, optional
        Emit LTO-IR (``--dlink-time-opt``), optimise it (``--gen-opt-lto``).
    define_macro : str, tuple or sequence, optional
        ``--define-macro=NAME`` or ``NAME=VALUE``: a name, a ``(name, value)`` pair, or a
        sequence of names and pairs.
    undefine_macro, include_path, pre_include : str or sequence of str, optional
        ``--undefine-macro``, ``--include-path``, ``--pre-include``.
    use_bundled_headers : bool, optional
        Compile against the CUDA and CCCL headers that ship inside NVRTC, so no toolkit install
        is needed (``--use-bundled-headers=DIR``; NVRTC installs them once into
        ``DIR``, ``nvrtc-bundled-headers`` in ``$CUDA_CORE_CACHE_DIR`` or else in
        ``$XDG_CACHE_HOME/cuda_core``). NVRTC 13.3 and later.
    no_source_include : bool, optional
        ``--no-source-include``.
    std : str, optional
        C++ dialect, e.g. ``"c++17"`` (``--std``).
    builtin_move_forward, builtin_initializer_list : bool, optional
        ``--builtin-move-forward``, ``--builtin-initializer-list``.
    disable_warnings, restrict, device_as_default_execution_space, device_int128 : bool, optional
        The switches of the same name.
    optimization_info : str, optional
        ``--optimization-info`` (e.g. ``"inline"``).
    no_display_error_number, brief_diagnostics : bool, optional
        Diagnostic formatting.
    diag_error, diag_suppress, diag_warn : int or sequence of int, optional
        Diagnostic numbers to promote, suppress or warn about.
    time : str or bool, optional
        Write compile timings to this file (``--time``). For a PTX program (nvJitLink), any
        value, ``True`` too, asks for ``-time``.
    split_compile : int, optional
        Threads for split compilation (``--split-compile``); a ``bool`` is read as ``0``/``1``,
        as ``cuda.core`` takes it.
    fdevice_syntax_only, minimal : bool, optional
        Syntax check only; minimal header set.
    no_cache : bool, optional
        Turn NVRTC's own compile cache off (``--no-cache``, NVRTC 12.9+). The cuda_core compile
        cache is controlled by ``Program.compile(cache=...)``.
    fdevice_time_trace : str, optional
        Write a time-trace JSON of the compile to this file (``--fdevice-time-trace``).
    device_float128 : bool, optional
        Allow ``__float128`` in device code (``--device-float128``; NVRTC accepts it for
        ``sm_100`` and newer).
    frandom_seed : str, optional
        Seed of randomised optimisations (``--frandom-seed``).
    ofast_compile : {"0", "min", "mid", "max"}, optional
        Trade optimisation for compile speed (``--Ofast-compile``).
    pch : bool, optional
        Automatic precompiled headers (``--pch``).
    create_pch, use_pch, pch_dir : str, optional
        Create / use this precompiled header file, directory of PCH files.
    pch_verbose, pch_messages, instantiate_templates_in_pch : bool, optional
        Precompiled-header switches. The ``fdevice_time_trace``, ``device_float128``,
        ``frandom_seed``, ``ofast_compile`` and PCH options need NVRTC 12.8 or later.
    extra_sources : sequence of tuple, optional
        More NVVM IR modules (text or bitcode) compiled with an NVVM program, as
        ``((name, source), ...)`` with ``name`` a str and ``source`` a str or bytes. NVVM only.
    use_libdevice : bool, optional
        Link NVIDIA's libdevice math library into an NVVM program. NVVM only.
    numba_debug : bool, optional
        Debug information in the layout Numba expects (``--numba-debug`` for NVRTC 13.1+,
        which also needs ``debug=True``; ``-numba-debug`` for NVVM).

    Raises
    ------
    TypeError, ValueError
        A field of the wrong type or value.

    Examples
    --------
    >>> ProgramOptions(arch="sm_90", std="c++17", use_fast_math=True).as_bytes("nvrtc")
    [b'-arch=sm_90', b'--use_fast_math', b'--std=c++17']
    """

    name: str | None = "default_program"
    arch: str | None = None
    relocatable_device_code: bool | None = None
    extensible_whole_program: bool | None = None
    debug: bool | None = None
    lineinfo: bool | None = None
    device_code_optimize: bool | None = None
    ptxas_options: str | list[str] | tuple[str, ...] | None = None
    max_register_count: int | None = None
    ftz: bool | None = None
    prec_sqrt: bool | None = None
    prec_div: bool | None = None
    fma: bool | None = None
    use_fast_math: bool | None = None
    extra_device_vectorization: bool | None = None
    link_time_optimization: bool | None = None
    gen_opt_lto: bool | None = None
    define_macro: Any = None
    undefine_macro: str | list[str] | tuple[str, ...] | None = None
    include_path: Any = None
    use_bundled_headers: bool | None = None
    pre_include: str | list[str] | tuple[str, ...] | None = None
    no_source_include: bool | None = None
    std: str | None = None
    builtin_move_forward: bool | None = None
    builtin_initializer_list: bool | None = None
    disable_warnings: bool | None = None
    restrict: bool | None = None
    device_as_default_execution_space: bool | None = None
    device_int128: bool | None = None
    optimization_info: str | None = None
    no_display_error_number: bool | None = None
    diag_error: int | list[int] | tuple[int, ...] | None = None
    diag_suppress: int | list[int] | tuple[int, ...] | None = None
    diag_warn: int | list[int] | tuple[int, ...] | None = None
    brief_diagnostics: bool | None = None
    time: str | None = None
    split_compile: int | None = None
    fdevice_syntax_only: bool | None = None
    minimal: bool | None = None
    no_cache: bool | None = None
    fdevice_time_trace: str | None = None
    device_float128: bool | None = None
    frandom_seed: str | None = None
    ofast_compile: str | None = None
    pch: bool | None = None
    create_pch: str | None = None
    use_pch: str | None = None
    pch_dir: str | None = None
    pch_verbose: bool | None = None
    pch_messages: bool | None = None
    instantiate_templates_in_pch: bool | None = None
    extra_sources: Any = None
    use_libdevice: bool | None = None
    numba_debug: bool | None = None

    def __post_init__(self) -> None:
        if self.name is None:
            self.name = "default_program"  # as cuda.core reads None
        if self.arch is not None:
            self.arch = normalize_arch(self.arch)
        # On/off options take any truth value, as in cuda.core (``debug=1``, ``numpy.True_``).
        for f in _BOOL_FIELDS:
            setattr(self, f, as_flag(getattr(self, f)))
        if self.use_bundled_headers:
            # cuda.core refuses it when the options are made (not at compile): so do we.
            _check_nvrtc_version(["use_bundled_headers"])
        if self.time is False:
            self.time = None
        if isinstance(self.split_compile, bool):
            self.split_compile = int(self.split_compile)  # as cuda.core passes it on
        for f in (
            "name",
            "std",
            "optimization_info",
            "time",
            "create_pch",
            "use_pch",
            "pch_dir",
            "fdevice_time_trace",
            "frandom_seed",
        ):
            v = getattr(self, f)
            if f == "time" and v is True:
                continue  # a PTX program's switch (nvJitLink's -time), as cuda.core takes it
            if v is not None and not isinstance(v, (str, os.PathLike)):
                raise arg_error(f, "a string or None", v, exc=TypeError)
        check_counts(self, ("max_register_count", "split_compile"))
        if self.ofast_compile is not None and self.ofast_compile not in _OFAST_LEVELS:
            raise arg_error(
                "ofast_compile",
                f"one of {', '.join(map(repr, _OFAST_LEVELS))} or None",
                self.ofast_compile,
            )
        self._normalize()

    def __repr__(self) -> str:
        # Only what was set: the 58 fields at their defaults say nothing.
        return options_repr(self)

    def _normalize(self) -> None:
        # List-valued fields, checked and flattened (again in as_bytes: fields are mutable).
        self._ptxas = _as_list("ptxas_options", self.ptxas_options, (str,))
        self._undef = _as_list("undefine_macro", self.undefine_macro, (str,))
        self._incs = [
            os.fspath(p) for p in _as_list("include_path", self.include_path, (str, os.PathLike))
        ]
        self._pre = _as_list("pre_include", self.pre_include, (str,))
        self._diag = {
            f: _as_list(f, getattr(self, f), (int,))
            for f in ("diag_error", "diag_suppress", "diag_warn")
        }
        self._macros = _macros(self.define_macro)
        self._extra = _extra_sources(self.extra_sources)

    # ------------------------------------------------------------------------------------------

    def _arch_or_device(self) -> str:
        return self.arch if self.arch is not None else device_arch()

    def _set_fields(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if getattr(self, n) not in (None, (), [])]

    def as_bytes(self, backend: str = "nvrtc", target_type: str | None = None) -> list[bytes]:
        """The exact flags this options object gives the named backend.

        Parameters
        ----------
        backend : {"nvrtc", "nvjitlink", "nvvm"}
            The compiler that will take the flags (C++, PTX and NVVM IR input respectively).
        target_type : {"ptx", "cubin", "ltoir"}, optional
            The output asked of the compiler; ``"ltoir"`` adds the LTO flag where needed.

        Returns
        -------
        list of bytes
            One flag per item.

        Raises
        ------
        ValueError
            ``backend`` is unknown; an option is set that the backend cannot take (the message
            names it); ``arch`` is not set and no GPU is present.
        """
        backend = backend.lower() if isinstance(backend, str) else backend
        self._normalize()
        if backend == "nvrtc":
            flags = self._nvrtc_flags(target_type)
        elif backend == "nvjitlink":
            flags = self._nvjitlink_flags(target_type)
        elif backend == "nvvm":
            flags = self._nvvm_flags(target_type)
        else:
            raise arg_error(
                "backend",
                f"one of {', '.join(_BACKENDS)}",
                backend,
                lead=f"Unknown backend {backend!r}. Must be one of: 'nvrtc', 'nvvm' (or "
                "'nvjitlink', for PTX input)",
            )
        return [f.encode() for f in flags]

    def _nvrtc_flags(self, target_type: str | None) -> list[str]:
        if (
            self.extra_sources is not None or self.use_libdevice
        ):  # cheap test first: hot on cache hits
            self._reject("NVRTC", _NVRTC_OK)
        out = [f"-arch={self._arch_or_device()}"]
        add = out.append
        if self.relocatable_device_code is not None:
            add(f"--relocatable-device-code={_tf(self.relocatable_device_code)}")
        if self.extensible_whole_program:
            add("--extensible-whole-program")
        if self.debug:
            add("--device-debug")
        if self.lineinfo:
            add("--generate-line-info")
        if self.device_code_optimize:  # NVRTC takes only "on"; off is its default with debug
            add("--dopt=on")
        out.extend(f"--ptxas-options={p}" for p in self._ptxas)
        if self.max_register_count is not None:
            add(f"--maxrregcount={self.max_register_count}")
        if self.ftz is not None:
            add(f"--ftz={_tf(self.ftz)}")
        if self.prec_sqrt is not None:
            add(f"--prec-sqrt={_tf(self.prec_sqrt)}")
        if self.prec_div is not None:
            add(f"--prec-div={_tf(self.prec_div)}")
        if self.fma is not None:
            add(f"--fmad={_tf(self.fma)}")
        if self.use_fast_math:
            add("--use_fast_math")
        if self.extra_device_vectorization:
            add("--extra-device-vectorization")
        if self.link_time_optimization or (target_type == "ltoir"):
            add("--dlink-time-opt")
        if self.gen_opt_lto:
            add("--gen-opt-lto")
        out.extend(f"--define-macro={m}" for m in self._macros)
        out.extend(f"--undefine-macro={m}" for m in self._undef)
        out.extend(f"--include-path={p}" for p in self._incs)
        out.extend(f"--pre-include={p}" for p in self._pre)
        if self.no_source_include:
            add("--no-source-include")
        if self.std is not None:
            add(f"--std={self.std}")
        if self.builtin_move_forward is not None:
            add(f"--builtin-move-forward={_tf(self.builtin_move_forward)}")
        if self.builtin_initializer_list is not None:
            add(f"--builtin-initializer-list={_tf(self.builtin_initializer_list)}")
        if self.disable_warnings:
            add("--disable-warnings")
        if self.restrict:
            add("--restrict")
        if self.device_as_default_execution_space:
            add("--device-as-default-execution-space")
        if self.device_int128:
            add("--device-int128")
        if self.optimization_info is not None:
            add(f"--optimization-info={self.optimization_info}")
        if self.no_display_error_number:
            add("--no-display-error-number")
        for f, flag in (
            ("diag_error", "--diag-error"),
            ("diag_suppress", "--diag-suppress"),
            ("diag_warn", "--diag-warn"),
        ):
            out.extend(f"{flag}={n}" for n in self._diag[f])
        if self.brief_diagnostics is not None:
            add(f"--brief-diagnostics={_tf(self.brief_diagnostics)}")
        if self.time is True:
            raise arg_error(
                "time",
                "a file name for NVRTC's timing table (True is nvJitLink's switch, for PTX)",
                self.time,
            )
        if self.time is not None:
            add(f"--time={os.fspath(self.time)}")
        if self.split_compile is not None:
            add(f"--split-compile={self.split_compile}")
        if self.fdevice_syntax_only:
            add("--fdevice-syntax-only")
        if self.minimal:
            add("--minimal")
        # An on/off option that is off asks nothing of NVRTC: only the ones in use are checked.
        _check_nvrtc_version(
            [n for n in self._set_fields(_NVRTC_MIN_VERSION) if getattr(self, n) is not False]
        )
        if self.use_bundled_headers:
            add(f"--use-bundled-headers={bundled_headers_dir()}")
        if self.no_cache:
            add("--no-cache")
        if self.fdevice_time_trace is not None:
            add(f"--fdevice-time-trace={os.fspath(self.fdevice_time_trace)}")
        if self.device_float128:
            add("--device-float128")
        if self.frandom_seed is not None:
            add(f"--frandom-seed={self.frandom_seed}")
        if self.ofast_compile is not None:
            add(f"--Ofast-compile={self.ofast_compile}")
        if self.pch:
            add("--pch")
        if self.create_pch is not None:
            add(f"--create-pch={os.fspath(self.create_pch)}")
        if self.use_pch is not None:
            add(f"--use-pch={os.fspath(self.use_pch)}")
        if self.pch_dir is not None:
            add(f"--pch-dir={os.fspath(self.pch_dir)}")
        if self.pch_verbose is not None:
            add(f"--pch-verbose={_tf(self.pch_verbose)}")
        if self.pch_messages is not None:
            add(f"--pch-messages={_tf(self.pch_messages)}")
        if self.instantiate_templates_in_pch is not None:
            add(f"--instantiate-templates-in-pch={_tf(self.instantiate_templates_in_pch)}")
        if self.numba_debug:
            add("--numba-debug")
        return out

    def _reject(self, backend: str, allowed: frozenset[str]) -> None:
        # A switch left at False asks for nothing, so any backend may ignore it; a true/false
        # option's False asks for its flag (--builtin-move-forward=false), as any value.
        bad = [
            f
            for f in self._set_fields(_ALL_FIELDS)
            if f not in allowed and (getattr(self, f) is not False or f in _TRUE_FALSE)
        ]
        if not bad:
            return
        if backend == "NVVM":
            # cuda.core's message, all of it: code matches it whole (a note would break that,
            # pytest matches notes too), and it names the options
            raise UnsupportedOptionError(
                f"The following options are not supported by NVVM backend: {', '.join(bad)}"
            )
        takes = f" (it takes only {', '.join(sorted(allowed))})" if len(allowed) < 20 else ""
        raise ValueError(
            f"option(s) {', '.join(bad)} cannot be used with the {backend} backend{takes}"
        )

    def _nvjitlink_flags(self, target_type: str | None) -> list[str]:
        # numba_debug: the linker cannot honour it; Program warns (as cuda.core) and drops it
        self._reject("nvJitLink (PTX input)", _NVJITLINK_OK | {"numba_debug"})
        out = [f"-arch={self._arch_or_device()}"]
        add = out.append
        if self.max_register_count is not None:
            add(f"-maxrregcount={self.max_register_count}")
        if self.time is not None:
            add("-time")
        if self.debug:
            add("-g")
        if self.lineinfo:
            add("-lineinfo")
        if self.device_code_optimize is not None:
            add("-O3" if self.device_code_optimize else "-O0")
        if self.ftz is not None:
            add(f"-ftz={_tf(self.ftz)}")
        if self.prec_div is not None:
            add(f"-prec-div={_tf(self.prec_div)}")
        if self.prec_sqrt is not None:
            add(f"-prec-sqrt={_tf(self.prec_sqrt)}")
        if self.fma is not None:
            add(f"-fma={_tf(self.fma)}")
        if self.link_time_optimization:
            add("-lto")
        out.extend(f"-Xptxas={p}" for p in self._ptxas)
        if self.split_compile is not None:
            add(f"-split-compile={self.split_compile}")
        if target_type == "ptx":
            add("-ptx")
        return out

    def _nvvm_flags(self, target_type: str | None) -> list[str]:
        self._reject("NVVM", _NVVM_OK)
        arch = self._arch_or_device()
        num = arch.partition("_")[2]
        out = [f"-arch=compute_{num}"]
        add = out.append
        if self.debug:
            add("-g")
        if self.lineinfo:
            add("-generate-line-info")
        if self.device_code_optimize is not None:
            add("-opt=3" if self.device_code_optimize else "-opt=0")
        if self.ftz is not None:
            add(f"-ftz={int(self.ftz)}")
        if self.prec_sqrt is not None:
            add(f"-prec-sqrt={int(self.prec_sqrt)}")
        if self.prec_div is not None:
            add(f"-prec-div={int(self.prec_div)}")
        if self.fma is not None:
            add(f"-fma={int(self.fma)}")
        if self.link_time_optimization or target_type == "ltoir":
            add("-gen-lto")
        if self.numba_debug:
            add("-numba-debug")
        return out

    def _header_inputs(self) -> tuple[list[str], list[str]]:
        """(include directories, pre-included headers): the files the cache key must read."""
        return self._incs, self._pre


_ALL_FIELDS = tuple(f.name for f in dataclasses.fields(ProgramOptions))
_BOOL_FIELDS = tuple(
    f.name for f in dataclasses.fields(ProgramOptions) if str(f.type).startswith("bool")
)
# Options given to NVRTC as --name=true/false: False is a request too.
_TRUE_FALSE = frozenset(
    {
        "relocatable_device_code",
        "ftz",
        "prec_sqrt",
        "prec_div",
        "fma",
        "builtin_move_forward",
        "builtin_initializer_list",
        "brief_diagnostics",
        "pch_verbose",
        "pch_messages",
        "instantiate_templates_in_pch",
    }
)
_OFAST_LEVELS = ("0", "min", "mid", "max")
# Options only the NVVM backend takes.
_NVRTC_OK = frozenset(_ALL_FIELDS) - {"extra_sources", "use_libdevice"}
_NVJITLINK_OK = frozenset(
    {
        "name",
        "arch",
        "max_register_count",
        "time",
        "debug",
        "lineinfo",
        "device_code_optimize",
        "ftz",
        "prec_div",
        "prec_sqrt",
        "fma",
        "link_time_optimization",
        "ptxas_options",
        "split_compile",
    }
)
_NVVM_OK = frozenset(
    {
        "name",
        "arch",
        "debug",
        "lineinfo",
        "device_code_optimize",
        "ftz",
        "prec_sqrt",
        "prec_div",
        "fma",
        "link_time_optimization",
        "extra_sources",
        "use_libdevice",
        "numba_debug",
    }
)
