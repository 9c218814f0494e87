"""``python -m minitorch_attn.gradcheck``: run the gradient-check suite (see :mod:`.command`)."""

import sys

from .command import main

sys.exit(main(prog="python -m minitorch_attn.gradcheck"))
