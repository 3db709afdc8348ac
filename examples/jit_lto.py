"""JIT link-time optimisation: two translation units compiled to LTO-IR, linked with nvJitLink.

A library unit defines a device function; the main unit's kernel calls it. Each is compiled
separately to LTO-IR, and the Linker optimises across both (the call is inlined) into one
cubin. The script launches the kernel and checks the result.
"""

from __future__ import annotations

import sys

import numpy as np

from cuda_core import Device, LaunchConfig, Linker, LinkerOptions, Program, ProgramOptions, launch

LIBRARY = r"""
__device__ float polynomial(float x) {
    return 3.0f * x * x + 2.0f * x + 1.0f;
}
"""

MAIN = r"""
__device__ float polynomial(float x);  // defined in the other unit

extern "C" __global__ void apply(const float* x, float* out, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = polynomial(x[i]);
}
"""


def main() -> int:
    dev = Device()
    dev.set_current()
    arch = f"sm_{dev.arch}"
    opts = dict(arch=arch, relocatable_device_code=True, link_time_optimization=True)
    lib = Program(LIBRARY, options=ProgramOptions(name="library.cu", **opts)).compile("ltoir")
    main_unit = Program(MAIN, options=ProgramOptions(name="main.cu", **opts)).compile("ltoir")
    linker = Linker(main_unit, lib, options=LinkerOptions(arch=arch, link_time_optimization=True))
    linked = linker.link("cubin")
    ker = linked.get_kernel("apply")

    n = 10_000
    x = np.linspace(-2.0, 2.0, n, dtype=np.float32)
    s = dev.create_stream()
    dx = dev.allocate(x.nbytes, stream=s)
    dout = dev.allocate(x.nbytes, stream=s)
    dx.copy_from(x, stream=s)
    launch(s, LaunchConfig(grid=(n + 127) // 128, block=128), ker, dx, dout, np.uint32(n))
    out = np.empty_like(x)
    dout.copy_to(out, stream=s)
    s.sync()
    expected = 3.0 * x * x + 2.0 * x + 1.0
    if not np.allclose(out, expected, rtol=1e-5, atol=1e-5):
        print(f"FAILED: max error {np.abs(out - expected).max()}")
        return 1
    print(f"LTO-linked kernel ({linker.backend}) agrees with NumPy on {n} elements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
