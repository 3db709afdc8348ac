"""The package's shape stays as issue 20 left it: every source file (Python and C) at most 600
lines, and at most 30 Python modules directly in ``cuda_core/`` (the rest live in wings)."""

from __future__ import annotations

import pathlib

import cuda_core

PACKAGE = pathlib.Path(cuda_core.__file__).parent
MAX_LINES = 600
MAX_TOP_MODULES = 30


def test_no_source_file_over_600_lines():
    sources = [p for ext in ("*.py", "*.c", "*.h") for p in PACKAGE.rglob(ext)]
    assert len(sources) > 100  # the walk found the package, not an empty folder
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in sources
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concept (lines): {long}"


def test_at_most_30_modules_at_the_top():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert "__init__.py" in top
    assert len(top) <= MAX_TOP_MODULES, top
