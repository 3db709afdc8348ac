import time, ctypes
from cuda.bindings import driver as d
def ok(r):
    assert r[0] == 0, r
    return r[1] if len(r) == 2 else r[1:]
ok((d.cuInit(0),) ) if False else d.cuInit(0)
dev = ok(d.cuDeviceGet(0))
ctx = ok(d.cuDevicePrimaryCtxRetain(dev)); d.cuCtxSetCurrent(ctx)
print("ctx", int(ctx), "id", d.cuCtxGetId(ctx))
s1 = ok(d.cuStreamCreate(1)); e1 = ok(d.cuEventCreate(2))
pool = ok(d.cuDeviceGetMemPool(dev)); print("pool", int(pool))
p = ok(d.cuMemAllocFromPoolAsync(1<<20, pool, s1)); print("ptr", int(p))
print("reset", d.cuDevicePrimaryCtxReset(dev))
print("after reset: getid(ctx)", d.cuCtxGetId(ctx), "current", d.cuCtxGetCurrent())
print("query s1", d.cuStreamQuery(s1), "query e1", d.cuEventQuery(e1))
print("state", d.cuDevicePrimaryCtxGetState(dev))
ctx2 = ok(d.cuDevicePrimaryCtxRetain(dev)); print("ctx2", int(ctx2), "same", int(ctx2)==int(ctx))
print("setcur", d.cuCtxSetCurrent(ctx2), "getid", d.cuCtxGetId(ctx2))
print("query s1 after reinit", d.cuStreamQuery(s1))
s2 = ok(d.cuStreamCreate(1)); print("s2", int(s2), "alias s1", int(s2)==int(s1))
e2 = ok(d.cuEventCreate(2)); print("e2 alias e1", int(e2)==int(e1))
pool2 = ok(d.cuDeviceGetMemPool(dev)); print("pool2", int(pool2), "same", int(pool2)==int(pool))
print("alloc old pool", d.cuMemAllocFromPoolAsync(1<<20, pool, s2))
p2 = ok(d.cuMemAllocFromPoolAsync(1<<20, pool2, s2)); print("p2", int(p2), "alias", int(p2)==int(p))
# cost of cuCtxGetId through ctypes
lib = ctypes.CDLL("libcuda.so.1"); f = lib.cuCtxGetId; f.argtypes=[ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulonglong)]
x = ctypes.c_ulonglong(); c = ctypes.c_void_p(int(ctx2)); n=200000
t=time.perf_counter()
for _ in range(n): f(c, ctypes.byref(x))
print("cuCtxGetId ctypes us", (time.perf_counter()-t)/n*1e6)
g = lib.cuCtxGetCurrent; g.argtypes=[ctypes.POINTER(ctypes.c_void_p)]; y=ctypes.c_void_p()
t=time.perf_counter()
for _ in range(n): g(ctypes.byref(y))
print("cuCtxGetCurrent ctypes us", (time.perf_counter()-t)/n*1e6)
# occupancy segfault: what cuda.core does
try:
    import cuda.core as cc
    from cuda.core import Device, Program, ProgramOptions
    D = Device(); D.set_current()
    k = Program('extern "C" __global__ void k(float*x){extern __shared__ float s[]; x[threadIdx.x]=s[0];}', "c++", ProgramOptions(arch="sm_90")).compile("cubin").get_kernel("k")
    import inspect
    src = inspect.getsource(type(k.occupancy).max_potential_block_size) if hasattr(type(k.occupancy).max_potential_block_size, '__code__') else 'cython'
    print("cc src", src[:1500])
    CB = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)
    cb = CB(lambda b: 4*b)
    b2d = d.CUoccupancyB2DSize(ctypes.cast(cb, ctypes.c_void_p).value)
    print("cc b2d", k.occupancy.max_potential_block_size(b2d, 0))
    print("cc int", k.occupancy.max_potential_block_size(128, 0))
except Exception as e:
    import traceback; traceback.print_exc()
