"""Interop and graph benchmark: views, stream wrapping, graph replay vs direct launches.

Rows, each for cuda_core and NVIDIA cuda.core (when importable) in the same run:

* ``StridedMemoryView.from_dlpack`` on a PyTorch tensor and on a CuPy array;
* wrapping a PyTorch / CuPy stream into a Stream (``Device.create_stream(foreign_stream)``);
* per-kernel cost of a captured graph of 1,000 empty kernels (one ``Graph.launch`` + sync,
  divided by 1,000) versus a direct ``launch()`` loop of 1,000 empty kernels.

A CPU-only section runs first and needs no GPU: ``StridedMemoryView.from_dlpack`` and
``from_array_interface`` on NumPy host arrays, for both implementations, plus a row timing the
producer's own ``__dlpack_device__`` + ``__dlpack__`` calls so the consumer's overhead on top of
them can be read off (view cost minus producer cost).

Run: ``python benchmarks/bench_interop.py`` (GPU rows need a GPU; missing peers print n/a), or
``python benchmarks/bench_interop.py --cpu`` for the CPU-only section.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _harness import Suite, environment_line

EMPTY = 'extern "C" __global__ void empty_kernel() {}'
KERNELS = 1000


def _impls():
    out = {}
    import cuda_core

    out["cuda_core"] = cuda_core
    try:
        import cuda.core as nv

        if not hasattr(nv, "Device"):
            import cuda.core.experimental as nv
        out["cuda.core"] = nv
    except Exception:
        pass
    return out


def _view_cls(mod):
    try:
        return mod.utils.StridedMemoryView
    except AttributeError:
        import importlib

        return importlib.import_module(mod.__name__ + ".utils").StridedMemoryView


def _per_kernel(fn, rounds=7):
    """Median seconds per kernel of fn() (which runs KERNELS kernels and syncs)."""
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / KERNELS)
    times.sort()
    return times[len(times) // 2]


def cpu_main(impls) -> None:
    """Views of NumPy host arrays (no GPU needed); ratio cuda_core / cuda.core."""
    import numpy as np

    names = ["cuda_core", "cuda.core"]
    suite = Suite("StridedMemoryView on NumPy host arrays (CPU only)", names, baseline="cuda.core")
    arrays = {
        "(3,4) float64": np.zeros((3, 4)),
        "strided (4,8)[:, ::2] int32": np.zeros((4, 8), dtype=np.int32)[:, ::2],
    }
    for label, a in arrays.items():
        for name in names:
            mod = impls.get(name)
            V = _view_cls(mod) if mod is not None else None
            suite.add(
                f"from_dlpack {label}",
                name,
                None if V is None else (lambda V=V, a=a: V.from_dlpack(a, -1)),
            )
    a = arrays["(3,4) float64"]
    for name in names:
        mod = impls.get(name)
        V = _view_cls(mod) if mod is not None else None
        # Both ask the driver for the current device here; cuda.core 1.2 needs a GPU and a
        # current context (CUDA_ERROR_INVALID_CONTEXT without one). Each is given its device
        # where there is a GPU, as code that uses a view would have.
        if mod is not None:
            try:
                mod.Device().set_current()
            except Exception:
                pass  # no GPU: the row says why
        suite.add(
            "from_array_interface (3,4) float64",
            name,
            None if V is None else (lambda V=V, a=a: V.from_array_interface(a)),
        )
    try:
        import torch

        t = torch.zeros((3, 4))
    except ImportError:
        t = None
    for name in names:
        mod = impls.get(name)
        V = _view_cls(mod) if mod is not None and t is not None else None
        suite.add(
            "from_dlpack torch CPU tensor (3,4)",
            name,
            None if V is None else (lambda V=V, t=t: V.from_dlpack(t, -1)),
        )
    producer = Suite(
        "producer cost alone (the floor every consumer pays)", ["numpy"], baseline="numpy"
    )
    dev, dl = a.__dlpack_device__, a.__dlpack__
    producer.run(
        "__dlpack_device__() + __dlpack__(max_version=(1, 0))",
        "numpy",
        lambda: (dev(), dl(stream=None, max_version=(1, 0))),
    )
    producer.run("__array_interface__", "numpy", lambda: a.__array_interface__)
    suite.measure()  # round-robin: a slow spell of the host hits both implementations alike
    print(suite.table())
    print()
    print(producer.table())
    floor = producer.rows[0].results["numpy"]
    row = suite.rows[0].results
    if isinstance(floor, float):
        print()
        for name in names:
            v = row.get(name)
            if isinstance(v, float):
                print(
                    f"{name}: from_dlpack overhead on top of numpy's own calls = {(v - floor) * 1e6:.3f} us"
                )
    print()


def main() -> None:
    print(environment_line())
    impls = _impls()
    cpu_main(impls)
    if "--cpu" in sys.argv[1:]:
        return
    try:
        impls["cuda_core"].Device()
    except Exception as exc:
        print(f"GPU section skipped: {type(exc).__name__}: {exc}"[:200])
        return
    names = ["cuda_core", "cuda.core"]
    suite = Suite("interop and graphs", names, baseline="cuda.core")
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import cupy as cp
    except ImportError:
        cp = None
    graph_rows: dict[str, dict[str, float | str]] = {}
    for name in names:
        mod = impls.get(name)
        if mod is None:
            for op in (
                "from_dlpack(torch tensor)",
                "from_dlpack(cupy array)",
                "wrap torch stream",
                "wrap cupy stream",
            ):
                suite.add(op, name, None)
            continue
        dev = mod.Device()
        dev.set_current()
        s = dev.create_stream()
        V = _view_cls(mod)
        sp = int(s.handle)
        if torch is not None:
            t = torch.ones(1024, device="cuda")
            suite.add(
                "from_dlpack(torch tensor)", name, lambda V=V, t=t, sp=sp: V.from_dlpack(t, sp)
            )
            ts = torch.cuda.Stream()
            suite.add("wrap torch stream", name, lambda dev=dev, ts=ts: dev.create_stream(ts))
        else:
            suite.add("from_dlpack(torch tensor)", name, None)
            suite.add("wrap torch stream", name, None)
        if cp is not None:
            a = cp.ones(1024, dtype=cp.float32)
            suite.add("from_dlpack(cupy array)", name, lambda V=V, a=a, sp=sp: V.from_dlpack(a, sp))
            cs = cp.cuda.Stream(non_blocking=True)
            suite.add("wrap cupy stream", name, lambda dev=dev, cs=cs: dev.create_stream(cs))
        else:
            suite.add("from_dlpack(cupy array)", name, None)
            suite.add("wrap cupy stream", name, None)
        # graph replay vs direct launches
        prog = mod.Program(
            EMPTY, code_type="c++", options=mod.ProgramOptions(arch=f"sm_{dev.arch}")
        )
        kern = prog.compile("cubin").get_kernel("empty_kernel")
        cfg = mod.LaunchConfig(grid=1, block=32)

        def direct(mod=mod, s=s, kern=kern, cfg=cfg):
            for _ in range(KERNELS):
                mod.launch(s, cfg, kern)
            s.sync()

        b = s.create_graph_builder()
        b.begin_building()
        for _ in range(KERNELS):
            mod.launch(b, cfg, kern)
        b.end_building()
        g = b.complete()
        g.upload(s)

        def replay(g=g, s=s):
            g.launch(s)
            s.sync()

        graph_rows[name] = {"direct": _per_kernel(direct), "graph": _per_kernel(replay)}
    suite.measure()
    print(suite.table())
    print()
    print(f"## graph of {KERNELS} empty kernels: microseconds per kernel (host + device, median)")
    print()
    print("| implementation | direct launch() loop | graph replay | direct/graph |")
    print("|---|---|---|---|")
    for name in names:
        r = graph_rows.get(name)
        if r is None:
            print(f"| {name} | n/a | n/a | n/a |")
            continue
        d, gr = r["direct"], r["graph"]
        print(f"| {name} | {d * 1e6:.3f} | {gr * 1e6:.3f} | {d / gr:.1f}x |")
    if "cuda_core" in graph_rows and "cuda.core" in graph_rows:
        a, b = graph_rows["cuda_core"]["graph"], graph_rows["cuda.core"]["graph"]
        print(f"\ngraph replay per kernel, cuda_core/cuda.core: {a / b:.2f}")


if __name__ == "__main__":
    main()
