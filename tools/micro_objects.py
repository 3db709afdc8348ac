"""Micro-timings of the pieces behind the Device()/Stream/Event/Buffer host costs (developer tool).

Run on a GPU machine from the repository root: ``PYTHONPATH=$PWD python3 tools/micro_objects.py``.
Prints best-of-5 microseconds per call for cuda_core's public operations, the raw driver calls
under them, and NVIDIA cuda.core's public operations where it is installed.
"""

import os
import timeit

from cuda.bindings import driver

import cuda_core as cc
from cuda_core import _fast


def t(label, fn, n=100000):
    for _ in range(1000):
        fn()
    best = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
    print(f"{label:45s} {best:.3f} us", flush=True)


# MICRO_PRELOAD="cupy torch": import (and start) those first, as the benchmark scripts do.
for mod in os.environ.get("MICRO_PRELOAD", "").split():
    m = __import__(mod)
    if mod == "cupy":
        m.cuda.Stream(non_blocking=True)
    if mod == "torch":
        m.zeros(1, device="cuda")
dev = cc.Device()
dev.set_current()
s = dev.create_stream()
ev = dev.create_event()
print("fastpath", _fast.ENABLED)
t("raw ctx_get_device", _fast.ctx_get_device)
t("raw event_record", lambda: _fast.event_record(ev._int, s._int))
t("raw event_query", lambda: _fast.event_query(ev._int))
t("cc Device()", cc.Device)
t("cc Device(0)", lambda: cc.Device(0))
t("cc Stream.record(ev)", lambda: s.record(ev))
t("cc event create+close", lambda: dev.create_event().close())
t("cc event create (dropped)", lambda: dev.create_event())
t("cc stream create+close", lambda: dev.create_stream().close(), n=20000)
t("cc allocate(1 MiB)+close", lambda: dev.allocate(1 << 20, stream=s).close(), n=20000)
try:
    from cuda.core import Device as NDevice
except ImportError:
    NDevice = None
if NDevice is not None:
    nd = NDevice(0)
    nd.set_current()
    ns = nd.create_stream()
    ne = nd.create_event()
    t("nv Device()", NDevice)
    t("nv Device(0)", lambda: NDevice(0))
    t("nv Stream.record(ev)", lambda: ns.record(ne))
    t("nv event create+close", lambda: nd.create_event().close())
    t("nv stream create+close", lambda: nd.create_stream().close(), n=20000)
    t("nv allocate(1 MiB)+close", lambda: nd.allocate(1 << 20, stream=ns).close(), n=20000)
flags = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)


def ev_bind():
    e = driver.cuEventCreate(flags)[1]
    driver.cuEventDestroy(e)


t("bindings cuEventCreate+Destroy", ev_bind)
s.sync()
