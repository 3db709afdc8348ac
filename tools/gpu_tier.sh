#!/usr/bin/env bash
# Run on the GPU machine (device tool): every test file in its own pytest process (a crash in
# one file cannot hide the others), on each backend of $BACKENDS, JOBS processes at a time; then
# the files of $SERIAL (they read device-wide state such as free memory and clocks, which other
# processes would change under them) one at a time; then the benchmarks named in $BENCH.
# Logs under $OUT: summary.txt (per file; per backend the totals, failures, files that crashed or
# timed out, skips by reason), <backend>.log (all pytest output).
# Where .devcarry/gl holds the EGL/OpenGL loaders (libEGL.so.1, libOpenGL.so.0, libGLdispatch.so.0
# from Debian's libegl1/libopengl0/libglvnd0), they go first on LD_LIBRARY_PATH for the graphics
# tests.
# EXTRA_PATH goes first on PYTHONPATH (tools/device/cu12.sh puts the 12.x bindings there).
# Usage: [BACKENDS="native pure"] [JOBS=6] [BENCH="bench_launch.py ..."] [FILES="tests/test_x.py ..."]
#        bash tools/gpu_tier.sh
set -u
export PYTHONPATH=${EXTRA_PATH:+$EXTRA_PATH:}$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
BACKENDS=${BACKENDS:-native}
JOBS=${JOBS:-1}
SERIAL=${SERIAL:-"tests/memory/test_vmm.py tests/interop/test_external_memory.py tests/system/test_system_nvml_compare.py tests/system/test_system_nvml.py tests/system/test_system_nvml_queries.py tests/report/test_nvml_report.py"}
export FILE_TIMEOUT=${FILE_TIMEOUT:-240}
[ -d .devcarry/gl ] && export LD_LIBRARY_PATH="$PWD/.devcarry/gl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
WORK=$(mktemp -d); export WORK
start=$SECONDS
# Build the optional native backend in place, as `pip install -e .` does (it is optional: a
# failure leaves the pure-Python backend).
python3 setup.py -q build_ext --inplace > "$OUT/build_ext.txt" 2>&1 || tail -5 "$OUT/build_ext.txt"
python3 -c "import sys, cuda.bindings, cuda_core, cuda_core._handles._driver as u, cuda_core._handles._backend as b; u.ensure_driver(); print(sys.version.split()[0], 'cuda.bindings', cuda.bindings.__version__, 'native', b.NATIVE, b.REASON)" | tee "$OUT/env.txt"

one() {  # one BACKEND FILE: the file's tests in a process of their own, on that backend
    local backend=$1 f=$2 name log rc line
    name=$(basename "$f" .py); log="$WORK/$backend-$name.log"
    if [ "$backend" = pure ]; then export CUDA_CORE_BACKEND=python; else unset CUDA_CORE_BACKEND; fi
    CUDA_CORE_CACHE_DIR="$WORK/cache-$backend-$name" timeout "$FILE_TIMEOUT" \
        python3 -X faulthandler -m pytest -q -rfEs -p no:cacheprovider "$f" > "$log" 2>&1
    rc=$?
    line=$(grep -E '[0-9]+ (passed|failed|error|errors|skipped|deselected)' "$log" | tail -1)
    echo "[$backend] $name.py: rc=$rc ${line:-no summary (rc 124: timed out; another: crashed)}" >> "$WORK/summary-$backend.txt"
}
export -f one

FILES=${FILES:-$(find tests -name 'test_*.py' | sort)}
parallel=() serial=()
for f in $FILES; do
    case " $SERIAL " in *" $f "*) serial+=("$f") ;; *) parallel+=("$f") ;; esac
done
for backend in $BACKENDS; do for f in "${parallel[@]}"; do echo "$backend $f"; done; done \
    | xargs -P "$JOBS" -L 1 bash -c 'one "$0" "$1"'
for backend in $BACKENDS; do for f in "${serial[@]}"; do one "$backend" "$f"; done; done

: > "$OUT/summary.txt"
for backend in $BACKENDS; do
    sort "$WORK/summary-$backend.txt" >> "$OUT/summary.txt"
    for log in "$WORK/$backend"-*.log; do echo "=================== [$backend] $log"; cat "$log"; done > "$OUT/$backend.log"
    python3 - "$backend" "$OUT" >> "$OUT/summary.txt" <<'PY'
import collections, pathlib, re, sys
backend, out = sys.argv[1], pathlib.Path(sys.argv[2])
totals = collections.Counter()
broken = []  # files that ended without pytest's summary: a crash or the time limit
for line in (out / "summary.txt").read_text().splitlines():
    if line.startswith(f"[{backend}] ") and "totals" not in line:
        for n, what in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)", line):
            totals["error" if what.startswith("error") else what] += int(n)
        if "no summary" in line:
            broken.append(line.split("]", 1)[1].strip())
text = (out / f"{backend}.log").read_text(errors="replace")
bad = sorted(set(re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)))
print(f"[{backend}] totals: " + ", ".join(f"{v} {k}" for k, v in sorted(totals.items()))
      + f"; failed or errored: {len(bad)}; files crashed or timed out: {len(broken)}")
for b in bad + broken:
    print(f"  {b}")
reasons = collections.Counter()
for m in re.finditer(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", text, re.M):
    reasons[m.group(2)] += int(m.group(1))
print(f"[{backend}] skips by reason:")
for reason, n in reasons.most_common():
    print(f"    {n:5d}  {reason}")
PY
done
echo "tests took $((SECONDS - start)) s with JOBS=$JOBS" >> "$OUT/summary.txt"
grep -E "totals|^  [^ ]|rc=[1-9]" "$OUT/summary.txt"
for b in ${BENCH:-}; do
  echo "=== benchmark $b"
  timeout 240 python3 "benchmarks/$b" 2>&1 | tee "$OUT/$(basename "$b" .py).txt"
done
rm -rf "$WORK"
