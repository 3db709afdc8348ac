"""``.. examples-table::``: the table of ``examples/README.md`` (one source for the examples'
index), set as a reStructuredText list-table in the docs' examples page.

:func:`read_rows` parses the README's table (``| `script.py` | shows | needs |`` rows, after
the header and its separator); backticks become literals. The build depends on the README, so
an edit there rebuilds the page.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

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


def _rst(text: str) -> str:
    # Markdown's `x` as a literal; a literal followed by a letter (`Buffer`s) needs an escaped
    # space after it in reStructuredText.
    return re.sub(
        r"`([^`]+)`(?=(\w?))", lambda m: f"``{m.group(1)}``" + ("\\ " if m.group(2) else ""), text
    )


class ExamplesTable(Directive):
    has_content = False

    def run(self) -> list[nodes.Node]:
        self.state.document.settings.env.note_dependency(str(README))
        lines = [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 22 50 28",
            "",
            "   * - script",
            "     - shows",
            "     - needs",
        ]
        for script, shows, needs in read_rows():
            lines += [f"   * - ``{script}``", f"     - {_rst(shows)}", f"     - {_rst(needs)}"]
        box = nodes.container()
        self.state.nested_parse(StringList(lines, source=str(README)), self.content_offset, box)
        return box.children


def setup(app):  # type: ignore[no-untyped-def]
    app.add_directive("examples-table", ExamplesTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
