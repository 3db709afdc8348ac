"""Compile the GPU tier's kernels with NVRTC 12 for the GPU run under cuda-bindings 12.x.

Run where ``cuda-bindings`` 12.x and NVRTC 12 are installed (``pip install -e ".[cu12,test]"``),
from the repository root::

    python tools/precompile_cu12.py [FOLDER] [--misses FILE ...]   # default: .devcarry/cu12 (ignored)

It compiles every request of ``tests/helpers/precompiled.py``'s ``REQUESTS`` for ``sm_90``
(the H100) and writes ``<key>.bin`` and ``<key>.json`` per request into FOLDER, replacing what
was there; ``tools/device/cu12.sh`` serves them to the tests on the GPU machine. With
``--misses``, it also compiles the requests that a GPU run found missing (``misses.txt`` of
``tools/device/cu12.sh``); those of earlier runs are kept in ``tools/cu12_requests.jsonl`` and
always compiled. A request NVRTC 12 refuses (a test of compile errors) is reported and left out. It refuses to
run with another major of ``cuda-bindings`` or NVRTC, and fails on any compile error.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The requests earlier GPU runs under 12.x found missing (misses.txt lines, once each): always
# compiled, so a fresh checkout gets the same coverage. Append a run's new misses to keep them.
RECORDED = ROOT / "tools" / "cu12_requests.jsonl"
sys.path.insert(0, str(ROOT))


def main(argv: list[str]) -> int:
    import argparse

    import cuda.bindings

    from cuda_core import Program, system
    from cuda_core._errors import CUDAError
    from tests.helpers import precompiled

    parser = argparse.ArgumentParser(description="Compile the GPU tier's kernels with NVRTC 12.")
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT / ".devcarry" / "cu12")
    parser.add_argument("--misses", type=Path, action="append", default=[],
                        help="a misses file of tools/device/cu12.sh: compile its requests too")  # fmt: skip
    args = parser.parse_args(argv[1:])
    args.misses.insert(0, RECORDED)
    folder = args.folder
    nvrtc = system.get_nvrtc_version()
    if not cuda.bindings.__version__.startswith("12.") or nvrtc[0] != 12:
        print(
            f"needs cuda-bindings 12.x and NVRTC 12 (found {cuda.bindings.__version__}, NVRTC {nvrtc[0]}.{nvrtc[1]})",
            file=sys.stderr,
        )
        return 2
    compiler = f"NVRTC {nvrtc[0]}.{nvrtc[1]} (cuda-bindings {cuda.bindings.__version__})"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    total = count = 0
    missed = [r for path in args.misses for r in precompiled.missed_requests(path)]
    for desc, code, options, target, names in [*precompiled.requests(), *missed]:
        try:
            obj = Program(code, "c++", options=options).compile(
                target, name_expressions=names, cache=False
            )
        except (CUDAError, ValueError, TypeError) as e:
            print(f"left out ({type(e).__name__}: {str(e).splitlines()[0][:100]}): {desc}")
            continue
        key = precompiled.store(folder, desc, code, options, target, names, obj, compiler)
        size = (folder / f"{key}.bin").stat().st_size
        total += size
        count += 1
        print(f"{key}  {size:8d} bytes  {desc}")
    print(f"{count} kernels' code, {total / 2**20:.2f} MiB, compiled by {compiler}, in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
