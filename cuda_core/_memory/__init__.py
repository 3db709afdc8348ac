"""Device memory: Buffer and the memory resources (one file per resource)."""

from __future__ import annotations

__all__: list[str] = []
