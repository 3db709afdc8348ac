"""Micro-timings of the pieces behind StridedMemoryView.from_dlpack(torch tensor) (developer tool).

Run on a GPU machine from the repository root: ``PYTHONPATH=$PWD python3 tools/micro_torch.py``.
"""

import timeit

import torch
from cuda.bindings import driver

import cuda_core as cc
from cuda_core._handles._backend import NATIVE, backend
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
pinned = c.pin_memory()

V.from_dlpack(x, sp)
print("native backend", NATIVE, "native torch reader", bridge._torch.get("native"))
t("t.is_neg() (cpu)", c.is_neg)
t("t.is_conj() (cpu)", c.is_conj)
t("t.is_pinned() (cpu)", c.is_pinned)
attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
t(
    "cuPointerGetAttribute (cuda.bindings, cpu)",
    lambda: driver.cuPointerGetAttribute(attr, c.data_ptr()),
)
t("backend.torch_view(cpu, -1)", lambda: backend.torch_view(V, c, -1))
t("backend.torch_view(pinned, -1)", lambda: backend.torch_view(V, pinned, -1))
t("backend.torch_view(cuda, -1)", lambda: backend.torch_view(V, x, -1))
t("bridge.torch_fields(cpu, -1)", lambda: bridge.torch_fields(c, -1))
t("cc from_dlpack(cuda, sp)", lambda: V.from_dlpack(x, sp))
t("cc from_dlpack(cuda, -1)", lambda: V.from_dlpack(x, -1))
t("cc from_dlpack(cpu, -1)", lambda: V.from_dlpack(c, -1))
t("cc from_dlpack(pinned, -1)", lambda: V.from_dlpack(pinned, -1))
try:
    from cuda.core.utils import StridedMemoryView as NV
except ImportError:
    NV = None
if NV is not None:
    t("nv from_dlpack(cuda, sp)", lambda: NV.from_dlpack(x, sp))
    t("nv from_dlpack(cuda, -1)", lambda: NV.from_dlpack(x, -1))
    t("nv from_dlpack(cpu, -1)", lambda: NV.from_dlpack(c, -1))
    v = NV.from_dlpack(pinned, -1)
    print("nv pinned view: is_device_accessible", v.is_device_accessible, v.__dlpack_device__())
s.sync()

# The NumPy array interface (host memory), the pieces of StridedMemoryView.from_array_interface.
import numpy as np  # noqa: E402

from cuda_core._interop import _array_interface as ai  # noqa: E402

a = np.zeros((3, 4))
iface = a.__array_interface__
t("a.__array_interface__", lambda: a.__array_interface__)
t("cuCtxGetDevice (cuda.bindings)", driver.cuCtxGetDevice)
t("_current_device()", ai._current_device)
t("_read_interface_dict", lambda: ai._read_interface_dict(iface, 0, False, 1))
t("cc from_array_interface", lambda: V.from_array_interface(a))
if NV is not None:
    t("nv from_array_interface", lambda: NV.from_array_interface(a))
