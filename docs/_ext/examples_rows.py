"""The rows of ``examples/README.md``'s table, for the ``examples-table`` directive
(:mod:`examples_table`). Kept apart from the directive so it needs nothing but the standard
library: the CPU tier checks the table without docutils installed.

:func:`read_rows` parses the README's table (``| `script.py` | shows | needs |`` rows, after
the header and its separator); :func:`rst` turns its backticks into literals.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "examples" / "README.md"
_ROW = re.compile(r"^\|\s*`([^`]+\.py)`\s*\|(.*)\|(.*)\|\s*$")


def read_rows(path: Path = README) -> list[tuple[str, str, str]]:
    """``(script, shows, needs)`` for every row of the README's examples table."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            rows.append((m.group(1), m.group(2).strip(), m.group(3).strip()))
    return rows


def rst(text: str) -> str:
    """Markdown's `x` as a reStructuredText literal; a literal followed by a letter
    (`Buffer`s) needs an escaped space after it."""
    return re.sub(
        r"`([^`]+)`(?=(\w?))", lambda m: f"``{m.group(1)}``" + ("\\ " if m.group(2) else ""), text
    )
