"""Test tiers: everything not marked ``gpu`` runs anywhere; ``gpu`` tests skip without a GPU."""

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
