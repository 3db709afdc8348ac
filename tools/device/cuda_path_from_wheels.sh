# Sourced by the device scripts (bash): where no CUDA toolkit is set (CUDA_PATH/CUDA_HOME), point
# CUDA_PATH at the CUDA headers a wheel ships (found by cooperative_groups.h), for code that
# includes them (cooperative groups, cuda/barrier, mdspan).
if [ -z "${CUDA_PATH:-}" ] && [ -z "${CUDA_HOME:-}" ]; then
  inc=$(python3 - <<'PY'
import site, pathlib
for base in site.getsitepackages():
    for hit in sorted(pathlib.Path(base, "nvidia").glob("**/include/cooperative_groups.h")):
        print(hit.parent.parent); raise SystemExit
PY
)
  if [ -n "$inc" ]; then export CUDA_PATH="$inc"; echo "CUDA_PATH=$CUDA_PATH (headers from a wheel)"; fi
fi
