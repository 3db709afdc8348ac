"""KernelAttributes: a kernel's per-device attributes (``cuKernelGetAttribute``), as properties.

Before ``cuda.core`` 1.0 each attribute was a method taking a device
(``kernel.attributes.num_regs()``, ``num_regs(device_id)``); the integer attributes still answer
that call, with a ``DeprecationWarning`` (their values are ints that can be called).
"""

from __future__ import annotations

from typing import Any

from ._compat import driver
from ._handles._driver import ensure_driver
from ._utils import arg_error, call, handle_return
from ._utils._renamed import warn_renamed

__all__ = ["KernelAttributes"]

_CUresult = driver.CUresult
_FA = driver.CUfunction_attribute


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
        raise arg_error("device", "a Device, an int or None", device_id, exc=TypeError)
    return handle_return(driver.cuDeviceGet(ordinal), "cuDeviceGet")


class _CallableInt(int):
    """An integer attribute's value, which code written for ``cuda.core`` 0.x may still call:
    ``kernel.attributes.num_regs()`` (this value) or ``num_regs(device)`` (that device's), with
    a ``DeprecationWarning`` naming the property. Otherwise a plain ``int``."""

    _view: KernelAttributes
    _name: str

    def __call__(self, device_id: Any = None) -> int:
        warn_renamed(
            f"KernelAttributes.{self._name}()",
            f"the property KernelAttributes.{self._name} "
            f"(kernel.attributes[device].{self._name} for another device)",
            stacklevel=3,
        )
        if device_id is None:  # the view's device, just read
            return int(self)
        return int(getattr(self._view[device_id], self._name))

    def __reduce__(self) -> Any:
        return (int, (int(self),))


def _callable_int(view: KernelAttributes, name: str, value: int) -> int:
    out = _CallableInt(value)
    out._view = view
    out._name = name
    return out


def _int_attr(attr: Any, doc: str) -> property:
    name = _FA(attr).name.removeprefix("CU_FUNC_ATTRIBUTE_").lower()

    def get(self: KernelAttributes) -> int:
        return _callable_int(self, name, self._get(attr))

    get.__doc__ = doc
    return property(get)


def _bool_attr(attr: Any, doc: str) -> property:
    def get(self: KernelAttributes) -> bool:
        return bool(self._get(attr))

    get.__doc__ = doc
    return property(get)


def _settable_attr(attr: Any, doc: str) -> property:
    name = _FA(attr).name.removeprefix("CU_FUNC_ATTRIBUTE_").lower()

    def get(self: KernelAttributes) -> int:
        return _callable_int(self, name, self._get(attr))

    def set(self: KernelAttributes, value: int) -> None:
        self._set(attr, value)

    get.__doc__ = doc
    return property(get, set)


