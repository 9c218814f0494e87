"""Grading that a determined student cannot fool, and that never loses an honest student's
points: each cheat, written only inside a task's SOLUTION region, is graded and gets the
honest score (a stub's 0, or what the student's own code earns); a hang, a flood of
output, memory exhaustion and a stopped grader cost nothing else.

Where the cheat is about what the student's process may touch (the instructor's tree, the
held-back tests, the grader's files, the network, processes that outlive the grading),
the test needs the isolation that root gives: student code under its own account, in a
network namespace of its own. It runs when the tests run as root and a Python that
another user may run is found (``/usr/bin/python3.X``, the same version, with this
environment's libraries added); else it is skipped, and says why.
"""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from minitorch_attn.homework import hiding, judge, markers, remote, sandbox
from minitorch_attn.homework.grade import Grader, GraderError, task_limits
from minitorch_attn.homework.instructor import InstructorTree
from minitorch_attn.homework.results import gradescope_results
from minitorch_attn.homework.runner import cap
from minitorch_attn.homework.submission import Submission

ROOT = markers.PROJECT_ROOT
TREE = InstructorTree()
REFERENCE = Submission.reference(TREE)
SOFTMAX = "minitorch_attn/functional/softmax.py"
TASKS = {t["id"]: t for a in TREE.manifest["assignments"] for t in a["tasks"]}
STUB = ["raise NotImplementedError('Task 2.1: not done')"]


def cheating(forward, backward=STUB, task="2.1", base=REFERENCE):
    """``base`` (the reference) with task 2.1's two regions replaced by ``forward`` and ``backward`` (text)."""
    return base.with_blocks(
        SOFTMAX,
        task,
        [
            textwrap.dedent(forward).strip().splitlines(),
            textwrap.dedent(backward if isinstance(backward, str) else "\n".join(backward)).strip().splitlines(),
        ],
    )


@pytest.fixture(scope="module")
def student_python(tmp_path_factory):
    """A Python another user may run, with this environment's libraries; skips when the
    tests do not run as root or no such Python is found."""
    if os.geteuid() != 0:
        pytest.skip("student code runs under its own account only when the grader is root")
    if sandbox.reachable(sys.executable):
        return sys.executable
    system = pathlib.Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    site = (
        pathlib.Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    )
    if not system.is_file() or not sandbox.reachable(system) or not site.is_dir():
        pytest.skip(f"{sys.executable} is private and there is no {system} to run student code with")
    real = pathlib.Path(os.path.realpath(site))
    if not all(folder.stat().st_mode & 0o001 for folder in (real, *real.parents)):
        pytest.skip(f"this environment's libraries ({site}) sit in a folder another user may not enter")
    folder = pathlib.Path("/tmp") / f"minitorch-attn-test-python-{os.getpid()}"
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(folder)], check=True)
    own_site = folder / "lib" / site.parent.name / "site-packages"
    (own_site / "outer.pth").write_text(f"import site; site.addsitedir({str(site)!r})\n")
    folder.chmod(0o755)
    yield str(folder / "bin" / "python")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def private_tree(tmp_path_factory):
    """A copy of the instructor's tree in a folder only root may enter (as /autograder/source)."""
    folder = tmp_path_factory.mktemp("private") / "source"
    for name in ("minitorch_attn", "tests", "gradcheck", "setup.cfg", "pyproject.toml"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, folder / name)
    folder.chmod(0o700)
    return folder


COLLECTED = {}  # the instructor's tests of each task, collected once for this module's graders


def quick(grader):
    """``grader`` running only a few tests of each task (three public ones and one held
    back), so that each cheat is graded in seconds."""
    key = grader.has_reference
    if key not in COLLECTED:
        grader.expected("2.1")  # collects them
        COLLECTED[key] = {
            name: [i for i in ids if not i.startswith("tests/instructor/")][:3]
            + [i for i in ids if i.startswith("tests/instructor/")][:1]
            for name, ids in grader._expected.items()
        }
    grader._expected = COLLECTED[key]
    return grader


@pytest.fixture(scope="module")
def isolated(private_tree, student_python):
    with Grader(private_tree, budget=400, python=student_python) as grader:
        assert grader.account is not None, grader.isolation
        yield quick(grader)


@pytest.fixture(scope="module")
def plain():
    with Grader(TREE, budget=400) as grader:
        yield quick(grader)


def graded(grader, submission, task="2.1"):
    limit, per_test = task_limits(grader.budget, 4, grader.timeout)
    return grader.grade_task(TASKS[task], submission, limit, per_test)


# ---- forged verdicts: whatever the student's process says, the held-back tests decide ----------------------
FORGE_REPORT = """
import gc, json, os, sys
import _pytest.main
report = [a.split('=', 1)[1] for a in sys.argv if a.startswith('--grading-report=')]
if report:
    session = next(o for o in gc.get_objects() if isinstance(o, _pytest.main.Session))
    with open(report[0], 'a') as f:
        for item in session.items:
            f.write(json.dumps({'test': item.nodeid, 'outcome': 'passed', 'message': '', 'where': ''}) + '\\n')
        f.write(json.dumps({'exit': 0}) + '\\n')
os._exit(0)
"""
REGISTER_HOOK = """
import gc
import pytest
from _pytest.config import Config
class Passer:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        outcome.get_result().outcome = 'passed'
for config in [o for o in gc.get_objects() if isinstance(o, Config)]:
    if not config.pluginmanager.has_plugin('passer'):
        config.pluginmanager.register(Passer(), 'passer')
raise NotImplementedError('Task 2.1: not done')
"""
PATCH_PLUGIN = """
from minitorch_attn.homework import pytest_report
original = pytest_report.GradingReport.write
def write(self, **record):
    if 'test' in record:
        record.update(outcome='passed', message='')
    original(self, **record)
pytest_report.GradingReport.write = write
raise NotImplementedError('Task 2.1: not done')
"""
REEXEC_PYTEST = """
import os, sys
if any(a.startswith('--grading-report=') for a in sys.argv):
    os.environ['PYTEST_ADDOPTS'] = '--collect-only'
    os.execv(sys.executable, [sys.executable, '-m', 'pytest', *sys.argv[1:]])
raise NotImplementedError('Task 2.1: not done')
"""


