"""``python -m minitorch_attn.opinfo``: print the table of operations (Markdown), one row per record."""

import sys

from ..argtypes import CommandParser
from .table import markdown_table


def main(argv=None):
    """Print the table; exit status 0."""
    parser = CommandParser(prog="python -m minitorch_attn.opinfo", description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    print(markdown_table(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
