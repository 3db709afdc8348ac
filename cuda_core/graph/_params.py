"""Driver parameter structs for explicit graph nodes, shared by node creation and updates.

Each helper checks its arguments (house-style errors), builds the ``cuda.bindings`` struct the
driver call takes, and returns the Python objects the graph must keep alive for as long as it
can run (buffers, kernel arguments, copied user data).
"""

from __future__ import annotations

from typing import Any

from .. import _trampolines as _table
from .._compat import driver
from .._errors import CUDAError
from .._event import Event
from .._kernel import Kernel
from .._kernel_arg_handler import ParamHolder
from .._launch_config import LaunchConfig
from .._memory import Buffer
from .._memory._shared import share
from .._utils import arg_error, check_int, handle_return
from ._driver import current_context

__all__: list[str] = []  # private module

_UNIFIED = driver.CUmemorytype.CU_MEMORYTYPE_UNIFIED


def check_config(config: Any) -> LaunchConfig:
    if not isinstance(config, LaunchConfig):
        raise arg_error("config", "a LaunchConfig", config, exc=TypeError)
    if config.cluster is not None or config.is_cooperative:
        raise arg_error(
            "config",
            "a LaunchConfig without cluster or cooperative launch",
            config,
            "graph kernel nodes support neither",
        )
    return config


def check_kernel(kernel: Any) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise arg_error("kernel", "a Kernel (from ObjectCode.get_kernel())", kernel, exc=TypeError)
    return kernel


def kernel_params(config: Any, kernel: Any, args: Any) -> tuple[Any, ParamHolder]:
    """``(CUDA_KERNEL_NODE_PARAMS, ParamHolder)``; the holder must live until the driver call
    returns (the driver copies the argument bytes) and its ``args`` as long as the graph."""
    cfg = check_config(config)
    ker = check_kernel(kernel)
    if not isinstance(args, (tuple, list)):
        raise arg_error(
            "args", "a tuple of kernel arguments (args=() for none)", args, exc=TypeError
        )
    layout = ker._param_layout()
    holder = ParamHolder(tuple(args), layout, param_types=ker._param_types())
    p = driver.CUDA_KERNEL_NODE_PARAMS()
    p.func = ker._function()
    p.gridDimX, p.gridDimY, p.gridDimZ = cfg.grid
    p.blockDimX, p.blockDimY, p.blockDimZ = cfg.block
    p.sharedMemBytes = cfg.shmem_size
    p.kernelParams = holder.ptr
    p.ctx = current_context("cuGraphAddKernelNode")
    return p, holder


def _keeps_only(*_: Any) -> None:
    """The function of a library-keeping user object's entry: never run; its arguments are
    what the entry keeps alive."""


def retain_library(graph: Any, state: Any, kernel: Kernel) -> None:
    """Make ``graph`` hold a CUDA user object that keeps ``kernel``'s module (and so its
    loaded library) alive, once per graph and module. The driver copies user objects into a
    clone (``cuGraphClone``) and an executable graph, so those run after every Python reference
    is gone, as in ``cuda.core``. A graph that refuses user objects keeps the Python references
    only."""
    module = kernel._module
    key = (int(graph), id(module))
    if key in state.libraries:
        return
    try:
        _table.keep_in_graph(graph, _keeps_only, (module,))
    except CUDAError:
        return
    state.libraries.add(key)


def hold(state: Any, graph: Any, keep: Any) -> None:
    """Keep ``keep`` (a node's operands: kernel arguments, buffers, events) alive as long as
    ``graph``: in the graph's Python state, and in a CUDA user object the graph holds, which
    the driver copies into a clone and an executable graph. A graph that refuses user objects
    keeps the Python reference only."""
    state.keep.append(keep)
    try:
        _table.keep_in_graph(graph, _keeps_only, (keep,))
    except CUDAError:
        pass


