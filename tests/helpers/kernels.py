"""Small kernels and raw device memory for GPU-tier tests of devices, streams and events.

The kernels are compiled with ``cuda_core.Program`` where it exists, else with NVRTC directly,
and launched with ``cuLaunchKernel`` so that tests of streams and events depend on nothing but
the objects under test. Call everything here with the device's context current
(``Device().set_current()``).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from cuda.bindings import driver, nvrtc

from cuda_core._utils import handle_return

# A kernel that sleeps ``ns`` nanoseconds of wall time (globaltimer), one that writes a flag
# after sleeping, and one that spins until it sees the flag (or gives up after a timeout) and
# records how many times it had to poll.
TIMING_SRC = r"""
__device__ __forceinline__ unsigned long long gtime()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void sleep_ns(unsigned long long ns)
{
    unsigned long long t0 = gtime();
    while (gtime() - t0 < ns) {
        __nanosleep(2000);
    }
}

extern "C" __global__ void set_flag_after(volatile int* flag, unsigned long long ns)
{
    unsigned long long t0 = gtime();
    while (gtime() - t0 < ns) {
        __nanosleep(2000);
    }
    __threadfence_system();
    *flag = 1;
    __threadfence_system();
}

extern "C" __global__ void spin_on_flag(volatile int* flag, unsigned long long* out,
                                        unsigned long long timeout_ns)
{
    unsigned long long t0 = gtime();
    unsigned long long polls = 0;
    while (*flag == 0 && gtime() - t0 < timeout_ns) {
        ++polls;
        __nanosleep(1000);
    }
    out[0] = polls;
    out[1] = (unsigned long long)(*flag);
}

extern "C" __global__ void fill_i32(int* out, int n, int value)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = value;
    }
}
"""


class RawKernel:
    """A compiled kernel launched through ``cuLaunchKernel`` with ctypes arguments."""

    def __init__(self, handle: Any, keepalive: Any) -> None:
        # Load the kernel into the current context now: with lazy loading, a first launch
        # would load it then, and loading waits for running kernels, which defeats tests
        # that run two kernels at once (one spinning on the other's flag).
        kernel = driver.CUkernel(int(handle))
        func = handle_return(driver.cuKernelGetFunction(kernel), "cuKernelGetFunction")
        handle_return(driver.cuFuncLoad(func), "cuFuncLoad")
        self._func = func
        self._keepalive = keepalive  # ObjectCode or CUlibrary that owns the code

    def launch(self, stream: Any, grid: int, block: int, *args: Any) -> None:
        """Launch on ``stream`` (a cuda_core Stream) with ctypes scalar arguments."""
        params = (ctypes.c_void_p * max(1, len(args)))(*(ctypes.addressof(a) for a in args))
        handle_return(
            driver.cuLaunchKernel(
                self._func, grid, 1, 1, block, 1, 1, 0, stream.handle, ctypes.addressof(params), 0
            ),
            "cuLaunchKernel",
        )


_cache: dict[tuple[str, str, str, int], RawKernel] = {}


def compile_kernel(src: str, name: str, arch: str) -> RawKernel:
    """Compile ``src`` for ``sm_<arch>`` and return its ``extern "C"`` kernel ``name``."""
    ctx = int(handle_return(driver.cuCtxGetCurrent(), "cuCtxGetCurrent"))
    key = (src, name, arch, ctx)  # a loaded function belongs to one context
    if key in _cache:
        return _cache[key]
    import cuda_core

    program_cls = getattr(cuda_core, "Program", None)
    if program_cls is not None:
        prog = program_cls(
            src, code_type="c++", options=cuda_core.ProgramOptions(arch=f"sm_{arch}")
        )
        obj = prog.compile("cubin")
        kernel = obj.get_kernel(name)
        raw = RawKernel(kernel._handle, (obj, kernel))
    else:
        cubin = nvrtc_cubin(src, arch)
        lib = handle_return(
            driver.cuLibraryLoadData(cubin, None, None, 0, None, None, 0), "cuLibraryLoadData"
        )
        kern = handle_return(driver.cuLibraryGetKernel(lib, name.encode()), "cuLibraryGetKernel")
        raw = RawKernel(kern, lib)
    _cache[key] = raw
    return raw


def nvrtc_cubin(src: str, arch: str) -> bytes:
    """Compile ``src`` to a cubin for ``sm_<arch>`` with NVRTC directly."""
    prog = handle_return(
        nvrtc.nvrtcCreateProgram(src.encode(), b"test.cu", 0, [], []), "nvrtcCreateProgram"
    )
    try:
        opts = [f"--gpu-architecture=sm_{arch}".encode()]
        err = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = handle_return(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
            log = b" " * size
            handle_return(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
            raise RuntimeError(f"NVRTC failed: {log.decode(errors='replace')}")
        size = handle_return(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        handle_return(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def timing_kernel(name: str, arch: str) -> RawKernel:
    """One of the kernels of :data:`TIMING_SRC`."""
    return compile_kernel(TIMING_SRC, name, arch)


class DeviceMemory:
    """``nbytes`` of device memory from ``cuMemAlloc`` (zeroed), freed by ``free()``/``with``."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = int(handle_return(driver.cuMemAlloc(nbytes), "cuMemAlloc"))
        handle_return(driver.cuMemsetD8(self.ptr, 0, nbytes), "cuMemsetD8")

    def arg(self) -> ctypes.c_uint64:
        """The pointer as a kernel argument."""
        return ctypes.c_uint64(self.ptr)

    def read(self, dtype: Any) -> np.ndarray:
        """Copy the whole allocation to the host (synchronous) as an array of ``dtype``."""
        host = np.zeros(self.nbytes // np.dtype(dtype).itemsize, dtype=dtype)
        handle_return(driver.cuMemcpyDtoH(host.ctypes.data, self.ptr, host.nbytes), "cuMemcpyDtoH")
        return host

    def free(self) -> None:
        if self.ptr:
            handle_return(driver.cuMemFree(self.ptr), "cuMemFree")
            self.ptr = 0

    def __enter__(self) -> DeviceMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()


def current_context_int() -> int:
    """The address of the calling thread's current context (0 when none)."""
    return int(handle_return(driver.cuCtxGetCurrent(), "cuCtxGetCurrent"))
