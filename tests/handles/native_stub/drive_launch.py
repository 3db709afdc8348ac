"""Drive ``cuda_core.launch()`` and ``PreparedLaunch`` against the stub driver (CPU tier).

Run by ``tests/test_launcher_fastpath.py`` in a subprocess: ``python drive_launch.py NATIVE_SO
STUB_SO CHECK``, where ``NATIVE_SO`` is a build of the native module (``-``: the backend
``cuda_core`` picks, ``CUDA_CORE_BACKEND`` applies). The whole package is bound to the stub
(``stub_package.py``); a stream's device is a stand-in with an H100's limits (the accessor
``_links.Device`` answers it, as in ``tests/test_launch_config_set.py``), so configs are checked
and built as on a GPU. ``--list`` prints the checks; a check prints ``PASS <check>`` and, for
``misuse``, one JSON line of outcomes (the test compares the backends' lines); ``all`` runs
every check in turn, in one process. On the native
backend each check asserts which path ran (``launch_counters()``): the C path, or the Python
path it handed the call to.
"""

from __future__ import annotations

import ctypes
import json
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import checks_entries  # noqa: F401  (registers the method-entry checks)
import numpy as np
from launch_env import CHECK, CHECKS, PTR, PY_LAUNCH, P, Ran, check, outcome

if CHECK != "--list":
    from stub_package import c_layout

    from cuda_core import LaunchConfig, PreparedLaunch, launch
    from cuda_core._errors import CUDAError


def setup(layout: tuple[tuple[int, int], ...] | None = None) -> Any:
    """A stream, a config, a kernel with ``layout`` (default: (float*, int)), a live buffer."""
    layout = c_layout((8, 4)) if layout is None else layout
    return P.stream(), LaunchConfig(grid=2, block=32), P.kernel(layout), P.buffer(PTR)


def params(sizes: tuple[int, ...], call: Callable[[], Any]) -> bytes:
    """The parameter bytes the stub received from ``call()``."""
    P.expect_params(sizes)
    call()
    got = P.params()
    P.expect_params(())
    return got


# ---------------------------------------------------------------------------------------------


@check
def steady_state() -> None:
    s, cfg, k, buf = setup(c_layout((8, 8, 4, 4, 8, 8, 8, 2, 1, 8)))
    args = (buf, buf, np.int32(3), np.float32(1.5), 2.5, np.uint64(7), buf, np.int16(-2))
    args += (np.uint8(9), np.int64(-5))
    want = b"".join(
        [PTR.to_bytes(8, "little")] * 2
        + [np.int32(3).tobytes(), np.float32(1.5).tobytes(), np.float64(2.5).tobytes()]
        + [np.uint64(7).tobytes(), PTR.to_bytes(8, "little"), np.int16(-2).tobytes()]
        + [np.uint8(9).tobytes(), np.int64(-5).tobytes()]
    )
    sizes = (8, 8, 4, 4, 8, 8, 8, 2, 1, 8)
    with Ran() as first:
        assert params(sizes, lambda: launch(s, cfg, k, *args)) == want
    first.expect(fast=0, slow=1)  # the first launch builds the plan, in Python
    with Ran() as steady:
        for _ in range(5):
            assert params(sizes, lambda: launch(s, cfg, k, *args)) == want
    steady.expect(fast=5, slow=0)
    assert P.count("cuLaunchKernelEx") == 6
    seen = ctypes.cast(P.lib.stub_launch, ctypes.POINTER(ctypes.c_uint * 8)).contents
    assert tuple(seen[:6]) == (2, 1, 1, 32, 1, 1)  # grid, block of the config
    # Other argument types: the Python path plans them, then C launches them too.
    other = (*args[:2], 4, *args[3:])  # a Python int for the int parameter
    with Ran() as r:
        launch(s, cfg, k, *other)
        assert (
            params(sizes, lambda: launch(s, cfg, k, *other)) == want[:16] + b"\4\0\0\0" + want[20:]
        )
        launch(s, cfg, k, *args)  # the plan launched last is the one C knows: back to Python
    r.expect(fast=1, slow=2)
    # PreparedLaunch: calls launch in C; new arguments of the bound types are packed in place.
    p = PreparedLaunch(s, cfg, k, *args)
    with Ran() as r:
        assert params(sizes, p) == want
        new = (*args[:2], np.int32(-1), *args[3:])
        got = params(sizes, lambda: p(*new))
        assert got[16:20] == np.int32(-1).tobytes() and p.args == new
        assert params(sizes, p)[16:20] == np.int32(-1).tobytes()
    r.expect(p_fast=3, p_slow=0)
    p.set_arg(2, np.int32(77))  # set_arg writes the bytes C launches
    with Ran() as r:
        assert params(sizes, p)[16:20] == np.int32(77).tobytes()
    r.expect(p_fast=1)


