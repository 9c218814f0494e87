"""Feedback that names the mistake: the failure patterns of the planted mistakes.

``homework selftest --write-patterns`` records, for each planted mistake of
``mutants.json`` that its task catches, which checks of that task fail
(``patterns.json`` beside this file; the autograder zip carries it, student trees do not).
When a student's failures in a task match one of those patterns, the task's feedback says
which kind of mistake produces it ("Your failures have the pattern of softmax backward
without the row term"), without showing any code.

Matching: the failed checks of the task and of a pattern, as two sets of check names, must
share at least ``MIN_SIMILARITY`` of their union (Jaccard similarity); the closest pattern
wins, and a tie between two mistakes names neither.
"""

from __future__ import annotations

import json
import pathlib

from ..atomic import write_atomically

FILE = "minitorch_attn/homework/patterns.json"
MIN_SIMILARITY = 0.8


def record(rows):
    """The patterns file's dict from ``rows`` of ``(mistake name, task id, [failed check names])``."""
    return {"about": "Which checks fail for each planted mistake of mutants.json; written by "
                     "`minitorch-attn homework selftest --write-patterns`.",
            "patterns": [{"task": task, "mistake": name, "failed": sorted(set(failed))}
                         for name, task, failed in rows if failed]}


def write(root, patterns):
    """Write ``patterns`` (a :func:`record` dict) to ``root/FILE`` atomically; returns the path."""
    path = pathlib.Path(root) / FILE
    write_atomically(path, (json.dumps(patterns, indent=1, ensure_ascii=False) + "\n").encode())
    return path


def load(root):
    """``[{"task", "mistake", "failed"}]`` from ``root/FILE``; an empty list when it is missing.

    Raises:
        ValueError: the file is not a patterns file.
    """
    path = pathlib.Path(root) / FILE
    if not path.is_file():
        return []
    entries = json.loads(path.read_text()).get("patterns")
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("task"), str) and isinstance(e.get("mistake"), str)
            and isinstance(e.get("failed"), list) for e in entries):
        raise ValueError(f"{path} is not a patterns file (expected {{'patterns': [{{task, mistake, failed}}]}})")
    return entries


def match(patterns, task_id, failed):
    """The name of the planted mistake whose pattern ``failed`` (check names) matches best
    in ``task_id``, or None (no pattern close enough, or a tie)."""
    failed = set(failed)
    if not failed:
        return None
    scored = []
    for entry in patterns:
        if entry["task"] != task_id:
            continue
        theirs = set(entry["failed"])
        scored.append((len(failed & theirs) / len(failed | theirs), entry["mistake"]))
    scored.sort(reverse=True)
    if not scored or scored[0][0] < MIN_SIMILARITY or (len(scored) > 1 and scored[1][0] == scored[0][0]
                                                         and scored[1][1] != scored[0][1]):
        return None
    return scored[0][1]
