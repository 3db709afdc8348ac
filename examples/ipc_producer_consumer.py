"""Producer and consumer processes sharing GPU memory, ordered by IPC events.

The producer (this process) allocates buffers from an IPC-enabled memory pool and fills each
with a kernel. It hands a filled buffer to one of the consumer processes (started with the
``spawn`` method) through a ``multiprocessing`` queue, together with an IPC event recorded
after the fill. The consumer makes its stream wait on that event, checks the data with a
kernel, unmaps the buffer, records an IPC event of its own and sends it back; the producer's
stream waits on it before the buffer is filled again. No process waits on the host for a
hand-off: the events order the work on the device.

1,000 hand-offs in total. At the end the producer checks that its pool is back to the use it
started with, and each consumer that every buffer it imported is closed and that its table of
open file descriptors is back to its size at the start (the driver does not report the use of
an imported pool: ``cuMemPoolGetAttribute`` answers ``CUDA_ERROR_INVALID_VALUE`` for one), and
that its checks ran and found the data right (and, as a control, wrong against another seed). Exits 0
only when every check passes. Needs one GPU (the processes share it).

    python examples/ipc_producer_consumer.py [--consumers 2] [--handoffs 1000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import time
import traceback
from typing import Any

import numpy as np
from _example import need_gpu, run_main

from cuda_core import (
    CompilerLibraryNotFoundError,
    CUDAError,
    Device,
    DeviceMemoryResource,
    DeviceMemoryResourceOptions,
    EventOptions,
    LaunchConfig,
    Program,
    ProgramOptions,
    launch,
)

KERNELS = r"""
__device__ unsigned int pattern(unsigned int seed, unsigned int i)
{
    unsigned int x = (seed * 2654435761u) ^ (i + 0x9e3779b9u);
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    return x;
}

extern "C" __global__ void fill(unsigned int* p, unsigned int n, unsigned int seed)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        p[i] = pattern(seed, i);
    }
}

// counts[0] += elements that differ from pattern(seed); counts[1] += 1 per launch.
extern "C" __global__ void check(const unsigned int* p, unsigned int n, unsigned int seed,
                                 unsigned long long* counts)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && p[i] != pattern(seed, i)) {
        atomicAdd(&counts[0], 1ull);
    }
    if (i == 0) {
        atomicAdd(&counts[1], 1ull);
    }
}
"""
ELEMENTS = 1 << 18  # 1 MiB buffers of uint32
SLOTS_PER_CONSUMER = 2
CONTROL_SEED = 0x5BD1E995  # checked against seed ^ CONTROL_SEED, every element should differ
IPC = EventOptions(ipc_enabled=True)
TIMEOUT = 120  # seconds any process waits for a message before giving up


def kernels(dev: Device) -> Any:
    prog = Program(KERNELS, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
    return prog.compile("cubin")


def run(stream: Any, kernel: Any, *args: Any) -> None:
    launch(stream, LaunchConfig(grid=(ELEMENTS + 255) // 256, block=256), kernel, *args)


def pool_use(mr: Any) -> int:
    """Bytes in use in the producer's pool."""
    return int(mr.attributes.used_mem_current)


def open_fds() -> int:
    """Open file descriptors of this process (Linux)."""
    return len(os.listdir("/proc/self/fd"))


# -- a consumer process -----------------------------------------------------------------------------


def consumer(index: int, mr: DeviceMemoryResource, work: Any, done: Any) -> None:
    """Entry point of a consumer process: ``mr`` arrived mapped (its pool imported here)."""
    try:
        done.put(("report", index, consume(index, mr, work, done)))
    except BaseException:
        done.put(("error", index, traceback.format_exc()))


def consume(index: int, mr: DeviceMemoryResource, work: Any, done: Any) -> dict[str, Any]:
    dev = Device(0)
    dev.set_current()
    check = kernels(dev).get_kernel("check")
    s = dev.create_stream()
    counts = dev.allocate(16, stream=s)  # this process's own memory, not the shared pool
    control = dev.allocate(16, stream=s)
    counts.fill(0, stream=s)
    control.fill(0, stream=s)
    fds_at_start = open_fds()
    imported: list[Any] = []  # every buffer received, to check each was closed
    mine: dict[int, Any] = {}  # slot -> the event this process sent back for it
    received = 0
    while (msg := work.get(timeout=TIMEOUT)) is not None:
        slot, seed, buf, ready = msg  # buf: mapped from the producer's pool while unpickled
        if slot in mine:
            mine.pop(slot).close()  # the producer waited on it before sending the slot again
        s.wait(ready)  # the producer's fill comes first, on the device
        n = np.uint32(ELEMENTS)
        run(s, check, buf, n, np.uint32(seed), counts)
        run(s, check, buf, n, np.uint32(seed ^ CONTROL_SEED), control)
        buf.close(stream=s)  # unmapped here once the checks have run
        imported.append(buf)
        ready.close()  # this process's handle, before the producer drops the event
        mine[slot] = s.record(options=IPC)
        done.put(("done", index, (slot, mine[slot])))
        received += 1
    for ev in mine.values():
        ev.close()
    host = np.zeros(4, dtype=np.uint64)
    counts.copy_to(host[:2], stream=s)
    control.copy_to(host[2:], stream=s)
    s.sync()
    counts.close()
    control.close()
    s.close()
    return {
        "received": received,
        "mismatches": int(host[0]),
        "checks": int(host[1]),
        "control_mismatches": int(host[2]),
        "fds": (fds_at_start, open_fds()),
        "open_imports": sum(1 for b in imported if not b.is_closed),
    }


