"""DeviceProperties: every ``CUdevice_attribute`` of a device as a cached, read-only property."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._compat import device_attributes, driver
from ._handles._driver import device_attribute

__all__ = ["DeviceProperties"]


_BOOL_NAMES = frozenset(
    {
        "gpu_overlap",
        "kernel_exec_timeout",
        "integrated",
        "concurrent_kernels",
        "tcc_driver",
        "unified_addressing",
        "managed_memory",
        "multi_gpu_board",
        "pageable_memory_access",
        "concurrent_managed_access",
        "cooperative_launch",
        "cooperative_multi_device_launch",
        "pageable_memory_access_uses_host_page_tables",
        "direct_managed_mem_access_from_host",
        "cluster_launch",
        "unified_function_pointers",
    }
)


def _is_bool_attribute(name: str) -> bool:
    if name in _BOOL_NAMES or name.startswith("can_") or name.endswith("_enabled"):
        return True
    return name.endswith("_supported") and "handle_types" not in name


class DeviceProperties:
    """The attributes of a device (``CUdevice_attribute``), as cached read-only properties.

    Every ``CU_DEVICE_ATTRIBUTE_X`` of CUDA 13.0 and of the installed ``cuda-bindings`` is
    available as the property ``x`` (lower case), e.g. ``max_threads_per_block``, ``multiprocessor_count``,
    ``cluster_launch``. Capability flags are ``bool``; everything else is ``int``. Each value is
    queried from the driver once and then cached. Obtained from :attr:`Device.properties`.
    """

    __slots__ = ("_cache", "_dev")

    _cache: dict[str, int | bool]
    _dev: driver.CUdevice

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "DeviceProperties cannot be instantiated directly. Please use Device APIs (Device.properties)"
        )

    @classmethod
    def _for(cls, cu_device: driver.CUdevice) -> DeviceProperties:
        self = object.__new__(cls)
        self._dev = cu_device
        self._cache = {}
        return self

    def _get(self, name: str, attr: driver.CUdevice_attribute, as_bool: bool) -> int | bool:
        try:
            return self._cache[name]
        except KeyError:
            pass
        value = device_attribute(attr, int(self._dev))
        out: int | bool = bool(value) if as_bool else value
        self._cache[name] = out
        return out

    if TYPE_CHECKING:  # the properties are generated from CUdevice_attribute below

        def __getattr__(self, name: str) -> Any: ...

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(_ATTRIBUTE_NAMES))

    def __repr__(self) -> str:
        return f"<DeviceProperties of device {int(self._dev)}>"


def _make_property(name: str, attr: driver.CUdevice_attribute) -> property:
    as_bool = _is_bool_attribute(name)

    def fget(self: DeviceProperties) -> int | bool:
        return self._get(name, attr, as_bool)

    fget.__name__ = name
    kind = "bool" if as_bool else "int"
    fget.__doc__ = f"{kind}: ``CU_DEVICE_ATTRIBUTE_{name.upper()}``."
    return property(fget)


# cuda.core's names where they differ from the enum's.
_ALIASES = {"virtual_address_management_supported": "virtual_memory_management_supported"}

_ATTRIBUTE_NAMES: list[str] = []
for _enum_name, _attr in device_attributes():
    _name = _enum_name.removeprefix("CU_DEVICE_ATTRIBUTE_").lower()
    for _n in (_name, _ALIASES.get(_name)):
        if _n is not None:
            _ATTRIBUTE_NAMES.append(_n)
            setattr(DeviceProperties, _n, _make_property(_n, _attr))
del _enum_name, _attr, _name, _n
