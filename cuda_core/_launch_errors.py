"""Why a kernel launch failed: the driver's status, with the numbers that explain its usual
causes (``launch()`` and ``PreparedLaunch`` raise what :func:`explain_launch_failure` builds)."""

from __future__ import annotations

from typing import Any

from ._compat import driver
from ._errors import CUDAError, _CooperativeLaunchTooLargeError
from ._utils import handle_return, make_error

__all__: list[str] = []  # private module

_CUresult = driver.CUresult


def explain_launch_failure(err: Any, dev: Any, config: Any, kernel: Any, label: str) -> CUDAError:
    """The :class:`CUDAError` of a launch the driver refused with status ``err``: what was
    launched, and where the driver's status has a usual cause that can be checked (a cooperative
    grid too large, too many threads per block, too much dynamic shared memory) the numbers that
    show it (``dev``: the stream's device, or ``None`` where it is unknown)."""
    code = int(err)
    extra = f"launching {label} with {config!r}"
    try:
        if dev is None:
            raise LookupError("the stream's device is unknown")
        with dev._scope():
            func = handle_return(driver.cuKernelGetFunction(kernel._handle), "cuKernelGetFunction")
            if code == int(_CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE):
                threads = config.block[0] * config.block[1] * config.block[2]
                per_sm = handle_return(
                    driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                        func, threads, config.shmem_size
                    ),
                    "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                )
                sms = dev.properties.multiprocessor_count
                g = config.grid_blocks
                extra = (
                    f"a cooperative grid of {g[0] * g[1] * g[2]} blocks cannot be co-resident: "
                    f"{label} fits {per_sm} blocks of {threads} threads per SM x {sms} SMs = "
                    f"{per_sm * sms} blocks on {dev.name}"
                )
            elif code == int(_CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES):
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
                most = handle_return(driver.cuFuncGetAttribute(attr, func), "cuFuncGetAttribute")
                threads = config.block[0] * config.block[1] * config.block[2]
                extra = f"block {config.block} has {threads} threads; {label} can run at most {most} per block"
            elif code == int(_CUresult.CUDA_ERROR_INVALID_VALUE) and config.shmem_size > 48 * 1024:
                attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                most = handle_return(driver.cuFuncGetAttribute(attr, func), "cuFuncGetAttribute")
                if config.shmem_size > most:
                    extra = (
                        f"shmem_size {config.shmem_size} is more than the {most} bytes of dynamic shared "
                        f"memory {label} allows; raise its CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES "
                        "attribute first"
                    )
    except Exception:  # the details are a bonus; report the launch failure itself
        pass
    error = make_error(err, "cuLaunchKernelEx", extra)
    if code == int(_CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE):
        error.__class__ = _CooperativeLaunchTooLargeError  # cuda.core raises ValueError for it
    return error
