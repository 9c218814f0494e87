"""Homework scaffolding: turn the engine into assignments and grade them task by task.

In the library source, the code a student writes sits between two marker comments:
a line ``# BEGIN SOLUTION 1.2`` (the task id) before it and a line ``# END SOLUTION``
after it, both indented like the code. A student tree replaces each such region by
``raise NotImplementedError("Task 1.2: ...")``.

Signatures, docstrings (with the derivation) and the rest of the engine stay visible.
``manifest.json`` (beside this file) groups the tasks into assignments and says which
tests and gradcheck entries grade each task and how many points it is worth.

* :mod:`.markers` finds and checks the marked regions;
* :mod:`.make` writes a student tree for one assignment (``minitorch-attn homework make``);
* :mod:`.grade` runs each task's tests against a student tree and writes a Gradescope
  ``results.json`` (``minitorch-attn homework grade``).

The tradition: minitorch's per-task pytest markers and nbgrader's solution blocks.
"""
