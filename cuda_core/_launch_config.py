"""Launch configuration: grid, cluster and block shapes, dynamic shared memory, cooperation.

A :class:`LaunchConfig` is a small value that needs no GPU to build. Its fields can be set after
construction, as in ``cuda.core`` 1.2, with the checks construction makes. At the first launch
on a device it is checked against that device's limits (once per device), and the native
``CUlaunchConfig`` is built once per stream, as a ``LaunchConfigHandle`` of the handle layer
that holds the stream's handle, and reused by every later launch on that stream. Setting a
field drops all of that (and tells the :class:`~cuda_core.PreparedLaunch` objects bound to the
config), so the next launch is built from the new values.
"""

from __future__ import annotations

import weakref
from typing import Any

from . import _links
from ._handles._backend import backend
from ._utils import ValueOverflowError, arg_error, cast_to_3_tuple
from ._utils._renamed import renamed_property, warn_renamed

__all__ = ["LaunchConfig"]

_LaunchConfigHandle = backend.LaunchConfigHandle

_SHMEM_RULE = "a whole number of bytes >= 0"
_AXES = ("x", "y", "z")
# Streams whose native configs one LaunchConfig keeps; past this the cache starts over. An
# evicted LaunchConfigHandle lives on where it is still used (a PreparedLaunch holds its own).
_MAX_NATIVE = 8


def _dim3(name: str, value: Any) -> tuple[int, int, int]:
    return cast_to_3_tuple(name, value)


def _cluster(value: Any) -> tuple[int, int, int] | None:
    return None if value is None else cast_to_3_tuple("LaunchConfig.cluster", value)


def _shmem(value: Any) -> int:
    """Dynamic shared memory in bytes, read as cuda.core reads it (an int, a NumPy integer, a
    bool, a float with no fractional part), then checked: >= 0 and < 2**32."""
    if hasattr(type(value), "__index__"):
        v = int(value.__index__())
    elif isinstance(value, float) and value.is_integer():
        v = int(value)
    elif (
        hasattr(type(value), "is_integer")
        and hasattr(type(value), "__float__")
        and value.is_integer()
    ):
        v = int(value)  # a NumPy float holding a whole number
    else:
        raise arg_error("LaunchConfig.shmem_size", _SHMEM_RULE, value, exc=TypeError)
    if v < 0:
        raise arg_error("LaunchConfig.shmem_size", _SHMEM_RULE, value)
    if v >= 2**32:
        raise arg_error(
            "LaunchConfig.shmem_size", "below 2**32 bytes", value, exc=ValueOverflowError
        )
    return v


