#!/usr/bin/env bash
# The GPU tier under cuda-bindings 12.x, on the GPU machine (device tool, kind nvidia-h100-x1).
#
# That machine has cuda-bindings 13 and NVRTC 13 only, and no network. This script needs the
# ignored paths .whl (the cuda-bindings 12.9 wheel for CPython 3.12 and the cuda-pathfinder
# wheel tested with it) and .devcarry/cu12 (the kernels tools/precompile_cu12.py compiled with
# NVRTC 12 for sm_90) carried along. It installs the wheels into a scratch folder put first on
# PYTHONPATH (nothing of the machine's Python changes), builds the native backend in place, and
# runs every test file in its own pytest process on both backends (tools/gpu_tier.sh), with CUDA_CORE_TEST_PRECOMPILED naming the kernels:
# tests compiling a kernel found there launch the NVRTC 12 code; tests needing NVRTC for
# anything else skip with "NVRTC 12 is not installed on this machine" (cuda_core does not use
# NVRTC 13 with the 12.x bindings). Logs under $OUT/cu12/: setup.txt (install, build, the
# environment report), summary.txt (tools/gpu_tier.sh's, and the misses), native.log and
# pure.log (every pytest output), misses.txt (compiles not found among the kernels), report.json.
#
# To make the carried paths on the CPU machine (a fresh checkout has neither):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux_2_28_x86_64 -d .whl cuda-bindings==12.9.10 cuda-pathfinder==1.9.0
#   PYTHONPATH=$PWD <cu12 venv>/bin/python tools/precompile_cu12.py
# Usage: bash tools/device/cu12.sh   [FILES="tests/test_x.py ..."] [JOBS=8] [FILE_TIMEOUT=seconds, default 180]
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
LOG="$OUT/cu12"
mkdir -p "$LOG"
ROOT=$PWD
WORK=$(mktemp -d /tmp/cu12.XXXXXX)
FILE_TIMEOUT=${FILE_TIMEOUT:-180}
start=$SECONDS

fail_setup() { echo "SETUP FAILED: $*" | tee -a "$LOG/setup.txt" "$LOG/summary.txt"; exit 1; }

# -- set-up: the 12.9 bindings first on the path, the native backend built, the report ----------
{
    echo "== python: $(python3 --version 2>&1); machine's cuda-bindings: $(python3 -c 'import cuda.bindings as b; print(b.__version__)' 2>&1)"
    echo "== machine's cuda-pathfinder: $(python3 -c 'import cuda.pathfinder as p; print(p.__version__)' 2>&1)"
    echo "== carried: $(ls .whl 2>&1 | tr '\n' ' '); $(ls .devcarry/cu12/*.bin 2>/dev/null | wc -l) precompiled kernels"
} > "$LOG/setup.txt" 2>&1
shopt -s nullglob
wheels=(.whl/cuda_bindings-12.9.*-cp312-*.whl .whl/cuda_pathfinder-*.whl)
[ ${#wheels[@]} -eq 2 ] || fail_setup "carry .whl with the cuda-bindings 12.9 cp312 wheel and the cuda-pathfinder wheel (found: ${wheels[*]:-none})"
[ -d .devcarry/cu12 ] || fail_setup "carry .devcarry/cu12 (python tools/precompile_cu12.py in a cu12 environment)"
if ! python3 -m pip install --quiet --no-deps --no-index --target "$WORK/site" "${wheels[@]}" >> "$LOG/setup.txt" 2>&1; then
    # No pip: a wheel of these (no scripts, no data) installs by unpacking it.
    echo "pip failed; unpacking the wheels instead" >> "$LOG/setup.txt"
    python3 -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
        "$WORK/site" "${wheels[@]}" >> "$LOG/setup.txt" 2>&1 || fail_setup "could not install ${wheels[*]}"
fi
export PYTHONPATH="$WORK/site:$ROOT"
export CUDA_CORE_CACHE_DIR="$WORK/cache"
python3 setup.py -q build_ext --inplace >> "$LOG/setup.txt" 2>&1 || fail_setup "the native backend did not build"
python3 - >> "$LOG/setup.txt" 2>&1 <<'PY' || fail_setup "the environment is not the one this run needs (see setup.txt)"
import cuda.bindings
import cuda.pathfinder

import cuda_core._handles._backend as b
from cuda_core import system
from cuda_core._handles._driver import ensure_driver

ensure_driver()
print(f"cuda-bindings {cuda.bindings.__version__} from {cuda.bindings.__file__}")
print(f"cuda-pathfinder {cuda.pathfinder.__version__}; driver supports CUDA {system.get_driver_version()}")
print(f"handle layer: native {b.NATIVE} ({b.REASON})")
assert cuda.bindings.__version__.startswith("12.9."), "the 12.9 bindings are not the ones imported"
assert b.NATIVE, "the native backend is not in use"
PY
python3 -m cuda_core >> "$LOG/setup.txt" 2>&1
python3 -m cuda_core --json > "$LOG/report.json" 2>> "$LOG/setup.txt"

# -- the tests -------------------------------------------------------------------------------
export CUDA_CORE_TEST_PRECOMPILED="$ROOT/.devcarry/cu12"
export CUDA_CORE_TEST_PRECOMPILED_MISSES="$LOG/misses.txt"
: > "$LOG/misses.txt"

# Every file on both backends, eight processes at a time (tools/gpu_tier.sh), the bindings first on
# the path.
EXTRA_PATH="$WORK/site" OUT="$LOG" BACKENDS="native pure" JOBS=${JOBS:-8} FILE_TIMEOUT="$FILE_TIMEOUT" \
    FILES="${FILES:-$(find tests -name 'test_*.py' | sort)}" bash tools/gpu_tier.sh > "$LOG/tier.txt" 2>&1

# The summary (totals, failures, skips by reason per backend) is tools/gpu_tier.sh's; add the misses.
echo "compiles not found among the precompiled kernels (they skip): $(wc -l < "$LOG/misses.txt") (misses.txt)" >> "$LOG/summary.txt"
echo "elapsed: $((SECONDS - start)) s" >> "$LOG/summary.txt"
cat "$LOG/summary.txt"
rm -rf "$WORK"
