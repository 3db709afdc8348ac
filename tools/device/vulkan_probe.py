"""Why headless Vulkan does (or does not) work on this machine: a standalone probe.

Run from the repository root, with the loader carried where the system has none::

    CUDA_CORE_VULKAN_LIB=$PWD/.devcarry/vk/usr/lib/x86_64-linux-gnu/libvulkan.so.1 \
        python tools/device/vulkan_probe.py

It prints the ICD manifests (``/usr/share/vulkan/icd.d``, ``/etc/vulkan/icd.d``,
``VK_ICD_FILENAMES`` / ``VK_DRIVER_FILES``), whether each manifest's ``library_path`` loads with
ctypes (a headless container often lacks ``libGLX_nvidia.so.0`` or its dependencies, which makes
``vkCreateInstance`` answer ``VK_ERROR_INCOMPATIBLE_DRIVER``), then creates an instance with
apiVersion 1.3, 1.2 and 1.0, with the loader's own log (``VK_LOADER_DEBUG``, set here unless
given), and lists the physical devices with their UUIDs and the external fd extensions. It needs
neither cuda_core nor CUDA. Exit status 0 when an instance with a device having both extensions
was made, else 1.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys

os.environ.setdefault("VK_LOADER_DEBUG", "error,warn,driver,info")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

import _vulkan as vk

MANIFEST_DIRS = ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")


def manifests() -> list[str]:
    found = []
    for var in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES"):
        found += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    for d in MANIFEST_DIRS:
        found += sorted(glob.glob(os.path.join(d, "*.json")))
    return found


def check_manifest(path: str) -> None:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"  {path}: unreadable ({exc})")
        return
    icd = data.get("ICD", {})
    lib = icd.get("library_path", "?")
    print(f"  {path}: library_path={lib} api_version={icd.get('api_version', '?')}")
    try:
        ctypes.CDLL(lib)
        print(f"    {lib} loads")
    except OSError as exc:
        print(f"    {lib} does NOT load: {exc}")


def main() -> int:
    print(f"VK_LOADER_DEBUG={os.environ['VK_LOADER_DEBUG']}")
    print(f"loader: {vk.loader_path()} ({vk.ENV}={os.environ.get(vk.ENV, '')!r})")
    print("ICD manifests:")
    paths = manifests()
    for p in paths:
        check_manifest(p)
    if not paths:
        print("  none found: the driver has no Vulkan ICD here")
    for d in MANIFEST_DIRS:
        if os.path.isdir(d):
            print(f"{d}: {sorted(os.listdir(d))}")
    try:
        lib = vk.load_loader()
    except OSError as exc:
        print(f"loader: {exc}")
        return 1
    for major, minor in ((1, 3), (1, 2), (1, 0)):
        version = (major << 22) | (minor << 12)
        sys.stdout.flush()
        try:
            inst = vk.create_instance(lib, version)
        except vk.VulkanError as exc:
            print(f"apiVersion {major}.{minor}: {exc}", flush=True)
            continue
        print(f"apiVersion {major}.{minor}: instance 0x{inst:x}", flush=True)
        fn = lib.vkDestroyInstance
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p], None
        fn(inst, None)
    try:
        with vk.Vulkan() as v:
            for pd in v.physical_devices():
                d = v.describe(pd)
                exts = [
                    e.decode()
                    for e in (vk.EXT_MEMORY_FD, vk.EXT_SEMAPHORE_FD)
                    if e in d["extensions"]
                ]
                print(f"device: {d['name']} vendor={d['vendor']:#x} api={d['api']} uuid={d['uuid'].hex()} "
                      f"fd extensions={exts}")  # fmt: skip
            print(f"opened: {v.info['name']} (queue family {v.family})")
    except (OSError, vk.VulkanError) as exc:
        print(f"no usable device: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