@check
def dense_doubles() -> None:
    # Only doubles (launch_pack.c's dense_f64 plan): each argument's type is checked as it is
    # packed (four at a time where every one is a float, one by one for mixed float types).
    # Another type anywhere, even at the last place, goes to the Python path, whose plan for
    # those types C then launches. 66 arguments: 16 blocks of four and two after them.
    n = 66
    sizes = (8,) * n
    s, cfg, k, _ = setup(c_layout(sizes))
    floats = tuple(float(i) * 1.5 for i in range(n))
    want = np.array(floats, dtype=np.float64).tobytes()
    with Ran() as r:
        for _ in range(3):
            assert params(sizes, lambda: launch(s, cfg, k, *floats)) == want
    r.expect(fast=2, slow=1)
    for at in (0, 1, 2, 3, n // 2, n - 2, n - 1):
        mixed = (*floats[:at], np.float64(-2.0), *floats[at + 1 :])
        expect = want[: 8 * at] + np.float64(-2.0).tobytes() + want[8 * at + 8 :]
        with Ran() as r:
            assert params(sizes, lambda m=mixed: launch(s, cfg, k, *m)) == expect
            assert params(sizes, lambda m=mixed: launch(s, cfg, k, *m)) == expect  # its plan
            assert params(sizes, lambda: launch(s, cfg, k, *floats)) == want
        r.expect(fast=1, slow=2)
    with Ran() as r:
        assert params(sizes, lambda: launch(s, cfg, k, *floats)) == want
    r.expect(fast=1, slow=0)
    assert outcome(lambda: launch(s, cfg, k, *floats[:-1]))[0] == "TypeError"  # one too few


@check
def kernels_without_arguments() -> None:
    s, cfg, k, _ = setup(())
    with Ran() as r:
        for _ in range(3):
            launch(s, cfg, k)
        p = PreparedLaunch(s, cfg, k)
        p()
        p()
    r.expect(fast=2, slow=1, p_fast=2)
    assert P.count("cuLaunchKernelEx") == 5


def misuse_cases(
    buf: Any, closed: Any
) -> list[tuple[str, tuple[int, ...], tuple[Any, ...], tuple[Any, ...]]]:
    """(name, parameter sizes, warm arguments (launched first, so the plan is C's), bad ones)."""
    void8 = np.zeros(1, dtype=[("a", "<i4"), ("b", "<f4")])[0]
    void4 = np.zeros(1, dtype=[("a", "<i4")])[0]
    return [
        ("too few", (8, 4), (buf, np.int32(1)), (buf,)),
        ("too many", (8, 4), (buf, np.int32(1)), (buf, np.int32(1), 1)),
        ("float for an int", (8, 4), (buf, np.int32(1)), (buf, 1.5)),
        ("int too big for an int", (8, 4), (buf, 5), (buf, 2**40)),
        ("int too small for an int", (8, 4), (buf, 5), (buf, -(2**31) - 1)),
        ("np.uint64 too big for an int", (8, 4), (buf, np.uint64(5)), (buf, np.uint64(2**40))),
        ("pointer too big", (8, 4), (0x1000, np.int32(1)), (2**64, np.int32(1))),
        ("negative pointer", (8, 4), (0x1000, np.int32(1)), (-(2**63) - 1, np.int32(1))),
        ("unsupported type", (8, 4), (buf, np.int32(1)), (buf, "1000")),
        ("closed buffer", (8, 4), (buf, np.int32(1)), (closed, np.int32(1))),
        ("struct of another size", (8, 4), (void8, np.int32(1)), (void4, np.int32(1))),
        ("str for a bool", (1,), (True,), ("x",)),
        ("double for a float", (4,), (np.float32(1),), (np.float64(1e300),)),
    ]


@check
def misuse() -> None:
    """Each case through the entry (its plan warm, so C tries and hands it over) and through the
    Python path, and through PreparedLaunch's C call and its Python call: the same outcome."""
    buf, closed = P.buffer(PTR), P.buffer(PTR + 0x1000)
    closed.close()
    results = []
    for name, sizes, warm, bad in misuse_cases(buf, closed):
        s, cfg = P.stream(), LaunchConfig(grid=1, block=1)
        k = P.kernel(c_layout(sizes))
        launch(s, cfg, k, *warm)
        with Ran() as r:
            fast = outcome(partial(launch, s, cfg, k, *bad))
        r.expect(fast=0, slow=1)
        python = outcome(partial(PY_LAUNCH, s, cfg, k, *bad))
        assert fast == python and fast[0] != "ok", (name, fast, python)
        p = PreparedLaunch(s, cfg, k, *warm)
        bound = params(sizes, p)
        with Ran() as r:
            p_fast = outcome(partial(p, *bad))
        r.expect(p_fast=0, p_slow=1)
        q = PreparedLaunch(s, cfg, k, *warm)
        p_python = outcome(partial(q._call_py, *bad))
        assert p_fast == p_python, (name, p_fast, p_python)
        assert p.args == warm and params(sizes, p) == bound  # the bound launch is untouched
        results.append([name, fast, p_fast])
    # The refusals of values C packs itself (not of another count or type) were C's to refuse.
    with Ran() as r:
        s, cfg, k = P.stream(), LaunchConfig(grid=1, block=1), P.kernel(c_layout((8, 4)))
        launch(s, cfg, k, buf, 5)
        outcome(lambda: launch(s, cfg, k, buf, 2**40))
        outcome(lambda: launch(s, cfg, k, closed, 5))
    r.expect(fast=0, slow=3, refused=2)
    # Misuse of the stream, config and kernel arguments: the same on both paths.
    s, cfg, k, buf = setup()
    for bad in (
        (None, cfg, k),
        (s, (1, 1), k),
        (s, cfg, object()),
        (s, {"grid": 1, "block": 0}, k),
    ):
        a, b = outcome(partial(launch, *bad, buf, 1)), outcome(partial(PY_LAUNCH, *bad, buf, 1))
        assert a == b and a[0] in ("TypeError", "ValueError"), (a, b)
        results.append([repr(bad[:2]), a, a])
    a = outcome(lambda: launch(s, cfg, k, buf, 1, bogus=1))
    assert a == outcome(lambda: PY_LAUNCH(s, cfg, k, buf, 1, bogus=1)) and a[0] == "TypeError"
    print(json.dumps(results))


@check
def driver_refusals() -> None:
    """A status from the driver: the same CUDAError on both paths, with no extra launch."""
    s, cfg, k, buf = setup()
    p = PreparedLaunch(s, cfg, k, buf, np.int32(1))
    launch(s, cfg, k, buf, np.int32(1))
    for status in (719, 1):
        got = []
        for call in (
            lambda: launch(s, cfg, k, buf, np.int32(1)),
            lambda: PY_LAUNCH(s, cfg, k, buf, np.int32(1)),
            p,
            p._call_py,
        ):
            before = P.count("cuLaunchKernelEx")
            P.fail("cuLaunchKernelEx", status)
            got.append(outcome(call))
            assert P.count("cuLaunchKernelEx") == before + 1
        assert all(g == got[0] for g in got), got
        assert got[0][0] == "CUDAError" and got[0][1].startswith("cuLaunchKernelEx: CUDA_ERROR_")
    exc = None
    P.fail("cuLaunchKernelEx", 719)
    try:
        launch(s, cfg, k, buf, np.int32(1))
    except CUDAError as e:
        exc = e
    assert exc is not None and exc.api == "cuLaunchKernelEx" and exc.code == 719


@check
def closed_stream() -> None:
    s, cfg, k, buf = setup()
    launch(s, cfg, k, buf, np.int32(1))
    p = PreparedLaunch(s, cfg, k, buf, np.int32(1))
    q = PreparedLaunch(s, cfg, k, buf, np.int32(1))
    s.close()
    with Ran() as r:
        a = outcome(lambda: launch(s, cfg, k, buf, np.int32(1)))
    r.expect(fast=0, slow=1)
    assert (
        a
        == outcome(lambda: PY_LAUNCH(s, cfg, k, buf, np.int32(1)))
        == [
            "RuntimeError",
            "Stream has been closed",
        ]
    )
    with Ran() as r:
        a = outcome(p)
    r.expect(p_fast=0, p_slow=1)
    assert (
        a
        == outcome(q._call_py)
        == [
            "RuntimeError",
            "Stream has been closed: the stream this PreparedLaunch was made for",
        ]
    )


@check
def config_changes() -> None:
    s, cfg, k, buf = setup()
    p = PreparedLaunch(s, cfg, k, buf, np.int32(1))
    launch(s, cfg, k, buf, np.int32(1))
    seen = ctypes.cast(P.lib.stub_launch, ctypes.POINTER(ctypes.c_uint * 8)).contents
    cfg.grid = 7  # the next launch builds the new native config in Python, then C runs again
    with Ran() as r:
        launch(s, cfg, k, buf, np.int32(1))
        assert seen[0] == 7
        launch(s, cfg, k, buf, np.int32(1))
        p()
        assert seen[0] == 7
        p()
    r.expect(fast=1, slow=1, p_fast=1, p_slow=1)
    cfg.block = 2048  # beyond the device: the same ValueError on both paths, no launch
    before = P.count("cuLaunchKernelEx")
    a = outcome(lambda: launch(s, cfg, k, buf, np.int32(1)))
    assert a == outcome(lambda: PY_LAUNCH(s, cfg, k, buf, np.int32(1))) == outcome(p)
    assert a[0] == "ValueError" and "2048 threads" in a[1], a
    assert P.count("cuLaunchKernelEx") == before
    # Another stream: its own native config; launches alternate between them in Python.
    s2 = P.stream()
    cfg.block = 32
    with Ran() as r:
        launch(s, cfg, k, buf, np.int32(1))
        launch(s2, cfg, k, buf, np.int32(1))
        launch(s2, cfg, k, buf, np.int32(1))
    r.expect(fast=1, slow=2)


@check
def python_paths() -> None:
    """What C leaves to Python: keywords, a dict config, other stream types, types without a
    native packing (a ctypes integer for a wider parameter)."""
    s, cfg, k, buf = setup()
    launch(s, cfg, k, buf, np.int32(1))
    k0 = P.kernel((), address=0xC0DE80)
    launch(s, cfg, k0)
    with Ran() as r:
        launch(stream=s, config=cfg, kernel=k0)
        launch(s, {"grid": 2, "block": 32}, k, buf, np.int32(1))
        launch(P.stream(), cfg, k, buf, np.int32(1))  # a stream the config has not seen
        launch(s, cfg, k, buf, np.int32(1))  # the config's last stream is s again (Python)
        launch(s, cfg, k, buf, np.int32(1))  # and C launches
    r.expect(fast=1, slow=4)
    k16 = P.kernel(c_layout((8, 4)), address=0xC0DE40)
    assert params((8, 4), lambda: launch(s, cfg, k16, buf, ctypes.c_int16(-3)))[8:] == (
        (-3).to_bytes(4, "little", signed=True)
    )
    with Ran() as r:
        launch(s, cfg, k16, buf, ctypes.c_int16(-3))
        PreparedLaunch(s, cfg, k16, buf, ctypes.c_int16(-3))()
    r.expect(fast=0, slow=1, p_fast=0, p_slow=1)  # no native plan: Python packs them
    assert k16._fast is None


@check
def gil_released_during_the_launch() -> None:
    """A launch that waits in the driver (a full queue behind a Python host function, here the
    stub waiting for a flag) lets other Python threads run: one of them clears the flag."""
    s, cfg, k, buf = setup()
    launch(s, cfg, k, buf, np.int32(1))
    p = PreparedLaunch(s, cfg, k, buf, np.int32(1))
    waiting = ctypes.c_int.in_dll(P.lib, "stub_waiting")
    for call in (lambda: launch(s, cfg, k, buf, np.int32(1)), p, lambda: p(buf, np.int32(2))):

        def release() -> None:
            deadline = time.monotonic() + 20
            while waiting.value == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            P.lib.stub_block_launches(0)

        t = threading.Thread(target=release, daemon=True)
        P.lib.stub_block_launches(1)
        t.start()
        with Ran() as r:
            call()  # status 999 (a CUDAError) if the GIL was held for the 10 s the stub waits
        t.join()
        assert r.delta["fast"] + r.delta["p_fast"] == 1 or not P.native


@check
def threads() -> None:
    """Launches of one plan from two threads at once (the GIL released in the driver): the
    second finds the plan's buffer in use and packs into its own."""
    s, cfg, k, buf = setup()
    launch(s, cfg, k, buf, np.int32(1))
    waiting = ctypes.c_int.in_dll(P.lib, "stub_waiting")
    errors: list[BaseException] = []

    def run(v: int) -> None:
        try:
            launch(s, cfg, k, buf, np.int32(v))
        except BaseException as exc:
            errors.append(exc)

    P.lib.stub_block_launches(1)
    workers = [threading.Thread(target=run, args=(v,)) for v in (2, 3)]
    with Ran() as r:
        for t in workers:
            t.start()
        while waiting.value < 2:
            time.sleep(0.001)
        P.lib.stub_block_launches(0)
        for t in workers:
            t.join()
    assert not errors, errors
    r.expect(fast=2, slow=0)
    # Many launches from several threads, values checked by nothing but the stub's own checks.
    with Ran() as r:
        workers = [
            threading.Thread(
                target=lambda: [launch(s, cfg, k, buf, np.int32(i)) for i in range(500)]
            )
            for _ in range(4)
        ]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    r.expect(fast=2000)


@check
def references() -> None:
    """The C path leaks no reference and holds none once it returns."""
    s, cfg, k, buf = setup()
    args = (buf, np.int32(1))
    launch(s, cfg, k, *args)
    p = PreparedLaunch(s, cfg, k, *args)
    p(*args)  # binds this very tuple (a call with *args hands it over as it is)
    objs = [s, cfg, k, buf, args[1], s._h, cfg._last, p] + ([k._fast] if P.native else [])
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(1000):
        launch(s, cfg, k, *args)
        p()
        p(*args)
    P.fail("cuLaunchKernelEx", 719, 20)
    for _ in range(10):
        outcome(lambda: launch(s, cfg, k, *args))
        outcome(p)
    after = [sys.getrefcount(o) for o in objs]
    assert after == before, list(zip(objs, before, after))


def main() -> None:
    for name in CHECKS if CHECK == "all" else [CHECK]:
        P.lib.stub_reset()  # counts from 0 (a new context id: each check makes its streams)
        P.lib.stub_set_current(P.lib.stub_ctx())
        CHECKS[name]()
        assert P.errors == 0, f"the stub saw {P.errors} misuses"
        print(f"PASS {name}", flush=True)


if __name__ == "__main__":
    if CHECK == "--list":
        print(" ".join(CHECKS))
    else:
        main()