@pytest.mark.parametrize(
    "cheat",
    [FORGE_REPORT, REGISTER_HOOK, PATCH_PLUGIN, REEXEC_PYTEST],
    ids=[
        "forged report, then exit",
        "pytest hook registered at run time",
        "the grader's report plugin patched",
        "pytest run again with PYTEST_ADDOPTS",
    ],
)
def test_a_forged_verdict_earns_nothing(plain, cheat):
    result = graded(plain, cheating(cheat))
    assert result.score == 0
    assert any(c.held_back and not c.passed for c in result.checks)


FORGE_REPLY = """
import os, sys
if sys.argv[1:2] and sys.argv[1].isdigit():   # the worker of the held-back tests: python -m ... IN OUT
    os.write(int(sys.argv[2]), b'{"n": 999999, "value": null}\\n')
raise NotImplementedError('Task 2.1: not done')
"""
PATCH_WORKER = """
import sys
worker = sys.modules.get('__main__')
if hasattr(worker, 'Worker'):
    worker.Worker.reply = lambda self, value, depth=0: None   # every answer after this one: None
raise NotImplementedError('Task 2.1: not done')
"""


@pytest.mark.parametrize(
    "cheat",
    [FORGE_REPLY, PATCH_WORKER],
    ids=["a reply written on the grader's channel", "the worker's answers replaced"],
)
def test_a_forged_answer_to_the_held_back_tests_earns_nothing(plain, cheat):
    result = graded(plain, cheating(cheat))
    assert result.score == 0 and any(c.held_back and not c.passed for c in result.checks)


# ---- what the student's code may reach ---------------------------------------------------------------
def test_the_instructor_tree_cannot_be_read_nor_written(isolated, private_tree):
    target = private_tree / SOFTMAX
    before = target.read_text()
    steal = f"""
    import textwrap
    path = {str(target)!r}
    try:
        with open(path, 'a') as f:
            f.write('# changed by a student')
    except OSError:
        pass
    code = open(path).read().split('# BEGIN SOLUTION 2.1')[1].split('# END SOLUTION')[0]
    scope = dict(globals(), ctx=ctx, x=x, dim=dim)
    exec(textwrap.dedent(code), scope)
    p = scope['p']
    """
    result = graded(isolated, cheating(steal))
    text = "\n".join(c.message for c in result.failures)
    assert result.score == 0 and ("PermissionError" in text or "FileNotFoundError" in text)  # closed, or not in sight
    assert target.read_text() == before


def test_the_grader_s_own_copies_cannot_be_written(isolated):
    vandal = """
    import glob, os
    for folder in glob.glob('/tmp/minitorch-attn-grading-*/*/minitorch_attn/functional'):
        try:
            open(os.path.join(folder, 'softmax.py'), 'a').write('raise SystemExit')
        except OSError:
            pass
    raise NotImplementedError('Task 2.1: not done')
    """
    assert graded(isolated, cheating(vandal)).score == 0
    assert graded(isolated, REFERENCE, task="2.2").score == 30  # the next task is graded on intact copies


