"""``python -m minitorch_attn.opinfo``: print the table of operations (Markdown), one row per record;
with ``--glance``, every op's forward and backward rule, one line each (:mod:`.glance`)."""

import sys

from ..argtypes import CommandParser
from .glance import glance_text
from .table import markdown_table


def main(argv=None):
    """Print the table (or, with ``--glance``, the rules at a glance); exit status 0."""
    parser = CommandParser(prog="python -m minitorch_attn.opinfo", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--glance",
        action="store_true",
        help="print each op's forward and backward rule, one line each, instead of the table",
    )
    args = parser.parse_args(argv)
    print(glance_text() if args.glance else markdown_table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
