"""The pure-Python backend's launch configurations (see :mod:`cuda_core._handles._protocol`)."""

from __future__ import annotations

import ctypes
from typing import Any

from .._compat import driver
from ._pure_common import _closed
from ._pure_streams import StreamHandle

__all__: list[str] = []  # private module

_CUstream = driver.CUstream

# CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void** params, void** extra)
# (CUDA 12.0 ABI). A CFUNCTYPE function releases the GIL during the call, as cuda.bindings does.
_LAUNCH_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p
)
_ATTR = driver.CUlaunchAttributeID
_launch_fn: Any = None  # cuLaunchKernelEx through ctypes (its entry point), or None; set by bind


class LaunchConfigHandle:
    """A native ``CUlaunchConfig`` (and its attributes) for one stream handle."""

    __slots__ = ("_address", "_cfg", "stream")

    def __init__(
        self,
        stream: StreamHandle,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        shmem: int,
        cluster: tuple[int, int, int] | None,
        cooperative: bool,
        pss: bool,
    ) -> None:
        if type(stream) is not StreamHandle:
            raise TypeError("stream must be a StreamHandle")
        stream._live()
        cfg = driver.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes = shmem
        cfg.hStream = _CUstream(stream.address)
        attrs = []
        if cluster is not None:
            a = driver.CUlaunchAttribute()
            a.id = _ATTR.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            dim = a.value.clusterDim
            dim.x, dim.y, dim.z = cluster
            attrs.append(a)
        if cooperative:
            a = driver.CUlaunchAttribute()
            a.id = _ATTR.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
            a.value.cooperative = 1
            attrs.append(a)
        if pss:
            a = driver.CUlaunchAttribute()
            a.id = _ATTR.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            a.value.programmaticStreamSerializationAllowed = 1
            attrs.append(a)
        if attrs:
            cfg.attrs = attrs
        cfg.numAttrs = len(attrs)
        self._cfg = cfg  # owns the struct (and its attribute array) that _address points at
        self._address = cfg.getPtr()
        self.stream = stream

    @property
    def values(self) -> tuple[Any, ...]:
        """What the stored ``CUlaunchConfig`` hands the driver, read back from it: (grid in
        blocks, block, shared memory bytes, cluster or None, cooperative, pss)."""
        cfg = self._cfg
        cluster, coop, serial = None, False, False
        for i in range(cfg.numAttrs):
            a = cfg.attrs[i]
            if a.id == _ATTR.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
                dim = a.value.clusterDim
                cluster = (dim.x, dim.y, dim.z)
            elif a.id == _ATTR.CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
                coop = bool(a.value.cooperative)
            elif a.id == _ATTR.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
                serial = bool(a.value.programmaticStreamSerializationAllowed)
        return (
            (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
            (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ),
            cfg.sharedMemBytes,
            cluster,
            coop,
            serial,
        )

    def launch(self, function: int, params: int) -> int:
        """``cuLaunchKernelEx(config, function, params, NULL)``: the status (0: success)."""
        if self.stream.is_released:
            raise _closed("Stream")
        fn = _launch_fn
        if fn is not None:
            return fn(self._address, function, params, None)  # type: ignore[no-any-return]
        return int(driver.cuLaunchKernelEx(self._cfg, driver.CUfunction(function), params, 0)[0])
