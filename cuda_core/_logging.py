"""The ``cuda_core`` logger: silent unless the application configures logging.

``logging.getLogger("cuda_core")`` carries a ``NullHandler``; at DEBUG it reports compile-cache
hits, misses and writes, the handle-layer backend chosen at import, context and idle-pool
creation, and fallback decisions (no nvJitLink, no native backend). Nothing is logged on the
launch or allocation paths.

Turn it on with, for example::

    import logging
    logging.basicConfig()
    logging.getLogger("cuda_core").setLevel(logging.DEBUG)
"""

from __future__ import annotations

import logging

__all__: list[str] = []  # private module: the logger is reached by its name

logger = logging.getLogger("cuda_core")
logger.addHandler(logging.NullHandler())
