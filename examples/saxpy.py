"""SAXPY with a C++ template: float and double instantiations of one kernel (checks its results).

Compiles ``saxpy<float>`` and ``saxpy<double>`` in one NVRTC call through name expressions,
fetches each kernel by its C++ name, launches both and compares with NumPy. A second run of
this script loads the compiled code from the compile cache instead of compiling again.
"""

from __future__ import annotations

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
template <typename T>
__global__ void saxpy(const T a, const T* x, const T* y, T* out, size_t n) {
    const size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t i = tid; i < n; i += gridDim.x * blockDim.x) {
        out[i] = a * x[i] + y[i];
    }
}
"""


def main() -> int:
    dev = need_gpu()
    dev.set_current()
    s = dev.create_stream()
    prog = Program(
        CODE, code_type="c++", options=ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
    )
    mod = prog.compile("cubin", name_expressions=("saxpy<float>", "saxpy<double>"))

    n = 1 << 20
    block = 256
    config = LaunchConfig(grid=(n + block - 1) // block, block=block)
    rng = np.random.default_rng(0)
    failures = []
    for dtype, name in ((np.float32, "saxpy<float>"), (np.float64, "saxpy<double>")):
        ker = mod.get_kernel(name)
        a = dtype(2.5)
        x = rng.random(n, dtype=dtype)
        y = rng.random(n, dtype=dtype)
        nbytes = x.nbytes
        dx, dy, dout = (dev.allocate(nbytes, stream=s) for _ in range(3))
        dx.copy_from(x, stream=s)
        dy.copy_from(y, stream=s)
        launch(s, config, ker, a, dx, dy, dout, np.uint64(n))
        out = np.empty_like(x)
        dout.copy_to(out, stream=s)
        s.sync()
        expected = a * x + y
        if not np.allclose(out, expected, rtol=1e-6 if dtype is np.float32 else 1e-12):
            failures.append(f"{name}: max error {np.abs(out - expected).max()}")
        for b in (dx, dy, dout):
            b.close()
    s.close()
    if failures:
        print("FAILED:", "; ".join(failures))
        return 1
    print(f"saxpy<float> and saxpy<double> agree with NumPy on {n} elements")
    return 0


if __name__ == "__main__":
    run_main(main)
