#!/usr/bin/env bash
# The NCCL part of issue 14 on the two-GPU machine (device tool, kind nvidia-h200-x2, carry .whl):
# builds in place, installs the carried nccl4py wheel (the machine has no network; PyTorch there
# brings libnccl.so.2 in site-packages/nvidia/nccl/lib), then runs tests/nccl/test_nccl.py on both
# backends, the example plainly and under torchrun-style variables, and the benchmark twice (each
# library first once). Full logs under $OUT/nccl/; a one-line-per-step summary in summary.txt.
# Usage: bash tools/device/nccl.sh            (all parts, about 8-10 minutes)
#        PARTS="tests" bash tools/device/nccl.sh  (any of: tests examples bench; to split a run)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
LOG=${OUT:-/tmp/out}/nccl
mkdir -p "$LOG"
: > "$LOG/summary.txt"
TARGET=/tmp/nccl4py
export PYTHONPATH=$ROOT:$TARGET PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0  # every GPU process (issue 24)
export CUDA_CORE_CACHE_DIR=$(mktemp -d)

step() {  # step <name> <timeout-seconds> <command...>: run, log, record rc
  local name=$1 limit=$2
  shift 2
  echo "=== $name: $*" | tee -a "$LOG/commands.txt"
  timeout "$limit" "$@" > "$LOG/$name.txt" 2>&1
  local rc=$?
  echo "$name: rc=$rc $(grep -E '(passed|failed|skipped|error)' "$LOG/$name.txt" | tail -1)" | tee -a "$LOG/summary.txt"
  return $rc
}

python3 setup.py -q build_ext --inplace > "$LOG/build_ext.txt" 2>&1 || tail -5 "$LOG/build_ext.txt"

# nccl4py (carried), and what it needs that this machine may lack (cuda-pathfinder that knows
# NCCL, packaging): installed into $TARGET only when missing, never over site-packages.
CP=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
WHEEL=$(ls .whl/nccl4py-*-"$CP"-*.whl 2>/dev/null | head -1)
rm -rf "$TARGET" && mkdir -p "$TARGET"
install_wheel() {  # pip when there is one, else the wheel is a zip: unpack it
  python3 -m pip install --no-deps --no-index --target "$TARGET" "$1" >> "$LOG/install.txt" 2>&1 \
    || python3 -m zipfile -e "$1" "$TARGET" >> "$LOG/install.txt" 2>&1
}
if [ -z "$WHEEL" ]; then
  echo "no nccl4py wheel for $CP under .whl/ (carry .whl)" | tee -a "$LOG/summary.txt"
else
  install_wheel "$WHEEL"
fi
python3 -c 'import packaging' 2>/dev/null || install_wheel "$(ls .whl/packaging-*.whl | head -1)"
if ! python3 -c 'from cuda.pathfinder import load_nvidia_dynamic_lib as f; f("nccl")' > "$LOG/pathfinder.txt" 2>&1; then
  echo "the installed cuda-pathfinder cannot load NCCL (see pathfinder.txt): using the carried one" | tee -a "$LOG/summary.txt"
  install_wheel "$(ls .whl/cuda_pathfinder-*.whl | head -1)"
fi
du -sh "$TARGET" >> "$LOG/install.txt"

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  python3 -m pip list 2>/dev/null | grep -i -E "cuda|nvidia|nccl|torch|numpy|pathfinder"
  python3 -c 'import cuda.pathfinder as p; print("cuda-pathfinder", p.__version__, p.__file__)'
  python3 -c 'import cuda.bindings, cuda_core._handles._backend as b; print("cuda.bindings", cuda.bindings.__version__, "native", b.NATIVE, b.REASON)'
  python3 -c 'from cuda_core import nccl; print("cuda_core.nccl", nccl.library_info())'
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} > "$LOG/env.txt" 2>&1
cat "$LOG/env.txt"

PARTS=${PARTS:-tests examples bench}
has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

if has tests; then
# the GPU tests of tests/nccl (collectives on 2 and, where visible, 4 GPUs; the fault cases,
# CUDA_CORE_NCCL_FAULT_TRIES tries each, default 5); the pure backend with one try of each
step test_nccl_native 420 python3 -X faulthandler -m pytest -q -rfEs -p no:cacheprovider -m gpu tests/nccl
CUDA_CORE_BACKEND=python CUDA_CORE_NCCL_FAULT_TRIES=${PURE_TRIES:-1} step test_nccl_pure 300 python3 -X faulthandler -m pytest -q -rfEs -p no:cacheprovider -m gpu tests/nccl
step test_examples_nccl 200 python3 -m pytest -q -rfEs -p no:cacheprovider tests/test_examples.py -k "nccl or indexed or judge"
fi

if has examples; then
# The example by hand, both ways (the tests above run it too; these logs show its output).
step example_plain 200 env -u RANK -u WORLD_SIZE -u LOCAL_RANK python3 examples/nccl_allreduce.py
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT \
    timeout 200 python3 examples/nccl_allreduce.py > "$LOG/example_env_rank$r.txt" 2>&1 &
  eval "PID$r=$!"
done
wait "$PID0"; RC0=$?
wait "$PID1"; RC1=$?
echo "example_env: rank0 rc=$RC0 rank1 rc=$RC1" | tee -a "$LOG/summary.txt"
fi

if has bench; then
step bench_allreduce_1 280 python3 benchmarks/bench_allreduce.py --first cuda_core --reps ${BENCH_REPS:-15}
if [ -z "${BENCH_ONCE:-}" ]; then
step bench_allreduce_2 280 python3 benchmarks/bench_allreduce.py --first torch --reps ${BENCH_REPS:-15}
fi
fi
echo; cat "$LOG/summary.txt"
grep -h -E "^(FAILED|ERROR)|Fatal Python|Traceback" "$LOG"/test_*.txt 2>/dev/null | head -40
cat "$LOG"/bench_allreduce_*.txt 2>/dev/null
