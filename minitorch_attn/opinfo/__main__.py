"""``python -m minitorch_attn.opinfo [--write-readme [PATH]]``: print the table of operations,
or write it into the README between its markers."""

import sys

from ..argtypes import CommandParser
from ..atomic import write_atomically
from .table import markdown_table, with_table


def main(argv=None):
    """Print the table (exit 0), or rewrite the README's copy of it; 2 for a README without markers."""
    parser = CommandParser(prog="python -m minitorch_attn.opinfo", description=__doc__.splitlines()[0])
    parser.add_argument("--write-readme", nargs="?", const="README.md", default=None, metavar="PATH",
                        help="write the table into PATH (default README.md) instead of printing it")
    args = parser.parse_args(argv)
    if args.write_readme is None:
        print(markdown_table(), end="")
        return 0
    with open(args.write_readme, encoding="utf-8") as f:
        text = f.read()
    try:
        write_atomically(args.write_readme, with_table(text).encode("utf-8"))
    except ValueError as exc:
        print(f"python -m minitorch_attn.opinfo: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
