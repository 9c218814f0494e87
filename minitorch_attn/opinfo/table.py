"""The table of operations, written from the records (never by hand).

``python -m minitorch_attn.opinfo`` prints it as Markdown; the documentation site shows the
same rows (``docs/_ext/catalogue.py``, the ``opinfo-table`` directive), each op linked to
its section, so neither copy can go stale.
"""

from . import op_db

HEADER = (
    "op",
    "record",
    "forward and backward from",
    "gradient for",
    "task",
    "samples (gradcheck / all)",
    "edge cases",
)


def table_rows(records=None):
    """One row of :data:`HEADER` per record: the op, its record's file, the source of its
    backward, what it has a gradient for, its homework task, how many samples check it
    (gradient-checked / all) and the edge cases they cover."""
    rows = []
    for record in records if records is not None else op_db():
        edges = sorted({e for s in record.samples for e in s.edges})
        gradchecked = sum(1 for s in record.samples if s.gradcheck)
        rows.append(
            (
                record.name,
                record.module.split("minitorch_attn/")[1],
                record.source,
                ", ".join(record.differentiable_in),
                record.task or "",
                f"{gradchecked} / {len(record.samples)}",
                ", ".join(edges),
            )
        )
    return rows


def _cell(text):
    return str(text).replace("|", "\\|")


def markdown_table(records=None):
    """:func:`table_rows` as a Markdown table (op and record file as code)."""
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---|---|---|---|---:|---|"]
    for name, where, *rest in table_rows(records):
        lines.append("| " + " | ".join([f"`{_cell(name)}`", f"`{where}`"] + [_cell(c) for c in rest]) + " |")
    return "\n".join(lines) + "\n"
