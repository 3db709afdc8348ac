"""Mark what a program does on a profiler's timeline.

Named ranges and marks go to NVTX, which Nsight Systems shows on its timeline beside the CUDA
calls and kernels (``nsys profile --trace=cuda,nvtx python app.py``); they need NVIDIA's
``nvtx`` package (``pip install "cudacore[nvtx]"``) and cost next to nothing where no profiler
is attached::

    from cuda_core import profiler

    @profiler.range                    # one range per call, named "train_step"
    def train_step(batch): ...

    for batch in batches:
        with profiler.range("load", color="green"):
            ...
        train_step(batch)
    profiler.mark("epoch done")

Import the module, not its names: ``range`` would hide Python's own.
"""

from __future__ import annotations

from ._ranges import Range as Range
from ._ranges import mark as mark
from ._ranges import range as range

__all__ = ["Range", "mark", "range"]
