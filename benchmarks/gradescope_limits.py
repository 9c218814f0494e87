"""Grade a mixed submission as Gradescope would, under its default limits, and print the figures.

    sudo python benchmarks/gradescope_limits.py [--assignment 1] [--cpu 0.5] [--memory-mb 768] [--budget 600]

What it does: writes the autograder zip of the assignment, unpacks it into a temporary
``/autograder``-like folder (``source/``, ``run_autograder``, ``submission/``, ``results/``),
puts there a submission in which the tasks are, in turn, the reference, a planted mistake,
a hang that swallows the test timeout, the stub as handed out, the reference again, ... and
runs ``run_autograder`` in a cgroup (v1) with a CPU quota of ``--cpu`` cores and a memory
limit of ``--memory-mb``, under a wall-clock limit of ``--budget`` seconds (the Gradescope
timeout). It prints the expected and the graded score of each task, the wall time, and the
cgroup's peak memory. Needs root (cgroups, and the student account); it uses this
environment's Python for the grader and for student code when another user may run it,
else student code runs as root's user (it says which).
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

from minitorch_attn.homework import markers
from minitorch_attn.homework.gradescope import write_autograder
from minitorch_attn.homework.instructor import InstructorTree, splice
from minitorch_attn.homework.make import make
from minitorch_attn.homework.selftest import load_mutants
from minitorch_attn.homework.submission import Submission

HANG = ["while True:", "    try:", "        while True:", "            pass", "    except BaseException:", "        pass"]


def mixed_submission(tree, number, folder):
    """Write the student tree of assignment ``number`` into ``folder`` with a mix of task
    states; returns ``{task id: (what, expected points)}``."""
    make(folder, number)
    reference = Submission.reference(tree)
    mutants = {m.task: m for m in load_mutants(tree)}
    plan = {}
    for index, task in enumerate(markers.assignment_by_number(tree.manifest, number)["tasks"]):
        kind = ["reference", "mistake", "hang", "stub", "reference"][index % 5]
        task_id = task["id"]
        if kind == "stub":
            plan[task_id] = ("stub as handed out", 0)
            continue
        blocks = reference
        if kind == "mistake" and task_id in mutants:
            blocks = mutants[task_id].submission(reference, tree)
            plan[task_id] = (f"mistake: {mutants[task_id].name}", 0)
        elif kind == "hang":
            first = tree.files_of(task_id)[0]
            regions = list(reference.blocks[(first, task_id)])
            regions[0] = HANG + regions[0]
            blocks = reference.with_blocks(first, task_id, regions)
            plan[task_id] = ("hang that swallows the timeout", 0)
        else:
            plan[task_id] = ("reference", task["points"])
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
    root = work / "autograder"
    write_autograder(work / "autograder.zip", args.assignment, budget=args.budget)
    with zipfile.ZipFile(work / "autograder.zip") as archive:
        archive.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    plan = mixed_submission(tree, args.assignment, work / "student")
    shutil.copytree(work / "student", root / "submission")
    (root / "venv").symlink_to(sys.prefix)   # this environment stands for setup.sh's /autograder/venv
    groups = cgroup(f"gradescope-limits-{os.getpid()}", args.cpu, args.memory_mb)
    environment = dict(os.environ, AUTOGRADER_ROOT=str(root), MINITORCH_ATTN_REQUIRE_ISOLATION="")

    def enter():
        for folder in groups:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    start = time.monotonic()
    try:
        report(args, root, plan, groups, start, environment, enter)
    finally:
        for folder in groups:
            for pid in (folder / "cgroup.procs").read_text().split():
                (folder.parent / "cgroup.procs").write_text(pid)
            folder.rmdir()
        shutil.rmtree(work, ignore_errors=True)


def report(args, root, plan, groups, start, environment, enter):
    """Run run_autograder in the groups and print the figures."""
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
    results = json.loads((root / "results" / "results.json").read_text())
    if not results["tests"]:
        print(results["output"])
    rows = {t["name"].split(":")[0].replace("Task ", ""): t for t in results["tests"] if "(smoke test)" not in t["name"]}
    print(f"assignment {args.assignment} under {args.cpu:g} CPU, {args.memory_mb} MB, a {args.budget:g} s budget: "
          f"{status}, {wall:.0f} s wall" + (f", peak memory {peak:.0f} MB" if peak else ""))
    print(f"{'task':<6} {'what':<62} {'expected':>8} {'graded':>7}")
    for task_id, (what, expected) in plan.items():
        print(f"{task_id:<6} {what[:62]:<62} {expected:>8g} {rows[task_id]['score'] if task_id in rows else '-':>7}")
    print(f"total: expected {sum(e for _, e in plan.values()):g}, graded {results.get('score', 0):g}; "
          f"results.json {len(json.dumps(results)):,} characters")

if __name__ == "__main__":
    main()
