"""Run a student's code in a process of its own, and leave nothing of it behind.

What :func:`run` does for each command the grader runs on a student's code:

* **another user.** When the grader is root (as on Gradescope), the command runs as the
  unprivileged account ``STUDENT_USER`` (made with ``useradd`` when missing), with no
  supplementary groups, in a scratch folder it owns. It cannot write outside that folder
  and ``/tmp``, cannot signal the grader, and cannot read what only root can read (the
  grader makes the instructor's tree, the release secret and its own copies readable by
  root only). When the grader is not root there is no other user to switch to: the command
  runs as the grader's user, and only the rest of this list holds.
* **its own session**, stdin closed, a minimal environment (no ``PYTEST_ADDOPTS``, no
  ``PYTHONPATH``), a cap on the size of every file it writes (``RLIMIT_FSIZE``), no core
  files, a cap on its number of processes (under the student account), and the parent-death
  signal: if the grader is killed, the command is killed with it.
* **a time limit** for the whole command; its output goes to an unnamed file of the
  grader's, of which only the last ``TAIL_BYTES`` are read back. The files it leaves that the
  grader reads (a report, probe values) are read after every process of it has ended, and
  never through a symbolic link.
* **nothing left behind**: when the command ends (or is stopped, or the grader is
  interrupted), its process group is killed; the grader is a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so processes that left the group with ``setsid()`` are
  re-parented to it and are killed too; under the student account, a helper that becomes
  that user calls ``kill(-1, SIGKILL)``, which ends every process of that user, wherever it
  is, and what that user left in ``/tmp``, ``/var/tmp`` and ``/dev/shm`` is removed. The
  scratch folder is the caller's to remove.

The verdicts never come from these processes: see :mod:`.probes` and :mod:`.grade`.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import pathlib
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

STUDENT_USER = "minitorch-student"
MAX_FILE_BYTES = 64 * 2 ** 20        # any file the student's code writes, its output included
MAX_PROCESSES = 256                  # under the student account
TAIL_BYTES = 20_000                  # of the output, read back
KEPT_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


@dataclasses.dataclass
class Finished:
    """How a command ended: its exit status, why it was stopped (None when it ended by
    itself) and the end of its output."""

    returncode: int
    stopped: str | None
    tail: str


def student_account():
    """``(uid, gid)`` of the account that runs student code, or None when the grader is not
    root. Creates the account (a system user without a home or a shell) when it is missing.

    Raises:
        OSError: root, but the account cannot be made (no ``useradd``).
    """
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(STUDENT_USER)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        done = subprocess.run([useradd, "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/usr/sbin/nologin", STUDENT_USER], capture_output=True, text=True)
        if done.returncode not in (0, 9):   # 9: made meanwhile by another grader
            raise OSError(f"cannot create the user {STUDENT_USER} that runs student code: {done.stderr.strip()}")
        entry = pwd.getpwnam(STUDENT_USER)
    return entry.pw_uid, entry.pw_gid


def reachable(path):
    """Whether any user may run the program at ``path`` (it and every folder above it can be
    entered and read by others): the student's account needs its Python."""
    path = pathlib.Path(os.path.realpath(path))
    if not path.is_file() or path.stat().st_mode & 0o005 != 0o005:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in path.parents)


def finds(python, module):
    """Whether ``python`` can import ``module`` (looked up, not imported)."""
    check = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is not None)"
    return subprocess.run([python, "-c", check], capture_output=True).returncode == 1


def hand_over(folder, account):
    """Give ``folder`` and all it holds to ``account`` (nothing to do when it is None)."""
    if account is None:
        return
    uid, gid = account
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, uid, gid)


def run(command, folder, limit, account, environment=None):
    """Run ``command`` (a list) in ``folder`` as described in the module docstring; returns
    a :class:`Finished`. Its stdout and stderr go to an unnamed file of the grader's (the
    student's code can neither replace it nor point it elsewhere)."""
    _become_subreaper()
    folder = pathlib.Path(folder)
    env = {k: os.environ[k] for k in KEPT_ENVIRONMENT if k in os.environ}
    env.update({"HOME": str(folder), "TMPDIR": str(folder), "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    env.update(environment or {})
    before = set(_descendants())
    with tempfile.TemporaryFile() as sink:
        process = subprocess.Popen(command, cwd=folder, stdin=subprocess.DEVNULL, stdout=sink,
                                   stderr=subprocess.STDOUT, env=env, preexec_fn=_child_setup(account))
        stopped = None
        try:
            try:
                process.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                stopped = f"stopped after {limit:g} s (the time limit of this run)"
        finally:
            clean_up(process, account, before)
        return Finished(process.returncode, stopped, read_tail(sink))


def read_tail(file, size=TAIL_BYTES):
    """The last ``size`` bytes of an open binary file as text (never the whole of a huge one)."""
    file.seek(0, os.SEEK_END)
    file.seek(max(0, file.tell() - size))
    return file.read(size).decode("utf-8", errors="replace")


def open_private(path):
    """``path`` opened for reading without following a symbolic link (one that student code
    left where the grader reads would make it read another file with its own rights)."""
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")


def clean_up(process, account, before=()):
    """Kill ``process``'s group, every new descendant of the grader and (under the student
    account) every process of that account; wait for what is the grader's to reap."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if account is not None:
        kill_account(account)
        remove_files_of(account)
    for _ in range(3):   # a process that forks while we look: look again
        left = [pid for pid in _descendants() if pid not in before]
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in left:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)   # re-parented to the grader (the subreaper): reap it
        if not left:
            break
    process.wait()


def kill_account(account):
    """End every process of ``account``: a helper becomes that user and calls
    ``kill(-1, SIGKILL)`` (every process it may signal, that is every one of that user)."""
    uid, gid = account
    for _ in range(3):
        pid = os.fork()
        if pid == 0:   # the helper: never returns
            try:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)   # every process of the user except the caller itself
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


def remove_files_of(account, folders=SHARED_FOLDERS):
    """Remove what ``account`` left at the top of the folders every user may write in
    (``/tmp``, ``/var/tmp``, ``/dev/shm``), so that nothing of one grading reaches the next."""
    for folder in folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != account[0]:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)


def _child_setup(account):
    """What the child does between fork and exec (see the module docstring)."""
    def setup():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if account is not None:
            uid, gid = account
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # after setuid, which clears it
    return setup


def _prctl(option, value):
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


_subreaper = False


def _become_subreaper():
    global _subreaper
    if not _subreaper:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _subreaper = True


def _descendants(root=None):
    """Process ids of every descendant of ``root`` (default: this process), from /proc."""
    root = os.getpid() if root is None else root
    children = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    with open(f"/proc/{name}/stat") as stat:
                        parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                    children.setdefault(parent, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