# -- the producer -----------------------------------------------------------------------------------


def produce(dev: Device, consumers: int, handoffs: int) -> list[str]:
    """Run the hand-offs; return the failed checks (none: success)."""
    mod = kernels(dev)
    fill = mod.get_kernel("fill")
    mr = DeviceMemoryResource(dev, DeviceMemoryResourceOptions(ipc_enabled=True, max_size=1 << 30))
    s = dev.create_stream()
    used_at_start = pool_use(mr)
    nslots = consumers * SLOTS_PER_CONSUMER
    bufs = [
        mr.allocate(4 * ELEMENTS, stream=s) for _ in range(nslots)
    ]  # slot j goes to consumer j % consumers
    ctx = mp.get_context("spawn")
    work = [ctx.Queue() for _ in range(consumers)]
    done = ctx.Queue()
    procs = [ctx.Process(target=consumer, args=(i, mr, work[i], done)) for i in range(consumers)]
    for p in procs:
        p.start()

    failures: list[str] = []
    reports: dict[int, dict[str, Any]] = {}
    ready: dict[int, Any] = {}  # slot -> the producer's event, until its consumer answers
    answered: dict[int, Any] = {}  # slot -> the consumer's event, until the slot is sent again
    free = list(range(nslots))

    def receive() -> None:
        kind, index, payload = done.get(timeout=TIMEOUT)
        if kind == "error":
            raise RuntimeError(f"consumer {index} failed:\n{payload}")
        if kind == "report":
            reports[index] = payload
            return
        slot, ev = payload
        s.wait(ev)  # the next fill of this slot runs after the consumer's checks
        answered[slot] = ev
        ready.pop(slot).close()
        free.append(slot)

    t0 = time.perf_counter()
    try:
        for k in range(handoffs):
            while not free:
                receive()
            slot = free.pop(0)
            if slot in answered:
                answered.pop(
                    slot
                ).close()  # this process's handle, before the consumer drops its event
            run(s, fill, bufs[slot], np.uint32(ELEMENTS), np.uint32(k))
            ready[slot] = s.record(options=IPC)
            work[slot % consumers].put((slot, k, bufs[slot], ready[slot]))
        while ready:
            receive()
        s.sync()
        for ev in answered.values():
            ev.close()
        for q in work:
            q.put(None)
        while len(reports) < consumers:
            receive()
    except (RuntimeError, queue.Empty) as exc:
        failures.append(f"the hand-offs stopped: {exc}")
        for q in work:  # let the other consumers stop instead of waiting out their timeout
            q.put(None)
    elapsed = time.perf_counter() - t0
    for p in procs:
        p.join(TIMEOUT)
        if p.is_alive():
            p.kill()
            p.join()
        if p.exitcode != 0:
            failures.append(f"consumer process {p.pid} exited with {p.exitcode}")
    if failures:
        return failures  # the buffers may still be in use elsewhere: leave them to process exit

    for b in bufs:
        b.close(stream=s)
    s.sync()
    used_at_end = pool_use(mr)
    high = int(mr.attributes.used_mem_high)
    print(f"producer: {handoffs} hand-offs to {consumers} consumers in {elapsed:.2f} s; "
          f"pool in use {used_at_start} -> {used_at_end} bytes (high-water mark {high})")  # fmt: skip
    if used_at_end != used_at_start:
        failures.append(f"producer: pool use {used_at_start} -> {used_at_end} bytes")
    if high < nslots * 4 * ELEMENTS:
        failures.append(
            f"producer: the pool never held the {nslots} buffers (high-water mark {high})"
        )
    total = 0
    for i, r in sorted(reports.items()):
        total += r["received"]
        start, end = r["fds"]
        print(f"consumer {i}: {r['received']} buffers, {r['checks']} checks, {r['mismatches']} wrong elements, "
              f"control {r['control_mismatches']} of {r['received'] * ELEMENTS} differ; "
              f"{r['open_imports']} imported buffers left open; open file descriptors {start} -> {end}")  # fmt: skip
        if r["checks"] != r["received"] or r["mismatches"]:
            failures.append(
                f"consumer {i}: {r['checks']} checks of {r['received']}, {r['mismatches']} wrong"
            )
        if r["control_mismatches"] < 0.99 * r["received"] * ELEMENTS:
            failures.append(
                f"consumer {i}: the control check found too few differences: the check is blind"
            )
        if r["open_imports"]:
            failures.append(f"consumer {i}: {r['open_imports']} imported buffers were never closed")
        if end > start + 2:  # a descriptor per hand-off would show as hundreds
            failures.append(f"consumer {i}: open file descriptors {start} -> {end}")
    if total != handoffs:
        failures.append(f"the consumers received {total} buffers, not {handoffs}")
    s.close()
    mr.close()
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--handoffs", type=int, default=1000)
    args = parser.parse_args()
    dev = need_gpu()
    dev.set_current()
    try:
        failures = produce(dev, max(1, args.consumers), args.handoffs)
    except CompilerLibraryNotFoundError:
        raise  # not a failure but a missing requirement: run_main() names the install command
    except CUDAError as exc:
        print(f"FAILED: {exc}")
        return 1
    for f in failures:
        print(f"FAILED: {f}")
    if not failures:
        print("all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    mp.set_start_method("spawn")  # CUDA does not survive fork; cuda_core warns when it is used
    run_main(main)
