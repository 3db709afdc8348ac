#!/usr/bin/env bash
# The system (NVML) checks on the GPU machine (device tool, kind nvidia-h100-x1):
#   1. the system/NVML tests on both backends (native, then CUDA_CORE_BACKEND=python),
#   2. `python -m cuda_core` and `python -m cuda_core --json`,
# with every log under $OUT/system/ (env.txt, pytest_native.txt, pytest_pure.txt, report.txt,
# report.json, summary.txt). Usage, from the repository root: bash tools/device/system.sh
# Exit status: 0 when both test runs and both reports succeed. Worst case about 9.5 minutes
# (each pytest run is cut at 230 s, each report at 50 s), inside the device tool's 10.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
LOG="$OUT/system"
mkdir -p "$LOG"
CUDA_CORE_CACHE_DIR=$(mktemp -d)
export CUDA_CORE_CACHE_DIR
FILES="tests/system/test_system.py tests/system/test_system_nvml.py tests/system/test_system_nvml_queries.py
  tests/system/test_system_nvml_compare.py tests/report/test_nvml_report.py tests/report/test_cli.py tests/test_api_parity.py"

{
  echo "== build_ext"
  python3 setup.py -q build_ext --inplace 2>&1 | tail -20
  echo "== versions"
  python3 -c "import sys, cuda.bindings, cuda_core, cuda_core._handles._backend as b; print(sys.version.split()[0], 'cuda.bindings', cuda.bindings.__version__, 'native', b.NATIVE, b.REASON)"
  python3 -c "import cuda.core; print('cuda.core', cuda.core.__version__)" 2>&1
  echo "== nvidia-smi"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi 2>&1
    nvidia-smi --format=csv --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,memory.total,memory.used,memory.free,power.draw,power.limit,temperature.gpu,fan.speed,pstate,mig.mode.current,inforom.img,inforom.oem,inforom.ecc,pcie.link.gen.max,pcie.link.gen.gpumax,clocks_event_reasons.supported,clocks_event_reasons.active 2>&1
    nvidia-smi topo -m 2>&1
    nvidia-smi nvlink -s 2>&1 | head -40
  else
    echo "nvidia-smi not found"
  fi
} > "$LOG/env.txt" 2>&1
head -3 "$LOG/env.txt" | tail -1

: > "$LOG/summary.txt"
status=0
for backend in native pure; do
  if [ "$backend" = pure ]; then export CUDA_CORE_BACKEND=python; else unset CUDA_CORE_BACKEND; fi
  # shellcheck disable=SC2086  # FILES is a list of paths
  timeout 230 python3 -X faulthandler -m pytest -q -rfEs -p no:cacheprovider $FILES > "$LOG/pytest_$backend.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  echo "pytest ($backend backend): rc=$rc $(grep -E '(passed|failed|error)' "$LOG/pytest_$backend.txt" | tail -1)" | tee -a "$LOG/summary.txt"
  grep -E "^(FAILED|ERROR)|Fatal Python" "$LOG/pytest_$backend.txt" | head -40 | tee -a "$LOG/summary.txt"
done
unset CUDA_CORE_BACKEND

timeout 50 python3 -m cuda_core > "$LOG/report.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || status=1
echo "python -m cuda_core: rc=$rc" | tee -a "$LOG/summary.txt"
timeout 50 python3 -m cuda_core --json > "$LOG/report.json" 2>> "$LOG/summary.txt"
rc=$?
[ $rc -eq 0 ] || status=1
echo "python -m cuda_core --json: rc=$rc" | tee -a "$LOG/summary.txt"
python3 -c "
import json, sys
info = json.load(open(sys.argv[1]))
nv = info['nvml']
print('nvml available:', nv['available'], nv['error'] or '', '| GPUs:', len(nv['gpus']))
for g in nv['gpus']:
    print('  ', g.get('index'), g.get('name'), 'errors:', sorted(g.get('errors', {})))
" "$LOG/report.json" 2>&1 | tee -a "$LOG/summary.txt"
echo "== report"
cat "$LOG/report.txt"
exit $status
