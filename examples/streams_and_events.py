"""Time a kernel with events, and order two streams with ``wait``.

Stream ``s1`` runs a kernel that sleeps ~100 ms and then writes 42; stream ``s2`` waits for
``s1`` and copies that value. Without the wait, ``s2`` would copy before the write. Events
around the sleeping kernel measure its duration. Needs a GPU (no CuPy); exits non-zero if a
check fails.
"""

from __future__ import annotations

import numpy as np
from _example import need_gpu, run_main

from cuda_core import EventOptions, LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
__device__ unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
extern "C" __global__ void sleep_then_write(int* x, unsigned long long ns, int value) {
    unsigned long long t0 = now();
    while (now() - t0 < ns) { __nanosleep(2000); }
    x[0] = value;
}
extern "C" __global__ void copy_first(const int* src, int* dst) { dst[0] = src[0]; }
"""
SLEEP_MS = 100


def main() -> int:
    dev = need_gpu()
    dev.set_current()
    prog = Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    mod = prog.compile("cubin")
    sleep_then_write = mod.get_kernel("sleep_then_write")
    copy_first = mod.get_kernel("copy_first")
    one = LaunchConfig(grid=1, block=1)

    zero = np.zeros(1, dtype=np.int32)
    src, dst = dev.allocate(4), dev.allocate(4)  # ordered on the device's default stream
    src.copy_from(zero, stream=dev.default_stream)
    dst.copy_from(zero, stream=dev.default_stream)
    dev.sync()

    timed = EventOptions(timing_enabled=True)
    with dev.create_stream() as s1, dev.create_stream() as s2:
        launch(s1, one, sleep_then_write, src, np.uint64(0), np.int32(0))  # warm-up
        s1.sync()
        start = s1.record(options=timed)
        launch(s1, one, sleep_then_write, src, np.uint64(SLEEP_MS * 1_000_000), np.int32(42))
        end = s1.record(options=timed)
        s2.wait(s1)  # everything submitted to s2 from now on runs after s1's work so far
        launch(s2, one, copy_first, src, dst)
        result = np.empty(1, dtype=np.int32)
        dst.copy_to(result, stream=s2)
        s2.sync()
        elapsed = end - start  # s2 finished after s1's kernel, so `end` has completed
        print(f"the sleeping kernel took {elapsed:.2f} ms (asked for {SLEEP_MS} ms)")
        print(f"s2 copied {int(result[0])} after waiting for s1")
        start.close()
        end.close()

    assert end.is_closed
    assert int(result[0]) == 42, "s2 ran before s1 had written its value"
    assert SLEEP_MS * 0.8 <= elapsed <= SLEEP_MS * 1.5, f"unexpected duration {elapsed:.2f} ms"
    print("OK")
    return 0


if __name__ == "__main__":
    run_main(main)
