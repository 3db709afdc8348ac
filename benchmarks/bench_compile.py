"""Compile and compile-cache cost, each measurement in a fresh process.

Rows: a cold compile (empty cache) of a templated kernel with two name expressions, and a
cache hit in a new process, timed from ``Program(...)`` (or the peer's equivalent) to a loaded
kernel. Peers: NVIDIA ``cuda.core`` (its ``FileStreamProgramCache``; a non-templated kernel,
since its file cache refuses name expressions' symbol mappings) and CuPy (``RawModule`` with its
disk cache). A peer that is not installed prints "n/a". Without a GPU, the times stop at the
compiled ObjectCode (nothing can be loaded) and the table says so.

Run: ``python benchmarks/bench_compile.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import environment_line

TEMPLATED = r"""
template <typename T>
__global__ void axpy(T a, const T* x, T* y, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
"""
PLAIN = r"""
extern "C" __global__ void axpy_f(float a, const float* x, float* y, size_t n) {
    size_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
"""
NAMES = ["axpy<float>", "axpy<double>"]

# Each child prints one JSON line: {"seconds": ..., "loaded": bool} or {"error": ...}.
_PRELUDE = r"""
import json, sys, time
def gpu_arch():
    try:
        from cuda.bindings import driver
        if driver.cuInit(0)[0] != 0:
            return None
        err, dev = driver.cuDeviceGet(0)
        A = driver.CUdevice_attribute
        ma = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)[1]
        mi = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)[1]
        return f"{ma}{mi}"
    except Exception:
        return None
ARCH = gpu_arch()
"""

CHILD = {
    "cuda_core": _PRELUDE
    + r"""
from cuda_core import Program, ProgramOptions
if ARCH:
    from cuda_core import Device
    Device().set_current()
code, names = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
mod = Program(code, "c++", options=ProgramOptions(arch=f"sm_{ARCH or '90'}")).compile("cubin", name_expressions=names)
if ARCH:
    for n in names:
        mod.get_kernel(n)
t1 = time.perf_counter()
print(json.dumps({"seconds": t1 - t0, "loaded": bool(ARCH)}))
""",
    "cuda.core": _PRELUDE
    + r"""
from cuda.core import Program, ProgramOptions
from cuda.core.utils import FileStreamProgramCache
if ARCH:
    from cuda.core import Device
    Device().set_current()
code, cache_dir = sys.argv[1], sys.argv[3]
t0 = time.perf_counter()
with FileStreamProgramCache(cache_dir) as cache:
    mod = Program(code, "c++", options=ProgramOptions(arch=f"sm_{ARCH or '90'}")).compile("cubin", cache=cache)
if ARCH:
    mod.get_kernel("axpy_f")
t1 = time.perf_counter()
print(json.dumps({"seconds": t1 - t0, "loaded": bool(ARCH)}))
""",
    "cupy": _PRELUDE
    + r"""
import cupy as cp
if not ARCH:
    raise SystemExit(json.dumps({"error": "CuPy needs a GPU"}))
cp.cuda.Device(0).use()
code, names = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
mod = cp.RawModule(code=code, options=("-std=c++17",), name_expressions=names)
for n in names:
    mod.get_function(n)
t1 = time.perf_counter()
print(json.dumps({"seconds": t1 - t0, "loaded": True}))
""",
}


def _run(impl: str, code: str, names: list[str], cache_dir: str) -> dict:
    env = dict(os.environ)
    env["CUDA_CORE_CACHE_DIR"] = os.path.join(cache_dir, "cuda_core")
    env["CUPY_CACHE_DIR"] = os.path.join(cache_dir, "cupy")
    env.pop("CUDA_CORE_CACHE", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    args = [
        sys.executable,
        "-c",
        CHILD[impl],
        code,
        json.dumps(names),
        os.path.join(cache_dir, "cuda.core"),
    ]
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    lines = [ln for ln in p.stdout.splitlines() + p.stderr.splitlines() if ln.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": tail[:70]}


def measure(impl: str, repeat: int) -> dict[str, object]:
    code, names = (PLAIN, ["axpy_f"]) if impl == "cuda.core" else (TEMPLATED, NAMES)
    cold, hit, loaded = [], [], True
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench_compile_") as d:
            r = _run(impl, code, names, d)  # empty cache: a cold compile
            if "error" in r:
                return {"cold": r["error"], "hit": r["error"]}
            cold.append(r["seconds"])
            loaded = loaded and r["loaded"]
            r = _run(impl, code, names, d)  # a new process finds the entry on disk
            if "error" in r:
                return {"cold": statistics.median(cold), "hit": r["error"]}
            hit.append(r["seconds"])
    return {"cold": statistics.median(cold), "hit": statistics.median(hit), "loaded": loaded}


def _available(mod: str) -> bool:
    try:
        __import__(mod)
    except Exception:
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="fresh-process pairs per implementation")
    args = ap.parse_args()
    impls = ["cuda_core", "cuda.core", "cupy"]
    results: dict[str, dict[str, object]] = {}
    for impl in impls:
        mod = {"cuda.core": "cuda.core.utils", "cupy": "cupy"}.get(impl)
        if mod and not _available(mod):
            results[impl] = {"cold": "n/a", "hit": "n/a"}
            continue
        results[impl] = measure(impl, args.repeat)

    def cell(v: object) -> str:
        return f"{v * 1e3:.2f}" if isinstance(v, float) else str(v)

    print(environment_line())
    loaded = results["cuda_core"].get("loaded", False)
    print(
        f"## Compile and cache hit, fresh process each, median of {args.repeat} "
        f"({'to a loaded kernel' if loaded else 'no GPU: to the compiled ObjectCode, nothing loaded'})"
    )
    print()
    head = ["operation"] + [f"{i} (ms)" for i in impls] + ["cuda_core/best peer"]
    rows = [head]
    for op, label in (
        ("cold", "cold compile, templated x2 (cuda.core: plain kernel)"),
        ("hit", "cache hit in a new process"),
    ):
        vals = [results[i][op] for i in impls]
        peers = [v for v in vals[1:] if isinstance(v, float)]
        mine = vals[0]
        ratio = f"{mine / min(peers):.2f}" if peers and isinstance(mine, float) else "n/a"
        rows.append([label] + [cell(v) for v in vals] + [ratio])
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    for n, r in enumerate(rows):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    hit = results["cuda_core"]["hit"]
    if isinstance(hit, float):
        print(f"\ncuda_core cache hit: {hit * 1e3:.2f} ms (target < 2 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
