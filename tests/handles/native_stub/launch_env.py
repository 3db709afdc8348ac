"""The harness of the stub-driver checks of ``drive_launch.py`` and ``checks_entries.py``.

Imported first by ``drive_launch.py`` (``python drive_launch.py NATIVE_SO STUB_SO CHECK``): it
reads those arguments, imports the whole ``cuda_core`` package bound to the stub driver
(``stub_package.py``; ``NATIVE_SO`` ``-``: the backend ``cuda_core`` picks) and gives a stream's
device a stand-in with an H100's limits (the accessor ``_links.Device`` answers it, as in
``tests/test_launch_config_set.py``), so configs are checked and built as on a GPU. Checks
register with :func:`check`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

NATIVE_SO, STUB_SO, CHECK = sys.argv[1:4]
P: Any = None  # the package on the stub, its backend, and the Python launch (not for --list)
N: Any = None
PY_LAUNCH: Any = None
if CHECK == "--list":
    NATIVE_SO = STUB_SO = ""
else:
    from stub_package import StubPackage

    P = StubPackage(STUB_SO, None if NATIVE_SO == "-" else NATIVE_SO)
    from cuda_core import _links, launch

    N = P.backend
    PY_LAUNCH = getattr(launch, "__wrapped__", launch)  # the Python path itself
    _H100 = SimpleNamespace(
        max_threads_per_block=1024, max_block_dim_x=1024, max_block_dim_y=1024,
        max_block_dim_z=64, max_grid_dim_x=2**31 - 1, max_grid_dim_y=65535,
        max_grid_dim_z=65535, max_shared_memory_per_block_optin=232448,
        compute_capability_major=9, compute_capability_minor=0, cooperative_launch=True,
    )  # fmt: skip
    STAND_IN = SimpleNamespace(_id=0, name="a stand-in H100", properties=_H100)
    _links.Device = lambda ordinal=None: STAND_IN

CHECKS: dict[str, Callable[[], None]] = {}
PTR = 0x7F0000001000


def check(fn: Callable[[], None]) -> Callable[[], None]:
    CHECKS[fn.__name__] = fn
    return fn


def counters() -> dict[str, int]:
    """The native path's counters (zeros on the pure backend)."""
    names = ("fast", "slow", "refused", "p_fast", "p_slow", "p_refused")
    values = N.launch_counters() if P.native else (0,) * 6
    return dict(zip(names, values))


class Ran:
    """The counters' change over a block: ``with Ran() as r: ...; r.delta["fast"]``."""

    def __enter__(self) -> Ran:
        self.before = counters()
        return self

    def __exit__(self, *exc: object) -> None:
        after = counters()
        self.delta = {k: after[k] - v for k, v in self.before.items()}

    def expect(self, **want: int) -> None:
        if P.native:
            got = {k: self.delta[k] for k in want}
            assert got == want, (got, want)


def outcome(fn: Callable[[], Any]) -> list[str]:
    """What a call did: ["ok"], or [exception class, message]."""
    try:
        fn()
    except Exception as exc:
        return [type(exc).__name__, str(exc)]
    return ["ok"]
