"""A graph keeps the libraries of its kernels loaded through CUDA user objects, so a copy the
driver makes (``cuGraphClone``) runs after every Python reference is gone, as in cuda.core."""

from __future__ import annotations

import gc
import time
import weakref

import numpy as np
import pytest
from cuda.bindings import driver

import cuda_core.graph as G
from cuda_core import LaunchConfig, LegacyPinnedMemoryResource, Program, ProgramOptions
from cuda_core._utils import handle_return

SRC = r"""
extern "C" __global__ void store(int* out, int v) { out[threadIdx.x] = v; }
"""


def _kernel(dev):
    obj = Program(SRC, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin"
    )
    return obj, obj.get_kernel("store")


@pytest.mark.gpu
def test_a_driver_clone_runs_after_the_kernel_and_its_module_are_gone(dev):
    s = dev.create_stream()
    out = LegacyPinnedMemoryResource().allocate(4 * 32)
    host = np.from_dlpack(out).view(np.int32)  # pinned: readable from the host
    host[:] = 0
    obj, kernel = _kernel(dev)
    module_gone = weakref.ref(obj)
    g = G.GraphDefinition()
    g.launch(LaunchConfig(grid=1, block=32), kernel, out, np.int32(7))
    g.launch(
        LaunchConfig(grid=1, block=32), kernel, out, np.int32(7)
    )  # the same module: one user object
    assert len(g._state.libraries) == 1
    clone = handle_return(driver.cuGraphClone(driver.CUgraph(int(g.handle))), "cuGraphClone")
    del kernel, obj, g
    gc.collect()
    assert module_gone() is not None  # the clone's user object keeps the module
    exe = handle_return(driver.cuGraphInstantiate(clone, 0), "cuGraphInstantiate")
    handle_return(driver.cuGraphLaunch(exe, driver.CUstream(int(s.handle))), "cuGraphLaunch")
    s.sync()
    assert (host == 7).all()
    handle_return(driver.cuGraphExecDestroy(exe), "cuGraphExecDestroy")
    handle_return(driver.cuGraphDestroy(clone), "cuGraphDestroy")
    s.sync()
    for _ in range(50):  # the driver releases user objects on a thread of its own
        gc.collect()
        if module_gone() is None:
            break
        time.sleep(0.02)
    assert module_gone() is None, "the module outlived every graph that used it"
    out.close()
    s.close()


@pytest.mark.gpu
def test_a_driver_clone_keeps_the_buffers_its_nodes_use(dev):
    s = dev.create_stream()
    _obj, kernel = _kernel(dev)
    buf = dev.allocate(4 * 32, stream=s)
    gone = weakref.ref(buf)
    g = G.GraphDefinition()
    g.launch(LaunchConfig(grid=1, block=32), kernel, buf, np.int32(5))
    clone = handle_return(driver.cuGraphClone(driver.CUgraph(int(g.handle))), "cuGraphClone")
    dptr = int(buf.handle)
    del buf, g
    gc.collect()
    assert gone() is not None  # the clone's user object holds the kernel's arguments
    exe = handle_return(driver.cuGraphInstantiate(clone, 0), "cuGraphInstantiate")
    handle_return(driver.cuGraphLaunch(exe, driver.CUstream(int(s.handle))), "cuGraphLaunch")
    s.sync()
    out = np.zeros(32, dtype=np.int32)
    handle_return(driver.cuMemcpyDtoH(out.ctypes.data, dptr, out.nbytes), "cuMemcpyDtoH")
    assert (out == 5).all()
    handle_return(driver.cuGraphExecDestroy(exe), "cuGraphExecDestroy")
    handle_return(driver.cuGraphDestroy(clone), "cuGraphDestroy")
    for _ in range(50):  # released on a driver thread
        gc.collect()
        if gone() is None:
            break
        time.sleep(0.02)
    assert gone() is None, "the buffer outlived every graph that used it"
    s.close()
