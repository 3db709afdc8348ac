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
import json
import sys
from collections.abc import Callable
from typing import Any, cast

import cuda_core

from ._compat import driver
from ._compile._options import normalize_arch
from ._report import _environment as _config
from ._report._text import format_report, section_verdicts, size, verdict, wrap
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


# The same kernel as PTX, written by hand (ISA 7.0, so any driver of CUDA 11 or newer JITs it for
# its GPU): the check of a base install, which has no NVRTC, still loads and launches a kernel.
_PTX = r"""
.version 7.0
.target sm_52
.address_size 64

.visible .entry cuda_core_selfcheck(
    .param .u64 out_param,
    .param .u32 n_param,
    .param .u32 a_param,
    .param .u32 b_param
)
{
    .reg .pred %p;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;

    ld.param.u64 %rd1, [out_param];
    ld.param.u32 %r1, [n_param];
    ld.param.u32 %r2, [a_param];
    ld.param.u32 %r3, [b_param];
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.s32 %r4, %r4, %r5, %r6;
    setp.ge.s32 %p, %r4, %r1;
    @%p bra DONE;
    mad.lo.s32 %r7, %r2, %r4, %r3;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r4, 4;
    add.s64 %rd2, %rd2, %rd3;
    st.global.u32 [%rd2], %r7;
DONE:
    ret;
}
"""


def _compile(arch: str) -> tuple[bytes, str]:
    """Compile the self-check kernel to a cubin for ``arch`` (e.g. ``"sm_90"``) with :class:`Program`.

    Returns the cubin and what compiled it.
    """
    prog = cuda_core.Program(_KERNEL, code_type="c++", options=cuda_core.ProgramOptions(arch=arch))
    cubin = cast(bytes, prog.compile("cubin").code)  # a compiled image, never a path
    return (cubin, "cuda_core.Program")


def _launch_and_verify(can_compile: bool, out: Callable[[str], None]) -> bool:
    import numpy as np

    dev = cuda_core.Device(0)
    dev.set_current()
    arch = f"sm_{dev.arch}"
    if can_compile:
        cubin, how = _compile(arch)
        out(f"compiled the self-check kernel for {arch} with {how} ({len(cubin)} bytes of cubin)")
        code = cuda_core.ObjectCode.from_cubin(cubin)
    else:
        out("no compiler on a base install: the kernel is loaded as PTX, which the driver compiles")
        code = cuda_core.ObjectCode.from_ptx(_PTX.encode())  # a str would be a path
    kernel = code.get_kernel(_KERNEL_NAME)
    stream = dev.create_stream()
    nbytes = _N * 4
    dptr = handle_return(driver.cuMemAlloc(nbytes), "cuMemAlloc")
    try:
        config = cuda_core.LaunchConfig(grid=(_N + 127) // 128, block=128)
        cuda_core.launch(
            stream, config, kernel, int(dptr), np.int32(_N), np.int32(_A), np.int32(_B)
        )
        stream.sync()
        host = np.zeros(_N, dtype=np.int32)
        handle_return(driver.cuMemcpyDtoH(host.ctypes.data, dptr, nbytes), "cuMemcpyDtoH")
    finally:
        handle_return(driver.cuMemFree(dptr), "cuMemFree")
        stream.close()
    expected = _A * np.arange(_N, dtype=np.int32) + _B
    if not np.array_equal(host, expected):
        bad = int(np.flatnonzero(host != expected)[0])
        out(f"element {bad} is {host[bad]}, expected {expected[bad]}")
        return False
    out(f"launched it on {dev.name} with cuda_core.launch and verified {_N} results")
    return True


def _self_check(info: dict[str, Any], arch: str, out: Callable[[str], None]) -> bool | None:
    """Compile (where a compiler is installed) and, with a GPU, launch and verify the kernel.

    Returns ``True`` (passed), ``False`` (failed, the reason said) or ``None`` (nothing could be
    checked: a base install without a GPU)."""
    can_compile = info["compilers"]["nvrtc"]["version"] is not None
    try:
        if any("error" not in g for g in info["gpus"]):
            return _launch_and_verify(can_compile, out)
        if not can_compile:
            out(
                "no usable NVRTC (see Install) and no GPU: nothing to compile and nothing to launch"
            )
            return None
        cubin, how = _compile(arch)
        if not cubin.startswith(b"\x7fELF"):
            out(f"NVRTC returned {len(cubin)} bytes that are not a cubin")
            return False
        out(f"compiled the self-check kernel for {arch} with {how} ({len(cubin)} bytes of cubin)")
        out("launching it needs a GPU with an NVIDIA driver; none was found, so it was not run")
        return True
    except Exception as exc:  # report every failure as a failed check, with its reason
        out(f"{type(exc).__name__}: {exc}")
        return False


def _arch(text: str) -> str:
    try:
        return normalize_arch(text)  # "90" -> "sm_90"
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    """Run the report and the self-check; return the exit code.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 when the setup is one the README documents and the self-check did not fail (or the
        cache was cleared), 1 otherwise; 2 for a bad argument (refused before anything runs).
    """
    parser = argparse.ArgumentParser(
        prog="python -m cuda_core", description="Report the CUDA environment and check cuda_core."
    )
    parser.add_argument(
        "--arch",
        default="sm_90",
        type=_arch,
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
                f"cleared {before['entries']} entries ({size(before['bytes'])}) from {before['path']}"
            )
        return 0
    info = _config.collect()
    if not args.json:
        for line in format_report(info):
            print(line)
        print("\nSelf-check")
    lines: list[str] = []

    def out(line: str) -> None:
        lines.append(line)
        if not args.json:
            print("\n".join(wrap(line, 2, 4)), flush=True)

    ok = _self_check(info, args.arch, out)
    verdicts = section_verdicts(info)
    broken = [title for title, (good, _) in verdicts.items() if good is False]
    if ok is False:
        broken.append("Self-check")
    if args.json:
        info["self_check"] = {"passed": ok is not False, "ran": ok is not None, "lines": lines}
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        print(verdict(ok, "passed" if ok else "not run" if ok is None else "the kernel's check"))
        print()
        print(f"FAILED in: {', '.join(broken)}" if broken else "OK: a setup the README documents")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
