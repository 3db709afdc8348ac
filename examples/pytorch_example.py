"""PyTorch interop: launch a cuda_core kernel on PyTorch tensors, on PyTorch's own stream.

Self-checking: exits non-zero on a wrong result. Needs a GPU and PyTorch.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import need_gpu, need_module, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch, utils

StridedMemoryView = utils.StridedMemoryView

CODE = r"""
template <typename T>
__global__ void saxpy(T a, const T* x, const T* y, T* out, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""


def main() -> int:
    torch = need_module("torch")
    dev = need_gpu()
    if not torch.cuda.is_available():
        print("FAILED: a GPU is present but this PyTorch cannot use it (a CPU-only build?)")
        return 1
    dev.set_current()
    prog = Program(
        CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}", std="c++17")
    )
    mod = prog.compile("cubin", name_expressions=("saxpy<float>",))
    kernel = mod.get_kernel("saxpy<float>")

    ts = torch.cuda.Stream()  # PyTorch's stream, which our work below is ordered on
    n = 1 << 16
    with torch.cuda.stream(ts):
        x = torch.rand(n, device="cuda")
        y = torch.rand(n, device="cuda")
        out = torch.empty_like(x)
    # Views check dtype/contiguity and give pointers; PyTorch orders its work before ours.
    s = dev.create_stream(ts)  # our Stream borrowing PyTorch's
    vx = StridedMemoryView.from_dlpack(x, int(s.handle))
    # Strides are in elements, as the producer gave them: PyTorch gives (1,) for a contiguous
    # 1-d tensor (None would mean a producer that gave no strides, which is C-contiguous too).
    if (
        vx.dtype != np.float32
        or vx.shape != (n,)
        or vx.strides not in (None, (1,))
        or vx.ptr != x.data_ptr()
    ):
        print(f"FAIL: unexpected view of x: {vx}", file=sys.stderr)
        return 1
    # A strided tensor reports its strides in elements, not bytes.
    vs = StridedMemoryView.from_dlpack(x[::4], int(s.handle))
    if vs.shape != (n // 4,) or vs.strides != (4,) or vs.ptr != x.data_ptr():
        print(f"FAIL: unexpected view of x[::4]: {vs}", file=sys.stderr)
        return 1
    config = LaunchConfig(grid=(n + 255) // 256, block=256)
    launch(
        s, config, kernel, np.float32(2.0), x.data_ptr(), y.data_ptr(), out.data_ptr(), np.uint64(n)
    )
    ts.synchronize()
    if not torch.allclose(out, 2.0 * x + y):
        print("FAIL: saxpy result is wrong", file=sys.stderr)
        return 1
    # The other way round: PyTorch works on our stream through ExternalStream.
    ours = dev.create_stream()
    try:  # newer PyTorch takes any object with __cuda_stream__ (our Stream has it)
        theirs = torch.cuda.Stream.from_external(ours)
    except (AttributeError, TypeError):
        theirs = None
    if theirs is None or theirs.cuda_stream != int(ours.handle):
        theirs = torch.cuda.ExternalStream(int(ours.handle))
    with torch.cuda.stream(theirs):
        z = out * 0 + 1
    ours.sync()
    if int(z.sum()) != n:
        print("FAIL: PyTorch on our stream", file=sys.stderr)
        return 1
    ours.close()
    print("OK")
    return 0


if __name__ == "__main__":
    run_main(main)
