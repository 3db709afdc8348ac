"""All-reduce bus bandwidth and latency on every visible GPU, and point-to-point bandwidth between
two: cuda_core.nccl against torch.distributed.

For each library, one spawned process per GPU runs the same schedule on float32 data, in place,
``sum``: for each size from 1 MiB to 1 GiB (powers of 4), a warm-up, then ``--reps`` rounds
of back-to-back all-reduces (more rounds for small sizes), each round timed on the host from
the first call to the stream's completion. Reported per size: the median time per all-reduce
(the slower rank's), algbw = bytes / time and busbw = algbw * 2(n-1)/n (NCCL's bus bandwidth,
comparable across GPU counts), and the ratio cuda_core / PyTorch. Latency: the median of
single all-reduces of 1 MiB, each followed by a stream synchronisation, in microseconds.

cuda_core calls NCCL through nccl4py on a ``StridedMemoryView`` of a ``Buffer`` and a
``Stream``; PyTorch through ``torch.distributed.all_reduce`` (NCCL backend, its own NCCL
stream). Both should run the same ``libnccl.so.2``: where PyTorch is installed the cuda_core
process imports it first, so nccl4py finds PyTorch's library already loaded; each side prints
the path and version it used.

Point-to-point: GPU 0 sends to GPU 1 (``send``/``recv`` against ``dist.send``/``dist.recv``),
the same sizes, timed the same way on both ranks (the slower); bandwidth = bytes / time.

Run: ``python benchmarks/bench_allreduce.py`` (every visible GPU; ``--gpus N`` for fewer,
``--first torch`` runs PyTorch first, to see order effects, ``--no-p2p`` skips the
point-to-point table). Every process runs with ``NCCL_NVLS_ENABLE=0``. Targets: busbw >= 0.95x
PyTorch from 64 MiB, lower latency than PyTorch at 1 MiB.
"""

from __future__ import annotations

import argparse
import inspect
import multiprocessing
import os
import queue as _queue
import socket
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _harness import environment_line, markdown_table

MIB = 1 << 20
SIZES = [MIB * 4**k for k in range(6)]  # 1 MiB .. 1 GiB
LAT_SIZE = MIB
WARMUP = 5


