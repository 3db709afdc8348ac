"""Kernel and its occupancy queries.

A :class:`Kernel` wraps a ``CUkernel`` (context-independent). Its per-device attributes
(``cuKernelGetAttribute(attr, kernel, device)``) are :class:`KernelAttributes`, in
:mod:`cuda_core._kernel_attributes`; occupancy queries use the kernel's ``CUfunction`` in the
current context (``cuKernelGetFunction``).
"""

from __future__ import annotations

import ctypes
import sys
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ._compat import driver, has
from ._handles._backend import entry_point
from ._handles._driver import ensure_driver
from ._kernel_attributes import KernelAttributes as KernelAttributes
from ._utils import arg_error, call, cast_to_3_tuple, handle_return, raise_status

if TYPE_CHECKING:
    from ._kernel_arg_rules import ParamType

__all__ = ["Kernel", "KernelAttributes", "KernelOccupancy"]


class ParamInfo(NamedTuple):
    """Where one kernel parameter lies in the argument buffer (:attr:`Kernel.arguments_info`).

    Attributes
    ----------
    offset : int
        Byte offset of the parameter.
    size : int
        Size of the parameter in bytes.
    """

    offset: int
    size: int


class MaxPotentialBlockSizeOccupancyResult(NamedTuple):
    """The result of :meth:`KernelOccupancy.max_potential_block_size`.

    Attributes
    ----------
    min_grid_size : int
        The smallest grid that reaches full occupancy of the device.
    max_block_size : int
        The block size that maximises occupancy.
    """

    min_grid_size: int
    max_block_size: int


_CUresult = driver.CUresult
_SUCCESS = _CUresult.CUDA_SUCCESS
_INVALID_VALUE = _CUresult.CUDA_ERROR_INVALID_VALUE


def _launch_config(config: Any, stream: Any, with_cluster: bool) -> Any:
    """A driver CUlaunchConfig from a LaunchConfig-like object (grid, block, shmem_size, cluster)."""
    grid = cast_to_3_tuple("config.grid", getattr(config, "grid", 1))
    block = cast_to_3_tuple("config.block", getattr(config, "block", 1))
    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = int(getattr(config, "shmem_size", 0) or 0)
    if stream is not None:
        from ._stream import as_stream

        cfg.hStream = as_stream(stream).handle
    cluster = getattr(config, "cluster", None)
    if with_cluster and cluster is not None:
        dims = cast_to_3_tuple("config.cluster", cluster)
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = dims
        cfg.attrs = [attr]
        cfg.numAttrs = 1
    return cfg


# CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
#     CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit)
_MAX_POTENTIAL_BLOCK_SIZE = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_int),
    ctypes.POINTER(ctypes.c_int),
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
)


def _b2d_address(fn: Any) -> int:
    """The C function a ``driver.CUoccupancyB2DSize`` stands for.

    ``cuda.core`` documents ``CUoccupancyB2DSize(_ptr=address)``: the wrapper's pointer
    (``getPtr()``) *is* the function, and ``int(wrapper)`` reads the function's first machine
    code bytes, which ``cuda.bindings`` would pass on as the callback (the driver then jumps
    to garbage). ``CUoccupancyB2DSize(address)`` instead stores the address in the wrapper
    itself, where ``getPtr()`` points into the object and ``int(wrapper)`` is the function.
    """
    ptr = int(fn.getPtr())
    if id(fn) <= ptr < id(fn) + sys.getsizeof(fn):
        return int(fn)
    return ptr


def _max_potential_block_size_b2d(
    func: Any, callback: int, block_size_limit: int
) -> tuple[int, int]:
    """``cuOccupancyMaxPotentialBlockSize`` with a C callback address, through ctypes.

    ctypes releases the GIL for the call; a ctypes callback takes it back when the driver
    calls it, a callback needing no Python (numba ``cfunc``, C) runs as is.
    """
    ensure_driver()
    addr = entry_point("cuOccupancyMaxPotentialBlockSize")
    if not addr:
        raise RuntimeError("the CUDA driver lacks cuOccupancyMaxPotentialBlockSize")
    grid, block = ctypes.c_int(0), ctypes.c_int(0)
    status = _MAX_POTENTIAL_BLOCK_SIZE(addr)(
        ctypes.byref(grid), ctypes.byref(block), int(func), callback or None, 0, block_size_limit
    )
    if status:
        raise_status(status, "cuOccupancyMaxPotentialBlockSize")
    return grid.value, block.value