@pytest.mark.parametrize("who", ["plain", "isolated"])
def test_a_daemon_that_left_the_session_is_killed(request, who):
    shared = pathlib.Path("/tmp") / f"minitorch-attn-daemon-{os.getpid()}"  # the grader's, writable by all
    shared.mkdir(exist_ok=True)
    shared.chmod(0o1777)
    pid_file = shared / "pid"
    pid_file.unlink(missing_ok=True)
    daemon = f"""
    import os, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open({str(pid_file)!r} + '.part', 'w').write(str(os.getpid()))
            os.rename({str(pid_file)!r} + '.part', {str(pid_file)!r})
            while True:
                time.sleep(1)
        os._exit(0)
    while not os.path.exists({str(pid_file)!r}):
        time.sleep(0.01)
    raise NotImplementedError('Task 2.1: not done')
    """
    grader = request.getfixturevalue(who)
    try:
        assert graded(grader, cheating(daemon)).score == 0
        if grader.confinement.hidden:  # its /tmp was its own: look for any process of the student account
            left = [pid for pid in _pids_of(grader.account[0]) if _alive(pid)]
            assert not left, f"processes of the student account outlived the grading: {left}"
        else:
            pid = int(pid_file.read_text())
            assert not _alive(pid), f"the daemon {pid} outlived the grading"
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _pids_of(uid):
    """The process ids whose real user is ``uid``, from /proc."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            lines = (entry / "status").read_text().splitlines() if entry.name.isdigit() else []
        except OSError:
            continue
        if any(line.startswith("Uid:") and int(line.split()[1]) == uid for line in lines):
            found.append(int(entry.name))
    return found


def test_a_file_the_grader_reads_is_never_read_through_a_link(plain, tmp_path):
    secret = tmp_path / "grader-only.txt"
    secret.write_text(json.dumps({"test": "x", "outcome": "passed", "message": "SECRET TEXT"}) + "\n")
    swap = f"""
    import os, sys
    for name in ['.grading-report.jsonl']:
        if os.path.exists(os.path.dirname(name) or '.'):
            if os.path.lexists(name):
                os.unlink(name)
            os.symlink({str(secret)!r}, name)
    raise NotImplementedError('Task 2.1: not done')
    """
    result = graded(plain, cheating(swap))
    assert result.score == 0 and "SECRET TEXT" not in "\n".join(c.message for c in result.checks)


def test_the_copy_student_code_runs_in_holds_no_reference_and_no_held_back_test():
    """Task 2.1's code that calls attention (assignment 4) meets the stub the student has;
    the other tasks of assignment 2 are the student's own code (stubs here), and nothing
    held back is there."""
    with Grader(TREE) as grader:
        folder = grader.workspace.copy_with(
            grader.student_tree(cheating("p = None", base=Submission.stubs(TREE)), 2),
            TREE.tasks_of(2) | TREE.tasks_of(2, later=True),
        )
        try:
            assert "NotImplementedError('Task 4." in (folder / "minitorch_attn/functional/attention.py").read_text()
            softmax = (folder / SOFTMAX).read_text()
            assert "NotImplementedError('Task 2.2" in softmax and "NotImplementedError('Task 2.3" in softmax
            for held in (*TREE.manifest["held_out"], "tests/instructor", "minitorch_attn/homework/release_secret.txt"):
                assert not (folder / held).exists(), held
            solutions = markers.distinctive_lines(
                [r for regions in TREE.regions.values() for r in regions if int(r.task.split(".")[0]) >= 2]
            )
            lines = {line.strip() for path in folder.rglob("*.py") for line in path.read_text().splitlines()}
            assert solutions and not solutions & lines
        finally:
            grader.workspace.discard(folder)


def test_the_visible_run_holds_nothing_held_back(plain):
    leak = """
    import glob, inspect
    found = glob.glob('tests/instructor/*.py') + glob.glob('minitorch_attn/homework/mutants.json')
    raise RuntimeError('LEAK ' + ' '.join(open(f).read() for f in found) + inspect.getsource(LogSoftmax.forward))
    """
    shown = plain.visible(cheating(leak, base=Submission.stubs(TREE)), 2, 120, 60)
    text = "\n".join(c.message for run in shown.values() for c in run.checks)
    assert "LEAK" in text and "def test_" not in text and '"mutants"' not in text
    assert "NotImplementedError('Task 2.2" in text  # the other tasks are the student's own (stubs here)


HELD_BACK_LEAK = """
import glob, os
found = []
for pattern in ['tests/instructor/*.py', 'tests/instructor/*.pyc', {private!r} + '/tests/instructor/*.py',
                '/tmp/minitorch-attn-grading-*/*/tests/instructor/*.py', '/autograder/source/tests/instructor/*.py']:
    for name in glob.glob(pattern):
        try:
            found.append(open(name).read())
        except OSError as error:
            found.append(type(error).__name__)
raise RuntimeError('LEAK ' + str(os.path.isdir('tests/instructor')) + ' ' + ' '.join(found))
"""


def test_no_held_back_test_can_be_read(isolated, private_tree):
    """Neither in the copy the student's code runs in, nor in the grader's own copy, nor in
    the instructor's tree: its held-back tests run in a process the student's code is not in."""
    result = graded(isolated, cheating(HELD_BACK_LEAK.format(private=str(private_tree))))
    text = "\n".join(c.message for c in result.checks)
    assert result.score == 0 and "LEAK False" in text
    assert "def test_" not in text and "expect_close" not in text


OTHER_TASK_LEAK = """
import glob
texts = [open('minitorch_attn/functional/softmax.py').read()]
for name in glob.glob('/tmp/minitorch-attn-grading-*/*/minitorch_attn/functional/softmax.py'):
    try:
        texts.append(open(name).read())
    except OSError as error:
        texts.append(type(error).__name__)
begin = '# BEGIN SOLUTION ' + '2.2'   # not this region's own text
raise RuntimeError('LEAK ' + ' '.join(t.split(begin)[1].split('# END SOLUTION')[0] if begin in t else t for t in texts))
"""


@pytest.mark.parametrize("who", ["plain", "isolated"])
def test_another_task_s_reference_cannot_be_read(request, who):
    """Task 2.1's code reading task 2.2's region finds the student's own code (a stub
    here): the copy holds no reference of the assignment, and the grader's own copy is
    out of reach under the student's account. (As the grader's user, ``plain``, the
    grader's copy can be read: the README says so; only the copy is checked then.)"""
    grader = request.getfixturevalue(who)
    result = graded(grader, cheating(OTHER_TASK_LEAK, base=Submission.stubs(TREE)))
    text = "\n".join(c.message for c in result.checks)
    assert result.score == 0 and "LEAK" in text and "NotImplementedError('Task 2.2" in text
    distinctive = "y = z - lse_z"  # a line of the reference's log_softmax forward
    if who == "isolated":
        assert distinctive not in text
    else:  # the first region read is the copy's: the stub
        assert text.split("LEAK ")[1].lstrip().startswith("raise NotImplementedError('Task 2.2")


