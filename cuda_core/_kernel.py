"""Kernel, its per-device attributes and its occupancy queries.

A :class:`Kernel` wraps a ``CUkernel`` (context-independent). Attributes use
``cuKernelGetAttribute(attr, kernel, device)``; occupancy queries use the kernel's ``CUfunction``
in the current context (``cuKernelGetFunction``).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from cuda.bindings import driver

from ._utils import arg_error, ensure_driver, handle_return

__all__ = ["Kernel", "KernelAttributes", "KernelOccupancy"]

ParamInfo = namedtuple("ParamInfo", ["offset", "size"])
MaxPotentialBlockSizeOccupancyResult = namedtuple(
    "MaxPotentialBlockSizeOccupancyResult", ["min_grid_size", "max_block_size"]
)

_CUresult = driver.CUresult
_FA = driver.CUfunction_attribute
_SUCCESS = _CUresult.CUDA_SUCCESS
_INVALID_VALUE = _CUresult.CUDA_ERROR_INVALID_VALUE




def _cu_device(device_id: Any) -> Any:
    """The CUdevice for an ordinal, a Device, or ``None`` (the current device, else 0)."""
    ensure_driver()
    if device_id is None:
        err, dev = driver.cuCtxGetDevice()
        if err == _CUresult.CUDA_SUCCESS:
            return dev
        device_id = 0
    ordinal = getattr(device_id, "device_id", device_id)
    if isinstance(ordinal, bool) or not isinstance(ordinal, int):
        raise arg_error("device_id", "a Device, an int or None", device_id, exc=TypeError)
    return handle_return(driver.cuDeviceGet(ordinal), "cuDeviceGet")


class KernelAttributes:
    """Per-device attributes of a :class:`Kernel` (``Kernel.attributes``).

    Each query is a method taking an optional ``device_id`` (an int or a ``Device``; default:
    the current device), as in ``cuda.core``: ``kernel.attributes.num_regs()``. Results are
    cached per device.
    """

    __slots__ = ("_cache", "_kernel")
    _cache: dict[tuple[int, int], int]
    _kernel: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("KernelAttributes cannot be created directly; use Kernel.attributes")

    @classmethod
    def _init(cls, kernel: Any) -> KernelAttributes:
        self = object.__new__(cls)
        self._kernel = kernel
        self._cache = {}
        return self

    def _get(self, attr: Any, device_id: Any) -> int:
        dev = _cu_device(device_id)
        key = (int(dev), int(attr))
        v = self._cache.get(key)
        if v is None:
            v = int(handle_return(driver.cuKernelGetAttribute(attr, self._kernel, dev), "cuKernelGetAttribute"))
            self._cache[key] = v
        return v

    def max_threads_per_block(self, device_id: Any = None) -> int:
        """int: The most threads a block of this kernel can have."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device_id)

    def shared_size_bytes(self, device_id: Any = None) -> int:
        """int: Statically allocated shared memory per block, in bytes."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, device_id)

    def const_size_bytes(self, device_id: Any = None) -> int:
        """int: User constant memory, in bytes."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, device_id)

    def local_size_bytes(self, device_id: Any = None) -> int:
        """int: Local memory per thread, in bytes."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, device_id)

    def num_regs(self, device_id: Any = None) -> int:
        """int: Registers per thread."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_NUM_REGS, device_id)

    def ptx_version(self, device_id: Any = None) -> int:
        """int: The PTX virtual architecture the kernel was compiled for (e.g. 90)."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_PTX_VERSION, device_id)

    def binary_version(self, device_id: Any = None) -> int:
        """int: The binary architecture the kernel was compiled for (e.g. 90)."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_BINARY_VERSION, device_id)

    def cache_mode_ca(self, device_id: Any = None) -> bool:
        """bool: Whether the kernel was compiled with ``-Xptxas --dlcm=ca``."""
        return bool(self._get(_FA.CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, device_id))

    def max_dynamic_shared_size_bytes(self, device_id: Any = None) -> int:
        """int: The most dynamic shared memory a launch may ask for, in bytes."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, device_id)

    def set_max_dynamic_shared_size_bytes(self, value: int, device_id: Any = None) -> None:
        """Allow launches with up to ``value`` bytes of dynamic shared memory.

        Parameters
        ----------
        value : int
            Bytes; at most the device's opt-in limit minus the static shared memory.
        device_id : int or Device, optional
            The device (default: the current one).

        Raises
        ------
        CUDAError
            The driver refuses the value.
        """
        self._set(_FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value, device_id)

    def preferred_shared_memory_carveout(self, device_id: Any = None) -> int:
        """int: The preferred shared-memory carveout, in percent."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, device_id)

    def set_preferred_shared_memory_carveout(self, value: int, device_id: Any = None) -> None:
        """Set the preferred shared-memory carveout, in percent (-1 for the default).

        Parameters
        ----------
        value : int
            Percent of the maximum shared memory, or -1.
        device_id : int or Device, optional
            The device (default: the current one).

        Raises
        ------
        CUDAError
            The driver refuses the value.
        """
        self._set(_FA.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, value, device_id)

    def cluster_size_must_be_set(self, device_id: Any = None) -> bool:
        """bool: Whether launches must give a cluster size."""
        return bool(self._get(_FA.CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, device_id))

    def required_cluster_width(self, device_id: Any = None) -> int:
        """int: The cluster width the kernel requires (0 if none)."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, device_id)

    def required_cluster_height(self, device_id: Any = None) -> int:
        """int: The cluster height the kernel requires (0 if none)."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, device_id)

    def required_cluster_depth(self, device_id: Any = None) -> int:
        """int: The cluster depth the kernel requires (0 if none)."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, device_id)

    def non_portable_cluster_size_allowed(self, device_id: Any = None) -> bool:
        """bool: Whether non-portable cluster sizes may be used."""
        return bool(self._get(_FA.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, device_id))

    def cluster_scheduling_policy_preference(self, device_id: Any = None) -> int:
        """int: The block scheduling policy preference."""
        return self._get(_FA.CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, device_id)

    def _set(self, attr: Any, value: int, device_id: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise arg_error("value", "an int", value, exc=TypeError)
        dev = _cu_device(device_id)
        handle_return(driver.cuKernelSetAttribute(attr, value, self._kernel, dev), "cuKernelSetAttribute")
        self._cache.pop((int(dev), int(attr)), None)



def _launch_config(config: Any, stream: Any, with_cluster: bool) -> Any:
    """A driver CUlaunchConfig from a LaunchConfig-like object (grid, block, shmem_size, cluster)."""
    from ._utils import cast_to_3_tuple

    grid = cast_to_3_tuple("config.grid", getattr(config, "grid", 1))
    block = cast_to_3_tuple("config.block", getattr(config, "block", 1))
    cfg = driver.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = int(getattr(config, "shmem_size", 0) or 0)
    if stream is not None:
        from ._stream import as_stream

        cfg.hStream = as_stream(stream)._handle
    cluster = getattr(config, "cluster", None)
    if with_cluster and cluster is not None:
        dims = cast_to_3_tuple("config.cluster", cluster)
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = dims
        cfg.attrs = [attr]
        cfg.numAttrs = 1
    return cfg


class KernelOccupancy:
    """Occupancy queries of a :class:`Kernel` (``Kernel.occupancy``) in the current context.

    Each method asks the driver (``cuOccupancy*``) about the kernel's ``CUfunction`` in the
    current context; call ``Device.set_current()`` first.
    """

    __slots__ = ("_kernel",)
    _kernel: Kernel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("KernelOccupancy cannot be created directly; use Kernel.occupancy")

    @classmethod
    def _init(cls, kernel: Kernel) -> KernelOccupancy:
        self = object.__new__(cls)
        self._kernel = kernel
        return self

    def _func(self) -> Any:
        return self._kernel._function()

    def max_active_blocks_per_multiprocessor(self, block_size: int, dynamic_shared_memory_size: int) -> int:
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
            handle_return(
                driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(self._func(), block_size, dynamic_shared_memory_size),
                "cuOccupancyMaxActiveBlocksPerMultiprocessor",
            )
        )

    def max_potential_block_size(self, dynamic_shared_memory_needed: Any, block_size_limit: int) -> MaxPotentialBlockSizeOccupancyResult:
        """The block size that maximises occupancy and the grid size that fills the device.

        Parameters
        ----------
        dynamic_shared_memory_needed : int or driver.CUoccupancyB2DSize
            Dynamic shared memory per block in bytes, or a C callback giving it per block size.
        block_size_limit : int
            The largest block size to consider (0: no limit).

        Returns
        -------
        MaxPotentialBlockSizeOccupancyResult
            ``(min_grid_size, max_block_size)``.

        Raises
        ------
        TypeError
            ``dynamic_shared_memory_needed`` is neither an int nor a ``CUoccupancyB2DSize``.
        CUDAError
            No context is current, or the driver refuses the arguments.
        """
        if isinstance(dynamic_shared_memory_needed, int) and not isinstance(dynamic_shared_memory_needed, bool):
            res = driver.cuOccupancyMaxPotentialBlockSize(self._func(), None, dynamic_shared_memory_needed, block_size_limit)
        elif isinstance(dynamic_shared_memory_needed, driver.CUoccupancyB2DSize):
            res = driver.cuOccupancyMaxPotentialBlockSize(self._func(), dynamic_shared_memory_needed, 0, block_size_limit)
        else:
            raise arg_error(
                "dynamic_shared_memory_needed", "an int or a driver.CUoccupancyB2DSize", dynamic_shared_memory_needed, exc=TypeError
            )
        grid, block = handle_return(res, "cuOccupancyMaxPotentialBlockSize")
        return MaxPotentialBlockSizeOccupancyResult(int(grid), int(block))

    def available_dynamic_shared_memory_per_block(self, num_blocks_per_multiprocessor: int, block_size: int) -> int:
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
            handle_return(
                driver.cuOccupancyAvailableDynamicSMemPerBlock(self._func(), num_blocks_per_multiprocessor, block_size),
                "cuOccupancyAvailableDynamicSMemPerBlock",
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
        cfg = _launch_config(config, stream, with_cluster=False)
        return int(handle_return(driver.cuOccupancyMaxPotentialClusterSize(self._func(), cfg), "cuOccupancyMaxPotentialClusterSize"))

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
        cfg = _launch_config(config, stream, with_cluster=True)
        return int(handle_return(driver.cuOccupancyMaxActiveClusters(self._func(), cfg), "cuOccupancyMaxActiveClusters"))


class Kernel:
    """A kernel of a loaded :class:`ObjectCode`, ready for ``launch()``.

    Get one from :meth:`ObjectCode.get_kernel` or :meth:`Kernel.from_handle`. A kernel keeps its
    ObjectCode (and so the loaded library) alive.
    """

    __slots__ = ("__weakref__", "_attributes", "_handle", "_module", "_occupancy", "_params")
    _attributes: KernelAttributes | None
    _handle: Any
    _module: Any
    _occupancy: KernelOccupancy | None
    _params: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("Kernel cannot be created directly; use ObjectCode.get_kernel() or Kernel.from_handle()")

    @classmethod
    def _from_handle(cls, handle: Any, module: Any) -> Kernel:
        self = object.__new__(cls)
        self._handle = handle
        self._module = module
        self._attributes = None
        self._occupancy = None
        self._params = _UNSET
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
        return Kernel._from_handle(driver.CUkernel(handle), mod)

    @property
    def handle(self) -> Any:
        """driver.CUkernel: The kernel handle (``int(kernel.handle)`` is its address)."""
        return self._handle

    @property
    def attributes(self) -> KernelAttributes:
        """KernelAttributes: Per-device attributes (``kernel.attributes.num_regs()``)."""
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
        return handle_return(driver.cuKernelGetFunction(self._handle), "cuKernelGetFunction")

    def _param_layout(self) -> tuple[tuple[int, int], ...] | None:
        """((offset, size), ...) of each parameter, or ``None`` where the driver cannot tell."""
        p = self._params
        if p is _UNSET:
            p = self._params = self._query_params()
        return p

    def _query_params(self) -> tuple[tuple[int, int], ...] | None:
        ensure_driver()
        fn = getattr(driver, "cuKernelGetParamInfo", None)
        if fn is None:
            return None
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

    def _require_params(self) -> tuple[tuple[int, int], ...]:
        p = self._param_layout()
        if p is None:
            raise NotImplementedError("the driver cannot report kernel parameters (cuKernelGetParamInfo needs CUDA 12.4+)")
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
