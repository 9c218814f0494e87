"""``python -m gradcheck``: a short name for the gradient-check suite, installed with the package
(so it runs from any folder, as ``minitorch-attn gradcheck`` does).

The suite itself lives in the package, :mod:`minitorch_attn.gradcheck`, and its entries are
the gradient-check samples of the catalogue of operations (``minitorch_attn/opinfo/``, one
module per topic); this folder only runs it.
"""

from minitorch_attn.gradcheck.suite import DTYPES, Entry, Inputs, entries

__all__ = ["DTYPES", "Entry", "Inputs", "entries"]
