"""Vulkan and CUDA share a buffer and a timeline semaphore, taking turns (checks every value).

Vulkan (headless, through ctypes: ``_vulkan.py``) allocates a device buffer and a timeline
semaphore and exports both as file descriptors; CUDA imports them
(:class:`cuda_core.ExternalMemory`, :class:`cuda_core.ExternalSemaphore`). Then, each round k:

* CUDA waits until the semaphore reaches ``2k``; a kernel checks the words Vulkan filled last
  round (counting mismatches on the device) and writes new words of its own; CUDA signals
  ``2k + 1``;
* Vulkan's queue waits for ``2k + 1``, copies the whole shared buffer to a host-visible staging
  buffer, fills its half of the shared buffer with this round's word, and signals ``2k + 2``;
* the host waits for ``2k + 2`` and checks every word of the staging copy: CUDA's half as the
  kernel wrote it this round, Vulkan's half as Vulkan filled it the round before.

Needs a GPU whose driver has Vulkan (NVIDIA's ICD) and the Vulkan loader (``libvulkan.so.1``;
``CUDA_CORE_VULKAN_LIB`` names it where it is not installed).
"""

from __future__ import annotations

import ctypes
import os

import _vulkan
import numpy as np
from _example import missing, need_gpu, run_main

from cuda_core import (
    ExternalMemory,
    ExternalSemaphore,
    LaunchConfig,
    Program,
    ProgramOptions,
    launch,
)

HALF = 1 << 14  # words each side writes: CUDA words [0, HALF), Vulkan words [HALF, 2 * HALF)
FIRST_FILL = 0xA5000000  # what Vulkan fills before round 0; round k fills FIRST_FILL + k + 1
STRIDE = 2654435761  # CUDA's word i of round k: (k * STRIDE + i) mod 2**32

CODE = r"""
extern "C" __global__ void take_turn(unsigned int* shared, unsigned int half, unsigned int expect,
                                     unsigned int round, unsigned int* errors) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= half) return;
    if (shared[half + i] != expect) {   // what Vulkan filled last round
        atomicAdd(&errors[0], 1u);
        atomicMax(&errors[1], round + 1u);   // the last round that saw one
    }
    shared[i] = round * 2654435761u + i;
}
"""


def vulkan_fill(k: int) -> int:
    """The word Vulkan fills in round ``k`` (``k = -1``: before the first round)."""
    return (FIRST_FILL + k + 1) & 0xFFFFFFFF


def cuda_words(k: int) -> np.ndarray:
    """The words CUDA writes in round ``k``."""
    return (np.uint64(k) * np.uint64(STRIDE) + np.arange(HALF, dtype=np.uint64)).astype(np.uint32)


def device_uuid(dev) -> bytes:
    """The CUDA device's UUID as 16 bytes: Vulkan reports the same one (``deviceUUID``)."""
    return bytes.fromhex(dev.uuid.replace("-", ""))


class PingPong:
    """The shared buffer and semaphore, both sides set up; :meth:`run` takes rounds."""

    def __init__(self, dev) -> None:
        self.dev = dev
        self.vk = _vulkan.Vulkan(uuid=device_uuid(dev))
        try:
            self._setup()
        except BaseException:
            self.vk.close()
            raise

    def _setup(self) -> None:
        vk, dev = self.vk, self.dev
        nbytes = 2 * HALF * 4
        self.shared, shared_mem, alloc_size = vk.buffer(nbytes, exportable=True)
        self.staging, staging_mem, _ = vk.buffer(nbytes, exportable=False)
        host = vk.map(staging_mem, nbytes)
        self.view = np.frombuffer((ctypes.c_ubyte * nbytes).from_address(host), dtype=np.uint32)
        self.semaphore = vk.timeline_semaphore(0)
        vk.submit_transfer([], [(self.shared, 0, nbytes, vulkan_fill(-1))])
        vk.wait_idle()
        # CUDA takes each descriptor on success; on failure it is still ours to close.
        fd = vk.memory_fd(shared_mem)
        try:
            self.memory = ExternalMemory.from_fd(fd, alloc_size, device=dev)
        except BaseException:
            os.close(fd)
            raise
        fd = vk.semaphore_fd(self.semaphore)
        try:
            self.cuda_semaphore = ExternalSemaphore.from_fd(fd, kind="timeline", device=dev)
        except BaseException:
            os.close(fd)
            raise
        self.buffer = self.memory.map_buffer(0, nbytes)
        self.stream = dev.create_stream()
        prog = Program(CODE, code_type="c++", options=ProgramOptions(arch=f"sm_{dev.arch}"))
        self.kernel = prog.compile("cubin").get_kernel("take_turn")
        self.errors = dev.allocate(8, stream=self.stream)
        self.errors.fill(0, stream=self.stream)
        self.config = LaunchConfig(grid=(HALF + 255) // 256, block=256)
        self.round = 0
        self.host_mismatches = 0

    def run(self, rounds: int) -> None:
        """Take ``rounds`` more rounds, checking every word of each on the host."""
        vk, s, sem = self.vk, self.stream, self.cuda_semaphore
        for _ in range(rounds):
            k = self.round
            sem.wait(2 * k, stream=s)
            launch(s, self.config, self.kernel, self.buffer, np.uint32(HALF),
                   np.uint32(vulkan_fill(k - 1)), np.uint32(k), self.errors)  # fmt: skip
            sem.signal(2 * k + 1, stream=s)
            vk.submit_transfer(
                [(self.shared, self.staging, 2 * HALF * 4)],
                [(self.shared, HALF * 4, HALF * 4, vulkan_fill(k))],
                semaphore=self.semaphore, wait=2 * k + 1, signal=2 * k + 2,
            )  # fmt: skip
            vk.wait_semaphore(self.semaphore, 2 * k + 2)
            got = self.view
            bad = int(np.count_nonzero(got[:HALF] != cuda_words(k)))
            bad += int(np.count_nonzero(got[HALF:] != np.uint32(vulkan_fill(k - 1))))
            if bad and not self.host_mismatches:
                print(f"round {k}: {bad} words differ in Vulkan's copy")
            self.host_mismatches += bad
            self.round += 1

    def device_mismatches(self) -> int:
        """The words the kernel found wrong, over every round so far."""
        counts = np.zeros(2, dtype=np.uint32)
        self.errors.copy_to(counts, stream=self.stream)
        self.stream.sync()
        if counts[0]:
            print(f"the kernel found {counts[0]} words wrong, the last in round {counts[1] - 1}")
        return int(counts[0])

    def close(self) -> None:
        """Release CUDA's side (mappings before the imports), then Vulkan's."""
        self.stream.sync()
        for obj in (self.buffer, self.errors, self.memory, self.cuda_semaphore, self.stream):
            obj.close()
        self.vk.close()


def main() -> int:
    dev = need_gpu()
    why = _vulkan.skip_reason(device_uuid(dev))
    if why is not None:
        missing("vulkan", why)
    dev.set_current()
    pp = PingPong(dev)
    try:
        pp.run(200)
        wrong = pp.host_mismatches + pp.device_mismatches()
    finally:
        pp.close()
    print(f"{pp.round} rounds through one timeline semaphore, {2 * HALF} words checked each round: "
          f"{'all match' if not wrong else f'{wrong} mismatches'}")  # fmt: skip
    return 1 if wrong else 0


if __name__ == "__main__":
    run_main(main)