def _iters(size: int) -> int:
    return max(5, min(100, (512 * MIB) // size))


def _loaded_nccl() -> str:
    """The libnccl file mapped into this process (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libnccl" in line and "/" in line}
    except OSError:
        return "?"
    return ", ".join(sorted(os.path.realpath(p) for p in paths)) or "none mapped"


def _measure(
    op: Any, sync: Any, views: dict[int, Any], reps: int
) -> tuple[dict[int, float], float]:
    """(median seconds per all-reduce by size, median single all-reduce + sync latency at 1 MiB)."""
    per_op: dict[int, float] = {}
    for size in SIZES:
        v, n = views[size], _iters(size)
        for _ in range(WARMUP):
            op(v)
        sync()
        rounds = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(n):
                op(v)
            sync()
            rounds.append((time.perf_counter() - t0) / n)
        per_op[size] = statistics.median(rounds)
    v = views[LAT_SIZE]
    lat = []
    for _ in range(20 * reps):
        t0 = time.perf_counter()
        op(v)
        sync()
        lat.append(time.perf_counter() - t0)
    return per_op, statistics.median(lat)


def _measure_p2p(
    send: Any, recv: Any, sync: Any, rank: int, views: dict[int, Any], reps: int
) -> dict[int, float]:
    """Median seconds per transfer by size, rank 0 sending to rank 1 (other ranks idle)."""
    per_op: dict[int, float] = {}
    for size in SIZES:
        v, n = views[size], _iters(size)
        rounds = []
        for r in range(WARMUP // 5 + reps):
            t0 = time.perf_counter()
            for _ in range(n):
                if rank == 0:
                    send(v)
                elif rank == 1:
                    recv(v)
            sync()
            if r >= WARMUP // 5:
                rounds.append((time.perf_counter() - t0) / n)
        per_op[size] = statistics.median(rounds)
    return per_op


def worker_cuda_core(
    rank: int, world: int, port: int, reps: int, pin_torch_nccl: bool, p2p: bool
) -> dict[str, Any]:
    if pin_torch_nccl:
        try:  # PyTorch loads its libnccl.so.2 at import; nccl4py then finds it already loaded
            import torch  # noqa: F401
        except ImportError:
            pass
    import numpy as np

    from cuda_core import Device, nccl
    from cuda_core.utils import StridedMemoryView

    dev = Device(rank)
    dev.set_current()
    s = dev.create_stream()
    uid = nccl.exchange_unique_id(rank, world, "127.0.0.1", port, timeout=120)
    comm = nccl.Communicator.init(world, rank, uid, device=dev)
    buf = dev.allocate(max(SIZES), stream=s)
    buf.fill(0, stream=s)
    views = {
        size: StridedMemoryView.from_buffer(buf, (size // 4,), dtype=np.float32) for size in SIZES
    }
    all_reduce = comm.all_reduce

    def op(v: Any) -> None:
        all_reduce(v, op="sum", stream=s)

    per_op, lat = _measure(op, s.sync, views, reps)
    p2p_op: dict[int, float] = {}
    if p2p:
        p2p_op = _measure_p2p(lambda v: comm.send(v, 1, stream=s), lambda v: comm.recv(v, 0, stream=s),
                              s.sync, rank, views, reps)  # fmt: skip
        comm.barrier(stream=s)
    info = nccl.library_info()
    comm.close()
    buf.close()
    return {"per_op": per_op, "lat": lat, "nccl": f"{info['version']} ({_loaded_nccl()})",
            "extra": f"nccl4py {info['nccl4py']}", "p2p": p2p_op}  # fmt: skip


def worker_torch(
    rank: int, world: int, port: int, reps: int, _pin: bool, p2p: bool
) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    kw = (
        {"device_id": dev}
        if "device_id" in inspect.signature(dist.init_process_group).parameters
        else {}
    )
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, **kw
    )
    t = torch.zeros(max(SIZES) // 4, dtype=torch.float32, device=dev)
    views = {size: t[: size // 4] for size in SIZES}
    all_reduce = dist.all_reduce

    def op(v: Any) -> None:
        all_reduce(v)

    per_op, lat = _measure(op, torch.cuda.synchronize, views, reps)
    p2p_op: dict[int, float] = {}
    if p2p:
        p2p_op = _measure_p2p(lambda v: dist.send(v, 1), lambda v: dist.recv(v, 0),
                              torch.cuda.synchronize, rank, views, reps)  # fmt: skip
        dist.barrier()
    ver = ".".join(str(x) for x in torch.cuda.nccl.version())
    dist.destroy_process_group()
    return {
        "per_op": per_op,
        "lat": lat,
        "nccl": f"{ver} ({_loaded_nccl()})",
        "extra": f"torch {torch.__version__}",
        "p2p": p2p_op,
    }


def _entry(
    fn: Any, rank: int, world: int, port: int, reps: int, pin: bool, p2p: bool, out: Any
) -> None:
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    try:
        out.put((rank, True, fn(rank, world, port, reps, pin, p2p)))
    except BaseException:
        out.put((rank, False, traceback.format_exc()))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_library(
    fn: Any, world: int, reps: int, pin: bool, p2p: bool, timeout: float = 300.0
) -> dict[str, Any] | str:
    """Run ``fn`` on every rank in spawned processes; the slower rank's time per size (or an error)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_entry, args=(fn, r, world, port, reps, pin, p2p, out))
        for r in range(world)
    ]
    for p in procs:
        p.start()
    got: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(got) < world and time.monotonic() < deadline:
            try:
                rank, ok, value = out.get(timeout=5)
            except _queue.Empty:
                if any(not p.is_alive() for p in procs) and out.empty():
                    break
                continue
            if not ok:
                return f"rank {rank} failed:\n{value}"
            got[rank] = value
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    if len(got) < world:
        return f"ranks {sorted(set(range(world)) - set(got))} gave no result (exit codes {[p.exitcode for p in procs]})"
    res = dict(got[0])
    res["per_op"] = {size: max(g["per_op"][size] for g in got.values()) for size in SIZES}
    res["lat"] = max(g["lat"] for g in got.values())
    if p2p:
        res["p2p"] = {size: max(got[r]["p2p"][size] for r in (0, 1)) for size in SIZES}
    return res


def _p2p_table(results: dict[str, dict[str, Any]]) -> str:
    rows = [["size", "cuda_core us", "torch us", "cuda_core GB/s", "torch GB/s", "ratio"]]
    for size in SIZES:
        t = {k: r["p2p"][size] for k, r in results.items() if r.get("p2p")}
        bw = {k: size / v / 1e9 for k, v in t.items()}
        cells = [f"{size // MIB} MiB"]
        cells += [f"{t[k] * 1e6:.1f}" if k in t else "n/a" for k in ("cuda_core", "torch")]
        cells += [f"{bw[k]:.1f}" if k in bw else "n/a" for k in ("cuda_core", "torch")]
        cells.append(f"{bw['cuda_core'] / bw['torch']:.3f}" if len(bw) == 2 else "n/a")
        rows.append(cells)
    return markdown_table("point-to-point, GPU 0 sends to GPU 1 (send/recv), float32", rows)


def _table(title: str, world: int, results: dict[str, dict[str, Any]]) -> str:
    factor = 2 * (world - 1) / world
    ours, theirs = results.get("cuda_core"), results.get("torch")
    head = [
        "size",
        "cuda_core us",
        "torch us",
        "cuda_core busbw GB/s",
        "torch busbw GB/s",
        "busbw ratio",
    ]
    rows = [head]
    for size in SIZES:
        cells = [f"{size // MIB} MiB"]
        bw = {}
        for name, r in (("cuda_core", ours), ("torch", theirs)):
            t = r["per_op"][size] if r else None
            bw[name] = size / t * factor / 1e9 if t else None
            cells.append(f"{t * 1e6:.1f}" if t else "n/a")
        cells += [f"{bw[k]:.1f}" if bw[k] else "n/a" for k in ("cuda_core", "torch")]
        cells.append(
            f"{bw['cuda_core'] / bw['torch']:.3f}" if bw["cuda_core"] and bw["torch"] else "n/a"
        )
        rows.append(cells)
    lines = [markdown_table(title, rows)]
    lat = {k: r["lat"] * 1e6 for k, r in (("cuda_core", ours), ("torch", theirs)) if r}
    line = ", ".join(f"{k} {v:.1f} us" for k, v in lat.items())
    if len(lat) == 2:
        line += f" (ratio {lat['cuda_core'] / lat['torch']:.3f})"
    lines.append("")
    lines.append(f"1 MiB latency (one all-reduce + stream sync, median): {line}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--first", choices=("cuda_core", "torch"), default="cuda_core")
    ap.add_argument(
        "--gpus", type=int, default=0, help="how many GPUs (default: every visible one)"
    )
    ap.add_argument("--no-p2p", action="store_true", help="skip the point-to-point table")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument(
        "--no-pin", action="store_true", help="do not import torch first in the cuda_core processes"
    )
    args = ap.parse_args()
    print(environment_line())
    from cuda_core import nccl, system

    try:
        n = system.get_num_devices()
    except Exception as exc:
        print(f"no GPU: {exc}")
        return 0
    args.gpus = args.gpus or n
    if n < args.gpus or args.gpus < 2:
        print(f"needs {max(2, args.gpus)} GPUs (this machine has {n})")
        return 0
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    libs = {"cuda_core": worker_cuda_core, "torch": worker_torch}
    if not nccl.is_available():
        print('cuda_core: n/a (pip install "cudacore[nccl]")')
        libs.pop("cuda_core")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch: n/a (not installed)")
        libs.pop("torch")
    order = sorted(libs, key=lambda k: k != args.first)
    results: dict[str, dict[str, Any]] = {}
    for name in order:
        res = run_library(libs[name], args.gpus, args.reps, not args.no_pin, not args.no_p2p)
        if isinstance(res, str):
            print(f"{name}: {res}")
            continue
        results[name] = res
        print(f"{name}: NCCL {res['nccl']}; {res['extra']}")
    paths = {r["nccl"].split(" (", 1)[1] for r in results.values()}
    if len(results) == 2:
        print("same libnccl on both sides:", "yes" if len(paths) == 1 else f"NO: {sorted(paths)}")
    print()
    print(
        _table(
            f"all-reduce, float32 sum in place, {args.gpus} GPUs, order {' then '.join(order)}",
            args.gpus,
            results,
        )
    )
    if not args.no_p2p and results:
        print()
        print(_p2p_table(results))
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
