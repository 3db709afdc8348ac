"""ObjectCode: compiled code (cubin, PTX, LTO-IR, fatbin, ...), loaded lazily into a CUlibrary.

Loading uses the context-independent library API (``cuLibraryLoadData``);
:meth:`ObjectCode.get_kernel` gives a :class:`~cuda_core.Kernel` wrapping a ``CUkernel`` from
``cuLibraryGetKernel``. ``Kernel``, ``KernelAttributes`` and ``KernelOccupancy`` are defined in
:mod:`cuda_core._kernel` and :mod:`cuda_core._kernel_attributes`; this module re-exports them
(``cuda.core`` keeps them with ObjectCode, in its ``_module``).
"""

from __future__ import annotations

import functools
import os
import weakref
from typing import Any

from .._compat import driver
from .._handles._driver import ensure_driver
from .._handles._owned import OwnedHandle
from .._kernel import Kernel, KernelAttributes, KernelOccupancy, kernel_loaded, library_unloaded
from .._utils import arg_error, handle_return, make_error
from ._param_types import kernel_param_types

__all__ = ["Kernel", "KernelAttributes", "KernelOccupancy", "ObjectCode"]

_CODE_TYPES = ("cubin", "ptx", "ltoir", "fatbin", "object", "library")
_LOADABLE = ("cubin", "ptx", "fatbin")
_CUresult = driver.CUresult


