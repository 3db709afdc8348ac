#!/usr/bin/env bash
# Run on the GPU machine (device tool): NVIDIA's cuda.core examples, each run unmodified with
# NVIDIA's cuda.core and with the import rewritten to cuda_core (tools/peer_examples.py).
# Needs the examples carried: carry=[".devcarry/peer_examples"] (a git-ignored folder).
# Writes $OUT/dropin/{table.txt,results.json,logs.txt}; prints the table.
# Usage: bash tools/device/dropin.sh      (CUDA_CORE_BACKEND=python for the pure-Python backend;
#        ONLY="saxpy host_launch" to run some; EXAMPLE_TIMEOUT=seconds per run, default 150)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/dropin"
export CUDA_CORE_CACHE_DIR=$(mktemp -d)
EXAMPLES=.devcarry/peer_examples
if [ ! -d "$EXAMPLES" ]; then
  echo "no $EXAMPLES here: run with carry=[\"$EXAMPLES\"]"; exit 2
fi
# Build the native backend in place (optional: a failed build leaves the pure-Python backend).
python3 setup.py -q build_ext --inplace > /tmp/dropin_build.txt 2>&1 || tail -5 /tmp/dropin_build.txt
python3 -c "import cuda_core._handles._backend as b, cuda.bindings; print('cuda_core backend native =', b.NATIVE, b.REASON, '; cuda.bindings', cuda.bindings.__version__)"
. "$(dirname "$0")/cuda_path_from_wheels.sh"  # CUDA_PATH for kernels that include CUDA headers
python3 tools/peer_examples.py "$EXAMPLES" "$OUT/dropin" --timeout "${EXAMPLE_TIMEOUT:-150}" ${ONLY:+--only $ONLY}
