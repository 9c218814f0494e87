"""The autograder's first step: are the libraries the grader needs installed?

``run_autograder`` runs this file by its path, before anything imports the package (whose
``__init__`` needs NumPy), with the standard library only:

    python minitorch_attn/homework/preflight.py RESULTS_JSON

It reads the requirements of ``setup.cfg`` (``install_requires`` and the ``test`` extra)
from the current folder. When one is missing it writes RESULTS_JSON with no score and an
output saying which (so Gradescope shows a grader error, not a traceback or a student's
0) and exits with status 2; else it exits with 0 and writes nothing.
"""

import configparser
import importlib.metadata
import json
import os
import pathlib
import re
import sys
import tempfile


def missing_requirements(setup_cfg="setup.cfg"):
    """The names of the distributions in ``setup_cfg``'s requirements that are not installed."""
    config = configparser.ConfigParser()
    config.read(setup_cfg)
    lines = (config.get("options", "install_requires", fallback="") + "\n"
             + config.get("options.extras_require", "test", fallback=""))
    names = [re.match(r"[A-Za-z0-9._-]+", line.strip())[0] for line in lines.splitlines() if line.strip()]
    missing = []
    for name in names:
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def main(argv=None):
    """Check, and write the grader-error results.json when a library is missing."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python preflight.py RESULTS_JSON", file=sys.stderr)
        return 2
    if not pathlib.Path("setup.cfg").is_file():
        reason = f"{os.getcwd()} has no setup.cfg: the autograder's source folder is incomplete"
    else:
        missing = missing_requirements()
        reason = (f"the grader's Python ({sys.executable}, {sys.version.split()[0]}) lacks {', '.join(missing)}: "
                  f"rebuild the autograder (its setup.sh installs them)") if missing else None
    if reason is None:
        return 0
    print(f"the autograder could not grade: {reason}", file=sys.stderr)
    results = pathlib.Path(argv[0])
    results.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=results.parent)
    with os.fdopen(handle, "w") as file:
        json.dump({"output": f"The autograder could not grade this submission (this is not your grade; your "
                             f"instructor will regrade it): {reason}", "output_format": "text", "tests": []}, file)
    os.chmod(temporary, 0o644)
    os.replace(temporary, results)
    return 2


if __name__ == "__main__":
    sys.exit(main())
