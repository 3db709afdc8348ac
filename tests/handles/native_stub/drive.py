"""Drive ``cuda_core._handles._native`` against the fake driver in ``stub_cuda.c`` (CPU tier).

Run by ``tests/handles/test_native_stub.py`` in a subprocess, never in the test process (GPU tests
share that one's module): ``python drive.py NATIVE_SO STUB_SO CHECK``. It loads the given
build of the native module on its own, binds it to the stub's symbols (``stub_env.py``), runs
one check and prints ``PASS <check>``. The checks live in ``checks_*.py``, one concept each;
``--list`` prints their names in order. Every check ends by asserting the stub saw no misuse
(no double destroy or free, no stale handle used) and that every context push was popped.
"""

from __future__ import annotations

import gc

import checks_contexts  # noqa: F401  (each checks_* module registers its checks, in this order)
import checks_errors  # noqa: F401
import checks_interop  # noqa: F401
import checks_launch  # noqa: F401
import checks_lifetime  # noqa: F401
import checks_memory  # noqa: F401
import checks_streams  # noqa: F401
from stub_env import CHECK, CHECKS, bind, errors, lib


def main() -> None:
    if CHECK != "unbound":
        bind()
    lib.stub_reset()
    CHECKS[CHECK]()
    gc.collect()
    assert errors.value == 0, (
        f"the stub saw {errors.value} misuses (double destroy/free, stale handle)"
    )
    assert lib.stub_depth() == 0, "a context push was not popped"
    print(f"PASS {CHECK}")


if __name__ == "__main__":
    if CHECK == "--list":
        print(" ".join(CHECKS))
    else:
        main()
