#!/usr/bin/env bash
# The multi-GPU checks, for the two-GPU machine (device kind nvidia-h200-x2): builds the native
# backend in place, then with each backend (native, then pure Python with CUDA_CORE_BACKEND=python)
# runs the multi-GPU tests (and the device and stream tests, which have two-GPU cases), the
# multi-GPU example (through its test and on its own) and the peer copy benchmark: each twice in
# all, once per backend. About 6 minutes. Full logs under $OUT/multigpu/; summary.txt says what
# passed. Usage (repository root): bash tools/device/multigpu.sh
# Optional: TESTS="tests/x.py ..." (the test files), BACKENDS="native" (or "pure").
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
LOG="$OUT/multigpu"
mkdir -p "$LOG"
export CUDA_CORE_CACHE_DIR=$(mktemp -d)
SUMMARY="$LOG/summary.txt"
: > "$SUMMARY"

note() { echo "$*" | tee -a "$SUMMARY"; }

python3 setup.py -q build_ext --inplace > "$LOG/build_ext.txt" 2>&1
note "build_ext: rc=$?"
{
  nvidia-smi -L
  nvidia-smi topo -m
  python3 -c "import sys, cuda.bindings, cuda_core, cuda_core._handles._driver as u, cuda_core._handles._backend as b; u.ensure_driver(); \
from cuda_core import Device; ds = Device.get_all_devices(); \
print(sys.version.split()[0], 'cuda.bindings', cuda.bindings.__version__, 'native', b.NATIVE, b.REASON); \
print([(d.device_id, d.name, [d.can_access_peer(o) for o in ds]) for d in ds])"
} > "$LOG/env.txt" 2>&1
cat "$LOG/env.txt"

TESTS=${TESTS:-"tests/test_multi_gpu.py tests/test_device.py tests/test_stream.py"}
for backend in ${BACKENDS:-native pure}; do
  if [ "$backend" = pure ]; then export CUDA_CORE_BACKEND=python; else unset CUDA_CORE_BACKEND; fi
  for f in $TESTS; do
    name=$(basename "$f" .py)
    log="$LOG/${backend}_${name}.txt"
    timeout 240 python3 -X faulthandler -m pytest -q -rfEs -p no:cacheprovider "$f" > "$log" 2>&1
    note "$backend $name: rc=$? $(grep -E '(passed|failed|error|skipped)' "$log" | tail -1)"
  done
  log="$LOG/${backend}_test_examples_multi_gpu.txt"
  timeout 240 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_examples.py -k multi_gpu > "$log" 2>&1
  note "$backend test_examples -k multi_gpu: rc=$? $(grep -E '(passed|failed|error|skipped)' "$log" | tail -1)"
  log="$LOG/${backend}_example_multi_gpu_reduction.txt"
  timeout 120 python3 examples/multi_gpu_reduction.py > "$log" 2>&1
  note "$backend example multi_gpu_reduction: rc=$? $(tail -1 "$log")"
  log="$LOG/${backend}_bench_peer_copy.txt"
  timeout 240 python3 benchmarks/bench_peer_copy.py > "$log" 2>&1
  note "$backend bench_peer_copy: rc=$?"
  grep -E "^- |FAILED" "$log" | tee -a "$SUMMARY"
done
unset CUDA_CORE_BACKEND
grep -hE "^(FAILED|ERROR)|Fatal Python" "$LOG"/*test_*.txt | head -60
echo "logs: $LOG"
