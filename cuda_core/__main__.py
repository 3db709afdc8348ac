"""``python -m cuda_core``: report the CUDA environment and check that cuda_core works.

The report (also :func:`cuda_core.show_config`) names Python, ``cuda-bindings``, the
handle-layer backend (and how to rebuild it where that helps), the NVIDIA driver (or says that
none was found) and whether it suits ``cuda-bindings``, every GPU with its key properties,
what NVML says of each GPU (clocks, memory, power, temperature, NVLink) and the peer-to-peer
matrix between them (or one line saying why NVML is not available), the NVRTC, nvJitLink and
libNVVM versions (or the install command for a missing one), the
compile cache (directory, entries, size) and the NumPy, CuPy and PyTorch versions with whether
their CUDA matches the driver. The self-check then compiles a small kernel; with a GPU it also
launches it and verifies the result, without one it compiles for ``--arch`` and says that
launching needs a GPU. ``--json`` prints the same as one JSON object; ``--clear-cache``
empties the compile cache on disk. The exit code is 0 when the self-check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from collections.abc import Callable
from typing import Any, cast

import cuda_core

from ._compat import driver
from ._compile._options import normalize_arch
from ._report import _environment as _config
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
            kern = handle_return(
                driver.cuLibraryGetKernel(library, _KERNEL_NAME.encode()), "cuLibraryGetKernel"
            )
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
                    (_N + 127) // 128,
                    1,
                    1,
                    128,
                    1,
                    1,
                    0,
                    stream.handle,
                    ctypes.addressof(params),
                    0,
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


def _self_check(n_gpus: int, arch: str, out: Callable[[str], None]) -> bool:
    try:
        if n_gpus:
            return _launch_and_verify(out)

        arch = normalize_arch(arch)  # "90" -> "sm_90"
        cubin, how = _compile(arch)
        if not cubin.startswith(b"\x7fELF"):
            out(f"  FAILED: NVRTC returned {len(cubin)} bytes that are not a cubin")
            return False
        out(f"  compiled the self-check kernel for {arch} with {how} ({len(cubin)} bytes of cubin)")
        out("  launching it needs a GPU with an NVIDIA driver; none was found, so it was not run")
        return True
    except Exception as exc:  # report every failure as a failed check, with its reason
        out(f"  FAILED: {type(exc).__name__}: {exc}")
        return False


def main(argv: list[str] | None = None) -> int:
    """Run the report and the self-check; return the exit code.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 when the self-check passes (or the cache was cleared), 1 when it fails.
    """
    parser = argparse.ArgumentParser(
        prog="python -m cuda_core", description="Report the CUDA environment and check cuda_core."
    )
    parser.add_argument(
        "--arch",
        default="sm_90",
        help="architecture to compile for when no GPU is present (default: sm_90; 90 means sm_90)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report and the check as one JSON object"
    )
    parser.add_argument(
        "--clear-cache", action="store_true", help="empty the compile cache on disk and exit"
    )
    args = parser.parse_args(argv)
    if args.clear_cache:
        before = _config.clear_cache()
        if not before["enabled"]:
            print("the compile cache on disk is off (CUDA_CORE_CACHE=0): nothing to clear")
        else:
            print(
                f"cleared {before['entries']} entries ({_config._size(before['bytes'])}) from {before['path']}"
            )
        return 0
    info = _config.collect()
    lines: list[str] = []
    out: Callable[[str], None] = lines.append if args.json else print
    if not args.json:
        for line in _config.format_report(info):
            out(line)
    out("Self-check:")
    ok = _self_check(len([g for g in info["gpus"] if "error" not in g]), args.arch, out)
    out("Self-check passed." if ok else "Self-check FAILED.")
    if args.json:
        info["self_check"] = {"passed": ok, "lines": [line.strip() for line in lines[1:-1]]}
        print(json.dumps(info, indent=2, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
