"""Print every GPU's main facts and a few of its properties, and check that they agree.

Run: ``python examples/device_properties.py`` (needs a GPU). Exits non-zero if a check fails.
"""

from __future__ import annotations

from _example import need_gpu, run_main

from cuda_core import Device, system


def main() -> int:
    need_gpu()
    n = system.get_num_devices()
    print(
        f"CUDA driver {system.get_driver_version()}, NVRTC {system.get_nvrtc_version()}, {n} GPU(s)"
    )
    assert n >= 1, "no GPU found"
    for dev in Device.get_all_devices():
        props = dev.properties
        cc = dev.compute_capability
        print(f"[{dev.device_id}] {dev.name}")
        print(
            f"    compute capability {cc.major}.{cc.minor} (arch sm_{dev.arch}), "
            f"{dev.total_memory / 2**30:.1f} GiB, PCI {dev.pci_bus_id}, UUID {dev.uuid}"
        )
        print(
            f"    {props.multiprocessor_count} SMs, warp {props.warp_size}, "
            f"{props.max_threads_per_block} threads/block, "
            f"{props.max_shared_memory_per_block_optin // 1024} KiB shared memory/block (opt-in), "
            f"L2 {props.l2_cache_size // 2**20} MiB"
        )
        print(
            f"    unified addressing {props.unified_addressing}, managed memory {props.managed_memory}, "
            f"cooperative launch {props.cooperative_launch}"
        )
        # Self-checks: the facts agree with each other and the singleton rule holds.
        assert Device(dev.device_id) is dev
        assert (props.compute_capability_major, props.compute_capability_minor) == cc
        assert dev.arch == f"{cc.major}{cc.minor}"
        assert dev.total_memory > 0 and dev.name
        assert props.warp_size == 32
        assert isinstance(props.unified_addressing, bool)
        assert props.max_threads_per_block >= 1024
        assert dev.can_access_peer(dev)
    print("OK")
    return 0


if __name__ == "__main__":
    run_main(main)
