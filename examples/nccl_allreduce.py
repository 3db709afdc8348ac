"""All-reduce and a data-parallel training step over several GPUs with NCCL (checks its results).

Every rank (one per GPU) all-reduces a buffer and checks the sum, then runs three steps of
data-parallel gradient descent: it computes a gradient of its own data with a kernel compiled
by ``Program``, all-reduces the gradients (sum), and a second kernel divides by the world size
and updates the parameters. Every rank checks its parameters against NumPy and, through an
all-gather, that all ranks hold the same ones.

Two ways to start it, one script:

* ``python examples/nccl_allreduce.py``: one process per visible GPU (at least two), started
  here with ``multiprocessing`` (spawn);
* under a launcher that sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
  ``MASTER_PORT`` (``torchrun --nproc-per-node 2 examples/nccl_allreduce.py``; ``mpirun`` with
  ``MASTER_ADDR``/``MASTER_PORT`` exported, OpenMPI's own rank variables are read too): this
  process is one rank, on GPU ``LOCAL_RANK``, of a job that may span several machines.

Rank 0 makes the NCCL unique id and hands it to the others over TCP at
``MASTER_ADDR:MASTER_PORT`` (``MASTER_PORT + 1`` under torchrun, whose agent holds
``MASTER_PORT``; ``nccl.exchange_unique_id``, standard library only). For a job across
machines, export ``CUDA_CORE_NCCL_SECRET`` (a random value, the same for every rank) before the
launcher, so that only the job's ranks get the id. Exits 0 when every rank passed, 1 otherwise,
3 when NCCL or a second GPU is missing.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import socket
import sys
import time
from collections.abc import Mapping

import numpy as np
from _example import need_gpu, need_nccl, run_main

CODE = r"""
// d/dw of 0.5 * (w*x - y)^2, element by element: this rank's gradient for its data (x, y)
extern "C" __global__ void local_grad(const float* w, const float* x, const float* y, float* g, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) g[i] = (w[i] * x[i] - y[i]) * x[i];
}
// g_sum holds the all-reduced sum: divide by the world size, then take a gradient step
extern "C" __global__ void sgd_update(float* w, const float* g_sum, float inv_world, float lr, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) w[i] -= lr * (g_sum[i] * inv_world);
}
"""
N_SUM = 1 << 20  # floats in the plain all-reduce
N_PARAMS = 1 << 16  # parameters of the data-parallel model
STEPS = 3
LR = np.float32(0.05)
TIMEOUT = 300.0  # seconds the plain mode waits for its ranks


def batch(rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank ``rank``'s training data: every rank can make every rank's, for the NumPy check."""
    rng = np.random.default_rng(1234 + rank)
    return rng.standard_normal(N_PARAMS, dtype=np.float32), rng.standard_normal(
        N_PARAMS, dtype=np.float32
    )


def check_all_reduce(comm, dev, s, view_of) -> list[str]:
    base = (np.arange(N_SUM) % 1000).astype(np.float32)
    buf = dev.allocate(base.nbytes, stream=s)
    buf.copy_from(base * np.float32(comm.rank + 1), stream=s)
    comm.all_reduce(view_of(buf, N_SUM), op="sum", stream=s)  # in place
    out = np.empty_like(base)
    buf.copy_to(out, stream=s)
    s.sync()
    buf.close()
    expected = base * np.float32(comm.nranks * (comm.nranks + 1) // 2)  # 1 + 2 + ... + nranks
    if not np.array_equal(out, expected):
        bad = int(np.flatnonzero(out != expected)[0])
        return [f"all-reduce: element {bad} is {out[bad]}, expected {expected[bad]}"]
    return []


def kernels(dev):
    """The two kernels of the data-parallel step, compiled for ``dev``."""
    from cuda_core import Program, ProgramOptions

    return Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )


