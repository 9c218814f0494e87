"""Grade a mixed submission as Gradescope would, under its default limits, and print the figures.

    sudo python benchmarks/gradescope_limits.py [--assignment 1] [--cpu 0.5] [--memory-mb 768] [--budget 600]

What it does: writes the autograder zip of the assignment, unpacks it into a temporary
``/autograder``-like folder (``source/``, ``run_autograder``, ``submission/``, ``results/``),
puts there a submission in which every task is the reference but the last two: a planted
mistake, then a hang that swallows the test timeout (the last task of each assignment is
one whose code no other task calls), and runs ``run_autograder`` twice: once without
limits, then in a cgroup (v1) with a CPU quota of ``--cpu`` cores and a memory limit of
``--memory-mb``, under a wall-clock limit of ``--budget`` seconds (the Gradescope timeout).
It prints each task's score in both runs (the same when the limits cost no earned point),
the wall times, and the cgroup's peak memory. Needs root (cgroups, and the student
account); it uses this environment's Python for the grader and for student code when
another user may run it, else student code runs as root's user (it says which).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

from minitorch_attn.homework import markers, sandbox
from minitorch_attn.homework.gradescope import write_autograder
from minitorch_attn.homework.instructor import InstructorTree, splice
from minitorch_attn.homework.make import make
from minitorch_attn.homework.selftest import load_mutants
from minitorch_attn.homework.submission import Submission

HANG = ["while True:", "    try:", "        while True:", "            pass", "    except BaseException:", "        pass"]


def mixed_submission(tree, number, folder):
    """Write the student tree of assignment ``number`` into ``folder`` with a mix of task
    states; returns ``{task id: what}``."""
    make(folder, number)
    reference = Submission.reference(tree)
    mutants = {m.task: m for m in load_mutants(tree)}
    tasks = markers.assignment_by_number(tree.manifest, number)["tasks"]
    plan = {}
    for index, task in enumerate(tasks):
        kind = {len(tasks) - 1: "hang", len(tasks) - 2: "mistake"}.get(index, "reference")
        task_id = task["id"]
        blocks = reference
        if kind == "mistake" and task_id in mutants:
            blocks = mutants[task_id].submission(reference, tree)
            plan[task_id] = f"mistake: {mutants[task_id].name}"
        elif kind == "hang":
            first = tree.files_of(task_id)[0]
            regions = list(reference.blocks[(first, task_id)])
            regions[0] = HANG + regions[0]
            blocks = reference.with_blocks(first, task_id, regions)
            plan[task_id] = "hang that swallows the timeout"
        else:
            plan[task_id] = "reference"
        for rel in tree.files_of(task_id):
            path = folder / rel
            path.write_text(splice(path.read_text(), markers.find_regions(path), task_id, blocks.blocks[(rel, task_id)]))
    return plan


def cgroup(name, cpu, memory_mb):
    """Make cgroup-v1 groups ``name`` with the limits; returns their folders (or [] when unavailable)."""
    made = []
    try:
        for controller, settings in (("cpu", {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": str(int(cpu * 100000))}),
                                     ("memory", {"memory.limit_in_bytes": str(memory_mb * 2 ** 20)})):
            folder = pathlib.Path("/sys/fs/cgroup") / controller / name
            folder.mkdir()
            made.append(folder)
            for key, value in settings.items():
                (folder / key).write_text(value)
    except OSError as error:
        print(f"no cgroup limits ({error}): the figures below are without them")
        for folder in made:
            folder.rmdir()
        return []
    return made


def venv(target):
    """``target``: a virtual environment with this one's libraries that another user may run
    (it stands for setup.sh's ``/autograder/venv``): this environment itself when its Python
    is reachable, else one of the system's Python of the same version with this
    environment's libraries added; without either, student code runs as the grader's user."""
    if sandbox.reachable(sys.executable):
        target.symlink_to(sys.prefix)
        return
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = pathlib.Path(f"/usr/bin/python{version}")
    site = pathlib.Path(sys.prefix) / "lib" / f"python{version}" / "site-packages"
    if not system.is_file() or not sandbox.reachable(system):
        target.symlink_to(sys.prefix)
        return
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(target)], check=True)
    (target / "lib" / f"python{version}" / "site-packages" / "outer.pth").write_text(
        f"import site; site.addsitedir({str(site)!r})\n")
    target.chmod(0o755)


def main():
    """Run it; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assignment", type=int, default=1)
    parser.add_argument("--cpu", type=float, default=0.5)
    parser.add_argument("--memory-mb", type=int, default=768)
    parser.add_argument("--budget", type=float, default=600.0)
    args = parser.parse_args()
    tree = InstructorTree()
    work = pathlib.Path(tempfile.mkdtemp(prefix="gradescope-limits-"))
    work.chmod(0o711)   # the student's account passes through it to the venv, as through /autograder
    root = work / "autograder"
    write_autograder(work / "autograder.zip", args.assignment, budget=args.budget, memory=args.memory_mb)
    with zipfile.ZipFile(work / "autograder.zip") as archive:
        archive.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    plan = mixed_submission(tree, args.assignment, work / "student")
    shutil.copytree(work / "student", root / "submission")
    venv(root / "venv")
    environment = dict(os.environ, AUTOGRADER_ROOT=str(root), MINITORCH_ATTN_REQUIRE_ISOLATION="")
    try:
        free = grade(args, root, environment, [])
        groups = cgroup(f"gradescope-limits-{os.getpid()}", args.cpu, args.memory_mb)
        try:
            limited = grade(args, root, environment, groups)
        finally:
            for folder in groups:
                for pid in (folder / "cgroup.procs").read_text().split():
                    (folder.parent / "cgroup.procs").write_text(pid)
                folder.rmdir()
        report(args, plan, free, limited, bool(groups))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def grade(args, root, environment, groups):
    """Run run_autograder (in ``groups`` when there are any); returns ``(status, wall seconds,
    peak memory MB or None, results.json)``."""
    def enter():
        for folder in groups:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    shutil.rmtree(root / "results", ignore_errors=True)
    start = time.monotonic()
    try:
        done = subprocess.run(["bash", str(root / "run_autograder")], cwd=root, env=environment, preexec_fn=enter,
                              capture_output=True, text=True, timeout=args.budget)
        status = f"exit status {done.returncode}"
    except subprocess.TimeoutExpired:
        status = f"KILLED at the {args.budget:g} s budget"
    wall = time.monotonic() - start
    peak = None
    for folder in groups:
        if folder.parent.name == "memory":
            peak = int((folder / "memory.max_usage_in_bytes").read_text()) / 2 ** 20
    return status, wall, peak, json.loads((root / "results" / "results.json").read_text())


def report(args, plan, free, limited, with_limits):
    """Print the figures of the two runs."""
    for name, (status, wall, peak, results) in (("without limits", free), ("under the limits", limited)):
        if not results["tests"]:
            print(results["output"])
        print(f"{name}: {status}, {wall:.0f} s wall" + (f", peak memory {peak:.0f} MB" if peak else "")
              + f"; score {results.get('score', 0):g}; results.json {len(json.dumps(results)):,} characters")
    print(f"assignment {args.assignment}, limits {args.cpu:g} CPU, {args.memory_mb} MB, a {args.budget:g} s budget"
          + ("" if with_limits else " (NOT APPLIED: no cgroups here)"))
    print(limited[3]["output"].splitlines()[-1])
    rows = [{t["name"].split(":")[0].replace("Task ", ""): t for t in r["tests"] if "(smoke test)" not in t["name"]}
            for r in (free[3], limited[3])]
    print(f"{'task':<6} {'what':<62} {'no limits':>9} {'limits':>7}")
    for task_id, what in plan.items():
        scores = [row[task_id]["score"] if task_id in row else "-" for row in rows]
        print(f"{task_id:<6} {what[:62]:<62} {scores[0]:>9} {scores[1]:>7}")


if __name__ == "__main__":
    main()
