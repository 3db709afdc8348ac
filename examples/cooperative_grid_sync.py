"""A cooperative launch: the whole grid synchronises in the middle of a kernel.

Each thread writes its value, the grid waits at ``cooperative_groups::this_grid().sync()``, then
each thread reads a value another block wrote. Exits non-zero on a wrong result.
"""

from __future__ import annotations

import os

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void rotate(int* buf, int* out) {
    cg::grid_group grid = cg::this_grid();
    unsigned i = grid.thread_rank(), n = grid.size();
    buf[i] = (int)(i * 7);
    grid.sync();  // every block's writes are visible after this
    out[i] = buf[(i + blockDim.x) % n];  // read what the next block wrote
}
"""


def include_dirs() -> list[str]:
    """Where cooperative_groups.h and the libcu++ headers it needs live."""
    dirs = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        dirs += [
            d
            for d in (find_nvidia_header_directory("cudart"), find_nvidia_header_directory("cccl"))
            if d
        ]
    except ImportError:
        pass
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    dirs += [
        d
        for d in (os.path.join(home, "include"), os.path.join(home, "include", "cccl"))
        if os.path.isdir(d)
    ]
    return dirs


def main() -> int:
    dev = need_gpu()
    dev.set_current()
    s = dev.create_stream()
    opts = ProgramOptions(arch=f"sm_{dev.arch}", std="c++17", include_path=include_dirs())
    ker = Program(CODE, code_type="c++", options=opts).compile("cubin").get_kernel("rotate")
    blocks, threads = dev.properties.multiprocessor_count, 256  # one block per SM always fits
    n = blocks * threads
    buf, out = dev.allocate(4 * n, stream=s), dev.allocate(4 * n, stream=s)
    launch(s, LaunchConfig(grid=blocks, block=threads, is_cooperative=True), ker, buf, out)
    host = np.empty(n, np.int32)
    out.copy_to(host, stream=s)
    s.sync()
    expected = ((np.arange(n) + threads) % n * 7).astype(np.int32)
    ok = np.array_equal(host, expected)
    print(f"cooperative_grid_sync: {blocks} blocks x {threads} threads:", "OK" if ok else "WRONG")
    buf.close()
    out.close()
    s.close()
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
