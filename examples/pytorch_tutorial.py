"""Tutorial: a kernel of your own in a PyTorch program (docs/tutorial_pytorch.rst shows this file).

CUDA tensors go in, a fused bias + ReLU kernel compiled with ``Program`` runs on PyTorch's
current stream between PyTorch's own operations, the results come back as tensors (also in
memory cuda_core allocated) and are checked against ``torch.relu(x + bias)``. Exits 0 when they
match, 1 when they do not, and 3 (one line) when PyTorch or a GPU is missing. The
``# [name]`` ... ``# [/name]`` comments mark the parts the tutorial page includes: keep them.
"""

from __future__ import annotations

import sys

import numpy as np
from _example import need_gpu, need_module, run_main

# [imports]
from cuda_core import LaunchConfig, Program, ProgramOptions, Stream, launch
from cuda_core.utils import StridedMemoryView

# [/imports]

# [kernel]
CODE = r"""
template <typename T>
__global__ void bias_relu(const T* x, const T* bias, T* out, long long rows, int cols)
{
    // out[r, c] = max(x[r, c] + bias[c], 0) for contiguous x and out: a grid-stride loop.
    long long n = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        T v = x[i] + bias[i % cols];
        out[i] = v > T(0) ? v : T(0);
    }
}
"""
NAMES = ("bias_relu<float>", "bias_relu<double>")
# [/kernel]


# [function]
def bias_relu(x, bias, kernels: dict, stream, out=None):
    """``relu(x + bias)`` for a 2-D CUDA tensor ``x`` (``bias`` along its last dimension).

    Runs on ``stream`` (PyTorch's current stream, normally, or a cuda_core ``Stream``). ``out``
    (optional) receives the result; it must be contiguous, of ``x``'s shape and dtype.
    """
    if x.dim() != 2 or bias.shape != x.shape[1:] or x.dtype != bias.dtype or x.dtype not in kernels:
        raise ValueError("x must be 2-D, bias 1-D of x's width, both float32 or float64")
    x, bias = x.contiguous(), bias.contiguous()  # copies (on the current stream) only if needed
    if out is None:
        out = x.new_empty(x.shape)  # from PyTorch's caching allocator, on the current stream
    elif out.shape != x.shape or out.dtype != x.dtype or not out.is_contiguous():
        raise ValueError("out must be a contiguous tensor of x's shape and dtype")
    rows, cols = x.shape
    blocks = min((rows * cols + 255) // 256, 4096)  # the grid-stride loop covers the rest
    if not isinstance(stream, Stream):
        stream = Stream(stream)  # borrows PyTorch's stream (never destroys it)
    launch(
        stream,
        LaunchConfig(grid=blocks, block=256),
        kernels[x.dtype],
        x.data_ptr(),
        bias.data_ptr(),
        out.data_ptr(),
        np.int64(rows),
        np.int32(cols),
    )
    return out


# [/function]


def main() -> int:
    torch = need_module("torch")
    dev = need_gpu()
    if not torch.cuda.is_available():
        print(
            "pytorch_tutorial: FAILED: a GPU is present but this PyTorch cannot use it (a CPU-only build?)",
            file=sys.stderr,
        )
        return 1

    # [compile]
    dev.set_current()  # the device's primary context: the one PyTorch uses as well
    options = ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
    module = Program(CODE, code_type="c++", options=options).compile(
        "cubin", name_expressions=NAMES
    )
    kernels = {
        torch.float32: module.get_kernel(NAMES[0]),
        torch.float64: module.get_kernel(NAMES[1]),
    }
    # [/compile]

    # [tensors]
    torch.manual_seed(0)
    side = torch.cuda.Stream(device=dev.device_id)
    with torch.cuda.stream(side):  # PyTorch's current stream in this block
        x = torch.randn(4096, 1000, device=f"cuda:{dev.device_id}")
        bias = torch.randn(1000, device=x.device)
        # Our kernel, between PyTorch's operations on the same stream: no host wait.
        y = bias_relu(x, bias, kernels, torch.cuda.current_stream())
        expected = torch.relu(x + bias)
        same32 = torch.equal(y, expected)  # True/False on the host: waits for the stream
        y64 = bias_relu(x.double(), bias.double(), kernels, torch.cuda.current_stream())
        same64 = torch.equal(y64, torch.relu(x.double() + bias.double()))
    # [/tensors]
    if not (same32 and same64):
        print(
            f"pytorch_tutorial: WRONG RESULT (float32 equal: {same32}, float64 equal: {same64})",
            file=sys.stderr,
        )
        return 1

    # [buffer]
    stream = dev.create_stream(side)  # a cuda_core Stream borrowing PyTorch's
    buf = dev.allocate(x.numel() * x.element_size(), stream=stream)  # memory cuda_core owns
    with torch.cuda.stream(side):
        z = torch.from_dlpack(StridedMemoryView.from_buffer(buf, tuple(x.shape), dtype=np.float32))
        bias_relu(x, bias, kernels, side, out=z)  # PyTorch's Stream object works as well
        same_buf = torch.equal(z, expected) and z.data_ptr() == int(buf.handle)
    del z  # the tensor kept the view, and the view the buffer, alive
    buf.close(stream)
    # [/buffer]
    if not same_buf:
        print(
            "pytorch_tutorial: WRONG RESULT in the cuda_core Buffer seen from PyTorch",
            file=sys.stderr,
        )
        return 1
    print(
        f"pytorch_tutorial: bias + ReLU on {tuple(x.shape)} float32 and float64 tensors equals PyTorch's"
    )
    return 0


if __name__ == "__main__":
    run_main(main)
