"""The whole ``cuda_core`` package in this process, its handle layer bound to the stub driver.

For the CPU-tier launch tests (``tests/test_launcher_fastpath.py``, whose cases run in a
subprocess) and ``benchmarks/bench_stub_launch.py``: both need real ``Stream``,
``LaunchConfig``, ``Kernel`` and ``Buffer`` objects going through ``launch()`` and
``PreparedLaunch`` to a ``cuLaunchKernelEx`` that does nothing. Use it in a process of its own:
it binds the backend (a process-wide table) to the stub and marks the driver started.

The objects are built the way the package builds them, minus the driver queries a machine
without a GPU cannot answer: a stream is a stub stream wrapped as ``Stream.from_handle`` wraps
one (on device 0), a config has its native configuration for that stream built as its first
launch builds it (the device check, which needs a ``Device``, left out), a kernel is
``Kernel.from_handle`` of a made-up address with the parameter layout given (what
``cuKernelGetParamInfo`` reports on a GPU), a buffer is ``Buffer.from_handle`` of a made-up
device address. The stub checks every stream it is handed.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["StubPackage"]


class StubPackage:
    """``cuda_core`` imported and bound to the stub library at ``stub_so``.

    ``native_so``: a build of the native module to use (put in ``sys.modules`` before
    ``cuda_core`` is imported, which must not have happened yet); ``None``: the backend
    ``cuda_core`` picks itself (``CUDA_CORE_BACKEND`` applies).
    """

    def __init__(self, stub_so: str, native_so: str | None = None) -> None:
        name = "cuda_core._handles._native"
        if native_so is not None:
            if "cuda_core" in sys.modules:
                raise RuntimeError(
                    "StubPackage(native_so=...) must run before cuda_core is imported"
                )
            spec = importlib.util.spec_from_file_location(name, native_so)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules[name] = module
        import cuda_core
        from cuda_core._handles import _backend, _contexts, _driver
        from cuda_core._utils import make_error

        self.cuda_core = cuda_core
        self.native = _backend.NATIVE
        self.backend: Any = _backend.backend
        lib = self.lib = ctypes.CDLL(stub_so)
        lib.stub_ctx.restype = ctypes.c_void_p
        lib.stub_set_current.argtypes = [ctypes.c_void_p]
        lib.stub_count.argtypes = [ctypes.c_char_p]
        lib.stub_fail.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        lib.stub_expect_params.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint)]
        lib.stub_reset()
        lib.stub_set_current(lib.stub_ctx())
        names = self.backend.entry_point_names() if self.native else ("cuLaunchKernelEx",)
        self.launch_ex = ctypes.cast(lib.cuLaunchKernelEx, ctypes.c_void_p).value
        addresses = {n: ctypes.cast(getattr(lib, n), ctypes.c_void_p).value for n in names}
        self.backend.bind(addresses, make_error, _contexts.context_handle)
        _driver._driver_ready = True  # the stub stands for an initialised driver
        self._keep: list[Any] = []

    # -- the stub's record -----------------------------------------------------------------

    def count(self, api: str) -> int:
        """How many times the stub's ``api`` was called since it was reset."""
        return int(self.lib.stub_count(api.encode()))

    def fail(self, api: str, status: int, times: int = 1) -> None:
        """Make the next ``times`` calls of ``api`` return ``status``."""
        assert self.lib.stub_fail(api.encode(), status, times) == 0, api

    @property
    def errors(self) -> int:
        """Misuses the stub saw (a stale or destroyed handle, ...)."""
        return int(ctypes.c_int.in_dll(self.lib, "stub_errors").value)

    def expect_params(self, sizes: Sequence[int]) -> None:
        """From now on the stub copies the bytes of each launch's parameters (``sizes[i]``
        bytes of parameter ``i``); :meth:`params` returns them."""
        arr = (ctypes.c_uint * max(len(sizes), 1))(*sizes)
        self.lib.stub_expect_params(len(sizes), arr)

    def params(self) -> bytes:
        """The parameter bytes of the last launch (see :meth:`expect_params`)."""
        n = ctypes.c_int.in_dll(self.lib, "stub_params_len").value
        return bytes((ctypes.c_ubyte * n).in_dll(self.lib, "stub_params"))

    # -- cuda_core objects on the stub -------------------------------------------------------

    def stream_address(self) -> int:
        """A new stub stream (never destroyed: the stub keeps every handle)."""
        h = ctypes.c_void_p()
        assert self.lib.cuStreamCreate(ctypes.byref(h), 1) == 0
        return int(h.value or 0)

    def stream(self) -> Any:
        """A ``Stream`` over a new stub stream, on device 0."""
        s = self.cuda_core.Stream.from_handle(self.stream_address())
        s._device_id = 0
        return s

    def config(self, stream: Any, **kwargs: Any) -> Any:
        """``LaunchConfig(**kwargs)`` (default grid=1, block=1) with its native configuration
        for ``stream`` built, as its first launch on it builds it."""
        kwargs.setdefault("grid", 1)
        kwargs.setdefault("block", 1)
        cfg = self.cuda_core.LaunchConfig(**kwargs)
        cfg._native[stream._h] = self.backend.LaunchConfigHandle(
            stream._h,
            cfg.grid_blocks,
            cfg.block,
            cfg.shmem_size,
            cfg.cluster,
            cfg.is_cooperative,
            cfg.programmatic_stream_serialization,
        )
        cfg._checked.add(0)
        return cfg

    def kernel(self, layout: Sequence[tuple[int, int]] | None, address: int = 0xC0DE00) -> Any:
        """A ``Kernel`` at a made-up address whose parameters are ``layout`` ((offset, size)
        each; ``None``: the driver could not tell)."""
        k = self.cuda_core.Kernel.from_handle(address)
        k._params = None if layout is None else tuple(layout)
        return k

    def buffer(self, address: int = 0x7F0000001000, size: int = 1024) -> Any:
        """A ``Buffer`` over made-up device memory (never freed)."""
        return self.cuda_core.Buffer.from_handle(address, size)


def c_layout(sizes: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The (offset, size) of parameters of these sizes, each aligned to its size (up to 8), as
    a C compiler lays out scalar parameters."""
    out, pos = [], 0
    for size in sizes:
        align = min(size, 8)
        pos = (pos + align - 1) // align * align
        out.append((pos, size))
        pos += size
    return tuple(out)