class KernelAttributes:
    """Per-device attributes of a :class:`Kernel` (``Kernel.attributes``), as properties.

    ``kernel.attributes`` is bound to the current device, looked up each time an attribute is
    read (device 0 where no context is current); ``kernel.attributes[device]`` (an int ordinal
    or a ``Device``) is a view bound to that device. All views of one kernel share one cache,
    so each attribute is asked of the driver (``cuKernelGetAttribute``) once per device.

    ``max_dynamic_shared_size_bytes`` and ``preferred_shared_memory_carveout`` are settable
    here (``cuKernelSetAttribute`` for the view's device), an extension of ``cuda.core``::

        kernel.attributes[dev].max_dynamic_shared_size_bytes = 100 * 1024

    Raises
    ------
    CUDAError
        The driver refuses a query or a value; no driver or GPU is present
        (``CUDADriverNotFoundError``).
    """

    __slots__ = ("_cache", "_device", "_kernel")
    _cache: dict[tuple[int, int], int]
    _device: Any
    _kernel: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            "KernelAttributes cannot be instantiated directly. Please use Kernel APIs "
            "(Kernel.attributes)"
        )

    @classmethod
    def _init(
        cls, kernel: Any, cache: dict[tuple[int, int], int] | None = None, device: Any = None
    ) -> KernelAttributes:
        self = object.__new__(cls)
        self._kernel = kernel
        self._cache = {} if cache is None else cache
        self._device = device
        return self

    def __getitem__(self, device: Any) -> KernelAttributes:
        """A view of these attributes bound to ``device``, sharing their cache.

        Parameters
        ----------
        device : Device or int
            The device (or its ordinal) whose attributes the view reads.

        Returns
        -------
        KernelAttributes

        Raises
        ------
        TypeError
            ``device`` is neither a ``Device`` nor an int.
        """
        ordinal = getattr(device, "device_id", device)
        if isinstance(ordinal, bool) or not isinstance(ordinal, int):
            raise arg_error("device", "a Device or an int", device, exc=TypeError)
        return KernelAttributes._init(self._kernel, self._cache, ordinal)

    def _get(self, attr: Any) -> int:
        dev = _cu_device(self._device)
        v = self._cache.get((int(dev), int(attr)))
        if v is None:
            v = self._fetch(attr, dev)
        return v

    def _fetch(self, attr: Any, dev: Any) -> int:
        """Ask the driver for ``attr`` on ``dev`` and cache the answer."""
        v = self._cache[(int(dev), int(attr))] = int(
            call(driver.cuKernelGetAttribute, attr, self._kernel, dev)
        )
        return v

    def _set(self, attr: Any, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise arg_error("value", "an int", value, exc=TypeError)
        dev = _cu_device(self._device)
        call(driver.cuKernelSetAttribute, attr, value, self._kernel, dev)
        # Cache what the driver now reports (it may adjust a hint such as the carveout).
        self._fetch(attr, dev)

    def __repr__(self) -> str:
        where = "current device" if self._device is None else f"device {self._device}"
        return f"<KernelAttributes of {self._kernel!r} on the {where}>"

    max_threads_per_block = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        "int: The most threads a block of this kernel can have.",
    )
    shared_size_bytes = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        "int: Statically allocated shared memory per block, in bytes.",
    )
    const_size_bytes = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "int: User constant memory, in bytes."
    )
    local_size_bytes = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "int: Local memory per thread, in bytes."
    )
    num_regs = _int_attr(_FA.CU_FUNC_ATTRIBUTE_NUM_REGS, "int: Registers per thread.")
    ptx_version = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_PTX_VERSION,
        "int: The PTX virtual architecture the kernel was compiled for (e.g. 90).",
    )
    binary_version = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_BINARY_VERSION,
        "int: The binary architecture the kernel was compiled for (e.g. 90).",
    )
    cache_mode_ca = _bool_attr(
        _FA.CU_FUNC_ATTRIBUTE_CACHE_MODE_CA,
        "bool: Whether the kernel was compiled with ``-Xptxas --dlcm=ca``.",
    )
    max_dynamic_shared_size_bytes = _settable_attr(
        _FA.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        "int: The most dynamic shared memory a launch may ask for, in bytes.\n\n"
        "Settable (``cuKernelSetAttribute`` for this view's device): launches above 48 KiB need it\n"
        "raised first. Setting a value the device cannot give raises ``CUDAError``; a non-int\n"
        "raises ``TypeError``.",
    )
    preferred_shared_memory_carveout = _settable_attr(
        _FA.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
        "int: The preferred shared-memory carveout, in percent (-1: no preference).\n\n"
        "Settable (``cuKernelSetAttribute`` for this view's device); a refused value raises\n"
        "``CUDAError``, a non-int ``TypeError``.",
    )
    cluster_size_must_be_set = _bool_attr(
        _FA.CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET,
        "bool: Whether launches must give a cluster size.",
    )
    required_cluster_width = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
        "int: The cluster width the kernel requires (0 if none).",
    )
    required_cluster_height = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
        "int: The cluster height the kernel requires (0 if none).",
    )
    required_cluster_depth = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
        "int: The cluster depth the kernel requires (0 if none).",
    )
    non_portable_cluster_size_allowed = _bool_attr(
        _FA.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
        "bool: Whether non-portable cluster sizes may be used.",
    )
    cluster_scheduling_policy_preference = _int_attr(
        _FA.CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
        "int: The block scheduling policy preference.",
    )