BORROW = "p = ctx.xp.exp(log_softmax(Tensor(x), dim).data)"  # softmax = exp(log_softmax), task 2.2's op


def test_calling_another_task_s_code_calls_the_student_s_own(plain):
    backward = REFERENCE.blocks[(SOFTMAX, "2.1")][1]
    assert graded(plain, cheating(BORROW, backward, base=Submission.stubs(TREE))).score == 0  # their 2.2: a stub
    assert graded(plain, cheating(BORROW, backward)).score == 30  # their 2.2 is right, and so softmax built on it


BORROW_LATER = """
from minitorch_attn.functional.attention import _attention_weights   # task 4.1's, a later assignment
rows = ctx.xp.moveaxis(x, dim, -1)
p = ctx.xp.moveaxis(_attention_weights(ctx.xp, None, rows, ctx.xp.eye(rows.shape[-1], dtype=x.dtype), 1.0, None,
                                       None), -1, dim)                # softmax(x @ I), the attention weights
"""


def test_a_later_assignment_s_code_is_the_stub_the_student_has(plain):
    result = graded(plain, cheating(BORROW_LATER, REFERENCE.blocks[(SOFTMAX, "2.1")][1]))
    assert result.score == 0 and "NotImplementedError: Task 4.1" in "\n".join(c.message for c in result.checks)


def test_student_code_has_no_network(isolated):
    if not sandbox.network_cut()[0]:
        pytest.skip(f"no network namespace for student code here: {sandbox.network_cut()[1]}")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        send = f"""
        import socket
        try:
            socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=2).sendall(b'stolen')
            said = 'SENT'
        except OSError as error:
            said = 'UNREACHABLE ' + str(error)
        raise RuntimeError(said)
        """
        result = graded(isolated, cheating(send))
        with pytest.raises(BlockingIOError):
            server.accept()  # no run of the student's code reached it
    text = "\n".join(c.message for c in result.checks)
    assert result.score == 0 and "UNREACHABLE" in text and "SENT" not in text


HOG = """
hog = []
while True:
    hog.append(bytearray(64 * 2 ** 20))
"""


def test_exhausting_memory_costs_only_its_own_task(plain):
    result = graded(plain, cheating(HOG, REFERENCE.blocks[(SOFTMAX, "2.1")][1]))
    text = "\n".join(c.message for c in result.checks)
    assert result.score == 0 and "MemoryError" in text
    assert f"at most {plain.confinement.memory >> 20} MB of memory" in text
    assert graded(plain, REFERENCE, task="2.2").score == 30


def test_the_remote_library_reads_replies_defensively():
    """A reply of the student's process is data of a known form, or the check fails."""
    import base64
    import io

    import numpy as np

    student = remote.Student(ROOT, sandbox.NONE)
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    pickled = base64.b64encode(buffer.getvalue()).decode()
    deep = 1
    for _ in range(remote.MAX_DEPTH + 2):
        deep = {"list": [deep]}
    for reply in (
        {"array": pickled},
        {"array": "not base64!"},
        {"tuple": [1], "list": [2]},
        {"ref": ["3", "x"]},
        {"function": "os.system"},
        deep,
    ):
        with pytest.raises(remote.StudentError):
            student._decode(reply)
    assert student._decode({"tuple": [1, "a" * 10_000, None]})[1] == "a" * remote.MAX_TEXT_CHARS
    buffer = io.BytesIO()
    np.save(buffer, np.arange(3.0))
    assert student._decode({"array": base64.b64encode(buffer.getvalue()).decode()}).tolist() == [0.0, 1.0, 2.0]


# ---- held-back inputs cannot be memorised --------------------------------------------------------------
def test_held_back_inputs_follow_the_secret_and_the_code():
    one = judge.seed("secret", "2.1", "code")
    assert one == judge.seed("secret", "2.1", "code")  # the same submission, the same grade
    assert (
        len(
            {
                one,
                judge.seed("other", "2.1", "code"),
                judge.seed("secret", "2.1", "code "),
                judge.seed("secret", "2.2", "code"),
            }
        )
        == 4
    )


# ---- never lose earned points -------------------------------------------------------------------------------
def test_a_hang_that_swallows_timeouts_costs_its_own_task_and_ends_in_time():
    hang = """
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass
    """
    with Grader(TREE) as grader:
        quick(grader)
        start = time.monotonic()
        hung = grader.grade_task(TASKS["2.1"], cheating(hang, REFERENCE.blocks[(SOFTMAX, "2.1")][1]), 8.0, 4.0)
        # the hang never ends by itself: ending at all proves the limits held. The bound is
        # its share (8 + 4 s) and room for starting its two runs on a machine other work
        # keeps busy (under load a run took 14 s to start and stop), not a timing to meet
        assert time.monotonic() - start < 5 * (8.0 + 4.0)
        earned = grader.grade_task(TASKS["2.2"], REFERENCE)  # the usual limits: its points must not hang on the load
    assert (hung.score, earned.score) == (0, 30)
    assert "stopped after" in "\n".join(c.message for c in hung.checks)


