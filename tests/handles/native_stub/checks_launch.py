"""Checks of LaunchConfigHandle: the CUlaunchConfig the driver receives, failures, a closed stream."""

from __future__ import annotations

from stub_env import N, check, count, fail, launch_seen, new_ctx, raises


@check
def launch() -> None:
    ctx = new_ctx()
    s = ctx.create_stream(0, None)
    cfg = N.LaunchConfigHandle(s, (1, 2, 3), [4, 5, 6], 128, (2, 1, 1), True, 1)
    assert cfg.stream is s
    assert cfg.launch(0xF00, 0xBA5) == 0
    seen = launch_seen
    assert tuple(seen.grid) == (1, 2, 3) and tuple(seen.block) == (4, 5, 6) and seen.shmem == 128
    assert (
        seen.stream == s.address
        and seen.function == 0xF00
        and seen.params == 0xBA5
        and seen.extra is None
    )
    assert seen.num_attrs == 3 and not seen.attrs_null
    assert list(seen.attr_id) == [
        4,
        2,
        5,
    ]  # cluster dimension, cooperative, programmatic serialization
    assert (
        tuple(seen.attr_value[0]) == (2, 1, 1)
        and seen.attr_value[1][0] == 1
        and seen.attr_value[2][0] == 1
    )
    plain = N.LaunchConfigHandle(s, (7, 1, 1), (32, 1, 1), 0, None, False, False)
    assert plain.launch(0xF01, None) == 0
    assert (
        seen.num_attrs == 0
        and seen.attrs_null
        and seen.params is None
        and tuple(seen.grid) == (7, 1, 1)
    )
    fail("cuLaunchKernelEx", 719)
    assert plain.launch(0xF01, 0) == 719  # a status, not an exception
    raises(ValueError, lambda: N.LaunchConfigHandle(s, (1, 1), (1, 1, 1), 0, None, False, False))
    raises(
        OverflowError, lambda: N.LaunchConfigHandle(s, (1, 1, 1), (1, 1, 1), -1, None, False, False)
    )
    raises(
        TypeError,
        lambda: N.LaunchConfigHandle(object(), (1, 1, 1), (1, 1, 1), 0, None, False, False),
    )
    s.release()
    raises(RuntimeError, lambda: cfg.launch(0xF00, 0), "Stream has been closed")
    assert count("cuLaunchKernelEx") == 3
