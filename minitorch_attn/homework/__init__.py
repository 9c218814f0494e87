"""Homework scaffolding: turn the engine into assignments and grade them task by task.

In the library source, the code a student writes sits between two marker comments:
a line ``# BEGIN SOLUTION 1.2`` (the task id) before it and a line ``# END SOLUTION``
after it, both indented like the code. A student tree keeps the two lines and puts
``raise NotImplementedError("Task 1.2: ...")`` between them; signatures, docstrings
(with the derivation) and the rest of the engine stay visible. ``manifest.json`` (beside
this file) groups the tasks into assignments with their points and gradient checks; the
tests of a task carry the pytest marker ``task_1_2``.

* :mod:`.markers` finds and checks the marked regions;
* :mod:`.make` writes a student tree for one assignment (``homework make``);
* :mod:`.submission` reads a student's code for each task from a tree, a zip or loose files;
* :mod:`.instructor` splices it into a copy of the instructor's tree made as the
  student's own tree is (no held-back test, no reference of the assignment);
* :mod:`.sandbox` runs student code apart (another user under root, no network, a memory
  cap, limits, nothing left behind); :mod:`.runner` and :mod:`.pytest_report` run a
  task's public tests there and read back their report without trusting it, and its
  held-back tests in the grader's own copy, where :mod:`.judge` and :mod:`.remote` give
  them the student's library in a process of its own (:mod:`.worker`), on inputs drawn
  from a secret;
* :mod:`.grade` grades every task of an assignment, each in a run of its own, and
  :mod:`.results` writes Gradescope's ``results.json`` (``homework grade``);
* :mod:`.selftest` grades the reference, the stubs, each task solved alone and the planted
  mistakes of ``mutants.json`` (``homework selftest``); :mod:`.probes` names a student's mistake
  from the held-back probes that isolate one term of a backward, and :mod:`.derive` writes the
  derive mode's trees (the backward's derivation hidden, a sheet to hand in);
* :mod:`.gradescope` writes the autograder zip and is what it runs (``homework autograder``),
  after :mod:`.preflight`, which needs no library.

The tradition: minitorch's per-task pytest markers and nbgrader's solution blocks.
"""