def address(value: Any, name: str, owner: Any = None) -> tuple[int, Any]:
    """``(address, object to retain)`` for a ``Buffer`` or a raw pointer (``int``). A Buffer
    (the operand, or the owner of a raw pointer) is retained with a share of its memory, so
    closing it while the graph lives frees nothing until the graph goes."""
    if isinstance(value, Buffer):
        if owner is not None:
            raise arg_error(
                f"{name}_owner",
                f"None when {name} is a Buffer",
                owner,
                "the graph already retains the Buffer",
                lead=f"{name}_owner cannot be used when {name} is a Buffer",
            )
        if value.is_closed:
            raise arg_error(
                name, "an open Buffer", value, lead=f"{name} Buffer has no active allocation"
            )
        return int(value.handle), (value, share(value))
    if isinstance(owner, Buffer) and owner.is_closed:
        raise arg_error(
            f"{name}_owner",
            "an open Buffer (or another object to retain)",
            owner,
            f"a closed Buffer no longer owns the memory at {name}",
            lead=f"{name}_owner Buffer has no active allocation",
        )
    if isinstance(owner, Buffer):
        owner = (owner, share(owner))  # the memory outlives owner.close(), as the graph does
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, driver.CUdeviceptr):
            return int(value), owner
        raise arg_error(name, "a Buffer or an int address", value, exc=TypeError)
    if value < 0:
        raise arg_error(name, "a non-negative address", value)
    return value, owner


def memset_value(value: Any) -> tuple[int, int]:
    """``(element size, value)`` of a memset fill: an int in [0, 256) is one byte; a
    buffer-protocol object of 1, 2 or 4 bytes gives its size and little-endian value."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < 256:
            raise arg_error("value", "an int in [0, 256) or a 1-, 2- or 4-byte buffer", value)
        return 1, value
    try:
        raw = memoryview(value).cast("B").tobytes()
    except TypeError:
        raise arg_error(
            "value", "an int in [0, 256) or a 1-, 2- or 4-byte buffer", value, exc=TypeError
        ) from None
    if len(raw) not in (1, 2, 4):
        raise arg_error("value", "an int in [0, 256) or a 1-, 2- or 4-byte buffer", value)
    return len(raw), int.from_bytes(raw, "little")


def memset_params(
    dst: Any, value: Any, width: Any, height: Any = 1, pitch: Any = 0, dst_owner: Any = None
) -> tuple[Any, Any]:
    """``(CUDA_MEMSET_NODE_PARAMS, object to retain)``."""
    ptr, keep = address(dst, "dst", dst_owner)
    size, v = memset_value(value)
    p = driver.CUDA_MEMSET_NODE_PARAMS()
    p.dst = ptr
    p.elementSize = size
    p.value = v
    p.width = check_int("width", width, 1)
    p.height = check_int("height", height, 1)
    p.pitch = check_int("pitch", pitch, 0)
    if p.height > 1 and p.pitch < p.width * size:
        raise arg_error(
            "pitch", f"at least width * element size ({p.width * size}) when height > 1", pitch
        )
    return p, keep


def memcpy_params(
    dst: Any, src: Any, size: Any, dst_owner: Any = None, src_owner: Any = None
) -> tuple[Any, tuple[Any, Any]]:
    """``(CUDA_MEMCPY3D, objects to retain)`` for a 1-D copy; memory types are left to the
    driver (unified addressing), so device, managed and pinned host pointers all work."""
    d, keep_d = address(dst, "dst", dst_owner)
    s, keep_s = address(src, "src", src_owner)
    n = check_int("size", size, 1)
    p = driver.CUDA_MEMCPY3D()
    p.srcMemoryType = _UNIFIED
    p.srcDevice = s
    p.dstMemoryType = _UNIFIED
    p.dstDevice = d
    p.WidthInBytes = n
    p.Height = 1
    p.Depth = 1
    return p, (keep_d, keep_s)


def check_event(event: Any) -> Event:
    if not isinstance(event, Event):
        raise arg_error(
            "event",
            "an Event (from Device.create_event() or Stream.record())",
            event,
            exc=TypeError,
        )
    return event


def device_id(device: Any) -> int:
    """The ordinal of a ``Device`` or an int; the current context's device for ``None``."""
    if device is None:
        current_context("cuCtxGetDevice")
        return int(handle_return(driver.cuCtxGetDevice(), "cuCtxGetDevice"))
    if isinstance(device, int) and not isinstance(device, bool):
        return check_int("device", device, 0)
    ordinal = getattr(device, "device_id", None)
    if not isinstance(ordinal, int):
        raise arg_error("device", "a Device, an int ordinal or None", device, exc=TypeError)
    return ordinal
