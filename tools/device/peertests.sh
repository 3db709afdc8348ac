#!/usr/bin/env bash
# Run on the GPU machine (device tool): NVIDIA's own cuda.core test suite, each test module run
# unmodified with NVIDIA's cuda.core and with the imports rewritten to cuda_core
# (tools/peer_tests.py). Needs the tests carried: carry=[".devcarry/peer_tests"] (git-ignored;
# it holds cuda_core/tests/... and cuda_python_test_helpers/... as laid out in NVIDIA's repo).
# Writes $OUT/peertests/{table.txt,results.json,logs.txt}; prints the table.
# Usage: bash tools/device/peertests.sh   (CUDA_CORE_BACKEND=python for the pure-Python backend;
#        ONLY="test_event test_stream" to run some; TEST_TIMEOUT=seconds per module and side;
#        JOBS=N modules side by side, default 8)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/peertests"
TESTS=.devcarry/peer_tests
if [ ! -f "$TESTS/cuda_core/tests/conftest.py" ]; then
  echo "no $TESTS/cuda_core/tests here: run with carry=[\"$TESTS\"]"; exit 2
fi
python3 setup.py -q build_ext --inplace > /tmp/peertests_build.txt 2>&1 || tail -5 /tmp/peertests_build.txt
python3 -c "import cuda_core._handles._backend as b, cuda.bindings, cuda.core; print('cuda_core backend native =', b.NATIVE, b.REASON, '; cuda.bindings', cuda.bindings.__version__, '; cuda.core', cuda.core.__version__)"
. "$(dirname "$0")/cuda_path_from_wheels.sh"  # CUDA_PATH for kernels that include CUDA headers
python3 tools/peer_tests.py "$TESTS" "$OUT/peertests" --gpu --timeout "${TEST_TIMEOUT:-900}" --jobs "${JOBS:-8}" ${ONLY:+--only $ONLY}
