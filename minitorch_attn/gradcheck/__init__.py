"""Gradient checking: the checker, and the suite of entries that proves every backward.

* :mod:`.checker` -- :func:`gradcheck` and :func:`check_gradients`: central finite
  differences in float64 under a random upstream gradient;
* :mod:`.suite`   -- :class:`~.suite.Entry` and :func:`~.suite.entries`: one entry per
  gradient-check sample of the catalogue of operations, :mod:`minitorch_attn.opinfo`;
* :mod:`.command` -- the table printed by ``python -m gradcheck`` and
  ``minitorch-attn gradcheck``.

``minitorch_attn.gradcheck`` (the attribute of the package) is the function
:func:`gradcheck`, as ``torch.autograd.gradcheck``; import the modules by their full name,
e.g. ``from minitorch_attn.gradcheck.suite import entries``.
"""

from .checker import GradcheckError, GradcheckReport, check_gradients, gradcheck

__all__ = ["GradcheckError", "GradcheckReport", "check_gradients", "gradcheck"]
