"""Every assignment's autograder, built and run as Gradescope builds and runs it, and its figures.

    sudo python benchmarks/gradescope_limits.py [--assignment N ...] [--check] [--cpu 0.5]
        [--memory-mb 768] [--budget 600] [--drop-pin NAME]

For each assignment of the manifest (or each ``--assignment`` given):

1. **the zip**: written by the package's own command, ``minitorch-attn homework autograder``
   (its ``setup.sh`` pins resolved by pip from ``setup.cfg``);
2. **the grader's environment, from the zip's own ``setup.sh``**: the zip unpacked into
   ``ROOT/source`` and ``setup.sh`` run as root with the system's ``PATH`` (so its
   ``python3`` is ``/usr/bin/python3``, as on Gradescope's image, not a developer's own
   Python) and ``AUTOGRADER_ROOT=ROOT``: apt, the virtual environment with the pins, the
   package, the student account. One environment serves every assignment (their
   ``setup.sh`` are the same; it is built again when one differs); pip's own cache keeps
   the wheels for the next run;
3. **three submissions**, each graded by the zip's ``run_autograder`` as Gradescope runs it
   (isolation required, in a cgroup with ``--memory-mb`` of memory and, when ``--cpu`` is
   above 0, a quota of that many cores; Gradescope's defaults are 0.5 core, 768 MB, 600 s):
   the reference (every task its points), the student tree as ``homework make`` writes it
   (0), and that tree solved with the reference except one planted mistake of
   ``mutants.json`` in the assignment's last task, whose code no other task calls (that
   task 0, every other its points).

It prints a table: each submission's score against the expected one, the wall time and the
cgroup's peak memory. With ``--check`` it exits with status 1 when a score differs
(``.ci/run`` runs it so, without the CPU quota, which only makes it slower).
``--drop-pin NAME`` deletes one pin from ``setup.sh`` before it runs, to show that the
check fails when ``setup.sh`` misses a library the grader needs. Needs root (apt, the
student account, cgroups) and the package index.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

from minitorch_attn.homework import markers
from minitorch_attn.homework.instructor import InstructorTree, splice
from minitorch_attn.homework.selftest import load_mutants
from minitorch_attn.homework.submission import Submission

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSED_ON = ("PIP_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
"""Variables of the machine's network and package index, passed to setup.sh (no Python of the developer's)."""


def main():
    """Run it; see the module docstring. Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", type=int, action="append", help="one assignment (repeat it; default: all)")
    parser.add_argument("--check", action="store_true", help="exit with status 1 when a score is not the expected one")
    parser.add_argument(
        "--cpu", type=float, default=0.5, help="a CPU quota in cores (0: none); Gradescope's default 0.5"
    )
    parser.add_argument("--memory-mb", type=int, default=768, help="the memory limit; Gradescope's default 768")
    parser.add_argument("--budget", type=float, default=600.0, help="the Gradescope timeout, s; default 600")
    parser.add_argument(
        "--drop-pin", metavar="NAME", help="delete this library's pin from setup.sh (to see the check fail)"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("run it as root: setup.sh installs system packages and makes the student account")
    tree = InstructorTree()
    numbers = args.assignment or [a["number"] for a in tree.manifest["assignments"]]
    work = pathlib.Path(tempfile.mkdtemp(prefix="gradescope-e2e-"))
    work.chmod(0o711)  # the student's account passes through it to the venv, as through /autograder
    root, built, rows = work / "autograder", None, []
    try:
        for number in numbers:
            archive = work / f"autograder-{number}.zip"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "minitorch_attn.app.cli",
                    "homework",
                    "autograder",
                    "--assignment",
                    str(number),
                    "--budget",
                    f"{args.budget:g}",
                    "--memory",
                    str(args.memory_mb),
                    "--out",
                    str(archive),
                ],
                check=True,
            )
            unpack(archive, root)
            setup = (root / "source" / "setup.sh").read_text()
            if setup != built:
                build(root, args.drop_pin)
                built = setup
            for kind, folder, expected in submissions(tree, number, work / f"submissions-{number}"):
                rows.append((number, kind, expected, *grade(root, folder, args)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(rows, args)


def unpack(archive, root):
    """``archive`` into ``root/source`` (replacing what was there) and its run_autograder into ``root``."""
    shutil.rmtree(root / "source", ignore_errors=True)
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(root / "source")
    for name in ("setup.sh", "run_autograder"):
        (root / "source" / name).chmod(0o755)  # zipfile drops the modes; Gradescope keeps them
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")


def build(root, drop_pin=None):
    """Run ``root/source/setup.sh`` as Gradescope does (see the module docstring)."""
    setup = root / "source" / "setup.sh"
    if drop_pin:
        text, dropped = re.subn(rf"(?<=\s)'?{re.escape(drop_pin)}==\S+", "", setup.read_text(), flags=re.IGNORECASE)
        if not dropped:
            raise SystemExit(f"setup.sh pins no {drop_pin}")
        setup.write_text(text)
    shutil.rmtree(root / "venv", ignore_errors=True)
    environment = {k: v for k, v in os.environ.items() if k.startswith(PASSED_ON)}
    environment.update(
        PATH=SYSTEM_PATH, HOME="/root", LANG="C.UTF-8", DEBIAN_FRONTEND="noninteractive", AUTOGRADER_ROOT=str(root)
    )
    start = time.monotonic()
    done = subprocess.run(["bash", str(setup)], cwd=root / "source", env=environment, capture_output=True, text=True)
    if done.returncode != 0:
        said = [line for line in (done.stdout + done.stderr).splitlines() if "is ignored: it is neither" not in line]
        raise SystemExit("setup.sh failed, as it would while Gradescope builds the image:\n" + "\n".join(said[-30:]))
    python = os.path.realpath(root / "venv" / "bin" / "python")
    print(
        f"setup.sh built the grader's environment in {time.monotonic() - start:.0f} s (its Python: {python})",
        flush=True,
    )


def submissions(tree, number, folder):
    """``[(kind, folder, {task id: expected points})]``: the reference, the stubs, one mistake."""
    tasks = markers.assignment_by_number(tree.manifest, number)["tasks"]
    full = {t["id"]: t["points"] for t in tasks}
    folder.mkdir(mode=0o700)  # the reference is in it: no student process may read it
    reference = folder / "reference"
    shutil.copytree(
        tree.root / "minitorch_attn", reference / "minitorch_attn", ignore=shutil.ignore_patterns("__pycache__")
    )
    stubs = folder / "stubs"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "minitorch_attn.app.cli",
            "homework",
            "make",
            "--out",
            str(stubs),
            "--assignment",
            str(number),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    last = tasks[-1]["id"]
    mutant = next(m for m in load_mutants(tree) if m.task == last)
    planted = mutant.submission(Submission.reference(tree), tree)
    mistake = folder / "mistake"
    shutil.copytree(stubs, mistake)
    for task in full:
        for rel in tree.files_of(task):
            path = mistake / rel
            path.write_text(splice(path.read_text(), markers.find_regions(path), task, planted.blocks[(rel, task)]))
    return [
        ("reference", reference, full),
        ("stubs", stubs, dict.fromkeys(full, 0)),
        (f"mistake in {last}: {mutant.name}", mistake, dict(full, **{last: 0})),
    ]


def grade(root, submission, args):
    """``run_autograder`` on ``submission``; returns ``({task id: points}, output, status, seconds, peak MB)``."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    shutil.copytree(submission, root / "submission")
    groups = cgroup(f"gradescope-e2e-{os.getpid()}", args.cpu, args.memory_mb)
    environment = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8", "AUTOGRADER_ROOT": str(root)}
    start = time.monotonic()
    try:
        done = subprocess.run(
            ["bash", str(root / "run_autograder")],
            cwd=root,
            env=environment,
            capture_output=True,
            text=True,
            timeout=args.budget,
            preexec_fn=lambda: enter(groups),
        )
        status = f"exit status {done.returncode}"
    except subprocess.TimeoutExpired:
        status = f"KILLED at the {args.budget:g} s budget"
    finally:
        wall = time.monotonic() - start
        peak = leave(groups)
    written = root / "results" / "results.json"
    results = json.loads(written.read_text()) if written.is_file() else {"tests": [], "output": "no results.json"}
    points = {
        t["name"].split(":")[0].replace("Task ", ""): t["score"]
        for t in results["tests"]
        if "(smoke test)" not in t["name"]
    }
    return points, results.get("output", ""), status, wall, peak


def cgroup(name, cpu, memory_mb):
    """cgroup-v1 groups ``name`` with the limits; returns their folders ([] when unavailable)."""
    settings = [("memory", {"memory.limit_in_bytes": str(memory_mb * 2**20)})]
    if cpu > 0:
        settings.append(("cpu", {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": str(int(cpu * 100000))}))
    made = []
    try:
        for controller, values in settings:
            folder = pathlib.Path("/sys/fs/cgroup") / controller / name
            folder.mkdir()
            made.append(folder)
            for key, value in values.items():
                (folder / key).write_text(value)
    except OSError as error:
        print(f"no cgroup limits ({error}): the figures below are without them")
        leave(made)
        return []
    return made


def enter(groups):
    for folder in groups:
        (folder / "cgroup.procs").write_text(str(os.getpid()))


def leave(groups):
    """Remove the groups; returns the memory group's peak, MB (None without one)."""
    peak = None
    for folder in groups:
        if folder.parent.name == "memory":
            peak = int((folder / "memory.max_usage_in_bytes").read_text()) / 2**20
        for pid in (folder / "cgroup.procs").read_text().split():
            (folder.parent / "cgroup.procs").write_text(pid)
        folder.rmdir()
    return peak


def report(rows, args):
    """Print the table; returns 1 when ``--check`` and a score is not the expected one."""
    limits = f"{args.memory_mb} MB" + (f", {args.cpu:g} CPU" if args.cpu > 0 else ", no CPU quota")
    print(
        f"\nthe autograder of each assignment, built from its own setup.sh, under {limits}, a {args.budget:g} s budget"
    )
    print(f"{'as.':<4} {'submission':<58} {'score':>11} {'expected':>9} {'wall s':>7} {'peak MB':>8}  result")
    wrong = 0
    for number, kind, expected, points, output, status, wall, peak in rows:
        got = [points.get(task) for task in expected]  # None: the task is not in results.json (a grader error)
        ok = got == list(expected.values())
        wrong += not ok
        peak_text = f"{peak:.0f}" if peak is not None else "-"
        print(
            f"{number:<4} {kind[:58]:<58} {sum(g or 0 for g in got):>11g} {sum(expected.values()):>9g} "
            f"{wall:>7.0f} {peak_text:>8}  " + ("ok" if ok else f"WRONG ({status}; by task {dict(zip(expected, got))})")
        )
        if not ok:
            print("    " + output.replace("\n", "\n    ")[:2000])
    print(f"{len(rows) - wrong} of {len(rows)} gradings as expected")
    return 1 if (args.check and wrong) else 0


if __name__ == "__main__":
    sys.exit(main())
