"""Test tiers: everything not marked ``gpu`` runs anywhere; ``gpu`` tests skip without a GPU.

Shared GPU fixtures live here too; they reach the driver only when a (GPU) test requests them.
"""

from __future__ import annotations

import pytest

from tests.helpers import gpu_skip_reason


def pytest_collection_modifyitems(config, items):
    reason = None
    for item in items:
        if "gpu" in item.keywords:
            if reason is None:
                reason = gpu_skip_reason() or ""
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="module")
def dev():
    """The current device (``Device()``), made current once per test module."""
    from cuda_core import Device

    d = Device()
    d.set_current()
    return d
