"""Headless Vulkan through ctypes, just enough to share a buffer and a timeline semaphore with CUDA.

No shaders and no window: Vulkan allocates an exportable device buffer
(``VK_KHR_external_memory_fd``, opaque fd) and an exportable timeline semaphore
(``VK_KHR_external_semaphore_fd``; timeline semaphores are Vulkan 1.2 core), and runs transfer
commands (``vkCmdCopyBuffer``, ``vkCmdFillBuffer``) ordered by the semaphore. Used by
``vulkan_interop.py`` and by the tests (``tests/interop/vulkan_helper.py`` loads this file).

The loader is ``$CUDA_CORE_VULKAN_LIB`` when set (a path to ``libvulkan.so.1``), else the
system's (``ctypes.util.find_library("vulkan")``, then ``libvulkan.so.1``). :func:`skip_reason`
says in one line why Vulkan cannot be used here, or returns ``None``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

ENV = "CUDA_CORE_VULKAN_LIB"
API_1_2 = (1 << 22) | (2 << 12)
NVIDIA = 0x10DE
EXT_MEMORY_FD = b"VK_KHR_external_memory_fd"
EXT_SEMAPHORE_FD = b"VK_KHR_external_semaphore_fd"
OPAQUE_FD = 0x1  # VK_EXTERNAL_{MEMORY,SEMAPHORE}_HANDLE_TYPE_OPAQUE_FD_BIT
RESULTS = {
    0: "VK_SUCCESS", 2: "VK_TIMEOUT", -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY", -3: "VK_ERROR_INITIALIZATION_FAILED",
    -4: "VK_ERROR_DEVICE_LOST", -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT", -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER", -1000072003: "VK_ERROR_INVALID_EXTERNAL_HANDLE",
}  # fmt: skip

# sType values
_APP_INFO, _INSTANCE_INFO, _DEVICE_QUEUE_INFO, _DEVICE_INFO, _SUBMIT_INFO = 0, 1, 2, 3, 4
_MEMORY_ALLOCATE_INFO, _BUFFER_INFO, _SEMAPHORE_INFO = 5, 12, 9
_COMMAND_POOL_INFO, _COMMAND_BUFFER_ALLOCATE_INFO, _COMMAND_BUFFER_BEGIN_INFO = 39, 40, 42
_MEMORY_BARRIER = 46
_PROPERTIES_2, _ID_PROPERTIES = 1000059001, 1000071004
_EXTERNAL_MEMORY_BUFFER_INFO, _EXPORT_MEMORY_ALLOCATE_INFO = 1000072000, 1000072002
_MEMORY_GET_FD_INFO = 1000074002
_EXPORT_SEMAPHORE_INFO, _SEMAPHORE_GET_FD_INFO = 1000077000, 1000079001
_TIMELINE_FEATURES, _SEMAPHORE_TYPE_INFO = 1000207000, 1000207002
_TIMELINE_SUBMIT_INFO, _SEMAPHORE_WAIT_INFO, _SEMAPHORE_SIGNAL_INFO = (
    1000207003,
    1000207004,
    1000207005,
)

_TRANSFER_SRC, _TRANSFER_DST = 0x1, 0x2  # VkBufferUsageFlagBits
_DEVICE_LOCAL, _HOST_VISIBLE, _HOST_COHERENT = 0x1, 0x2, 0x4
_STAGE_TRANSFER, _STAGE_HOST = 0x1000, 0x4000
_ACCESS_TRANSFER_READ, _ACCESS_TRANSFER_WRITE, _ACCESS_HOST_READ = 0x800, 0x1000, 0x2000
_QUEUE_GRAPHICS, _QUEUE_COMPUTE, _QUEUE_TRANSFER = 0x1, 0x2, 0x4

_u32, _u64, _ptr, _char_p = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_char_p
_Handle = (
    ctypes.c_void_p
)  # dispatchable: VkInstance, VkPhysicalDevice, VkDevice, VkQueue, VkCommandBuffer
_Object = ctypes.c_uint64  # non-dispatchable: VkBuffer, VkDeviceMemory, VkSemaphore, VkCommandPool


class VulkanError(RuntimeError):
    """A Vulkan call failed: ``.call`` and ``.result`` (the ``VkResult``)."""

    def __init__(self, call: str, result: int) -> None:
        super().__init__(f"{call}: {RESULTS.get(result, 'VkResult')} ({result})")
        self.call, self.result = call, result


def _struct(name: str, fields: list[tuple[str, Any]]) -> type[ctypes.Structure]:
    return type(name, (ctypes.Structure,), {"_fields_": fields})


_Head = [("sType", _u32), ("pNext", _ptr)]
AppInfo = _struct("AppInfo", [*_Head, ("pApplicationName", _char_p), ("applicationVersion", _u32),
                              ("pEngineName", _char_p), ("engineVersion", _u32), ("apiVersion", _u32)])  # fmt: skip
InstanceInfo = _struct("InstanceInfo", [*_Head, ("flags", _u32), ("pApplicationInfo", _ptr),
                                        ("enabledLayerCount", _u32), ("ppEnabledLayerNames", _ptr),
                                        ("enabledExtensionCount", _u32), ("ppEnabledExtensionNames", _ptr)])  # fmt: skip
Properties2 = _struct("Properties2", [*_Head, ("properties", ctypes.c_ubyte * 1024)])
IDProperties = _struct("IDProperties", [*_Head, ("deviceUUID", ctypes.c_ubyte * 16),
                                        ("driverUUID", ctypes.c_ubyte * 16), ("deviceLUID", ctypes.c_ubyte * 8),
                                        ("deviceNodeMask", _u32), ("deviceLUIDValid", _u32)])  # fmt: skip
QueueFamily = _struct("QueueFamily", [("queueFlags", _u32), ("queueCount", _u32),
                                      ("timestampValidBits", _u32), ("granularity", _u32 * 3)])  # fmt: skip
ExtensionProperties = _struct(
    "ExtensionProperties", [("name", ctypes.c_char * 256), ("specVersion", _u32)]
)
MemoryType = _struct("MemoryType", [("propertyFlags", _u32), ("heapIndex", _u32)])
MemoryHeap = _struct("MemoryHeap", [("size", _u64), ("flags", _u32)])
MemoryProperties = _struct("MemoryProperties", [("memoryTypeCount", _u32), ("memoryTypes", MemoryType * 32),
                                                ("memoryHeapCount", _u32), ("memoryHeaps", MemoryHeap * 16)])  # fmt: skip
QueueInfo = _struct("QueueInfo", [*_Head, ("flags", _u32), ("queueFamilyIndex", _u32), ("queueCount", _u32),
                                  ("pQueuePriorities", ctypes.POINTER(ctypes.c_float))])  # fmt: skip
TimelineFeatures = _struct("TimelineFeatures", [*_Head, ("timelineSemaphore", _u32)])
DeviceInfo = _struct("DeviceInfo", [*_Head, ("flags", _u32), ("queueCreateInfoCount", _u32),
                                    ("pQueueCreateInfos", _ptr), ("enabledLayerCount", _u32),
                                    ("ppEnabledLayerNames", _ptr), ("enabledExtensionCount", _u32),
                                    ("ppEnabledExtensionNames", _ptr), ("pEnabledFeatures", _ptr)])  # fmt: skip
HandleTypesInfo = _struct(
    "HandleTypesInfo", [*_Head, ("handleTypes", _u32)]
)  # the three export infos
BufferInfo = _struct("BufferInfo", [*_Head, ("flags", _u32), ("size", _u64), ("usage", _u32),
                                    ("sharingMode", _u32), ("queueFamilyIndexCount", _u32),
                                    ("pQueueFamilyIndices", _ptr)])  # fmt: skip
MemoryRequirements = _struct(
    "MemoryRequirements", [("size", _u64), ("alignment", _u64), ("memoryTypeBits", _u32)]
)
AllocateInfo = _struct(
    "AllocateInfo", [*_Head, ("allocationSize", _u64), ("memoryTypeIndex", _u32)]
)
GetFdInfo = _struct(
    "GetFdInfo", [*_Head, ("object", _Object), ("handleType", _u32)]
)  # memory or semaphore
SemaphoreTypeInfo = _struct(
    "SemaphoreTypeInfo", [*_Head, ("semaphoreType", _u32), ("initialValue", _u64)]
)
SemaphoreInfo = _struct("SemaphoreInfo", [*_Head, ("flags", _u32)])
CommandPoolInfo = _struct("CommandPoolInfo", [*_Head, ("flags", _u32), ("queueFamilyIndex", _u32)])
CommandBufferAllocateInfo = _struct("CommandBufferAllocateInfo", [*_Head, ("commandPool", _Object),
                                                                  ("level", _u32), ("commandBufferCount", _u32)])  # fmt: skip
BeginInfo = _struct("BeginInfo", [*_Head, ("flags", _u32), ("pInheritanceInfo", _ptr)])
BufferCopy = _struct("BufferCopy", [("srcOffset", _u64), ("dstOffset", _u64), ("size", _u64)])
MemoryBarrier = _struct("MemoryBarrier", [*_Head, ("srcAccessMask", _u32), ("dstAccessMask", _u32)])
TimelineSubmitInfo = _struct("TimelineSubmitInfo", [*_Head, ("waitSemaphoreValueCount", _u32),
                                                    ("pWaitSemaphoreValues", _ptr), ("signalSemaphoreValueCount", _u32),
                                                    ("pSignalSemaphoreValues", _ptr)])  # fmt: skip
SubmitInfo = _struct("SubmitInfo", [*_Head, ("waitSemaphoreCount", _u32), ("pWaitSemaphores", _ptr),
                                    ("pWaitDstStageMask", _ptr), ("commandBufferCount", _u32),
                                    ("pCommandBuffers", _ptr), ("signalSemaphoreCount", _u32),
                                    ("pSignalSemaphores", _ptr)])  # fmt: skip
SignalInfo = _struct("SignalInfo", [*_Head, ("semaphore", _Object), ("value", _u64)])
SemaphoreWaitInfo = _struct("SemaphoreWaitInfo", [*_Head, ("flags", _u32), ("semaphoreCount", _u32),
                                                  ("pSemaphores", _ptr), ("pValues", _ptr)])  # fmt: skip


def _ref(s: Any) -> int:
    return ctypes.addressof(s)


def loader_path() -> str | None:
    """The loader to open: ``$CUDA_CORE_VULKAN_LIB``, else the system's, else ``None``."""
    env = os.environ.get(ENV, "").strip()
    if env:
        return env
    return ctypes.util.find_library("vulkan") or "libvulkan.so.1"