def kernel_function(handle: Any) -> Any:
    """The ``CUfunction`` of a kernel handle (``cuKernelGetFunction``) in the current context."""
    return handle_return(driver.cuKernelGetFunction(handle), "cuKernelGetFunction")


class KernelOccupancy:
    """Occupancy queries of a :class:`Kernel` (``Kernel.occupancy``) in the current context.

    Each method asks the driver (``cuOccupancy*``) about the kernel's ``CUfunction`` in the
    current context; call ``Device.set_current()`` first.
    """

    # The kernel's handle and what keeps its code loaded (its ObjectCode), not the Kernel: the
    # kernel caches this object, and a cycle would leave the code's unloading to the garbage
    # collector, which may run during a graph capture (where unloading invalidates it).
    __slots__ = ("_handle", "_module")
    _handle: Any
    _module: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "KernelOccupancy cannot be instantiated directly. Please use Kernel APIs "
            "(Kernel.occupancy)"
        )

    @classmethod
    def _init(cls, kernel: Kernel) -> KernelOccupancy:
        self = object.__new__(cls)
        self._handle = kernel._handle
        self._module = kernel._module
        return self

    def _function(self) -> Any:
        return kernel_function(self._handle)

    def _query(self, fn: Callable[..., tuple[Any, ...]], *args: Any) -> Any:
        """``fn(<the kernel's CUfunction>, *args)`` through the error funnel."""
        return call(fn, self._function(), *args)

    def max_active_blocks_per_multiprocessor(
        self, block_size: int, dynamic_shared_memory_size: int
    ) -> int:
        """The most blocks of this kernel that can be resident on one multiprocessor.

        Parameters
        ----------
        block_size : int
            Threads per block.
        dynamic_shared_memory_size : int
            Dynamic shared memory per block, in bytes.

        Returns
        -------
        int

        Raises
        ------
        CUDAError
            No context is current, or the driver refuses the arguments.
        """
        return int(
            self._query(
                driver.cuOccupancyMaxActiveBlocksPerMultiprocessor,
                block_size,
                dynamic_shared_memory_size,
            )
        )

    def max_potential_block_size(
        self, dynamic_shared_memory_needed: Any, block_size_limit: int
    ) -> MaxPotentialBlockSizeOccupancyResult:
        """The block size that maximises occupancy and the grid size that fills the device.

        Parameters
        ----------
        dynamic_shared_memory_needed : int or cuda.bindings.driver.CUoccupancyB2DSize
            Dynamic shared memory per block in bytes, or a C callback
            ``size_t (*)(int block_size)`` giving it per block size, wrapped as
            ``driver.CUoccupancyB2DSize(_ptr=address)`` (as ``cuda.core`` documents) or
            ``driver.CUoccupancyB2DSize(address)``. The callback runs on this thread during the
            call; the caller keeps it alive. Python callables are not accepted (wrap them with
            ``ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_int)``).
        block_size_limit : int
            The largest block size to consider (0: no limit).

        Returns
        -------
        MaxPotentialBlockSizeOccupancyResult
            ``(min_grid_size, max_block_size)``.

        Raises
        ------
        TypeError
            ``dynamic_shared_memory_needed`` is neither an int nor a ``CUoccupancyB2DSize``, or
            ``block_size_limit`` is not an int.
        CUDAError
            No context is current, or the driver refuses the arguments.
        """
        if isinstance(block_size_limit, bool) or not isinstance(block_size_limit, int):
            raise arg_error("block_size_limit", "an int", block_size_limit, exc=TypeError)
        if isinstance(dynamic_shared_memory_needed, int) and not isinstance(
            dynamic_shared_memory_needed, bool
        ):
            grid, block = self._query(
                driver.cuOccupancyMaxPotentialBlockSize,
                None,
                dynamic_shared_memory_needed,
                block_size_limit,
            )
        elif isinstance(dynamic_shared_memory_needed, driver.CUoccupancyB2DSize):
            grid, block = _max_potential_block_size_b2d(
                self._function(), _b2d_address(dynamic_shared_memory_needed), block_size_limit
            )
        else:
            raise arg_error(
                "dynamic_shared_memory_needed",
                "an int or a driver.CUoccupancyB2DSize",
                dynamic_shared_memory_needed,
                exc=TypeError,
            )
        return MaxPotentialBlockSizeOccupancyResult(int(grid), int(block))

    def available_dynamic_shared_memory_per_block(
        self, num_blocks_per_multiprocessor: int, block_size: int
    ) -> int:
        """Dynamic shared memory available per block when that many blocks share a multiprocessor.

        Parameters
        ----------
        num_blocks_per_multiprocessor : int
            Resident blocks per multiprocessor.
        block_size : int
            Threads per block.

        Returns
        -------
        int
            Bytes.

        Raises
        ------
        CUDAError
            No context is current, or the driver refuses the arguments.
        """
        return int(
            self._query(
                driver.cuOccupancyAvailableDynamicSMemPerBlock,
                num_blocks_per_multiprocessor,
                block_size,
            )
        )

    def max_potential_cluster_size(self, config: Any, stream: Any = None) -> int:
        """The largest cluster size this kernel can launch with under ``config``.

        Parameters
        ----------
        config : LaunchConfig
            Grid, block and shared memory of the launch (its cluster is ignored).
        stream : Stream, optional
            The stream the launch would use.

        Returns
        -------
        int

        Raises
        ------
        CUDAError
            No context is current, or the driver refuses the configuration.
        """
        return int(
            self._query(
                driver.cuOccupancyMaxPotentialClusterSize,
                _launch_config(config, stream, with_cluster=False),
            )
        )

    def max_active_clusters(self, config: Any, stream: Any = None) -> int:
        """The most clusters of ``config``'s shape that can be resident on the device at once.

        Parameters
        ----------
        config : LaunchConfig
            Grid, block, cluster and shared memory of the launch.
        stream : Stream, optional
            The stream the launch would use.

        Returns
        -------
        int

        Raises
        ------
        CUDAError
            No context is current, or the driver refuses the configuration.
        """
        return int(
            self._query(
                driver.cuOccupancyMaxActiveClusters,
                _launch_config(config, stream, with_cluster=True),
            )
        )