def test_a_flood_of_output_and_a_huge_message_are_capped(plain):
    flood = """
    import sys
    for _ in range(100):
        sys.stdout.write('x' * 1_000_000)
    raise AssertionError('y' * 30_000_000)
    """
    result = graded(plain, cheating(flood))
    assert result.score == 0
    assert max(len(c.message) for c in result.checks) <= 5_000
    results = gradescope_results(markers.assignment_by_number(TREE.manifest, 2), [result], 1.0)
    assert len(json.dumps(results)) < 200_000


def test_student_messages_are_capped_and_escaped():
    text = cap("a\x1b[2Jb\x00c\n\td" + "e" * 5000, 100)
    assert "\x1b" not in text and "\x00" not in text and "\n\td" in text and text.endswith("(cut at 100 characters)")


def test_results_json_is_written_after_each_task_and_kept_when_the_grader_is_stopped(tmp_path):
    """SIGTERM (the platform's limit) while task 2.2 hangs: 2.1's points stay in results.json,
    and the hanging process is killed with the grader."""
    tree = tmp_path / "student"
    shutil.copytree(ROOT / "minitorch_attn", tree / "minitorch_attn")
    pid_file = pathlib.Path("/tmp") / f"minitorch-attn-hang-{os.getpid()}"
    pid_file.unlink(missing_ok=True)
    path = tree / SOFTMAX
    hang = [
        "import os, sys",
        "if any('(task_2_2)' in a for a in sys.argv):   # task 2.2's run, not the visible one",
        f"    open({str(pid_file)!r} + '.part', 'w').write(str(__import__('os').getpid()))",
        f"    os.rename({str(pid_file)!r} + '.part', {str(pid_file)!r})",
        "    while True:",
        "        pass",
    ]
    forward, backward = REFERENCE.blocks[(SOFTMAX, "2.2")]
    from minitorch_attn.homework.instructor import splice

    path.write_text(splice(path.read_text(), markers.find_regions(path), "2.2", [hang + forward, backward]))
    results = tmp_path / "results.json"
    code = (
        "from minitorch_attn.stopping import stop_as_ctrl_c; stop_as_ctrl_c()\n"
        "from minitorch_attn.homework.results import grade_submission\n"
        f"grade_submission({str(tree)!r}, 2, {str(results)!r}, budget=400)\n"
    )
    grader = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        while not pid_file.exists():
            assert grader.poll() is None, "the grader ended before task 2.2 started"
            time.sleep(0.05)
        hanging = int(pid_file.read_text())
        grader.send_signal(signal.SIGTERM)
        grader.wait(timeout=60)
        written = json.loads(results.read_text())
        rows = {t["name"].split(":")[0]: t for t in written["tests"]}
        assert rows["Task 2.1"]["score"] == 30 and rows["Task 2.2"]["score"] == 0
        assert written["score"] == 30
        assert not _alive(hanging)
    finally:
        if grader.poll() is None:
            grader.kill()
        pid_file.unlink(missing_ok=True)


def test_a_python_with_pytorch_is_refused_when_isolation_is_required(monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("MINITORCH_ATTN_REQUIRE_ISOLATION", "1")
    with pytest.raises(GraderError, match="has torch.* \\(PyTorch\\)"):
        Grader(TREE)


def _alive(pid):
    """Whether ``pid`` is a running process (a zombie waiting to be reaped is not)."""
    for _ in range(200):  # SIGKILL is delivered at once; a reaper may take a moment
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in "ZX":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.05)
    return True


def test_a_student_grades_their_own_tree_without_held_back_tests(tmp_path):
    """In a student tree there is no held-back test and no reference: the public tests decide."""
    from minitorch_attn.homework.make import make

    make(tmp_path / "hw2", 2)
    with Grader(tmp_path / "hw2", budget=400) as grader:
        assert not grader.has_reference
        quick(grader)
        result = graded(grader, Submission.from_path(tmp_path / "hw2", grader.tree))
    assert result.score == 0 and result.checks and not any(c.held_back for c in result.checks)


# ---- the pieces, one by one ---------------------------------------------------------------------------------
def test_task_limits_share_the_budget_and_refuse_one_too_small():
    assert task_limits(600, 6, 60) == ((600 - 45) / 6, 46.25)
    assert task_limits(600, 2, 60)[1] == 60
    with pytest.raises(ValueError, match="too small for 5 runs"):
        task_limits(80, 5, 60)


def test_the_student_s_library_answers_in_a_process_of_its_own():
    """Calls, attributes and operators cross as requests; an error, a hang and an exit of
    the student's process each fail the check that asked, and the next check starts anew."""
    import numpy as np

    import minitorch_attn as mt

    student = remote.Student(ROOT, sandbox.NONE)
    try:
        student.begin(60)
        x = student.send(mt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True))
        ((x * x).sum() + 1).backward()
        assert x.grad.numpy().tolist() == [[0, 2, 4], [6, 8, 10]] and x.shape == (2, 3) and len(x) == 2
        assert [row.numpy().tolist() for row in x] == [[0, 1, 2], [3, 4, 5]] and x.grad is x.grad
        with pytest.raises(remote.StudentError, match=r"your code raised ValueError: .*dim 5.*\(at minitorch_attn/"):
            student.module("minitorch_attn.functional").softmax(x, dim=5)
        student.reset()
        student.begin(1)
        with pytest.raises(remote.StudentError, match="did not answer within the 1 s of this check"):
            student.module("time").sleep(30)
        with pytest.raises(remote.StudentError, match="stopped earlier in this check"):
            student.module("os")
        student.reset()
        student.begin(60)
        with pytest.raises(
            remote.StudentError,
            match=r"ended the student's process \(the process ended with exit "
            r"status 3\)",
        ):
            student.module("os")._exit(3)
        student.reset()
        student.begin(60)
        assert student.module("math").sqrt(4.0) == 2.0 and student.restarts == 2
        for _ in range(remote.MAX_STOPS_IN_A_ROW):  # code that ends the process in every check ...
            student.reset()
            student.begin(60)
            with pytest.raises(remote.StudentError, match="ended the student's process"):
                student.module("os")._exit(4)
        student.reset()
        student.begin(60)
        with pytest.raises(remote.StudentError, match="not run: the student's process was stopped in the 3 checks"):
            student.module("math")  # ... fails the next checks at once
    finally:
        student.close()


