"""The README's table of operations, written from the records (never by hand).

``python -m minitorch_attn.opinfo`` prints it; ``--write-readme`` puts it between the two
markers of ``README.md`` (an atomic rewrite), and ``tests/test_opinfo.py`` fails when the
README's copy is stale.
"""

from . import op_db

README_BEGIN = "<!-- table of operations: written by `python -m minitorch_attn.opinfo --write-readme` -->"
README_END = "<!-- end of the table of operations -->"


def _cell(text):
    return str(text).replace("|", "\\|")


def markdown_table(records=None):
    """One row per record: the op, its record's file, the source of its backward, its
    homework task, and how many samples check it (gradient-checked / all, edge cases)."""
    rows = ["| op | record | forward and backward from | gradient for | task | samples (gradcheck / all) "
            "| edge cases |",
            "|---|---|---|---|---|---:|---|"]
    for record in records if records is not None else op_db():
        edges = sorted({e for s in record.samples for e in s.edges})
        gradchecked = sum(1 for s in record.samples if s.gradcheck)
        where = record.module.split("minitorch_attn/")[1]
        rows.append(f"| `{_cell(record.name)}` | `{where}` | {_cell(record.source)} "
                    f"| {', '.join(record.differentiable_in)} | {record.task or ''} "
                    f"| {gradchecked} / {len(record.samples)} | {', '.join(edges)} |")
    return "\n".join(rows) + "\n"


def with_table(readme):
    """``readme`` (text) with the table between its markers replaced by the current one."""
    if README_BEGIN not in readme or README_END not in readme:
        raise ValueError(f"README.md has no table markers; add the lines {README_BEGIN!r} and {README_END!r}")
    head, rest = readme.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    return f"{head}{README_BEGIN}\n{markdown_table()}{README_END}{tail}"
