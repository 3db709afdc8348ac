"""Vulkan and CUDA take 1,000 turns on one shared buffer through one timeline semaphore
(``examples/vulkan_interop.py``'s ping-pong): every word checked every round, on the device
(what Vulkan filled) and on the host (Vulkan's copy of what CUDA wrote), and device memory does
not grow."""

from __future__ import annotations

import gc
import time

import pytest

from cuda_core._compat import driver
from cuda_core._utils import handle_return

ROUNDS = 1000


@pytest.fixture
def pp(dev):
    from tests.interop.vulkan_helper import ping_pong, vulkan_skip_reason

    why = vulkan_skip_reason()
    if why:
        pytest.skip(why)
    p = ping_pong().PingPong(dev)
    yield p
    p.close()


@pytest.mark.gpu
def test_a_thousand_rounds_check_every_value_and_keep_memory_flat(pp):
    pp.run(10)  # warm up: the kernel's module, the driver's first submissions
    pp.stream.sync()
    gc.collect()
    free_before = handle_return(driver.cuMemGetInfo())[0]
    t0 = time.perf_counter()
    pp.run(ROUNDS)
    elapsed = time.perf_counter() - t0
    pp.stream.sync()
    gc.collect()
    free_after = handle_return(driver.cuMemGetInfo())[0]
    assert pp.round == ROUNDS + 10
    assert pp.host_mismatches == 0, f"{pp.host_mismatches} words of Vulkan's copies were wrong"
    assert pp.device_mismatches() == 0
    assert free_before - free_after < (1 << 20), (
        f"free device memory fell by {free_before - free_after} bytes over {ROUNDS} rounds"
    )
    print(f"{ROUNDS} rounds in {elapsed:.2f} s")
