"""Capture a loop of small kernels into a CUDA graph, replay it, compare with direct launches.

Self-checking: exits non-zero when the graph's result differs from the direct launches'.
Needs a GPU.
"""

from __future__ import annotations

import functools
import sys
import time

import numpy as np
from _example import need_gpu, run_main

from cuda_core import LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
extern "C" __global__ void axpb(float* x, float a, float b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = a * x[i] + b;
}
"""
N = 4096
STEPS = 200


def main() -> int:
    dev = need_gpu()
    dev.set_current()
    s = dev.create_stream()
    kernel = (
        Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        .compile("cubin")
        .get_kernel("axpb")
    )
    config = LaunchConfig(grid=(N + 255) // 256, block=256)
    start = np.linspace(0.0, 1.0, N, dtype=np.float32)
    direct = dev.allocate(N * 4, stream=s)
    graphed = dev.allocate(N * 4, stream=s)
    direct.copy_from(start, stream=s)
    graphed.copy_from(start, stream=s)

    def step(stream, buf, k):
        launch(
            stream,
            config,
            kernel,
            buf,
            np.float32(0.5 + (k % 3) * 0.25),
            np.float32(0.01 * k),
            np.int32(N),
        )

    t0 = time.perf_counter()
    for k in range(STEPS):
        step(s, direct, k)
    s.sync()
    t_direct = time.perf_counter() - t0

    replays: list[int] = []
    builder = s.create_graph_builder()
    builder.begin_building()
    for k in range(STEPS):
        step(builder, graphed, k)
    # a host callback recorded into the graph runs on every replay, after the kernels before it
    # (it runs on a driver thread: it must not call CUDA; s.sync() lets it run while waiting)
    builder.callback(functools.partial(replays.append, STEPS))  # state goes in through a partial
    builder.end_building()
    with builder.complete() as graph:
        graph.upload(s)
        t0 = time.perf_counter()
        graph.launch(s)
        s.sync()
        t_graph = time.perf_counter() - t0

        a = np.empty(N, dtype=np.float32)
        b = np.empty(N, dtype=np.float32)
        direct.copy_to(a, stream=s)
        graphed.copy_to(b, stream=s)
        s.sync()
        print(
            f"{STEPS} kernels: direct launches {t_direct * 1e3:.2f} ms, graph replay {t_graph * 1e3:.2f} ms"
        )
        if not np.array_equal(a, b):
            print("FAIL: graph replay differs from direct launches", file=sys.stderr)
            return 1
        # replay again: the graph is reusable; the expected values follow from the host model
        expect = b.copy()
        for k in range(STEPS):
            expect = np.float32(0.5 + (k % 3) * 0.25) * expect + np.float32(0.01 * k)
        graph.launch(s)
        graphed.copy_to(b, stream=s)
        s.sync()
        if not np.allclose(b, expect, rtol=1e-5, atol=1e-5):
            print("FAIL: second replay differs from the host model", file=sys.stderr)
            return 1
        if replays != [STEPS, STEPS]:
            print(
                f"FAIL: the host callback ran {len(replays)} times for 2 replays", file=sys.stderr
            )
            return 1
    builder.close()
    direct.close(s)
    graphed.close(s)
    s.close()
    print("OK")
    return 0


if __name__ == "__main__":
    run_main(main)
