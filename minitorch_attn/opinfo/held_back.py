"""What stands in a student's tree for a reference answer of the catalogue.

Some references of the catalogue are the answers of homework tasks: the closed-form
backward of softmax is task 2.1's, ``unbroadcast`` is task 1.3's. Each sits between a line
``# BEGIN REFERENCE <task>`` and a line ``# END REFERENCE`` (module level, in this package),
and a student tree of that task's assignment, or of an earlier one, has in their place a
stand-in of the same name (:func:`held_back`) that raises :class:`HeldBack` when called:
neither the student's files nor the copy their code is graded in holds the answer
(:func:`minitorch_attn.homework.markers.hold_back` writes the stand-ins).

The public tests that compare an op with such a reference skip there ("held back"), and
the finite differences of ``python -m gradcheck`` still check every backward.
"""


class HeldBack(NotImplementedError):
    """A reference answer of a homework task, called in a tree where it is held back."""


def held_back(task, name):
    """The stand-in for the reference ``name`` of homework task ``task``: a function of any
    arguments that raises :class:`HeldBack` naming both."""

    def stand_in(*args, **kwargs):
        raise HeldBack(
            f"{name} is a reference answer of task {task}, held back in this tree: the public "
            f"comparisons with it are skipped here, and `python -m gradcheck` checks the backward"
        )

    stand_in.__name__ = stand_in.__qualname__ = name
    return stand_in
