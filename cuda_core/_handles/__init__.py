"""The handle layer: the seam between cuda_core and the driver, with its two backends.

``_backend`` picks the backend once at import (native, built from ``_csrc``, or pure Python,
``_pure``); every driver lifetime is owned by a handle of that backend.
"""

__all__: list[str] = []  # private package