def test_a_kept_array_is_the_very_array_the_student_s_code_gets():
    """An array a check keeps in the student's process (``Student.keep``) is passed to their
    code as that array, and read back afterwards: did their code write into it?"""
    import numpy as np

    student = remote.Student(ROOT, sandbox.NONE)
    try:
        student.begin(60)
        kept = student.keep(np.arange(3.0))
        assert isinstance(kept, remote.Remote)
        student.module("numpy").multiply(kept, 2.0, out=kept)  # written in place there
        assert student.read(kept).tolist() == [0.0, 2.0, 4.0]
        sent = np.arange(3.0)
        student.module("numpy").multiply(sent, 2.0, out=sent)  # sent as data: a copy there
        assert sent.tolist() == [0.0, 1.0, 2.0]
    finally:
        student.close()


def test_a_task_without_held_back_tests_or_with_a_stray_one_is_a_grader_error():
    """A task's points must not rest on the public tests alone (their report is written by
    the student's process), and a test must run somewhere."""
    with Grader(TREE) as grader:
        grader._expected = {markers.marker_name(t): ["tests/test_functional.py::test_x"] for t in TASKS}
        with pytest.raises(GraderError, match="task 3.1 has no held-back test"):
            grader.grade(REFERENCE, 3)
        grader._expected["task_3_1"].append("tests/test_homework.py::test_y")
        with pytest.raises(GraderError, match="in a held-out file outside tests/instructor"):
            grader.expected("3.1")


def test_feedback_names_the_mistake_only_from_tagged_probes():
    """A diagnosis needs the probes of the task to show one catalogued signature exactly:
    no stub (an untagged failure), no crash of the run, no other task's signature."""
    from minitorch_attn.homework import probes
    from minitorch_attn.homework.grade import TaskResult
    from minitorch_attn.homework.results import describe
    from minitorch_attn.homework.runner import Check

    def probe(kind, outcome="passed", message=""):
        return Check(f"{probes.PROBES_FILE}::test_probe_3_1[{kind}]", outcome, message)

    known, _ = probes.load(ROOT)
    missing_xhat = [
        probe("mean"),
        probe("xhat", "failed", "differs [probe 3.1/xhat: c = -1]"),
        Check("tests/test_functional.py::t", "failed", "x"),
    ]
    name = "layer_norm backward without the x̂ mean(dx̂ x̂) term"
    assert probes.diagnose(known, "3.1", missing_xhat) == name
    assert probes.diagnose(known, "3.1", missing_xhat, problem="the run timed out") is None
    assert probes.diagnose(known, "3.2", missing_xhat) is None  # another task's signature
    assert (
        probes.diagnose(
            known,
            "3.1",
            [probe("mean", "failed", "NotImplementedError"), probe("xhat", "failed", "NotImplementedError")],
        )
        is None
    )  # a stub
    assert (
        probes.diagnose(
            known,
            "3.1",
            [probe("mean", "failed", "[probe 3.1/mean: c = -1]"), probe("xhat", "failed", "[probe 3.1/xhat: c = -1]")],
        )
        is None
    )  # no such mistake
    assert probes.diagnose(known, "3.1", [probe("mean"), probe("xhat", "failed", "[probe 3.1/xhat: c = -2]")]) is None
    assert probes.diagnose(known, "3.1", [probe("mean"), probe("xhat")]) is None  # correct code
    forged = [Check("tests/test_functional.py::t", "failed", "[probe 3.1/xhat: c = -1]")]
    assert probes.diagnose(known, "3.1", forged) is None  # a public check's message
    result = TaskResult("3.1", "layer_norm", 60, missing_xhat, diagnosis=name)
    assert f"The probes of this task name the mistake: {name}." in describe(result)
    assert "probes of this task" not in describe(result, public_only=True)


def test_the_preflight_reports_a_missing_library_in_results_json(tmp_path):
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    numpy>=2.0\n    no-such-library-here>=1\n")
    results = tmp_path / "results" / "results.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "minitorch_attn/homework/preflight.py"), str(results)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "no-such-library-here" in done.stderr and "Traceback" not in done.stderr
    written = json.loads(results.read_text())
    assert "score" not in written and written["tests"] == []
    assert "could not grade" in written["output"] and "no-such-library-here" in written["output"]


