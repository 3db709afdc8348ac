"""Add two vectors with a templated kernel compiled at run time (exits non-zero on a wrong result).

The cuda.core pattern: a C++ template, instantiated through a name expression, launched on
CuPy arrays (or cuda_core Buffers where CuPy is not installed).
"""

from __future__ import annotations

import sys

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
template <typename T>
__global__ void vector_add(const T* a, const T* b, T* c, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) c[i] = a[i] + b[i];
}
"""


def main() -> int:
    dev = need_gpu()
    dev.set_current()
    s = dev.create_stream()
    prog = Program(
        CODE, code_type="c++", options=ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
    )
    ker = prog.compile("cubin", name_expressions=("vector_add<float>",)).get_kernel(
        "vector_add<float>"
    )

    n = 1_000_000
    rng = np.random.default_rng(0)
    a_host = rng.random(n, dtype=np.float32)
    b_host = rng.random(n, dtype=np.float32)
    config = LaunchConfig(grid=(n + 255) // 256, block=256)
    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None:
        a, b = cp.asarray(a_host), cp.asarray(b_host)
        c = cp.empty_like(a)
        cp.cuda.Device().synchronize()  # CuPy filled a and b on its own stream
        launch(s, config, ker, a, b, c, np.uint64(n))
        s.sync()
        result = cp.asnumpy(c)
    else:
        a, b, c = (dev.allocate(4 * n, stream=s) for _ in range(3))
        a.copy_from(a_host, stream=s)
        b.copy_from(b_host, stream=s)
        launch(s, config, ker, a, b, c, np.uint64(n))
        result = np.empty(n, np.float32)
        c.copy_to(result, stream=s)
        s.sync()
    if not np.array_equal(result, a_host + b_host):
        print("vector_add: WRONG RESULT", file=sys.stderr)
        return 1
    print(f"vector_add: {n} elements OK")
    s.close()
    return 0


if __name__ == "__main__":
    run_main(main)
