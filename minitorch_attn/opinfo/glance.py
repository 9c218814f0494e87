"""Backward at a glance: every op of the catalogue, its forward and its backward rule, one line each.

The rules are the records' own (``forward`` and ``backward`` of each :class:`~.record.OpInfo`),
so this page is written from the catalogue and cannot drift from it, after tinygrad's
``gradient.py`` (every derivative of the engine on one screen). Notation: ``g`` is the
upstream gradient (``grad_output``), ``y`` the output, ``unbroadcast`` the sum over the axes
broadcasting added (task 1.3's one place), ``broadcast(g)`` ``g`` with the reduced dims put
back, ``[cond]`` 1 where ``cond`` holds and 0 elsewhere, ``∘`` the elementwise product.

A backward rule that is a homework task's answer is held back in a student tree of that task
(:mod:`.held_back`); this page then says ``(task 2.1)`` where the rule would be.
``python -m minitorch_attn.opinfo --glance`` prints it.
"""

from . import op_db


def backward_rule(record):
    """The record's backward rule, or ``"(task X.Y)"`` where it is held back in this tree.

    Raises:
        ValueError: if the record has no backward rule.
    """
    rule = record.backward
    if isinstance(rule, str) and rule:
        return rule
    if callable(rule) and record.task:  # held_back's stand-in (the rule is the task's answer)
        return f"(task {record.task})"
    raise ValueError(
        f"record {record.name!r} ({record.module}) has no one-line backward rule: give it "
        f"backward='dx = ...' (in a # BEGIN REFERENCE region when it is a task's answer)"
    )


def glance_rows(records=None):
    """``[(op, forward, backward)]``, one per record, in the order of the course.

    Raises:
        ValueError: if a record has no forward or no backward rule.
    """
    rows = []
    for record in records if records is not None else op_db():
        if not (isinstance(record.forward, str) and record.forward):
            raise ValueError(
                f"record {record.name!r} ({record.module}) has no one-line forward rule: give it forward='y = ...'"
            )
        rows.append((record.name, record.forward, backward_rule(record)))
    return rows


def glance_text(records=None):
    """:func:`glance_rows` as aligned plain text: a header line, then ``op  forward  backward``
    per record, a blank line between the catalogue's topics."""
    records = list(records if records is not None else op_db())
    rows = glance_rows(records)
    width_op = max(len("op"), *(len(r[0]) for r in rows))
    width_fw = max(len("forward"), *(len(r[1]) for r in rows))
    lines = [f"{'op':<{width_op}}  {'forward':<{width_fw}}  backward"]
    topic = None
    for record, (name, forward, backward) in zip(records, rows):
        if topic is not None and record.module != topic:
            lines.append("")
        topic = record.module
        lines.append(f"{name:<{width_op}}  {forward:<{width_fw}}  {backward}".rstrip())
    return "\n".join(lines) + "\n"
