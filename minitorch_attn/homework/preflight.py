"""The autograder's first step: are the libraries the grader needs installed?

``run_autograder`` runs this file by its path, before anything imports the package (whose
``__init__`` needs NumPy), with the standard library only:

    python minitorch_attn/homework/preflight.py RESULTS_JSON

The grader needs what ``setup.cfg`` lists (``install_requires`` and the ``test`` extra):
:func:`requirement_lines` reads them, and is the one list that the zip's ``setup.sh``
is resolved from (:func:`minitorch_attn.homework.gradescope.resolve_pins`) and that this
check and :meth:`~minitorch_attn.homework.instructor.InstructorTree.check_dependencies`
look for. When one is missing it writes RESULTS_JSON with no score and an output saying
which, and why it can be missing (so Gradescope shows a grader error, not a traceback or a
student's 0), and exits with status 2; else it exits with 0 and writes nothing.
"""

import configparser
import importlib.metadata
import json
import os
import pathlib
import re
import sys
import tempfile

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def requirement_lines(setup_cfg="setup.cfg"):
    """The requirement lines (``"numpy>=2.0"``) of ``setup_cfg``'s ``install_requires`` and
    its ``test`` extra, in order: everything the grader and the tests need."""
    config = configparser.ConfigParser()
    config.read(setup_cfg)
    lines = (
        config.get("options", "install_requires", fallback="")
        + "\n"
        + config.get("options.extras_require", "test", fallback="")
    )
    return [line.strip() for line in lines.splitlines() if line.strip() and not line.strip().startswith("#")]


def canonical(name):
    """A distribution's name as pip compares them (PEP 503): ``Array_API.strict`` -> ``array-api-strict``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirements(setup_cfg="setup.cfg"):
    """The names of the distributions in ``setup_cfg``'s requirements that are not installed."""
    missing = []
    for line in requirement_lines(setup_cfg):
        name = NAME.match(line)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def pinned_in_text(text):
    """``{canonical name: "name==version"}`` of the pins in a ``setup.sh``'s text."""
    return {canonical(m[1]): m[0] for m in re.finditer(r"([A-Za-z0-9][A-Za-z0-9._-]*)==[^\s'\"]+", text)}


def pinned_in(setup_sh="setup.sh"):
    """The pins that the file ``setup_sh`` installs (:func:`pinned_in_text`; empty when
    there is no such file)."""
    path = pathlib.Path(setup_sh)
    return pinned_in_text(path.read_text(errors="replace") if path.is_file() else "")


def why_missing(missing, setup_sh="setup.sh"):
    """What a teacher reads when ``missing`` libraries are not in the grader's Python: whether
    the zip's ``setup.sh`` installs them (then it failed while the image was built) or not
    (then the zip is older than the package's requirements), and what to do."""
    pins = pinned_in(setup_sh)
    not_pinned = [name for name in missing if canonical(name) not in pins]
    said = (
        f"the grader's Python ({sys.executable}, {sys.version.split()[0]}) lacks {', '.join(missing)}, "
        "which setup.cfg requires"
    )
    if not_pinned:
        return (
            f"{said}. This zip's setup.sh does not install {', '.join(not_pinned)}: the zip was written by an "
            f"older minitorch-attn. Write it again from your checkout (minitorch-attn homework autograder "
            f"--assignment N --out FILE.zip: its setup.sh is resolved from setup.cfg), upload it and rebuild"
        )
    return (
        f"{said}. This zip's setup.sh installs them ({', '.join(pins[canonical(n)] for n in missing)}), so it "
        f"failed while Gradescope built the image: read the build output on the autograder's settings page "
        f"(a download that failed: rebuild; a pin with no wheel for the image's Python: write the zip again, "
        f"or choose Ubuntu 22.04 or 24.04)"
    )


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
        reason = why_missing(missing) if missing else None
    if reason is None:
        return 0
    print(f"the autograder could not grade: {reason}", file=sys.stderr)
    results = pathlib.Path(argv[0])
    results.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=results.parent)
    with os.fdopen(handle, "w") as file:
        json.dump(
            {
                "output": f"The autograder could not grade this submission (this is not your grade; your "
                f"instructor will regrade it): {reason}",
                "output_format": "text",
                "tests": [],
            },
            file,
        )
    os.chmod(temporary, 0o644)
    os.replace(temporary, results)
    return 2


if __name__ == "__main__":
    sys.exit(main())
