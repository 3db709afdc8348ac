"""The default-stream tokens, in one place for both backends and every layer above them.

A stream address of 0, ``CU_STREAM_LEGACY`` (1) or ``CU_STREAM_PER_THREAD`` (2) is no stream of
its own but a token: it names the default stream of whichever context is current when the
driver is called. Every address above :data:`LAST_TOKEN` is a real stream, with a context of its
own. The native backend's rule is the same (``CC_IS_TOKEN`` in ``_csrc/handles.h``).
"""

from __future__ import annotations

from .._compat import driver

__all__: list[str] = []  # private module

LAST_TOKEN = int(driver.CU_STREAM_PER_THREAD)
"""The highest default-stream token: addresses at or below it are tokens."""
