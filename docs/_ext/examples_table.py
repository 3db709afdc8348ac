"""``.. examples-table::``: the table of ``examples/README.md`` (one source for the examples'
index), set as a reStructuredText list-table in the docs' examples page. The rows come from
:mod:`examples_rows`; the build depends on the README, so an edit there rebuilds the page.
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from examples_rows import README, read_rows, rst


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
            lines += [f"   * - ``{script}``", f"     - {rst(shows)}", f"     - {rst(needs)}"]
        box = nodes.container()
        self.state.nested_parse(StringList(lines, source=str(README)), self.content_offset, box)
        return box.children


def setup(app):  # type: ignore[no-untyped-def]
    app.add_directive("examples-table", ExamplesTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