class LaunchConfig:
    """The shape of a kernel launch: grid, optional cluster, block, shared memory, cooperation.

    Parameters
    ----------
    grid : int or tuple of int
        Number of thread blocks in each dimension (1 to 3 ints, each >= 1). When ``cluster``
        is given, ``grid`` counts *clusters*, so the launch has ``grid * cluster`` blocks.
    cluster : int or tuple of int, optional
        Thread blocks per cluster in each dimension (compute capability 9.0 or newer).
    block : int or tuple of int
        Threads per block in each dimension (1 to 3 ints, each >= 1).
    shmem_size : int, optional
        Dynamic shared memory per block in bytes (default 0). Above 48 KiB the kernel's
        ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` attribute must be raised first.
    is_cooperative : bool, optional
        Launch as a cooperative kernel, so that ``cooperative_groups::this_grid().sync()``
        works; the whole grid must then fit on the device at once.
    programmatic_stream_serialization : bool, optional
        Allow programmatic dependent launch (PDL, compute capability 9.0 or newer): the kernel
        may start before the previous kernel in the stream has finished, once every block of
        that kernel has called ``cudaTriggerProgrammaticLaunchCompletion()`` (or exited); the
        kernel calls ``cudaGridDependencySynchronize()`` before reading what the previous
        one wrote. Sets ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``. Default
        ``False``.
    cooperative_launch : bool, optional
        Keyword-only: the name earlier ``cuda.core`` releases used for ``is_cooperative``
        (deprecated: warns ``DeprecationWarning``).

    Raises
    ------
    TypeError
        A shape is not an int or a tuple of ints, ``grid``/``block`` is missing, or
        ``shmem_size`` is not a whole number.
    ValueError
        A dimension is below 1, a tuple has more than three items, or ``shmem_size`` < 0.

    Notes
    -----
    Construction needs no GPU. The device limits (threads per block, block and grid
    dimensions, opt-in shared memory, cluster and cooperative support) are checked at the
    first launch on each device, and a violation names the limit and the device.

    Every field can be set after construction, as in ``cuda.core`` 1.2 (``cfg.grid = 64``,
    ``cfg.shmem_size = 4096``), with the checks and the normalisation construction applies
    (a shape becomes a 3-tuple). The next launch with the config, and the next call of a
    :class:`~cuda_core.PreparedLaunch` bound to it, use the new values. Equality and the hash
    follow the fields (as in ``cuda.core``), so do not change a config used as a dict key.

    Examples
    --------
    >>> cfg = LaunchConfig(grid=(n + 255) // 256, block=256)
    >>> cfg = LaunchConfig(grid=4, cluster=2, block=128)  # 8 blocks in clusters of 2
    >>> cfg.grid = 16                                      # the next launch has 16 clusters
    """

    __slots__ = (
        "__weakref__", "_block", "_checked", "_cluster", "_coop", "_grid", "_key", "_last", "_native",
        "_prepared", "_pss", "_shmem",
    )  # fmt: skip

    def __init__(
        self,
        grid: int | tuple[int, ...] | None = None,
        cluster: int | tuple[int, ...] | None = None,
        block: int | tuple[int, ...] | None = None,
        shmem_size: int | None = None,
        is_cooperative: bool = False,
        programmatic_stream_serialization: bool = False,
        *,
        cooperative_launch: bool | None = None,
    ) -> None:
        self._grid = _dim3("LaunchConfig.grid", grid)
        self._block = _dim3("LaunchConfig.block", block)
        self._cluster = _cluster(cluster)
        self._shmem = 0 if shmem_size is None else _shmem(shmem_size)
        if cooperative_launch is not None:
            warn_renamed("LaunchConfig(cooperative_launch=...)", "LaunchConfig(is_cooperative=...)")
            is_cooperative = cooperative_launch
        # The flags take any truth value (1, numpy.True_), as in cuda.core.
        self._coop = bool(is_cooperative)
        self._pss = bool(programmatic_stream_serialization)
        # StreamHandle -> LaunchConfigHandle (which holds that StreamHandle, so the key cannot
        # die and be reused while the entry lives). ``_last`` is the LaunchConfigHandle of the
        # latest stream (its ``stream`` is that StreamHandle), which launch() checks first: the
        # native launch entry reads it from this slot.
        self._native: dict[Any, Any] = {}
        self._last: Any = None
        self._checked: set[int] = set()
        # The PreparedLaunch objects built from this config (told when a field changes).
        self._prepared: weakref.WeakSet[Any] | None = None
        self._key = (self._grid, self._cluster, self._block, self._shmem, self._coop, self._pss)

    def _changed(self) -> None:
        """A field was set: nothing built from the old values may be used again."""
        self._key = (self._grid, self._cluster, self._block, self._shmem, self._coop, self._pss)
        self._last = None
        self._native = {}
        self._checked = set()
        if self._prepared:
            for p in list(self._prepared):
                p._config_changed()

    # -- the public fields ----------------------------------------------------------------

    @property
    def grid(self) -> tuple[int, int, int]:
        """Blocks (or clusters, when ``cluster`` is set) per grid dimension, as a 3-tuple.

        Settable: an int or a tuple of 1 to 3 ints, each >= 1."""
        return self._grid

    @grid.setter
    def grid(self, value: int | tuple[int, ...]) -> None:
        self._grid = _dim3("LaunchConfig.grid", value)
        self._changed()

    @property
    def cluster(self) -> tuple[int, int, int] | None:
        """Blocks per cluster dimension as a 3-tuple, or ``None`` without clusters (settable)."""
        return self._cluster

    @cluster.setter
    def cluster(self, value: int | tuple[int, ...] | None) -> None:
        self._cluster = _cluster(value)
        self._changed()

    @property
    def block(self) -> tuple[int, int, int]:
        """Threads per block dimension, as a 3-tuple (settable, as ``grid``)."""
        return self._block

    @block.setter
    def block(self, value: int | tuple[int, ...]) -> None:
        self._block = _dim3("LaunchConfig.block", value)
        self._changed()

    @property
    def shmem_size(self) -> int:
        """Dynamic shared memory per block, in bytes (settable)."""
        return self._shmem

    @shmem_size.setter
    def shmem_size(self, value: int) -> None:
        if value is None:  # cuda.core's field is a C int: None is refused once constructed
            raise arg_error("LaunchConfig.shmem_size", _SHMEM_RULE, value, exc=TypeError)
        self._shmem = _shmem(value)
        self._changed()

    @property
    def is_cooperative(self) -> bool:
        """Whether launches with this config are cooperative (grid-wide sync allowed); settable
        with any truth value."""
        return self._coop

    @is_cooperative.setter
    def is_cooperative(self, value: bool) -> None:
        self._coop = bool(value)
        self._changed()

    @property
    def programmatic_stream_serialization(self) -> bool:
        """Whether launches allow programmatic dependent launch (PDL) after the previous kernel;
        settable with any truth value."""
        return self._pss

    @programmatic_stream_serialization.setter
    def programmatic_stream_serialization(self, value: bool) -> None:
        self._pss = bool(value)
        self._changed()

    cooperative_launch = renamed_property("LaunchConfig", "cooperative_launch", "is_cooperative")

    @property
    def grid_blocks(self) -> tuple[int, int, int]:
        """Blocks per grid dimension, counting every block of every cluster."""
        g, c = self._grid, self._cluster
        if c is None:
            return g
        return (g[0] * c[0], g[1] * c[1], g[2] * c[2])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LaunchConfig):
            return NotImplemented
        return self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        # cuda.core 1.2's form: every field, in its order.
        return (
            f"LaunchConfig(grid={self._grid!r}, cluster={self._cluster!r}, block={self._block!r}, "
            f"shmem_size={self._shmem!r}, is_cooperative={self._coop!r}, "
            f"programmatic_stream_serialization={self._pss!r})"
        )

    # -- launch-time support (private) ------------------------------------------------------

    def _native_for(self, stream: Any) -> Any:
        """The LaunchConfigHandle for ``stream`` (a :class:`Stream`), built (and the device
        checked) on first use."""
        h = stream._h
        if h.is_released:
            raise RuntimeError("Stream has been closed")
        cfg = self._native.get(h)
        if cfg is None:
            ordinal = stream._device_id
            # the default streams follow the current context
            dev = stream.device if ordinal < 0 else _links.Device(ordinal)
            if dev._id not in self._checked:
                self._check_device(dev)
                self._checked.add(dev._id)
            cfg = _LaunchConfigHandle(
                h, self.grid_blocks, self._block, self._shmem, self._cluster, self._coop, self._pss
            )
            if len(self._native) >= _MAX_NATIVE:
                self._native.clear()
            self._native[h] = cfg
        self._last = cfg
        return cfg

    def _bind_prepared(self, prepared: Any) -> None:
        """Tell ``prepared`` (a PreparedLaunch holding this config) when a field changes."""
        if self._prepared is None:
            self._prepared = weakref.WeakSet()
        self._prepared.add(prepared)

    def _check_device(self, dev: Any) -> None:
        """Raise ``ValueError`` naming the limit and the device if ``dev`` cannot run this."""
        check_limits(self, dev.properties, dev.name)


