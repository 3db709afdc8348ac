"""Micro-timings of the pieces behind Device()/Stream/Event host costs (developer tool)."""
import ctypes
import timeit
import weakref

from cuda.bindings import driver

import cuda_core as cc

dev = cc.Device()
dev.set_current()
s = dev.create_stream()


def t(label, fn, n=100000):
    for _ in range(1000):
        fn()
    best = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
    print(f"{label:45s} {best:.3f} us")


t("bindings cuCtxGetDevice", driver.cuCtxGetDevice)
t("bindings cuCtxGetCurrent", driver.cuCtxGetCurrent)
err, pfn, _ = driver.cuGetProcAddress(b"cuCtxGetDevice", 12000, 0)
proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int))
f = proto(int(pfn))
out = ctypes.c_int()
ref = ctypes.byref(out)
t("ctypes cuCtxGetDevice(byref)", lambda: f(ref))
ptr = ctypes.pointer(out)
t("ctypes cuCtxGetDevice(pointer)", lambda: f(ptr))
t("Device()", cc.Device)
t("Device(0)", lambda: cc.Device(0))
flags = int(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING)


def ev_bind():
    e = driver.cuEventCreate(flags)[1]
    driver.cuEventDestroy(e)


t("bindings cuEventCreate+Destroy", ev_bind)
err, pc, _ = driver.cuGetProcAddress(b"cuEventCreate", 12000, 0)
err, pd, _ = driver.cuGetProcAddress(b"cuEventDestroy", 12000, 0)
err, pr, _ = driver.cuGetProcAddress(b"cuEventRecord", 12000, 0)
fc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_uint)(int(pc))
fd = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(int(pd))
fr = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(int(pr))
h = ctypes.c_void_p()
hb = ctypes.byref(h)


def ev_ct():
    fc(hb, flags)
    fd(h.value)


t("ctypes cuEventCreate+Destroy", ev_ct)
e = driver.cuEventCreate(flags)[1]
t("bindings cuEventRecord", lambda: driver.cuEventRecord(e, s.handle))
ei, si = int(e), int(s.handle)
t("ctypes cuEventRecord", lambda: fr(ei, si))
t("cc event create+close", lambda: dev.create_event().close())
ev = dev.create_event()
t("cc Stream.record(ev)", lambda: s.record(ev))


class Owner:
    __slots__ = ("__weakref__",)


def fin():
    o = Owner()
    f = weakref.finalize(o, int, 1)
    f()


t("weakref.finalize create+call", fin)
t("cc stream create+close", lambda: dev.create_stream().close(), n=20000)


def st_bind():
    h = driver.cuStreamCreate(1)[1]
    driver.cuStreamDestroy(h)


t("bindings cuStreamCreate+Destroy", st_bind, n=20000)
t("dev._scope() enter/exit", lambda: dev._scope().__enter__().__exit__())
