"""Run the gradient-check suite and print one row per entry; exit 1 on any failure.

    python -m gradcheck [--device cpu|strict|cuda] [--dtype float64|float32] [--only NAME]

Each row gives the entry's finite-difference step, its tolerance (the largest difference
allowed between the backward and the numeric gradient, over the elements; derived per entry
from the float64 error analysis of :mod:`.checker`), the largest difference found, and
``err/tol``, the largest share of its own tolerance an element used (below 1 passes).
"""

import os
import sys
import time

from ..argtypes import CommandParser, device_help, print_error
from ..core.backend import DeviceUnavailableError, get_backend
from .suite import DTYPES, entries


def main(argv=None, prog="python -m gradcheck"):
    """Run the suite and print its table; returns the exit status (0 all passed, 1 a failure,
    2 bad arguments, 130 after Ctrl-C). A reader that stops reading (``| head``) ends it quietly."""
    try:
        return _run(argv, prog)
    except KeyboardInterrupt:
        sys.stdout.flush()
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the table's reader went away: nothing left to say to it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(argv, prog):
    parser = CommandParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help=f"{device_help()} (NumPy, CuPy, array-api-strict)")
    parser.add_argument("--dtype", default="float64", choices=DTYPES)
    parser.add_argument("--only", default=None, help="run only entries whose name contains this text")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    try:
        get_backend(args.device)  # a missing CuPy or array-api-strict: one message, not one per row
    except (DeviceUnavailableError, ValueError, TypeError) as exc:
        return print_error(prog, exc)
    selected = [e for e in entries() if args.only is None or args.only in e.name]
    if not selected:
        return print_error(prog, f"no gradcheck entry matches {args.only!r}")
    print(
        f"gradcheck on device={args.device} dtype={args.dtype}; tolerances derived per entry "
        f"(see `python -c 'help(\"minitorch_attn.gradcheck.checker\")'`)"
    )
    print(f"{'op':<40} {'step':>8} {'tolerance':>10} {'max abs err':>12} {'err/tol':>8}  result")
    failures = []
    start = time.perf_counter()
    for entry in selected:
        try:
            report = entry.run(args.device, args.dtype, args.seed)
            status = "pass" if report.passed else "FAIL"
            row = (
                f"{entry.name:<40} {report.step:>8.1e} {report.max_tolerance:>10.2e} "
                f"{report.max_abs_error:>12.2e} {report.error_ratio:>8.1e}  {status}"
            )
            if not report.passed:
                failures.append((entry.name, report.failure))
        except Exception as exc:  # an entry that crashes is a failure too, reported in the table
            row = f"{entry.name:<40} {'-':>8} {'-':>10} {'-':>12} {'-':>8}  ERROR"
            failures.append((entry.name, f"{type(exc).__name__}: {exc}"))
        print(row, flush=True)
    print(f"{len(selected) - len(failures)} passed, {len(failures)} failed ({time.perf_counter() - start:.1f} s)")
    for name, message in failures:
        print(f"\n{name}: {message}")
    return 1 if failures else 0
