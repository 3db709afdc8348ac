#!/usr/bin/env bash
# Run on the GPU machine (device tool): every test file in its own pytest process (a crash in
# one file cannot hide the others), then the benchmarks named in $BENCH; logs under $OUT.
# Usage: [BENCH="bench_launch.py ..."] [FILES="tests/test_x.py ..."] bash tools/gpu_tier.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export CUDA_CORE_CACHE_DIR=$(mktemp -d)
# Build the optional accelerator in place, as `pip install -e .` does (it is optional: a failure
# leaves the pure Python path).
python3 setup.py -q build_ext --inplace > "$OUT/build_ext.txt" 2>&1 || tail -5 "$OUT/build_ext.txt"
python3 -c "import sys, cuda.bindings, cuda_core, cuda_core._utils as u, cuda_core._backend as b; u.ensure_driver(); print(sys.version.split()[0], 'cuda.bindings', cuda.bindings.__version__, 'native', b.NATIVE, b.REASON)" | tee "$OUT/env.txt"
: > "$OUT/summary.txt"
for f in ${FILES:-tests/test_*.py}; do
  timeout ${FILE_TIMEOUT:-240} python3 -X faulthandler -m pytest -q -rfEs -p no:cacheprovider "$f" > "$OUT/log_$(basename "$f" .py).txt" 2>&1
  rc=$?
  echo "$(basename "$f"): rc=$rc $(grep -E '(passed|failed|error|skipped)' "$OUT/log_$(basename "$f" .py).txt" | tail -1)" | tee -a "$OUT/summary.txt"
done
cat "$OUT"/log_*.txt > "$OUT/pytest_all.txt"; rm -f "$OUT"/log_*.txt
grep -E "^(FAILED|ERROR)|Fatal Python" "$OUT/pytest_all.txt" | head -80
for b in ${BENCH:-}; do
  echo "=== benchmark $b"
  timeout 240 python3 "benchmarks/$b" 2>&1 | tee "$OUT/$(basename "$b" .py).txt"
done
