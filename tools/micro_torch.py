"""Micro-timings of the pieces behind StridedMemoryView.from_dlpack(torch tensor) (developer tool).

Run on a GPU machine from the repository root: ``PYTHONPATH=$PWD python3 tools/micro_torch.py``.
"""

import timeit

import torch

import cuda_core as cc
from cuda_core._interop import _fast_arrays as bridge
from cuda_core.utils import StridedMemoryView as V


def t(label, fn, n=50000):
    for _ in range(500):
        fn()
    best = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
    print(f"{label:45s} {best:.3f} us", flush=True)


dev = cc.Device()
dev.set_current()
s = dev.create_stream()
sp = int(s.handle)
x = torch.ones(1024, device="cuda")
c = torch.ones(12).reshape(3, 4)

V.from_dlpack(x, sp)
aoti = bridge._torch["aoti"]
print("aoti", aoti is not None)
meta = aoti["meta"]
t("aoti meta (cuda)", lambda: meta(x))
t("t.is_neg()", x.is_neg)
t("t.is_pinned() (cpu)", c.is_pinned)
t("raw_stream(0)", lambda: bridge._torch["raw_stream"](0))
t("order_after(legacy, s)", lambda: bridge.order_after(1, sp, 0))
t("torch_view(cuda, sp)", lambda: bridge.torch_view(x, sp))
t("torch_view(cuda, -1)", lambda: bridge.torch_view(x, -1))
t("cc from_dlpack(cuda, sp)", lambda: V.from_dlpack(x, sp))
t("cc from_dlpack(cuda, -1)", lambda: V.from_dlpack(x, -1))
t("cc from_dlpack(cpu, -1)", lambda: V.from_dlpack(c, -1))
try:
    from cuda.core.utils import StridedMemoryView as NV
except ImportError:
    NV = None
if NV is not None:
    t("nv from_dlpack(cuda, sp)", lambda: NV.from_dlpack(x, sp))
    t("nv from_dlpack(cuda, -1)", lambda: NV.from_dlpack(x, -1))
    t("nv from_dlpack(cpu, -1)", lambda: NV.from_dlpack(c, -1))
s.sync()
