"""Mark what a program does on a profiler's timeline, and limit what the profiler captures.

Named ranges and marks go to NVTX, which Nsight Systems shows on its timeline beside the CUDA
calls and kernels (``nsys profile --trace=cuda,nvtx python app.py``); they need NVIDIA's
``nvtx`` package (``pip install "cudacore[nvtx]"``) and cost next to nothing where no profiler
is attached. :func:`capture` (or :func:`start` and :func:`stop`) limits what the profiler
records to parts of the run (``nsys profile --capture-range=cudaProfilerApi``)::

    from cuda_core import profiler

    @profiler.range                    # one range per call, named "train_step"
    def train_step(batch): ...

    with profiler.capture():           # the profile holds this block only
        for batch in batches:
            with profiler.range("load", color="green"):
                ...
            train_step(batch)
        profiler.mark("epoch done")

Import the module, not its names: ``range`` would hide Python's own. See :doc:`/profiling`.
"""

from __future__ import annotations

from ._capture import capture as capture
from ._capture import start as start
from ._capture import stop as stop
from ._ranges import Range as Range
from ._ranges import mark as mark
from ._ranges import range as range

__all__ = ["Range", "capture", "mark", "range", "start", "stop"]