class ObjectCode:
    """Compiled device code (cubin, PTX, LTO-IR, fatbin, object or library).

    Create it with :meth:`Program.compile` or a ``from_*`` factory. The code is loaded into the
    driver (a ``CUlibrary``, context-independent) on first use: :meth:`get_kernel` or
    :attr:`handle`. ``repr``, :attr:`code`, :attr:`code_type`, :attr:`name` and
    :attr:`symbol_mapping` need no driver.
    """

    __slots__ = (
        "__weakref__",
        "_code",
        "_code_type",
        "_holder",
        "_kernels",
        "_name",
        "_sym_map",
    )
    _code: bytes | str
    _code_type: str
    _holder: OwnedHandle | None  # owns the loaded CUlibrary
    # Kernels by name, held weakly: a Kernel keeps its ObjectCode alive, so a strong cache would
    # make a cycle, and the code would be unloaded by the garbage collector at some later time
    # (possibly during a graph capture, which unloading invalidates) instead of when the last
    # reference goes, as in cuda.core.
    _kernels: weakref.WeakValueDictionary[Any, Kernel] | None
    _name: str
    _sym_map: dict

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "ObjectCode objects cannot be instantiated directly. Use Program.compile() or ObjectCode.from_cubin(), "
            "from_ptx(), from_ltoir(), from_fatbin(), from_object(), from_library()"
        )

    @classmethod
    def _init(
        cls, code: Any, code_type: str, *, name: str = "", symbol_mapping: dict | None = None
    ) -> ObjectCode:
        self = object.__new__(cls)
        if isinstance(code, (bytearray, memoryview)):
            code = bytes(code)
        elif isinstance(code, os.PathLike):
            code = os.fspath(code)
        if not isinstance(code, (bytes, str)):
            raise arg_error(
                "module", "bytes or a path (str or os.PathLike)", type(code).__name__, exc=TypeError
            )
        if name is None:
            name = ""
        if not isinstance(name, str):
            raise arg_error("name", "a str", name, exc=TypeError)
        if symbol_mapping is not None and not isinstance(symbol_mapping, dict):
            raise arg_error("symbol_mapping", "a dict or None", symbol_mapping, exc=TypeError)
        self._code = code
        self._code_type = code_type
        self._name = name
        self._sym_map = dict(symbol_mapping) if symbol_mapping else {}
        self._holder = None
        self._kernels = weakref.WeakValueDictionary()
        return self

    @staticmethod
    def from_cubin(
        module: bytes | str, *, name: str = "", symbol_mapping: dict | None = None
    ) -> ObjectCode:
        """Wrap a cubin given as bytes or as a file path.

        Parameters
        ----------
        module : bytes or str or os.PathLike
            The cubin image, or the path of a file holding it (read by the driver on load).
        name : str, optional
            A name for messages.
        symbol_mapping : dict, optional
            Maps names given to :meth:`get_kernel` to the symbols in the code.

        Returns
        -------
        ObjectCode

        Raises
        ------
        TypeError
            ``module`` is neither bytes nor a path.
        """
        return ObjectCode._init(module, "cubin", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_ptx(
        module: bytes | str, *, name: str = "", symbol_mapping: dict | None = None
    ) -> ObjectCode:
        """Wrap PTX given as bytes or as a file path (JIT-compiled by the driver on load).

        Parameters, Returns and Raises are those of :meth:`from_cubin`.
        """
        return ObjectCode._init(module, "ptx", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_ltoir(
        module: bytes | str, *, name: str = "", symbol_mapping: dict | None = None
    ) -> ObjectCode:
        """Wrap LTO-IR given as bytes or as a file path (an input of :class:`Linker`).

        Parameters, Returns and Raises are those of :meth:`from_cubin`.
        """
        return ObjectCode._init(module, "ltoir", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_fatbin(
        module: bytes | str, *, name: str = "", symbol_mapping: dict | None = None
    ) -> ObjectCode:
        """Wrap a fatbin given as bytes or as a file path.

        Parameters, Returns and Raises are those of :meth:`from_cubin`.
        """
        return ObjectCode._init(module, "fatbin", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_object(
        module: bytes | str, *, name: str = "", symbol_mapping: dict | None = None
    ) -> ObjectCode:
        """Wrap a host object file with device code (an input of :class:`Linker`).

        Parameters, Returns and Raises are those of :meth:`from_cubin`.
        """
        return ObjectCode._init(module, "object", name=name, symbol_mapping=symbol_mapping)

    @staticmethod
    def from_library(
        module: bytes | str, *, name: str = "", symbol_mapping: dict | None = None
    ) -> ObjectCode:
        """Wrap a static library with device code (an input of :class:`Linker`).

        Parameters, Returns and Raises are those of :meth:`from_cubin`.
        """
        return ObjectCode._init(module, "library", name=name, symbol_mapping=symbol_mapping)

    # ------------------------------------------------------------------------------------------

    @property
    def code(self) -> bytes | str:
        """bytes or str: The code image, or the path it was created from."""
        return self._code

    @property
    def code_type(self) -> str:
        """str: One of ``"cubin"``, ``"ptx"``, ``"ltoir"``, ``"fatbin"``, ``"object"``, ``"library"``."""
        return self._code_type

    @property
    def name(self) -> str:
        """str: The name given at creation (the program's name after a compile)."""
        return self._name

    @property
    def symbol_mapping(self) -> dict:
        """dict: A copy of the map from name expressions to lowered (mangled) symbol names."""
        return dict(self._sym_map)

    @property
    def handle(self) -> Any:
        """cuda.bindings.driver.CUlibrary: The loaded library (loads it on first access; owned by this object).

        Raises
        ------
        CUDADriverNotFoundError
            No driver is present.
        CUDAError
            The driver cannot load the code.
        """
        return self._load()

    @property
    def is_closed(self) -> bool:
        """bool: Whether :meth:`close` was called."""
        return self._kernels is None

    def close(self) -> None:
        """Unload the library (kernels obtained from it become invalid); idempotent."""
        if self._kernels is None:
            return
        if self._holder is not None:
            library_unloaded(self)
            self._holder.release()
        self._holder = None
        self._kernels = None

    def __enter__(self) -> ObjectCode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        handle = 0 if self._holder is None else int(self._holder.value or 0)  # 0: not loaded yet
        return (
            f"<ObjectCode handle={handle:#x} code_type={self._code_type!r}>"  # cuda.core's format
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_object_code, (self._code, self._code_type, self._name, self._sym_map))

    def _load(self) -> Any:
        holder = self._holder
        if holder is not None:
            return holder.value
        if self._kernels is None:
            raise RuntimeError("ObjectCode has been closed")
        ensure_driver()
        code = self._code
        if isinstance(code, str):
            lib = handle_return(
                driver.cuLibraryLoadFromFile(code.encode(), [], [], 0, [], [], 0),
                "cuLibraryLoadFromFile",
            )
        else:
            if self._code_type == "ptx" and not code.endswith(b"\x00"):
                code = code + b"\x00"
            lib = handle_return(
                driver.cuLibraryLoadData(code, [], [], 0, [], [], 0), "cuLibraryLoadData"
            )
        self._holder = OwnedHandle("library", lib, driver.cuLibraryUnload)
        return lib

    def _kernel_names(self) -> list[str]:
        lib = self._load()
        try:
            count = handle_return(driver.cuLibraryGetKernelCount(lib), "cuLibraryGetKernelCount")
            kernels = handle_return(
                driver.cuLibraryEnumerateKernels(count, lib), "cuLibraryEnumerateKernels"
            )
            out = []
            for k in kernels:
                n = handle_return(driver.cuKernelGetName(k), "cuKernelGetName")
                out.append(n.decode() if isinstance(n, bytes) else str(n))
        except Exception:
            return []
        return sorted(out)

    def get_kernel(self, name: str | bytes) -> Kernel:
        """Return the kernel called ``name``, loading the code first if needed.

        Parameters
        ----------
        name : str or bytes
            A name expression given to :meth:`Program.compile` (mapped through
            :attr:`symbol_mapping`) or the kernel's symbol (an ``extern "C"`` name or a mangled
            name).

        Returns
        -------
        Kernel
            The same object for the same name while it is referenced (it keeps this ObjectCode
            alive).

        Raises
        ------
        RuntimeError
            The code type cannot be loaded (LTO-IR, object, library: link them first).
        CUDAError
            No kernel of that name; the message lists the kernels the code has.
        """
        kernels = self._kernels
        if kernels is not None:
            k = kernels.get(name)
            if k is not None:
                return k
        if self._code_type not in _LOADABLE:
            raise RuntimeError(
                f'Unsupported code type "{self._code_type}" (supported_code_types={_LOADABLE}): '
                f"kernels cannot be loaded from {self._code_type!r} code; link it with Linker "
                f"into one of {', '.join(_LOADABLE)} first"
            )
        lib = self._load()
        sym = self._sym_map.get(name, name)
        if isinstance(sym, str):
            sym = sym.encode()
        if not isinstance(sym, bytes):
            raise arg_error("name", "a str or bytes", name, exc=TypeError)
        err, handle = driver.cuLibraryGetKernel(lib, sym)
        if err != _CUresult.CUDA_SUCCESS:
            names = self._kernel_names()
            listing = ", ".join(names) if names else "none found"
            mapped = (
                f" (symbol {sym.decode(errors='replace')!r})"
                if sym != (name.encode() if isinstance(name, str) else name)
                else ""
            )
            raise make_error(
                err,
                "cuLibraryGetKernel",
                f"no kernel named {name!r}{mapped} in {self._name or 'this module'}; kernels: {listing}",
            )
        k = Kernel._from_handle(handle, self)
        kernel_loaded(handle, self)
        # The parameter types, read at the kernel's first packing plan: from the mangled symbol,
        # or from the PTX's .entry.
        k._signature = functools.partial(kernel_param_types, sym, self._code, self._code_type)
        # Messages name the kernel as the caller did ("scale<float>"), not by its mangled symbol.
        k._label = name if isinstance(name, str) else name.decode(errors="replace")
        if kernels is not None:
            kernels[name] = k
        return k

    def get_module(self) -> Any:
        """The ``CUmodule`` of the loaded library in the current context, for legacy driver APIs.

        The library (:attr:`handle`) is context-independent; ``cuLibraryGetModule`` gives the
        module it has in the context current on this thread (call ``Device.set_current()``
        first). The module belongs to the library: it stays valid while this ObjectCode is
        open and must not be unloaded by the caller.

        Returns
        -------
        cuda.bindings.driver.CUmodule

        Raises
        ------
        RuntimeError
            The code type cannot be loaded (LTO-IR, object, library), or this ObjectCode is
            closed.
        CUDAError
            No context is current, or the driver cannot load the code.
        """
        if self._code_type not in _LOADABLE:
            raise RuntimeError(
                f"{self._code_type!r} code cannot be loaded as a module; link it with Linker into "
                f"one of {', '.join(_LOADABLE)} first"
            )
        return handle_return(driver.cuLibraryGetModule(self._load()), "cuLibraryGetModule")


def _rebuild_object_code(code: Any, code_type: str, name: str, sym_map: dict) -> ObjectCode:
    return ObjectCode._init(code, code_type, name=name, symbol_mapping=sym_map)
