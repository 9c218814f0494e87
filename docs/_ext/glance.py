"""``.. opinfo-glance::``: backward at a glance, every op's forward and backward rule in one row.

The rows are :func:`minitorch_attn.opinfo.glance.glance_rows`, the records' own one-line rules
(``python -m minitorch_attn.opinfo --glance`` prints the same lines), each op linked to its
section of the engine's pages; a rule held back in a student tree reads "(task X.Y)" there.
"""

from __future__ import annotations

from catalogue import slug
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from minitorch_attn import opinfo
from minitorch_attn.opinfo.glance import glance_rows


def _literal(text):
    return "``" + text.replace("`", "'") + "``"


class GlanceDirective(SphinxDirective):
    """``.. opinfo-glance::``: one row per record (op, forward, backward), grouped by topic."""

    def run(self):
        lines = [
            ".. list-table::",
            "   :header-rows: 1",
            "   :widths: 18 38 44",
            "",
            "   * - op",
            "     - forward",
            "     - backward",
        ]
        for record, (name, forward, backward) in zip(opinfo.op_db(), glance_rows()):
            lines += [
                f"   * - :ref:`{name} <{slug(record.name)}>`",
                f"     - {_literal(forward)}",
                f"     - {_literal(backward)}",
            ]
        for module in opinfo.MODULES:
            self.env.note_dependency(module.__file__)
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="<opinfo-glance>"), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("opinfo-glance", GlanceDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
