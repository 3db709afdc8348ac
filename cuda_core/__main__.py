"""``python -m cuda_core``: report the CUDA environment and check that cuda_core works.

The report names Python, ``cuda-bindings``, the NVIDIA driver (or says that none was found),
every GPU with its name, compute capability and memory, and the NVRTC, nvJitLink and libNVVM
versions. The self-check then compiles a small kernel; with a GPU it also launches it and
verifies the result, without one it compiles for ``--arch`` and says that launching needs a
GPU. The exit code is 0 when the self-check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ctypes
import platform
import sys
from collections.abc import Callable
from typing import Any, cast

from cuda.bindings import driver

import cuda_core

from . import _backend, system
from ._errors import CUDADriverNotFoundError, CUDAError
from ._utils import handle_return

__all__: list[str] = []  # a command, not an API

_KERNEL_NAME = "cuda_core_selfcheck"
_KERNEL = r"""
extern "C" __global__ void cuda_core_selfcheck(int* out, int n, int a, int b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = a * i + b;
    }
}
"""
_N = 1000
_A, _B = 3, 7


def _version(fn: Callable[[], tuple[int, ...]]) -> str:
    try:
        return ".".join(str(p) for p in fn())
    except Exception as exc:  # a missing library is reported, not fatal
        return f"not found ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"


def _report(out: Callable[[str], None]) -> int:
    """Print the environment report; return the number of GPUs (0 without a driver)."""
    out(f"cuda_core {cuda_core.__version__}")
    out(f"Python {platform.python_version()} ({sys.executable}, {platform.machine()})")
    out(f"cuda-bindings {system.get_bindings_version()}")
    if _backend.NATIVE:
        out("handle layer: native backend (cuda_core._native)")
    else:
        out(f"handle layer: pure Python ({_backend.REASON})")
    try:
        import cuda.pathfinder as pathfinder

        out(f"cuda-pathfinder {getattr(pathfinder, '__version__', '?')}")
    except ImportError:
        out("cuda-pathfinder not installed")
    n_gpus = 0
    try:
        major, minor, *_ = system.get_driver_version_full()
        line = f"NVIDIA driver: supports CUDA {major}.{minor}"
        try:
            km = system.get_driver_version_full(kernel_mode=True)
            line += f" (driver {'.'.join(str(p) for p in km)})"
        except CUDAError:
            pass
        out(line)
        n_gpus = system.get_num_devices()
    except CUDADriverNotFoundError as exc:
        out(f"NVIDIA driver: no NVIDIA driver found ({exc.explanation})")
    except CUDAError as exc:
        out(f"NVIDIA driver: present, but {exc}")
    out(f"GPUs: {n_gpus}")
    for i in range(n_gpus):
        out("  " + _describe_gpu(i))
    out(f"NVRTC {_version(system.get_nvrtc_version)}")
    out(f"nvJitLink {_version(system.get_nvjitlink_version)}")
    out(f"libNVVM {_version(system.get_nvvm_version)}")
    return n_gpus


def _describe_gpu(ordinal: int) -> str:
    dev = handle_return(driver.cuDeviceGet(ordinal), "cuDeviceGet")
    raw = handle_return(driver.cuDeviceGetName(256, dev), "cuDeviceGetName")
    name = raw.split(b"\0", 1)[0].decode(errors="replace")
    attr = driver.CUdevice_attribute
    major = handle_return(
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute"
    )
    minor = handle_return(
        driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute"
    )
    mem = int(handle_return(driver.cuDeviceTotalMem(dev), "cuDeviceTotalMem"))
    return f"[{ordinal}] {name}, compute capability {major}.{minor}, {mem / 2**30:.1f} GiB"


def _compile(arch: str) -> tuple[bytes, str]:
    """Compile the self-check kernel to a cubin for ``arch`` (e.g. ``"sm_90"``) with :class:`Program`.

    Returns the cubin and what compiled it.
    """
    prog = cuda_core.Program(_KERNEL, code_type="c++", options=cuda_core.ProgramOptions(arch=arch))
    cubin = cast(bytes, prog.compile("cubin").code)  # a compiled image, never a path
    return (cubin, "cuda_core.Program")


def _launch_and_verify(out: Callable[[str], None]) -> bool:
    import numpy as np

    dev = cuda_core.Device(0)
    dev.set_current()
    arch = f"sm_{dev.arch}"
    cubin, how = _compile(arch)
    out(f"  compiled the self-check kernel for {arch} with {how} ({len(cubin)} bytes of cubin)")
    stream = dev.create_stream()
    nbytes = _N * 4
    dptr = handle_return(driver.cuMemAlloc(nbytes), "cuMemAlloc")
    library = None
    try:
        launch = getattr(cuda_core, "launch", None)
        if launch is not None and hasattr(cuda_core, "ObjectCode"):
            kernel = cuda_core.ObjectCode.from_cubin(cubin).get_kernel(_KERNEL_NAME)
            config = cuda_core.LaunchConfig(grid=(_N + 127) // 128, block=128)
            launch(stream, config, kernel, int(dptr), np.int32(_N), np.int32(_A), np.int32(_B))
            launched_by = "cuda_core.launch"
        else:
            library = handle_return(
                driver.cuLibraryLoadData(cubin, None, None, 0, None, None, 0), "cuLibraryLoadData"
            )
            kern = handle_return(driver.cuLibraryGetKernel(library, _KERNEL_NAME.encode()), "cuLibraryGetKernel")
            values: list[Any] = [
                ctypes.c_uint64(int(dptr)),
                ctypes.c_int(_N),
                ctypes.c_int(_A),
                ctypes.c_int(_B),
            ]
            params = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
            handle_return(
                driver.cuLaunchKernel(
                    driver.CUfunction(int(kern)),
                    (_N + 127) // 128, 1, 1, 128, 1, 1, 0,
                    stream.handle, ctypes.addressof(params), 0,
                ),
                "cuLaunchKernel",
            )
            launched_by = "cuLaunchKernel"
        stream.sync()
        host = np.zeros(_N, dtype=np.int32)
        handle_return(driver.cuMemcpyDtoH(host.ctypes.data, dptr, nbytes), "cuMemcpyDtoH")
    finally:
        handle_return(driver.cuMemFree(dptr), "cuMemFree")
        if library is not None:
            handle_return(driver.cuLibraryUnload(library), "cuLibraryUnload")
        stream.close()
    expected = _A * np.arange(_N, dtype=np.int32) + _B
    if not np.array_equal(host, expected):
        bad = int(np.flatnonzero(host != expected)[0])
        out(f"  FAILED: element {bad} is {host[bad]}, expected {expected[bad]}")
        return False
    out(f"  launched it on {dev.name} with {launched_by} and verified {_N} results")
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the report and the self-check; return the exit code.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 when the self-check passes, 1 when it fails.
    """
    parser = argparse.ArgumentParser(
        prog="python -m cuda_core", description="Report the CUDA environment and check cuda_core."
    )
    parser.add_argument(
        "--arch",
        default="sm_90",
        help="architecture to compile for when no GPU is present (default: sm_90)",
    )
    args = parser.parse_args(argv)
    out = print
    n_gpus = _report(out)
    out("Self-check:")
    try:
        if n_gpus:
            ok = _launch_and_verify(out)
        else:
            from ._program_options import normalize_arch

            args.arch = normalize_arch(args.arch)  # "90" -> "sm_90"
            cubin, how = _compile(args.arch)
            if not cubin.startswith(b"\x7fELF"):
                out(f"  FAILED: NVRTC returned {len(cubin)} bytes that are not a cubin")
                ok = False
            else:
                out(f"  compiled the self-check kernel for {args.arch} with {how} ({len(cubin)} bytes of cubin)")
                out("  launching it needs a GPU with an NVIDIA driver; none was found, so it was not run")
                ok = True
    except Exception as exc:  # report every failure as a failed check, with its reason
        out(f"  FAILED: {type(exc).__name__}: {exc}")
        ok = False
    out("Self-check passed." if ok else "Self-check FAILED.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
