"""Split a reduction over every visible GPU: one thread per GPU, combined on device 0.

The sum of squares of a large float64 array is computed in slices, one per GPU. Each GPU has
its own thread, which makes the GPU current there (``Device(i).set_current()``), creates its own
stream, copies its slice in, reduces it with a kernel (a block-wise pass, then one block over
the block sums) and copies its 8-byte partial result into a slot of a buffer on device 0 (a
peer copy between devices) before recording an event. Device 0's stream waits for every
event, adds the partial results with the same kernel and the host reads the total, which is
checked against NumPy. With one GPU the split degenerates to one slice (the script says so);
with none it exits with the "missing requirement" line. Exits 0 when the result checks out.
"""

from __future__ import annotations

import threading

import numpy as np
from _example import need_gpu, run_main

from cuda_core import Buffer, Device, LaunchConfig, Program, ProgramOptions, launch

CODE = r"""
// Sum of x[i] (or of x[i]*x[i]) for i < n: each block writes its sum to out[blockIdx.x].
template <bool SQUARE>
__global__ void block_sums(const double* x, unsigned long long n, double* out) {
    __shared__ double part[256];
    double acc = 0.0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        double v = x[i];
        acc += SQUARE ? v * v : v;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            part[threadIdx.x] += part[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = part[0];
    }
}
"""
N = (1 << 24) + 12_345  # ~16.8 million doubles (134 MB), not a multiple of the GPU count
BLOCK = 256
BLOCKS = 1024


def sum_of_squares(dev: Device, stream, kernels, data: Buffer, n: int, out: Buffer) -> None:
    """Queue the sum of squares of ``n`` doubles in ``data`` into ``out`` (8 bytes) on ``stream``."""
    squares, sums = kernels
    blocks = max(1, min(BLOCKS, (n + BLOCK - 1) // BLOCK))
    partial = dev.allocate(blocks * 8, stream=stream)
    launch(stream, LaunchConfig(grid=blocks, block=BLOCK), squares, data, np.uint64(n), partial)
    launch(stream, LaunchConfig(grid=1, block=BLOCK), sums, partial, np.uint64(blocks), out)
    partial.close()  # freed in stream order, after the kernels that use it


def main() -> int:
    need_gpu()
    devices = Device.get_all_devices()
    ndev = len(devices)
    if ndev == 1:
        print("only one GPU is visible: the reduction runs on it alone (two or more split it)")
    x = np.random.default_rng(2024).standard_normal(N)
    expected = float(np.dot(x, x))
    bounds = [N * i // ndev for i in range(ndev + 1)]  # one slice per GPU

    # Compile once per architecture; a Kernel is not tied to a context and runs on any device.
    kernels: dict[str, tuple] = {}
    for dev in devices:
        if dev.arch not in kernels:
            prog = Program(
                CODE, code_type="c++", options=ProgramOptions(std="c++17", arch=f"sm_{dev.arch}")
            )
            mod = prog.compile("cubin", name_expressions=("block_sums<true>", "block_sums<false>"))
            kernels[dev.arch] = (
                mod.get_kernel("block_sums<true>"),
                mod.get_kernel("block_sums<false>"),
            )

    dev0 = devices[0]
    dev0.set_current()
    s0 = dev0.create_stream()
    gathered = dev0.allocate(8 * ndev, stream=s0)  # one slot per GPU for its partial result
    s0.sync()
    done: list = [None] * ndev  # the event each worker records after its partial result is in place
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            dev = Device(i)  # this thread's Device object
            dev.set_current()
            s = dev.create_stream()
            lo, hi = bounds[i], bounds[i + 1]
            data = dev.allocate((hi - lo) * 8, stream=s)
            data.copy_from(x[lo:hi], stream=s)  # from host memory: done when it returns
            result = dev.allocate(8, stream=s)
            sum_of_squares(dev, s, kernels[dev.arch], data, hi - lo, result)
            slot = Buffer.from_handle(gathered.handle + 8 * i, 8, owner=gathered)  # on device 0
            result.copy_to(slot, stream=s)  # a peer copy when this is not device 0
            done[i] = s.record()
            s.sync()  # the buffers below may be freed now; s's work is done
            data.close()
            result.close()
            s.close()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,), name=f"gpu{i}") for i in range(ndev)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]

    for ev in done:
        s0.wait(ev)  # device 0's stream waits for every GPU's copy (events of other devices too)
    total = dev0.allocate(8, stream=s0)
    sums = kernels[dev0.arch][1]
    launch(
        s0, LaunchConfig(grid=1, block=BLOCK), sums, gathered, np.uint64(ndev), total
    )  # the combination
    partials = np.empty(ndev)
    gathered.copy_to(partials, stream=s0)  # waits for s0
    got = np.empty(1)
    total.copy_to(got, stream=s0)
    for i in range(ndev):
        lo, hi = bounds[i], bounds[i + 1]
        print(
            f"device {i} ({devices[i].name}): {hi - lo} elements, partial sum of squares {partials[i]:.6f}"
        )
    rel = abs(got[0] - expected) / expected
    print(
        f"{ndev} GPU(s): sum of squares {got[0]:.6f}; NumPy {expected:.6f}; relative difference {rel:.2e}"
    )
    for b in (total, gathered):
        b.close()
    s0.close()
    slices_ok = all(
        abs(partials[i] - float(np.dot(x[bounds[i] : bounds[i + 1]], x[bounds[i] : bounds[i + 1]])))
        <= 1e-10 * max(1.0, partials[i])
        for i in range(ndev)
    )
    if rel > 1e-10 or not slices_ok:
        print("FAILED: the GPU result differs from NumPy's")
        return 1
    return 0


if __name__ == "__main__":
    run_main(main)
