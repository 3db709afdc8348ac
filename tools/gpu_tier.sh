#!/usr/bin/env bash
# Run on the GPU machine (device tool): the whole test suite (GPU tier included), then the
# benchmarks named in $BENCH (default: all), logs under $OUT.
# Usage: bash tools/gpu_tier.sh [pytest args...]
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CUDA_CORE_CACHE_DIR=$(mktemp -d)
python3 - <<'PY' 2>&1 | tee "$OUT/env.txt"
import sys, cuda.bindings, numpy
print(sys.version)
print("cuda.bindings", cuda.bindings.__version__, "numpy", numpy.__version__)
PY
timeout ${PYTEST_TIMEOUT:-420} python3 -m pytest -q -rfEs -p no:cacheprovider --junitxml="$OUT/junit.xml" "${@:-tests}" 2>&1 | tee "$OUT/pytest.txt" | tail -n 60
echo "pytest exit: ${PIPESTATUS[0]}"
for b in ${BENCH:-}; do
  echo "=== benchmark $b"
  timeout 240 python3 "benchmarks/$b" 2>&1 | tee "$OUT/$(basename "$b" .py).txt"
done
