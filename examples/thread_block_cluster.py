"""Launch thread block clusters (compute capability 9.0+, e.g. H100); exits non-zero on a wrong result.

With ``cluster`` set, ``LaunchConfig.grid`` counts clusters: here 4 clusters of 2 x 2 blocks.
Every block reports its rank in its cluster and the cluster's shape.
"""

from __future__ import annotations

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
extern "C" __global__ void whoami(unsigned* out) {
    unsigned rank, dx, dy;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(dx));
    asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(dy));
    if (threadIdx.x == 0) {
        unsigned b = blockIdx.y * gridDim.x + blockIdx.x;
        out[3 * b] = rank; out[3 * b + 1] = dx; out[3 * b + 2] = dy;
    }
}
"""


def main() -> int:
    dev = need_gpu(min_arch=90)  # thread block clusters need compute capability 9.0
    dev.set_current()
    s = dev.create_stream()
    ker = (
        Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        .compile("cubin")
        .get_kernel("whoami")
    )
    config = LaunchConfig(grid=(2, 2), cluster=(2, 2), block=64)  # 4 x 4 blocks in all
    gx, gy, _ = config.grid_blocks
    out = dev.allocate(gx * gy * 3 * 4, stream=s)
    launch(s, config, ker, out)
    host = np.empty((gy, gx, 3), np.uint32)
    out.copy_to(host, stream=s)
    s.sync()
    ys, xs = np.mgrid[0:gy, 0:gx]
    expected_rank = (ys % 2) * 2 + (xs % 2)
    ok = (
        (host[..., 0] == expected_rank).all()
        and (host[..., 1] == 2).all()
        and (host[..., 2] == 2).all()
    )
    print("cluster ranks:\n", host[..., 0])
    out.close()
    s.close()
    print("thread_block_cluster:", "OK" if ok else "WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
