"""The handle layer: the seam between cuda_core and the driver, with its two backends.

``_protocol`` states what a backend provides (``typing.Protocol`` classes and ``ABI_VERSION``);
``_backend`` picks the backend once at import (native, built from ``_csrc``, or pure Python,
``_pure``) and types it as that protocol; every driver lifetime is owned by a handle of that
backend.
"""

__all__: list[str] = []  # private package