def test_what_the_student_account_left_in_shared_folders_is_removed(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root: files of another user")
    account = sandbox.student_account()
    for name in ("theirs.txt", "their-folder", "mine.txt"):
        path = tmp_path / name
        path.mkdir() if name.endswith("folder") else path.write_text("x")
        if not name.startswith("mine"):
            os.chown(path, *account)
    sandbox.remove_files_of(account, [str(tmp_path)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_every_folder_all_users_may_write_in_is_cleaned(tmp_path):
    # /run/lock is writable by all but no temporary folder: a file left there by one
    # grading's student code reached the next grading (a solution copied from another run)
    shared, private = tmp_path / "shared", tmp_path / "private"
    shared.mkdir(), private.mkdir()
    os.chmod(shared, 0o1777), os.chmod(private, 0o755)
    link = tmp_path / "link"
    link.symlink_to(shared)
    assert sandbox.shared_folders([str(shared), str(private), str(link), str(tmp_path / "absent")]) == [str(shared)]
    assert "/run/lock" in sandbox.SHARED_FOLDERS


def test_a_copy_handed_to_a_student_account_is_closed_to_every_other_user(tmp_path):
    # a concurrent grading (another student account) read this one's task tree, whose path
    # shows in /proc, and copied the student's solution from it
    if os.geteuid() != 0:
        pytest.skip("needs root: files of another user")
    account = sandbox.student_account()
    folder = tmp_path / "tree"
    (folder / "minitorch_attn").mkdir(parents=True)
    (folder / "minitorch_attn" / "softmax.py").write_text("x")
    sandbox.hand_over(folder, account)
    info = folder.stat()
    assert (info.st_uid, info.st_gid) == tuple(account) and info.st_mode & 0o777 == 0o700


def test_a_root_grader_refuses_what_it_cannot_isolate_and_says_the_command_that_fixes_it(monkeypatch):
    # student code read the references from a checkout others may read, and ran as root
    # where the student account could not run the virtual environment's Python: the grader
    # warned and graded; now it covers them, or refuses
    import tempfile

    with tempfile.TemporaryDirectory() as folder:  # pytest's own tmp_path is private to its user
        tree = pathlib.Path(folder) / "course" / "checkout"
        (tree / "minitorch_attn").mkdir(parents=True)
        solution = tree / "minitorch_attn" / "softmax.py"
        solution.write_text("reference")
        for path in (pathlib.Path(folder), tree.parent, tree, tree / "minitorch_attn"):
            os.chmod(path, 0o755)
        os.chmod(solution, 0o644)
        monkeypatch.setattr(hiding, "what_python_sees", lambda python: ({"torch": ["/x/torch"]}, []))
        libraries, unrunnable, readable = hiding.isolation_problems("/x/python", tree, [solution], (), None)
        assert "has torch (PyTorch)" in libraries and "setup.sh installs none" in libraries
        assert "cannot run under an account of its own" in unrunnable and "/usr/bin/python3 -m venv" in unrunnable
        assert "readable by other users" in readable and f"chmod 700 {tree}" in readable
        os.chmod(tree.parent, 0o700)
        monkeypatch.setattr(hiding, "what_python_sees", lambda python: ({}, []))
        assert hiding.isolation_problems("/x/python", tree, [solution], (), (1000, 1000)) == []
        # covered by a mount namespace, nothing is in reach whatever the modes
        os.chmod(tree.parent, 0o755)
        assert hiding.isolation_problems("/x/python", tree, [solution], (str(tree),), (1000, 1000)) == []


def test_hiding_covers_a_checkout_and_binds_back_the_python_inside_it(tmp_path):
    # a teacher's checkout holds the references and, often, the .venv the grader runs with:
    # the student's process must see the venv (minus PyTorch) and nothing else of it
    if not hiding.mount_namespaces():
        pytest.skip("the kernel gives this grader no mount namespace")
    root = tmp_path / "checkout"
    (root / "minitorch_attn").mkdir(parents=True)
    (root / "minitorch_attn" / "softmax.py").write_text("reference")
    site = root / ".venv" / "lib"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("torch")
    (site / "numpy.py").write_text("numpy")
    shared = pathlib.Path("/dev/shm") / f"minitorch-attn-test-{os.getpid()}"  # another grading's leftover
    shared.write_text("left by an earlier grading")
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child, as a student process would be before it becomes the student
        try:
            hiding.hide((str(root), str(site / "torch"), "/dev/shm"), (str(root / ".venv"),))
            seen = {
                "root": sorted(os.listdir(root)),
                "site": sorted(os.listdir(site)),
                "torch": os.listdir(site / "torch"),
                "numpy": (site / "numpy.py").read_text(),
                "shared": shared.exists(),
            }
            try:
                (root / "mine").write_text("x")
                seen["writable"] = True
            except OSError:
                seen["writable"] = False
            os.write(writable, json.dumps(seen).encode())
        finally:
            os._exit(0)
    os.close(writable)
    os.waitpid(pid, 0)
    seen = json.loads(os.read(readable, 100_000) or b"{}")
    shared.unlink()
    assert seen == {
        "root": [".venv"],
        "site": ["numpy.py", "torch"],
        "torch": [],
        "numpy": "numpy",
        "shared": False,
        "writable": False,
    }
    assert (root / "minitorch_attn" / "softmax.py").read_text() == "reference"  # outside, nothing changed


def test_the_plan_hides_every_folder_of_the_machine_but_the_systems_and_keeps_the_python(student_python):
    # a teacher's machine held other copies of the references (worktrees, scratch copies in
    # /tmp) and other environments with PyTorch: only the checkout and one environment's
    # libraries were covered, and a student read the reference from a worktree
    hidden, kept = hiding.plan(student_python, ())
    tops = {path for path in hidden if path.count("/") == 1}
    assert {"/tmp", "/root"} <= tops and not tops & {f"/{name}" for name in hiding.VISIBLE}
    assert (
        os.path.realpath(pathlib.Path(student_python).parent.parent) in kept
        or any(os.path.realpath(student_python).startswith(k + "/") for k in kept)
        or "/tmp" not in tops
    )


def test_a_region_that_does_not_compile_for_any_reason_is_that_task_s_zero():
    # 200,000 additions made compile() raise RecursionError, which stopped the whole grading
    from minitorch_attn.homework.instructor import SubmissionProblem

    for text in ["x = " + "1+" * 200_000 + "1", "x = 1\0"]:
        with pytest.raises(SubmissionProblem, match="task 2.1"):
            Grader._compile({"softmax.py": text}, "2.1")


def test_the_grader_reads_no_named_pipe_left_where_its_report_goes(tmp_path):
    # student code put a FIFO in place of the report: the root grader's read blocked for ever
    fifo = tmp_path / ".grading-report.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        sandbox.open_private(fifo)


def test_a_python_behind_a_private_folder_is_not_reachable_through_its_link(tmp_path):
    # venv/bin/python links to /usr/bin/python3, but a private folder above the venv stops
    # the student's account on the way: it was judged reachable, and the run crashed
    private = tmp_path / "private"
    (private / "venv" / "bin").mkdir(parents=True)
    link = private / "venv" / "bin" / "python"
    link.symlink_to(os.path.realpath(sys.executable))
    for folder in (tmp_path, private / "venv", private / "venv" / "bin"):
        os.chmod(folder, 0o755)
    os.chmod(private, 0o700)
    assert not sandbox.reachable(link)


def test_no_held_out_test_reaches_the_student_s_copy_as_bytecode():
    from minitorch_attn.homework.instructor import Workspace

    with Workspace(TREE) as workspace:
        folder = workspace.graded_base(TREE.tasks_of(2))
        compiled = {p.name.split(".")[0] for p in (folder / "tests").rglob("*.pyc")}
    held_out = {pathlib.Path(p).stem for p in TREE.manifest["held_out"]}
    assert compiled and not compiled & held_out


@pytest.fixture(scope="module")
def readable_tree(tmp_path_factory):
    """A copy of the instructor's tree that every user may read (a teacher's checkout)."""
    import tempfile

    folder = pathlib.Path(tempfile.mkdtemp(prefix="minitorch-attn-readable-")) / "checkout"
    for name in ("minitorch_attn", "tests", "gradcheck", "setup.cfg", "pyproject.toml"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, folder / name)
    for path in [folder.parent, folder, *folder.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    yield folder
    shutil.rmtree(folder.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def covered(readable_tree, student_python):
    if not hiding.mount_namespaces():
        pytest.skip("the kernel gives this grader no mount namespace: it refuses instead (tested above)")
    with Grader(readable_tree, budget=400, python=student_python, require_isolation=True) as grader:
        assert any(str(readable_tree).startswith(h + "/") for h in grader.confinement.hidden), grader.isolation
        yield quick(grader)


def test_a_student_who_opens_the_reference_file_gets_nothing(covered, readable_tree):
    steal = f"""
    import os, textwrap
    path = {str(readable_tree / SOFTMAX)!r}
    seen = os.listdir({str(readable_tree)!r})
    code = open(path).read().split('# BEGIN SOLUTION 2.1')[1].split('# END SOLUTION')[0]
    scope = dict(globals(), ctx=ctx, x=x, dim=dim)
    exec(textwrap.dedent(code), scope)
    p = scope['p']
    """
    result = graded(covered, cheating(steal, REFERENCE.blocks[(SOFTMAX, "2.1")][1]))  # the backward is theirs
    text = "\n".join(c.message for c in result.failures)
    assert result.score == 0 and "FileNotFoundError" in text and "def " not in text


TORCH_CHEAT = """
import sys
{unguard}
import torch
t = torch.from_numpy(x.copy()).requires_grad_(True)
p = torch.softmax(t, dim).detach().numpy()
"""


@pytest.mark.parametrize(
    "unguard", ["", "sys.meta_path[:] = [f for f in sys.meta_path if 'NoReference' not in repr(f)]"]
)
def test_a_student_who_imports_torch_gets_nothing(request, unguard):
    pytest.importorskip("torch")  # the grader's environment has it: the student's process must not
    who = "covered" if unguard else "plain"
    result = graded(
        request.getfixturevalue(who),
        cheating(TORCH_CHEAT.format(unguard=unguard), REFERENCE.blocks[(SOFTMAX, "2.1")][1]),
    )
    text = "\n".join(c.message for c in result.failures)
    assert result.score == 0  # with torch in reach, this forward and the reference backward earn the points
    assert (
        ("graded code may not import a library" in text)
        if not unguard
        else ("module 'torch' has no attribute 'from_numpy'" in text)
    )


def test_graders_at_the_same_time_get_accounts_of_their_own():
    """Each grader kills every process of its student account: two graders on one machine
    (a shared CI host) must not share one."""
    if os.geteuid() != 0:
        pytest.skip("needs root: student accounts")
    mine = sandbox.student_account()
    code = "from minitorch_attn.homework import sandbox; print(sandbox.student_account()[0])"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert int(other.stdout) != mine[0] and sandbox.student_account() == mine
