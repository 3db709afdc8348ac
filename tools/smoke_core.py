"""Quick GPU smoke check of Device/Stream/Event (developer tool, not a test)."""
import threading

from cuda.bindings import driver

import cuda_core as cc

dev = cc.Device()
print(dev, dev.arch, dev.compute_capability, dev.uuid, dev.pci_bus_id, dev.total_memory)
try:
    dev.create_stream()
except cc.CUDAError as e:
    print("before set_current:", e)
dev.set_current()
print("ctx", dev.context)
p = dev.properties
print(p.max_threads_per_block, p.multiprocessor_count, p.cluster_launch, p.memory_pools_supported)
s = dev.create_stream()
print(s, s.is_nonblocking, s.priority, s.device, s.context)
s2 = cc.Stream(options=cc.StreamOptions(priority=-1))
print(s2.priority)
e1 = s.record(options={"timing_enabled": True})
e2 = s.record(options={"timing_enabled": True})
e2.sync()
print("ms", e2 - e1, e2.is_done)
s2.wait(s)
s2.wait(e1)
s.sync()
dev.sync()
ev = dev.create_event({"ipc_enabled": True})
print(ev.ipc_descriptor)
s.close(); s.close(); s2.close()
print(cc.LEGACY_DEFAULT_STREAM.device, dev.default_stream)
out = []
t = threading.Thread(target=lambda: out.append(cc.Device(0)))
t.start(); t.join()
print("other thread distinct:", out[0] is not cc.Device(0), cc.Device(0) is cc.Device(0))
ctx2 = cc._utils.handle_return(driver.cuCtxCreate(None, 0, dev._cu_device), "cuCtxCreate")
print("ctx2 current; create_stream on dev:")
s3 = dev.create_stream()
cur = cc._utils.handle_return(driver.cuCtxGetCurrent(), "x")
print("restored:", int(cur) == int(ctx2), "stream ctx is primary:", int(s3._context_handle()) == dev._ctx_int)
print("OK")
