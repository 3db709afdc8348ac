set -x
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
python3 -c "import cuda.bindings, cuda.core, cupy, torch, numpy; print(cuda.bindings.__version__, cuda.core.__version__, cupy.__version__, torch.__version__, numpy.__version__)"
python3 -c "from cuda.bindings import nvrtc, nvjitlink; print(nvrtc.nvrtcVersion(), nvjitlink.version())"
python3 -c "import cuda.bindings.nvvm as n; print(n.version())"
python3 -c "import ml_dtypes, hypothesis; print(ml_dtypes.__version__, hypothesis.__version__)"
python3 -c "import cuda.pathfinder as p; print(p.find_nvidia_header_directory('cudart'))"
which gcc cc nvcc; ls /usr/local/cuda/include/cuda.h
python3 -m pip list 2>/dev/null | grep -i -E "cuda|nvidia|sphinx|ruff|mypy"