def load_loader() -> ctypes.CDLL:
    """Open the Vulkan loader; ``OSError`` naming what was tried and the variable to set."""
    path = loader_path()
    try:
        return ctypes.CDLL(path)
    except OSError as exc:
        raise OSError(
            f"the Vulkan loader ({path}) does not load: {exc}; set {ENV} to libvulkan.so.1"
        ) from None


def create_instance(lib: ctypes.CDLL, api_version: int = API_1_2) -> int:
    """``vkCreateInstance`` with no layers and no extensions: the ``VkInstance`` address."""
    app = AppInfo(_APP_INFO, None, b"cuda_core", 1, b"cuda_core", 1, api_version)
    info = InstanceInfo(_INSTANCE_INFO, None, 0, _ref(app), 0, None, 0, None)
    inst = _Handle()
    fn = lib.vkCreateInstance
    fn.argtypes, fn.restype = [_ptr, _ptr, _ptr], ctypes.c_int
    r = fn(_ref(info), None, ctypes.byref(inst))
    if r:
        raise VulkanError("vkCreateInstance", r)
    return int(inst.value or 0)


class Vulkan:
    """An instance, one device (the NVIDIA GPU whose UUID is ``uuid`` when given), one queue,
    a command pool and what it made (buffers, memory, semaphores), destroyed by :meth:`close`."""

    def __init__(self, uuid: bytes | None = None) -> None:
        self.lib = load_loader()
        self._objects: list[tuple[str, int]] = []
        gipa = self.lib.vkGetInstanceProcAddr
        gipa.argtypes, gipa.restype = [_Handle, _char_p], _ptr
        self._gipa = gipa
        self.instance = create_instance(self.lib)
        try:
            self._open_device(uuid)
        except BaseException:
            self.close()
            raise

    # -- function lookup ------------------------------------------------------------------------

    def _fn(self, name: str, restype: Any, *argtypes: Any, device: bool = True) -> Any:
        if device and getattr(self, "device", 0):
            addr = self._gdpa(self.device, name.encode())
        else:
            addr = self._gipa(self.instance, name.encode())
        if not addr:
            raise VulkanError(f"vkGet{'Device' if device else 'Instance'}ProcAddr({name})", -7)
        return ctypes.CFUNCTYPE(restype, *argtypes)(addr)

    def _call(self, name: str, *args: Any, argtypes: tuple[Any, ...], device: bool = True) -> None:
        r = self._fn(name, ctypes.c_int, *argtypes, device=device)(*args)
        if r:
            raise VulkanError(name, r)

    # -- device ---------------------------------------------------------------------------------

    def physical_devices(self) -> list[int]:
        """The ``VkPhysicalDevice`` addresses."""
        n = _u32()
        args = (_Handle, ctypes.POINTER(_u32), _ptr)
        self._call(
            "vkEnumeratePhysicalDevices",
            self.instance,
            ctypes.byref(n),
            None,
            argtypes=args,
            device=False,
        )
        arr = (_Handle * n.value)()
        self._call(
            "vkEnumeratePhysicalDevices",
            self.instance,
            ctypes.byref(n),
            arr,
            argtypes=args,
            device=False,
        )
        return [int(a or 0) for a in arr]

    def describe(self, pd: int) -> dict[str, Any]:
        """Name, vendor, API version, device UUID and extensions of physical device ``pd``."""
        ident = IDProperties(_ID_PROPERTIES, None)
        props = Properties2(_PROPERTIES_2, _ref(ident))
        self._fn("vkGetPhysicalDeviceProperties2", None, _Handle, _ptr, device=False)(
            pd, _ref(props)
        )
        raw = bytes(props.properties)
        api, _, vendor = int.from_bytes(raw[0:4], "little"), 0, int.from_bytes(raw[8:12], "little")
        name = raw[20:276].split(b"\0", 1)[0].decode(errors="replace")
        n = _u32()
        args = (_Handle, _ptr, ctypes.POINTER(_u32), _ptr)
        self._call(
            "vkEnumerateDeviceExtensionProperties",
            pd,
            None,
            ctypes.byref(n),
            None,
            argtypes=args,
            device=False,
        )
        exts = (ExtensionProperties * n.value)()
        self._call(
            "vkEnumerateDeviceExtensionProperties",
            pd,
            None,
            ctypes.byref(n),
            exts,
            argtypes=args,
            device=False,
        )
        return {
            "name": name, "vendor": vendor, "api": f"{api >> 22}.{(api >> 12) & 0x3FF}.{api & 0xFFF}",
            "uuid": bytes(ident.deviceUUID), "extensions": {e.name for e in exts},
        }  # fmt: skip

    def _open_device(self, uuid: bytes | None) -> None:
        chosen = None
        for pd in self.physical_devices():
            d = self.describe(pd)
            if not {EXT_MEMORY_FD, EXT_SEMAPHORE_FD} <= d["extensions"]:
                continue
            if uuid is not None and d["uuid"] != bytes(uuid):
                continue
            chosen = (pd, d)
            break
        if chosen is None:
            want = "the CUDA device" if uuid is not None else "a device"
            raise VulkanError(f"no Vulkan physical device is {want} with {EXT_MEMORY_FD.decode()} and "
                              f"{EXT_SEMAPHORE_FD.decode()}", -7)  # fmt: skip
        self.physical, self.info = chosen
        n = _u32()
        get_families = self._fn("vkGetPhysicalDeviceQueueFamilyProperties", None, _Handle,
                                ctypes.POINTER(_u32), _ptr, device=False)  # fmt: skip
        get_families(self.physical, ctypes.byref(n), None)
        fams = (QueueFamily * n.value)()
        get_families(self.physical, ctypes.byref(n), fams)
        want = _QUEUE_GRAPHICS | _QUEUE_COMPUTE | _QUEUE_TRANSFER  # every one of them can transfer
        self.family = next(i for i, f in enumerate(fams) if f.queueFlags & want and f.queueCount)
        prio = ctypes.c_float(1.0)
        queue = QueueInfo(_DEVICE_QUEUE_INFO, None, 0, self.family, 1, ctypes.pointer(prio))
        timeline = TimelineFeatures(_TIMELINE_FEATURES, None, 1)
        names = (_char_p * 2)(EXT_MEMORY_FD, EXT_SEMAPHORE_FD)
        info = DeviceInfo(_DEVICE_INFO, _ref(timeline), 0, 1, _ref(queue), 0, None, 2,
                          ctypes.cast(names, _ptr), None)  # fmt: skip
        dev = _Handle()
        self._call("vkCreateDevice", self.physical, _ref(info), None, ctypes.byref(dev),
                   argtypes=(_Handle, _ptr, _ptr, _ptr), device=False)  # fmt: skip
        self.device = int(dev.value or 0)
        gdpa = self._fn("vkGetDeviceProcAddr", _ptr, _Handle, _char_p, device=False)
        self._gdpa = gdpa
        q = _Handle()
        self._fn("vkGetDeviceQueue", None, _Handle, _u32, _u32, _ptr)(
            self.device, self.family, 0, ctypes.byref(q)
        )
        self.queue = int(q.value or 0)
        mem = MemoryProperties()
        self._fn("vkGetPhysicalDeviceMemoryProperties", None, _Handle, _ptr, device=False)(
            self.physical, _ref(mem)
        )
        self.memory_types = [
            (mem.memoryTypes[i].propertyFlags, i) for i in range(mem.memoryTypeCount)
        ]
        pool = _Object()
        self._call("vkCreateCommandPool", self.device, _ref(CommandPoolInfo(_COMMAND_POOL_INFO, None, 0x2, self.family)),
                   None, ctypes.byref(pool), argtypes=(_Handle, _ptr, _ptr, _ptr))  # fmt: skip
        self.pool = pool.value
        cmd = _Handle()
        alloc = CommandBufferAllocateInfo(_COMMAND_BUFFER_ALLOCATE_INFO, None, self.pool, 0, 1)
        self._call(
            "vkAllocateCommandBuffers",
            self.device,
            _ref(alloc),
            ctypes.byref(cmd),
            argtypes=(_Handle, _ptr, _ptr),
        )
        self.cmd = int(cmd.value or 0)

    # -- buffers and memory ---------------------------------------------------------------------

    def _memory_type(self, bits: int, flags: int) -> int:
        for props, i in self.memory_types:
            if bits & (1 << i) and props & flags == flags:
                return i
        raise VulkanError(f"no memory type with flags {flags:#x} in {bits:#x}", -2)

    def buffer(self, size: int, *, exportable: bool) -> tuple[int, int, int]:
        """A transfer buffer of ``size`` bytes bound to new memory: ``(buffer, memory,
        allocation size)``; exportable: device-local memory exportable as an opaque fd; else
        host-visible, coherent memory (a staging buffer)."""
        ext = HandleTypesInfo(_EXTERNAL_MEMORY_BUFFER_INFO, None, OPAQUE_FD)
        info = BufferInfo(_BUFFER_INFO, _ref(ext) if exportable else None, 0, size,
                          _TRANSFER_SRC | _TRANSFER_DST, 0, 0, None)  # fmt: skip
        buf = _Object()
        self._call(
            "vkCreateBuffer",
            self.device,
            _ref(info),
            None,
            ctypes.byref(buf),
            argtypes=(_Handle, _ptr, _ptr, _ptr),
        )
        self._objects.append(("vkDestroyBuffer", buf.value))
        req = MemoryRequirements()
        self._fn("vkGetBufferMemoryRequirements", None, _Handle, _Object, _ptr)(
            self.device, buf.value, _ref(req)
        )
        flags = _DEVICE_LOCAL if exportable else _HOST_VISIBLE | _HOST_COHERENT
        export = HandleTypesInfo(_EXPORT_MEMORY_ALLOCATE_INFO, None, OPAQUE_FD)
        alloc = AllocateInfo(_MEMORY_ALLOCATE_INFO, _ref(export) if exportable else None, req.size,
                             self._memory_type(req.memoryTypeBits, flags))  # fmt: skip
        mem = _Object()
        self._call(
            "vkAllocateMemory",
            self.device,
            _ref(alloc),
            None,
            ctypes.byref(mem),
            argtypes=(_Handle, _ptr, _ptr, _ptr),
        )
        self._objects.append(("vkFreeMemory", mem.value))
        self._call(
            "vkBindBufferMemory",
            self.device,
            buf.value,
            mem.value,
            0,
            argtypes=(_Handle, _Object, _Object, _u64),
        )
        return buf.value, mem.value, req.size

    def memory_fd(self, memory: int) -> int:
        """``vkGetMemoryFdKHR`` (opaque fd): a new descriptor the caller owns."""
        fd = ctypes.c_int(-1)
        info = GetFdInfo(_MEMORY_GET_FD_INFO, None, memory, OPAQUE_FD)
        self._call(
            "vkGetMemoryFdKHR",
            self.device,
            _ref(info),
            ctypes.byref(fd),
            argtypes=(_Handle, _ptr, _ptr),
        )
        return fd.value

    def map(self, memory: int, size: int) -> int:
        """``vkMapMemory`` of host-visible memory: the host address."""
        p = _ptr()
        self._call("vkMapMemory", self.device, memory, 0, size, 0, ctypes.byref(p),
                   argtypes=(_Handle, _Object, _u64, _u64, _u32, _ptr))  # fmt: skip
        return int(p.value or 0)

    # -- semaphores -----------------------------------------------------------------------------

    def timeline_semaphore(
        self, initial: int = 0, *, exportable: bool = True, binary: bool = False
    ) -> int:
        """A timeline semaphore at ``initial`` (``binary``: a binary semaphore instead),
        exportable as an opaque fd (or not)."""
        export = HandleTypesInfo(_EXPORT_SEMAPHORE_INFO, None, OPAQUE_FD)
        next_ = _ref(export) if exportable else None
        kind = SemaphoreTypeInfo(
            _SEMAPHORE_TYPE_INFO, next_, int(not binary), 0 if binary else initial
        )
        info = SemaphoreInfo(_SEMAPHORE_INFO, _ref(kind), 0)
        sem = _Object()
        self._call(
            "vkCreateSemaphore",
            self.device,
            _ref(info),
            None,
            ctypes.byref(sem),
            argtypes=(_Handle, _ptr, _ptr, _ptr),
        )
        self._objects.append(("vkDestroySemaphore", sem.value))
        return int(sem.value)

    def semaphore_fd(self, semaphore: int) -> int:
        """``vkGetSemaphoreFdKHR`` (opaque fd): a new descriptor the caller owns."""
        fd = ctypes.c_int(-1)
        info = GetFdInfo(_SEMAPHORE_GET_FD_INFO, None, semaphore, OPAQUE_FD)
        self._call(
            "vkGetSemaphoreFdKHR",
            self.device,
            _ref(info),
            ctypes.byref(fd),
            argtypes=(_Handle, _ptr, _ptr),
        )
        return fd.value

    def wait_semaphore(self, semaphore: int, value: int, timeout_ns: int = 10_000_000_000) -> None:
        """``vkWaitSemaphores`` on the host until ``semaphore`` reaches ``value``."""
        sems, vals = (_u64 * 1)(semaphore), (_u64 * 1)(value)
        info = SemaphoreWaitInfo(_SEMAPHORE_WAIT_INFO, None, 0, 1, _ref(sems), _ref(vals))
        self._call(
            "vkWaitSemaphores", self.device, _ref(info), timeout_ns, argtypes=(_Handle, _ptr, _u64)
        )

    def signal_semaphore(self, semaphore: int, value: int) -> None:
        """``vkSignalSemaphore``: set a timeline semaphore to ``value`` from the host."""
        info = SignalInfo(_SEMAPHORE_SIGNAL_INFO, None, semaphore, value)
        self._call("vkSignalSemaphore", self.device, _ref(info), argtypes=(_Handle, _ptr))

    def semaphore_value(self, semaphore: int) -> int:
        """``vkGetSemaphoreCounterValue``."""
        v = _u64()
        self._call(
            "vkGetSemaphoreCounterValue",
            self.device,
            semaphore,
            ctypes.byref(v),
            argtypes=(_Handle, _Object, _ptr),
        )
        return v.value

    # -- commands -------------------------------------------------------------------------------

    def submit_transfer(
        self, copies: list[tuple[int, int, int]], fills: list[tuple[int, int, int, int]], *,
        semaphore: int | None = None, wait: int | None = None, signal: int | None = None,
    ) -> None:  # fmt: skip
        """Record and submit, on the one queue: the copies ``(src, dst, size)`` (whole buffers
        from offset 0), a barrier, the fills ``(buffer, offset, size, uint32 value)``, and a
        barrier that makes the writes visible to the host; waiting for ``semaphore`` to reach
        ``wait`` first and setting it to ``signal`` after, where given. The previous submission
        must be complete (the command buffer is re-recorded)."""
        d, cmd = self.device, self.cmd
        self._call("vkBeginCommandBuffer", cmd, _ref(BeginInfo(_COMMAND_BUFFER_BEGIN_INFO, None, 1, None)),
                   argtypes=(_Handle, _ptr))  # fmt: skip
        copy = self._fn("vkCmdCopyBuffer", None, _Handle, _Object, _Object, _u32, _ptr)
        fill = self._fn("vkCmdFillBuffer", None, _Handle, _Object, _u64, _u64, _u32)
        barrier = self._fn(
            "vkCmdPipelineBarrier",
            None,
            _Handle,
            _u32,
            _u32,
            _u32,
            _u32,
            _ptr,
            _u32,
            _ptr,
            _u32,
            _ptr,
        )
        for src, dst, size in copies:
            region = BufferCopy(0, 0, size)
            copy(cmd, src, dst, 1, _ref(region))
        war = MemoryBarrier(
            _MEMORY_BARRIER,
            None,
            _ACCESS_TRANSFER_READ | _ACCESS_TRANSFER_WRITE,
            _ACCESS_TRANSFER_WRITE,
        )
        barrier(cmd, _STAGE_TRANSFER, _STAGE_TRANSFER, 0, 1, _ref(war), 0, None, 0, None)
        for buf, offset, size, value in fills:
            fill(cmd, buf, offset, size, value)
        host = MemoryBarrier(_MEMORY_BARRIER, None, _ACCESS_TRANSFER_WRITE, _ACCESS_HOST_READ)
        barrier(cmd, _STAGE_TRANSFER, _STAGE_HOST, 0, 1, _ref(host), 0, None, 0, None)
        self._call("vkEndCommandBuffer", cmd, argtypes=(_Handle,))
        cmds = (_Handle * 1)(cmd)
        sems = (_u64 * 1)(semaphore or 0)
        wait_vals, signal_vals = (_u64 * 1)(wait or 0), (_u64 * 1)(signal or 0)
        stage = (_u32 * 1)(_STAGE_TRANSFER)
        n_wait, n_signal = int(wait is not None), int(signal is not None)
        timeline = TimelineSubmitInfo(
            _TIMELINE_SUBMIT_INFO, None, n_wait, _ref(wait_vals), n_signal, _ref(signal_vals)
        )
        info = SubmitInfo(_SUBMIT_INFO, _ref(timeline) if semaphore else None, n_wait, _ref(sems), _ref(stage),
                          1, _ref(cmds), n_signal, _ref(sems))  # fmt: skip
        self._call(
            "vkQueueSubmit", self.queue, 1, _ref(info), 0, argtypes=(_Handle, _u32, _ptr, _Object)
        )
        del d

    def wait_idle(self) -> None:
        """``vkDeviceWaitIdle``."""
        self._call("vkDeviceWaitIdle", self.device, argtypes=(_Handle,))

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for the device, destroy what was made (newest first), the device and the
        instance; idempotent."""
        if getattr(self, "device", 0):
            self.wait_idle()
            for name, obj in reversed(self._objects):
                self._fn(name, None, _Handle, _Object, _ptr)(self.device, obj, None)
            self._objects.clear()
            if getattr(self, "pool", None):
                self._fn("vkDestroyCommandPool", None, _Handle, _Object, _ptr)(
                    self.device, self.pool, None
                )
            self._fn("vkDestroyDevice", None, _Handle, _ptr)(self.device, None)
            self.device = 0
        if self.instance:
            self._fn("vkDestroyInstance", None, _Handle, _ptr, device=False)(self.instance, None)
            self.instance = 0

    def __enter__(self) -> Vulkan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def skip_reason(uuid: bytes | None = None) -> str | None:
    """Why headless Vulkan with external fd memory and semaphores cannot be used here (one line
    naming the loader, the ``VkResult`` or the missing extension), or ``None`` when it can."""
    try:
        with Vulkan(uuid):
            return None
    except OSError as exc:
        return str(exc)
    except VulkanError as exc:
        return f"Vulkan is not usable here ({exc}; run tools/device/vulkan_probe.py to see why)"
