"""Tutorial: a kernel of your own in a CuPy program (docs/tutorial_cupy.rst shows this file).

CuPy arrays go in, a templated kernel compiled with ``Program`` runs on CuPy's current stream,
the results come back as CuPy arrays (also in memory cuda_core allocated) and are checked
against CuPy's own arithmetic. Exits 0 when they match, 1 when they do not, and 3 (one line)
when CuPy or a GPU is missing. The ``# [name]`` ... ``# [/name]`` comments mark the parts the
tutorial page includes: keep them.
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
__global__ void scale_add_rows(T alpha, const T* x, long long ldx, const T* y, T* out,
                               int rows, int cols)
{
    // out[r, c] = alpha * x[r, c] + y[c]. Rows of x are ldx elements apart; out is contiguous.
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols)
        out[(long long)r * cols + c] = alpha * x[r * ldx + c] + y[c];
}
"""
NAMES = ("scale_add_rows<float>", "scale_add_rows<double>")
# [/kernel]


# [function]
def scale_add_rows(alpha: float, x, y, out, kernels: dict, stream: Stream) -> None:
    """``out[...] = alpha * x + y`` for a 2-D ``x`` (``y`` broadcast over its rows), on ``stream``.

    ``x`` may be strided along its rows (a slice of a wider array); ``y`` and ``out`` must be
    contiguous. Any DLPack array works: CuPy, PyTorch, or a view of a cuda_core Buffer.
    """
    vx, vy, vo = (StridedMemoryView.from_dlpack(a, int(stream.handle)) for a in (x, y, out))
    rows, cols = vx.shape
    strides = vx.strides or (
        cols,
        1,
    )  # in elements, as the producer gave them; None: it gave none (C order)
    if strides[1] != 1:
        raise ValueError(f"x must have unit stride along its rows (strides {vx.strides})")
    if vy.shape != (cols,) or vy.strides not in (None, (1,)):
        raise ValueError(f"y must be a contiguous row of {cols} elements")
    if vo.shape != (rows, cols) or vo.strides not in (None, (cols, 1)):
        raise ValueError(f"out must be a contiguous {rows} x {cols} array")
    if not vx.dtype == vy.dtype == vo.dtype or vx.dtype not in kernels:
        raise TypeError(f"x, y and out must share one of the dtypes {sorted(map(str, kernels))}")
    config = LaunchConfig(grid=((cols + 31) // 32, (rows + 7) // 8), block=(32, 8))
    launch(
        stream,
        config,
        kernels[vx.dtype],
        vx.dtype.type(alpha),
        vx.ptr,
        np.int64(strides[0]),
        vy.ptr,
        vo.ptr,
        np.int32(rows),
        np.int32(cols),
    )


# [/function]


def main() -> int:
    cp = need_module("cupy")
    dev = need_gpu()

    # [compile]
    dev.set_current()  # the device's primary context: the one CuPy uses as well
    options = ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
    module = Program(CODE, code_type="c++", options=options).compile(
        "cubin", name_expressions=NAMES
    )
    kernels = {
        np.dtype(np.float32): module.get_kernel(NAMES[0]),
        np.dtype(np.float64): module.get_kernel(NAMES[1]),
    }
    # [/compile]

    # [arrays]
    rows, cols, alpha = 1000, 300, 2.5
    with cp.cuda.Stream(non_blocking=True) as cp_stream:  # CuPy's current stream in this block
        stream = dev.create_stream(cp.cuda.get_current_stream())  # the same stream, borrowed
        wide = cp.random.random((rows, cols + 20), dtype=cp.float32)
        x = wide[:, :cols]  # strided: its rows are cols + 20 elements apart
        y = cp.linspace(0, 1, cols, dtype=cp.float32)
        out = cp.empty((rows, cols), dtype=cp.float32)
    # [/arrays]

    # [launch]
    with cp_stream:
        scale_add_rows(alpha, x, y, out, kernels, stream)  # queued after CuPy's random fill
        expected = alpha * x + y  # CuPy's arithmetic, queued after our kernel
        close32 = cp.allclose(out, expected, rtol=1e-6, atol=1e-6)
        # The same function in double precision, on a contiguous copy of x.
        x64, y64 = x.astype(cp.float64), y.astype(cp.float64)
        out64 = cp.empty((rows, cols), dtype=cp.float64)
        scale_add_rows(alpha, x64, y64, out64, kernels, stream)
        close64 = cp.allclose(out64, alpha * x64 + y64, rtol=1e-12, atol=1e-12)
    cp_stream.synchronize()  # the only time the host waits
    # [/launch]
    if not (bool(close32) and bool(close64)):
        print(
            f"cupy_tutorial: WRONG RESULT (float32 match: {bool(close32)}, float64: {bool(close64)})",
            file=sys.stderr,
        )
        return 1

    # [buffer]
    buf = dev.allocate(rows * cols * 4, stream=stream)  # memory cuda_core owns
    result = cp.from_dlpack(StridedMemoryView.from_buffer(buf, (rows, cols), dtype=np.float32))
    with cp_stream:
        scale_add_rows(alpha, x, y, result, kernels, stream)
        same = cp.array_equal(result, out)  # a CuPy array over cuda_core's memory
    cp_stream.synchronize()
    same = bool(same)
    del result  # the CuPy array kept the view, and the view the buffer, alive
    buf.close(stream)
    # [/buffer]
    if not same:
        print("cupy_tutorial: WRONG RESULT in the cuda_core Buffer seen from CuPy", file=sys.stderr)
        return 1
    print(f"cupy_tutorial: {rows} x {cols} float32 (strided) and float64 results match CuPy")
    return 0


if __name__ == "__main__":
    run_main(main)
