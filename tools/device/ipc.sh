#!/usr/bin/env bash
# Run on the GPU machine (device tool; kind nvidia-h100-x1 or nvidia-h200-x2, one GPU suffices):
# builds the native backend in place, then on each backend runs the IPC tests (processes
# sharing memory and events through multiprocessing, the event and handle-layer tests the IPC
# changes touch) and examples/ipc_producer_consumer.py. Full logs under $OUT/ipc/, a summary on
# stdout; exits non-zero if anything failed.
# Usage: [BACKENDS="native pure"] bash tools/device/ipc.sh
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
LOG="$OUT/ipc"
mkdir -p "$LOG"
export CUDA_CORE_CACHE_DIR=$(mktemp -d)
python3 setup.py -q build_ext --inplace > "$LOG/build_ext.txt" 2>&1 || tail -5 "$LOG/build_ext.txt"
nvidia-smi > "$LOG/nvidia-smi.txt" 2>&1
TESTS="tests/memory/test_ipc_multiprocess.py tests/memory/test_ipc_multiprocess_reuse.py tests/memory/test_memory_ipc.py tests/test_event.py tests/handles/test_handles.py tests/test_stream.py"
status=0
: > "$LOG/summary.txt"
for backend in ${BACKENDS:-native pure}; do
  if [ "$backend" = pure ]; then export CUDA_CORE_BACKEND=python; else unset CUDA_CORE_BACKEND; fi
  python3 -c "import sys, cuda.bindings, cuda_core._handles._backend as b, cuda_core._handles._driver as u; print(sys.version.split()[0], 'cuda.bindings', cuda.bindings.__version__, 'native', b.NATIVE, b.REASON); u.ensure_driver()" \
    > "$LOG/env_$backend.txt" 2>&1
  echo "== $backend: $(tail -1 "$LOG/env_$backend.txt")" | tee -a "$LOG/summary.txt"
  timeout 240 python3 -X faulthandler -m pytest -q -rfEsw -p no:cacheprovider $TESTS \
    > "$LOG/pytest_$backend.txt" 2>&1
  rc=$?
  echo "pytest ($backend): rc=$rc $(grep -E '(passed|failed|error)' "$LOG/pytest_$backend.txt" | tail -1)" | tee -a "$LOG/summary.txt"
  grep -E "^(FAILED|ERROR)|Fatal Python|Warning" "$LOG/pytest_$backend.txt" | head -20
  [ $rc -eq 0 ] || status=1
  start=$(date +%s.%N)
  timeout 200 python3 -X faulthandler examples/ipc_producer_consumer.py > "$LOG/example_$backend.txt" 2>&1
  rc=$?
  secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  echo "example ($backend): rc=$rc in ${secs} s" | tee -a "$LOG/summary.txt"
  tail -6 "$LOG/example_$backend.txt"
  [ $rc -eq 0 ] || status=1
done
exit $status
