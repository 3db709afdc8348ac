"""CUDA graphs under the module name NVIDIA's ``cuda.core.graph`` uses.

The same objects are also exported from :mod:`cuda_core` itself.
"""

from __future__ import annotations

from ._graph import Graph, GraphBuilder, GraphCompleteOptions, GraphDebugPrintOptions

__all__ = ["Graph", "GraphBuilder", "GraphCompleteOptions", "GraphDebugPrintOptions"]