class Kernel:
    """A kernel of a loaded :class:`ObjectCode`, ready for ``launch()``.

    Get one from :meth:`ObjectCode.get_kernel` or :meth:`Kernel.from_handle`. A kernel keeps its
    ObjectCode (and so the loaded library) alive.
    """

    __slots__ = (
        "__weakref__",
        "_attributes",
        "_fast",
        "_handle",
        "_label",
        "_launch",
        "_module",
        "_occupancy",
        "_params",
        "_signature",
        "_types",
    )
    _attributes: KernelAttributes | None
    _handle: Any
    _label: str | None  # the name get_kernel was given (a name expression), for messages
    _module: Any
    _occupancy: KernelOccupancy | None
    _params: Any
    # What tells the parameter types (a callable of no arguments, set by ObjectCode.get_kernel),
    # or None; _types caches its answer.
    _signature: Callable[[], tuple[ParamType | None, ...] | None] | None
    _types: Any
    _launch: Any  # the launcher's _KernelEntry, or None
    # The native LaunchPlan of the arguments launched last (the native launch entry reads it
    # from this slot), or None.
    _fast: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "Kernel objects cannot be instantiated directly. Use ObjectCode.get_kernel() or Kernel.from_handle()"
        )

    @classmethod
    def _from_handle(cls, handle: Any, module: Any) -> Kernel:
        self = object.__new__(cls)
        self._handle = handle
        self._module = module
        self._attributes = None
        self._occupancy = None
        self._params = _UNSET
        self._signature = None
        self._types = _UNSET
        self._label = None
        self._launch = (
            None  # the launcher's per-kernel state (cuda_core._launcher), made at the first launch
        )
        self._fast = None
        return self

    @staticmethod
    def from_handle(handle: int, mod: Any = None) -> Kernel:
        """Wrap a foreign ``CUkernel`` given by its address (borrowed, never destroyed).

        Parameters
        ----------
        handle : int
            The ``CUkernel`` address.
        mod : ObjectCode, optional
            The ObjectCode it belongs to, kept alive by the kernel.

        Returns
        -------
        Kernel

        Raises
        ------
        TypeError
            ``handle`` is not an int.
        """
        if isinstance(handle, bool) or not isinstance(handle, int):
            raise arg_error("handle", "an int (the CUkernel address)", handle, exc=TypeError)
        if mod is None:  # a kernel of a library loaded here keeps it alive, as in cuda.core
            mod = _KERNEL_OWNERS.get(handle)
        return Kernel._from_handle(driver.CUkernel(handle), mod)

    @property
    def handle(self) -> Any:
        """cuda.bindings.driver.CUkernel: The kernel handle (``int(kernel.handle)`` is its address)."""
        return self._handle

    @property
    def attributes(self) -> KernelAttributes:
        """KernelAttributes: Attributes on the current device (``kernel.attributes.num_regs``);
        ``kernel.attributes[dev]`` for another device."""
        a = self._attributes
        if a is None:
            a = self._attributes = KernelAttributes._init(self._handle)
        return a

    @property
    def occupancy(self) -> KernelOccupancy:
        """KernelOccupancy: Occupancy queries in the current context."""
        o = self._occupancy
        if o is None:
            o = self._occupancy = KernelOccupancy._init(self)
        return o

    def _function(self) -> Any:
        return kernel_function(self._handle)

    def _param_layout(self) -> tuple[tuple[int, int], ...] | None:
        """((offset, size), ...) of each parameter, or ``None`` where the driver cannot tell."""
        p = self._params
        if p is _UNSET:
            p = self._params = self._query_params()
        return p

    def _query_params(self) -> tuple[tuple[int, int], ...] | None:
        ensure_driver()
        if not has("cuKernelGetParamInfo"):
            return None
        fn = driver.cuKernelGetParamInfo
        out: list[tuple[int, int]] = []
        while True:
            res = fn(self._handle, len(out))
            if res[0] != _SUCCESS:
                if res[0] == _INVALID_VALUE:
                    break
                if res[0] in (_CUresult.CUDA_ERROR_NOT_SUPPORTED, _CUresult.CUDA_ERROR_NOT_FOUND):
                    return None
                handle_return(res, "cuKernelGetParamInfo")
            out.append((int(res[1]), int(res[2])))
        return tuple(out)

    def _param_types(self) -> tuple[ParamType | None, ...] | None:
        """The C type of each parameter (``ParamType``, ``None`` where unknown), or ``None``
        where none is known (an ``extern "C"`` kernel in a cubin, ``Kernel.from_handle``).
        Worked out once, when the kernel's first packing plan is built."""
        t = self._types
        if t is _UNSET:
            source = self._signature
            t = self._types = None if source is None else source()
        return t  # type: ignore[no-any-return]

    def _require_params(self) -> tuple[tuple[int, int], ...]:
        p = self._param_layout()
        if p is None:
            raise NotImplementedError(
                "the driver cannot report kernel parameters (cuKernelGetParamInfo needs CUDA 12.4+)"
            )
        return p

    @property
    def num_arguments(self) -> int:
        """int: The number of parameters of the kernel.

        Raises
        ------
        NotImplementedError
            The driver is older than CUDA 12.4.
        """
        return len(self._require_params())

    @property
    def arguments_info(self) -> list[ParamInfo]:
        """list[ParamInfo]: ``(offset, size)`` in bytes of each parameter.

        Raises
        ------
        NotImplementedError
            The driver is older than CUDA 12.4.
        """
        return [ParamInfo(o, s) for o, s in self._require_params()]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Kernel):
            return NotImplemented
        return int(self._handle) == int(other._handle)

    def __hash__(self) -> int:
        return hash(int(self._handle))

    def __repr__(self) -> str:
        return f"<Kernel handle={int(self._handle):#x}>"


_UNSET: Any = object()

# The ObjectCode each kernel it gave out belongs to, by the kernel's address, while loaded: a
# kernel wrapped again from its bare handle (Kernel.from_handle) keeps its library. No driver
# call: an address that is not a kernel is never handed to the driver here.
_KERNEL_OWNERS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def kernel_loaded(kernel: Any, owner: Any) -> None:
    """Note that ``kernel`` (a CUkernel) belongs to ``owner`` (an ObjectCode)."""
    _KERNEL_OWNERS[int(kernel)] = owner


def library_unloaded(owner: Any) -> None:
    """Forget the kernels of ``owner``, whose library was unloaded."""
    for address in [a for a, o in _KERNEL_OWNERS.items() if o is owner]:
        _KERNEL_OWNERS.pop(address, None)
