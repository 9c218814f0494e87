"""The held-back tests' fixtures: ``student``, the library under test, and ``rng``.

When the grader runs these tests (``minitorch_attn.homework.judge``), this is a trusted
process: ``student`` is the student's library in a process of its own (the copy with their
code, under the sandbox), and ``minitorch_attn`` as imported here is the instructor's. Each
test draws its inputs here, sends them (``student.send``, ``leaf``), asks the student's
library for outputs and gradients, and compares them with a reference computed here: a
closed form in NumPy, or this process's own library. Everywhere else (the project's own
suite) ``student`` is the library this process imports, and the tests are ordinary tests.

What comes back from the student's library is a claim of their process, so a test decides
from what it chose itself, never from what it was told: the shapes of the upstream
gradients, the number of outputs, which inputs have a gradient come from the reference;
a reply is only ever compared with one.
"""

import zlib

import numpy as np
import pytest

from minitorch_attn.homework.judge import judge_of
from minitorch_attn.homework.remote import Local

LOCAL = Local()


@pytest.fixture
def student(request):
    """The library under test: the student's under the grader, else this process's."""
    judge = judge_of(request.config)
    if judge is None:
        yield LOCAL
        return
    judge.student.begin(judge.timeout)
    try:
        yield judge.student
    finally:
        judge.student.reset()


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's own id and, under the grader, the grading's
    secret seed (the same for the same submission, new for new code: held-back inputs
    cannot be memorised)."""
    judge = judge_of(request.config)
    own = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(own if judge is None else [judge.seed, own])
