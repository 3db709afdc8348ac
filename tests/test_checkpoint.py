"""cuda_core.checkpoint: argument checking (CPU) and a full lock/checkpoint/restore/unlock of a
child process that keeps data on the GPU (GPU tier)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from cuda_core import CUDAError
from cuda_core._compat import BINDINGS_MAJOR
from cuda_core.checkpoint import Process
from cuda_core.checkpoint import _restore_args as restore_args

# -- CPU tier ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pid,exc",
    [(0, ValueError), (-5, ValueError), (True, TypeError), (1.0, TypeError), ("12", TypeError)],
)
def test_pid_is_checked(pid, exc):
    with pytest.raises(exc, match="pid must be"):
        Process(pid)


def test_process_basics():
    p = Process(4242)
    assert p.pid == 4242
    assert p == Process(4242) and hash(p) == hash(Process(4242)) and p != Process(1)
    assert "4242" in repr(p)


@pytest.mark.parametrize("timeout,exc", [(-1, ValueError), (1.5, TypeError), (False, TypeError)])
def test_lock_timeout_is_checked(timeout, exc):
    with pytest.raises(exc, match="timeout_ms must be"):
        Process(1).lock(timeout_ms=timeout)


def test_restore_mapping_is_checked():
    with pytest.raises(TypeError, match="gpu_mapping must be a mapping"):
        restore_args([("a", "b")], [])
    with pytest.raises(ValueError, match="32 hex digits"):
        restore_args({"nothex": "GPU-" + "0" * 32}, [])
    with pytest.raises(TypeError, match="str or CUuuid"):
        restore_args({1: 2}, [])
    assert restore_args(None, []) is None
    assert restore_args({}, []) is None


def test_restore_mapping_builds_gpu_pairs():
    old, new = "00112233-4455-6677-8899-aabbccddeeff", "GPU-ffeeddcc-bbaa-9988-7766-554433221100"
    keep: list = []
    if BINDINGS_MAJOR < 13:  # the 12.x bindings have no CUcheckpointGpuPair
        with pytest.raises(
            RuntimeError, match=r"gpu_mapping needs cuda-bindings 13\.0 or newer \(installed: 12\."
        ):
            restore_args({old: new}, keep)
        return
    args = restore_args({old: new}, keep)
    assert args.gpuPairsCount == 1
    pair = args.gpuPairs[0]
    assert bytes(pair.oldUuid.bytes)[:16] == bytes.fromhex(old.replace("-", ""))
    assert bytes(pair.newUuid.bytes)[:16] == bytes.fromhex(new[4:].replace("-", ""))


def test_without_driver_a_clear_error():
    from cuda_core._handles._driver import driver_available

    if driver_available():
        pytest.skip("an NVIDIA driver is present")
    with pytest.raises(CUDAError, match="CUDA_ERROR_DRIVER_NOT_FOUND"):
        Process(1).state  # noqa: B018


# -- GPU tier ----------------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from cuda_core import Device
    dev = Device(0)
    dev.set_current()
    n = 1 << 20
    pattern = (np.arange(n, dtype=np.uint32) * 2654435761) & 0xFFFFFFFF
    buf = dev.allocate(pattern.nbytes)
    buf.copy_from(pattern, stream=dev.default_stream)
    dev.sync()
    print("ready", flush=True)
    sys.stdin.readline()              # the parent checkpoints and restores us meanwhile
    back = np.empty_like(pattern)
    buf.copy_to(back, stream=dev.default_stream)
    dev.sync()
    sys.exit(0 if np.array_equal(back, pattern) else 3)
    """
)


@pytest.mark.gpu
def test_checkpoint_restore_round_trip_of_a_child():
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline().strip()
        assert line == "ready", child.stderr.read()
        proc = Process(child.pid)
        try:
            assert proc.state == "running"
            proc.lock(timeout_ms=10_000)
        except CUDAError as exc:  # e.g. no checkpoint support in this container or driver
            pytest.skip(f"the driver refuses checkpointing here: {exc}")
        assert proc.state == "locked"
        proc.checkpoint()
        assert proc.state == "checkpointed"
        proc.restore()
        assert proc.state == "locked"
        proc.unlock()
        assert proc.state == "running"
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.wait(timeout=60) == 0, child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