def check_limits(config: LaunchConfig, props: Any, device_name: str) -> None:
    """Check ``config`` against device properties ``props`` (a ``DeviceProperties``).

    Raises ``ValueError`` whose message names the violated limit, its value and the device.
    Kept separate from the device so that it can be tested with explicit limits.
    """
    on = f"on {device_name}"
    bx, by, bz = config.block
    threads = bx * by * bz
    if threads > props.max_threads_per_block:
        raise ValueError(
            f"block {config.block} has {threads} threads, more than the "
            f"{props.max_threads_per_block} allowed {on}"
        )
    limits = (props.max_block_dim_x, props.max_block_dim_y, props.max_block_dim_z)
    for axis, v, lim in zip(_AXES, config.block, limits):
        if v > lim:
            raise ValueError(
                f"block {config.block} has {v} threads in {axis}, more than the {lim} allowed {on}"
            )
    limits = (props.max_grid_dim_x, props.max_grid_dim_y, props.max_grid_dim_z)
    blocks = config.grid_blocks
    for axis, v, lim in zip(_AXES, blocks, limits):
        if v > lim:
            what = (
                f"grid {config.grid}"
                if config.cluster is None
                else f"grid {config.grid} of clusters {config.cluster}"
            )
            raise ValueError(f"{what} has {v} blocks in {axis}, more than the {lim} allowed {on}")
    optin = props.max_shared_memory_per_block_optin
    if config.shmem_size > optin:
        raise ValueError(
            f"shmem_size {config.shmem_size} bytes is more than the {optin} bytes of dynamic "
            f"shared memory a block can have {on}"
        )
    if config.cluster is not None:
        cc = (props.compute_capability_major, props.compute_capability_minor)
        if cc < (9, 0):
            raise ValueError(
                f"cluster {config.cluster} needs compute capability 9.0 or newer, "
                f"but {device_name} has {cc[0]}.{cc[1]}"
            )
    if config.is_cooperative and not props.cooperative_launch:
        raise ValueError(f"cooperative launches are not supported {on}")
