"""StridedMemoryView: one kernel entry point for NumPy (host) and CuPy/PyTorch (device) arrays.

Self-checking: exits non-zero on a wrong result. The device part needs a GPU and CuPy.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import need_gpu, need_module, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch, utils

StridedMemoryView = utils.StridedMemoryView
args_viewable_as_strided_memory = utils.args_viewable_as_strided_memory

CODE = r"""
extern "C" __global__ void scale_strided(float* x, long long n, long long stride, float a)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) x[i * stride] *= a;
}
"""


@args_viewable_as_strided_memory((0,))
def scale(arr, factor, stream, kernel):
    """Scale a 1-D float32 array in place, on the host or the device, whichever it lives on."""
    view = arr.view(int(stream.handle) if stream is not None else -1)
    if view.dtype != np.float32 or len(view.shape) != 1:
        raise TypeError(f"need a 1-D float32 array (got {view.dtype}, shape {view.shape})")
    stride = 1 if view.strides is None else view.strides[0]
    n = view.shape[0]
    if not view.is_device_accessible:  # host: do it with NumPy on the same memory
        host = np.from_dlpack(view)
        host *= factor
        return
    launch(
        stream,
        LaunchConfig(grid=(n + 255) // 256, block=256),
        kernel,
        view.ptr,
        np.int64(n),
        np.int64(stride),
        np.float32(factor),
    )


def main() -> int:
    a = np.arange(10, dtype=np.float32)
    scale(a[::2], 3.0, None, None)
    expect = np.arange(10, dtype=np.float32)
    expect[::2] *= 3
    if not np.array_equal(a, expect):
        print("FAIL (host)", a, file=sys.stderr)
        return 1
    v = StridedMemoryView.from_dlpack(a[1::3], -1)
    print("host view:", v)
    if v.ptr != a[1:].ctypes.data or v.strides != (3,):
        print("FAIL (host view)", file=sys.stderr)
        return 1
    print("host part OK")
    cp = need_module("cupy")
    dev = need_gpu()
    dev.set_current()
    s = dev.create_stream()
    kernel = (
        Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        .compile("cubin")
        .get_kernel("scale_strided")
    )
    d = cp.arange(12, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    scale(d[::3], 2.0, s, kernel)
    s.sync()
    want = np.arange(12, dtype=np.float32)
    want[::3] *= 2
    if not np.array_equal(cp.asnumpy(d), want):
        print("FAIL (device)", cp.asnumpy(d), file=sys.stderr)
        return 1
    view = StridedMemoryView.from_dlpack(d[::3], int(s.handle))
    back = cp.from_dlpack(view)  # a view exports itself again, without copying
    if back.data.ptr != d.data.ptr or not cp.array_equal(back, d[::3]):
        print("FAIL (re-export)", file=sys.stderr)
        return 1
    s.close()
    print("OK")
    return 0


if __name__ == "__main__":
    run_main(main)
