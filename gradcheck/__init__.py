"""``python -m gradcheck``: a short name, from the project root, for the gradient-check suite.

The suite itself lives in the package, :mod:`minitorch_attn.gradcheck` (its entries, one
module per topic, in ``minitorch_attn/gradcheck/entries_*.py``); this folder only runs it.
"""

from minitorch_attn.gradcheck.suite import TOLERANCES, Entry, Inputs, entries

__all__ = ["TOLERANCES", "Entry", "Inputs", "entries"]