def check_data_parallel(comm, dev, s, view_of) -> list[str]:
    from cuda_core import LaunchConfig, launch

    mod = kernels(dev)
    grad_k, update_k = mod.get_kernel("local_grad"), mod.get_kernel("sgd_update")
    config = LaunchConfig(grid=(N_PARAMS + 255) // 256, block=256)
    world, n = comm.nranks, np.uint64(N_PARAMS)
    inv_world = np.float32(1.0 / world)

    w0 = np.linspace(-1.0, 1.0, N_PARAMS, dtype=np.float32)
    x, y = batch(comm.rank)
    w, dx, dy, g = (dev.allocate(4 * N_PARAMS, stream=s) for _ in range(4))
    for dst, src in ((w, w0), (dx, x), (dy, y)):
        dst.copy_from(src, stream=s)
    for _ in range(STEPS):
        launch(s, config, grad_k, w, dx, dy, g, n)
        comm.all_reduce(view_of(g, N_PARAMS), op="sum", stream=s)
        launch(s, config, update_k, w, g, inv_world, LR, n)
    every = dev.allocate(4 * N_PARAMS * world, stream=s)  # every rank's parameters, in rank order
    comm.all_gather(view_of(w, N_PARAMS), view_of(every, N_PARAMS * world), stream=s)
    got = np.empty(N_PARAMS, np.float32)
    all_w = np.empty((world, N_PARAMS), np.float32)
    w.copy_to(got, stream=s)
    every.copy_to(all_w, stream=s)
    s.sync()
    for b in (w, dx, dy, g, every):
        b.close()

    ref = w0.copy()  # the same steps in NumPy, with every rank's data
    data = [batch(r) for r in range(world)]
    for _ in range(STEPS):
        g_sum = np.zeros(N_PARAMS, np.float32)
        for xr, yr in data:
            g_sum += (ref * xr - yr) * xr
        ref = ref - LR * (g_sum * inv_world)
    failures = []
    if not np.allclose(got, ref, rtol=1e-5, atol=1e-6):
        failures.append(
            f"data-parallel step: parameters differ from NumPy by up to {np.abs(got - ref).max():.3g}"
        )
    for r in range(world):
        if not np.array_equal(all_w[r], got):
            failures.append(f"data-parallel step: rank {r}'s parameters differ from this rank's")
    return failures


def run_rank(rank: int, world: int, local_rank: int, addr: str, port: int) -> int:
    """One rank: join the group, run both checks, report. Returns the exit status."""
    nccl = need_nccl()
    need_gpu()
    from cuda_core import Device, system
    from cuda_core.utils import StridedMemoryView

    if local_rank >= system.get_num_devices():
        print(
            f"FAILED: rank {rank}: LOCAL_RANK {local_rank} but this machine has {system.get_num_devices()} GPUs"
        )
        return 1
    dev = Device(local_rank)
    dev.set_current()
    s = dev.create_stream()

    def view_of(buf, n):  # a Buffer as n float32 elements: NCCL learns the type and count from it
        return StridedMemoryView.from_buffer(buf, (n,), dtype=np.float32)

    uid = nccl.exchange_unique_id(rank, world, addr, port)
    with nccl.Communicator.init(world, rank, uid, device=dev) as comm:
        if rank == 0:
            info = nccl.library_info()
            print(
                f"NCCL {info['version']} ({info['path']}), nccl4py {info['nccl4py']}, {world} ranks"
            )
        failures = check_all_reduce(comm, dev, s, view_of) + check_data_parallel(
            comm, dev, s, view_of
        )
    s.close()
    for f in failures:
        print(f"FAILED: rank {rank}: {f}")
    if not failures:
        print(
            f"rank {rank} (GPU {local_rank}): all-reduce of {N_SUM} floats and {STEPS} data-parallel steps agree with NumPy"
        )
    return 1 if failures else 0


def launcher_env(env: Mapping[str, str]) -> tuple[int, int, int, str, int] | None:
    """(rank, world size, local rank, rank 0's address, rendezvous port) set by a launcher, or None.

    torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
    OpenMPI's ``mpirun`` sets ``OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK`` (export ``MASTER_ADDR``
    and ``MASTER_PORT`` yourself). torchrun's agent already serves its own store on
    ``MASTER_PORT`` (``TORCHELASTIC_RUN_ID`` tells it started us), so there rank 0 listens on the
    next port.
    """
    rank = env.get("RANK", env.get("OMPI_COMM_WORLD_RANK"))
    if rank is None:
        return None
    world = env.get("WORLD_SIZE", env.get("OMPI_COMM_WORLD_SIZE"))
    if world is None:
        raise SystemExit(
            "RANK is set but WORLD_SIZE is not: set both (and MASTER_ADDR, MASTER_PORT)"
        )
    local = env.get("LOCAL_RANK", env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    port = int(env.get("MASTER_PORT", "29500")) + (1 if "TORCHELASTIC_RUN_ID" in env else 0)
    return int(rank), int(world), int(local), env.get("MASTER_ADDR", "127.0.0.1"), port


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _child(rank: int, world: int, port: int) -> None:
    sys.exit(run_rank(rank, world, rank, "127.0.0.1", port))


def wait_for(procs: list, timeout: float) -> None:
    """Wait until every process has ended; when one fails, or ``timeout`` seconds pass, stop the
    others (after 10 s of grace for a failure: a failed rank leaves the others waiting in NCCL)."""
    deadline = time.monotonic() + timeout
    while True:
        # Ask each process once per round: ranks that end between two is_alive() calls must not
        # leave an empty list to wait on (that would wait for the whole timeout).
        live = [p.sentinel for p in procs if p.is_alive()]
        if not live:
            return
        multiprocessing.connection.wait(live, timeout=max(0.0, deadline - time.monotonic()))
        failed = any(p.exitcode not in (None, 0) for p in procs)
        if time.monotonic() >= deadline or failed:
            grace = time.monotonic() + (0 if time.monotonic() >= deadline else 10)
            for p in procs:
                p.join(max(0.0, grace - time.monotonic()))
                if p.is_alive():
                    print(f"FAILED: rank {procs.index(p)} did not finish; stopping it")
                    p.kill()
                    p.join()
            return


def spawn_all(world: int) -> int:
    """Plain mode: one spawned process per GPU; 0 when every one passed."""
    ctx = multiprocessing.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=_child, args=(r, world, port)) for r in range(world)]
    for p in procs:
        p.start()
    wait_for(procs, TIMEOUT)
    codes = [p.exitcode for p in procs]
    if any(c != 0 for c in codes):
        print(f"FAILED: exit codes of the ranks: {codes}")
        return 1
    print(f"nccl_allreduce: {world} ranks on {world} GPUs agree with NumPy")
    return 0


def main() -> int:
    launched = launcher_env(os.environ)
    if launched is not None:
        return run_rank(*launched)
    need_nccl()
    dev = need_gpu(count=2)
    kernels(dev)  # here first: a compiler this install lacks is named once, not by every rank
    from cuda_core import system

    return spawn_all(system.get_num_devices())


if __name__ == "__main__":
    run_main(main)
