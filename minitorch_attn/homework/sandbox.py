"""Run a student's code in a process of its own, and leave nothing of it behind.

What :func:`start` (and :func:`run`, which waits for it) does for each command the grader
runs on a student's code, as told by a :class:`Confinement`:

* **another user.** When the grader is root (as on Gradescope), the command runs as the
  unprivileged account ``STUDENT_USER`` (made with ``useradd`` when missing; a grader that
  runs beside another on one machine gets another, :func:`student_account`), with no
  supplementary groups, in a scratch folder it owns. It cannot write outside that folder
  and ``/tmp``, cannot signal the grader, and cannot read what only root can read (the
  grader makes the instructor's tree, the release secret and its own copies readable by
  root only). When the grader is not root there is no other user to switch to: the command
  runs as the grader's user, and only the rest of this list holds.
* **nothing of the instructor's, no reference library** (:mod:`.hiding`): a mount namespace
  that covers the instructor's checkout and PyTorch's (and its peers') folders, when root
  may make one, and a guard that refuses their import in every case.
* **no network**, when the grader is root on Linux and the kernel lets it: the command
  runs in a network namespace of its own (``unshare(CLONE_NEWNET)`` before the switch of
  user), which has only a loopback device, down: no address, no route, no name lookup.
  Where ``unshare`` is refused (a container without ``CAP_SYS_ADMIN``) or the grader is not
  root, the network is as the grader's: :func:`network_cut` says which, and why.
* **a memory cap** per process (``RLIMIT_DATA``: heap, anonymous mappings and stacks): an
  allocation past it raises ``MemoryError`` in the student's code, or ends its process,
  and costs that run only. It is per process: a command that starts many processes may
  use the cap in each (their number is capped under the student account).
* **its own session**, stdin closed, a minimal environment (no ``PYTEST_ADDOPTS``, no
  ``PYTHONPATH``), a cap on the size of every file it writes (``RLIMIT_FSIZE``), no core
  files, a cap on its number of processes (under the student account), and the parent-death
  signal: if the grader is killed, the command is killed with it.
* **a time limit** for the whole command; its output goes to an unnamed file of the
  grader's, of which only the last ``TAIL_BYTES`` are read back. The files it leaves that the
  grader reads are read after every process of it has ended, and never through a symbolic
  link.
* **nothing left behind**: when the command ends (or is stopped, or the grader is
  interrupted), its process group is killed; the grader is a child subreaper
  (``PR_SET_CHILD_SUBREAPER``), so processes that left the group with ``setsid()`` are
  re-parented to it and are killed too; under the student account, a helper that becomes
  that user calls ``kill(-1, SIGKILL)``, which ends every process of that user, wherever it
  is, and what that user left in ``/tmp``, ``/var/tmp`` and ``/dev/shm`` is removed. The
  scratch folder is the caller's to remove.

The verdicts never come from these processes: see :mod:`.judge` and :mod:`.grade`.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import fcntl
import os
import pathlib
import pwd
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

from . import hiding
from .leftovers import SHARED_FOLDERS, remove_files_of, shared_folders  # noqa: F401 (re-exported)

STUDENT_USER = "minitorch-student"
MAX_ACCOUNTS = 8  # graders at the same time on one machine, each with an account of its own
ACCOUNT_LOCKS = "/run/minitorch-attn" if os.path.isdir("/run") else "/var/run/minitorch-attn"
MAX_FILE_BYTES = 64 * 2**20  # any file the student's code writes, its output included
MAX_PROCESSES = 256  # under the student account
TAIL_BYTES = 20_000  # of the output, read back
KEPT_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")
# Memory: Gradescope's default container has 768 MB; the grader, and the trusted process that
# judges the held-back checks beside a student's process, keep GRADER_MEMORY_MB of it.
PLATFORM_MEMORY_MB = 768
GRADER_MEMORY_MB = 256
MIN_STUDENT_MEMORY_MB = 128  # numpy, pytest and the library need about 110 MB of address space

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
CLONE_NEWNET = 0x40000000


@dataclasses.dataclass(frozen=True)
class Confinement:
    """What a student's process runs under: ``account`` (``(uid, gid)``, or None for the
    grader's own user), ``memory`` (bytes of ``RLIMIT_DATA`` per process, or None) and
    ``cut_network`` (a network namespace of its own). ``why`` says, in words, what is and is
    not confined (for the grader's output). :meth:`of` chooses them for the machine."""

    account: tuple | None = None
    memory: int | None = None
    cut_network: bool = False
    why: str = ""
    hidden: tuple = ()  # folders covered in its mount namespace, and those bound back (:mod:`.hiding`)
    kept: tuple = ()
    guard: str | None = None  # the folder of the guard against reference libraries (:func:`.hiding.guard_folder`)

    @classmethod
    def of(cls, python, platform_memory_mb=PLATFORM_MEMORY_MB, private=()):
        """The confinement this machine allows, for student code run by ``python``, with a
        memory cap of ``platform_memory_mb - GRADER_MEMORY_MB`` (see :func:`student_memory`),
        ``private`` (the instructor's checkout) and the reference libraries out of reach
        (:mod:`.hiding`)."""
        memory = student_memory(platform_memory_mb)
        try:
            account = student_account()
        except OSError as error:
            account, who = None, str(error)
        else:
            who = "the grader is not root, so there is no other user to run it as"
        if account is not None and not reachable(python):
            account, who = None, f"{python} cannot be run by another user (a folder above it is private)"
        cut, no_cut = network_cut()
        hidden, kept = (), ()
        if account is not None and hiding.mount_namespaces():
            with contextlib.suppress(OSError):  # a Python that cannot say what it imports: nothing covered
                hidden, kept = hiding.plan(python, private)
        parts = [
            f"student code ran as the user {pwd.getpwuid(account[0]).pw_name}"
            if account is not None
            else f"student code ran as the grader's own user: {who}",
            "without network" if cut else f"with the grader's network ({no_cut})",
            f"with at most {memory >> 20} MB of memory per process",
            "with only the system's folders and its own in sight (no file of the instructor's, no reference library)"
            if hidden
            else "with reference libraries refused at import",
        ]
        return cls(account, memory, cut, "; ".join(parts), hidden, kept, hiding.guard_folder())

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        data = dict(data, account=tuple(data["account"]) if data["account"] else None)
        return cls(**{**data, "hidden": tuple(data.get("hidden", ())), "kept": tuple(data.get("kept", ()))})


NONE = Confinement()  # the grader's own user, no caps beyond the always-on ones (for trusted commands)


@dataclasses.dataclass
class Finished:
    """How a command ended: its exit status, why it was stopped (None when it ended by
    itself) and the end of its output."""

    returncode: int
    stopped: str | None
    tail: str

    def crash(self, memory=None):
        """A sentence saying how the command ended, for a run that did not finish its work:
        the time limit, else the exit status (naming the memory cap, when it may be why)."""
        if self.stopped:
            return self.stopped
        said = f"the process ended with exit status {self.returncode}"
        if self.returncode < 0:
            with contextlib.suppress(ValueError):
                said = f"the process was ended by {signal.Signals(-self.returncode).name}"
        if memory and (
            "MemoryError" in self.tail or self.returncode in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGKILL)
        ):
            said += f" (student code may use at most {memory >> 20} MB of memory per process)"
        return said


def student_memory(platform_memory_mb=PLATFORM_MEMORY_MB):
    """Bytes of memory each process of student code may use: the platform's memory less
    ``GRADER_MEMORY_MB`` for the grader.

    Raises:
        ValueError: a platform memory that leaves less than ``MIN_STUDENT_MEMORY_MB``.
    """
    memory_mb = platform_memory_mb - GRADER_MEMORY_MB
    if memory_mb < MIN_STUDENT_MEMORY_MB:
        raise ValueError(
            f"a platform memory of {platform_memory_mb:g} MB leaves {memory_mb:g} MB for student code: "
            f"give at least {GRADER_MEMORY_MB + MIN_STUDENT_MEMORY_MB} MB"
        )
    return int(memory_mb * 2**20)


def student_account():
    """``(uid, gid)`` of the account that runs this grader's student code, or None when the
    grader is not root. Graders that run at the same time on one machine (a shared CI host)
    each get an account of their own, ``STUDENT_USER`` then ``STUDENT_USER-2`` and so on up to
    ``MAX_ACCOUNTS``: each holds a lock on its account (a file of a folder only root may
    write, ``ACCOUNT_LOCKS``) for as long as its process lives, so that killing every process
    of its account never kills another grader's. Creates the account (a system user without
    a home or a shell) when it is missing; waits for the first one when all are taken.

    Raises:
        OSError: root, but the account cannot be made (no ``useradd``), or the lock folder
            is not root's own.
    """
    global _account
    if os.geteuid() != 0:
        return None
    if _account is None:
        folder = pathlib.Path(ACCOUNT_LOCKS)
        folder.mkdir(mode=0o700, exist_ok=True)
        state = folder.lstat()
        if not stat.S_ISDIR(state.st_mode) or state.st_uid != 0 or state.st_mode & 0o022:
            raise OSError(f"{folder} is not a folder that only root may write: student code cannot get an account")
        names = [STUDENT_USER] + [f"{STUDENT_USER}-{n}" for n in range(2, MAX_ACCOUNTS + 1)]
        for blocking, name in [(False, name) for name in names] + [(True, names[0])]:
            lock = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(lock)
                continue
            _account = (_make_account(name), lock)
            break
    return _account[0]


_account = None  # ((uid, gid), the lock's file descriptor) of this process's student account


def _make_account(name):
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        done = subprocess.run(
            [
                useradd,
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                name,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode not in (0, 9):  # 9: made meanwhile by another grader
            raise OSError(f"cannot create the user {name} that runs student code: {done.stderr.strip()}") from None
        entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def reachable(path):
    """Whether any user may run the program at ``path`` (it and every folder above it can be
    entered and read by others): the student's account needs its Python."""
    real = pathlib.Path(os.path.realpath(path))
    if not real.is_file() or real.stat().st_mode & 0o005 != 0o005:
        return False
    given = pathlib.Path(os.path.abspath(path))  # a link's own folders are walked too (a venv's bin/python)
    return all(parent.stat().st_mode & 0o001 for parent in {*real.parents, *given.parents})


def hand_over(folder, account):
    """Give ``folder`` and all it holds to ``account``, and close ``folder`` to every other
    user (mode 0700): another grading running at the same time, under another student
    account, must not read this one's copy and so copy a student's code (nothing to do when
    ``account`` is None)."""
    if account is None:
        return
    uid, gid = account
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, uid, gid)
    os.chmod(folder, 0o700)


def network_cut():
    """``(True, "")`` when student code can run in a network namespace of its own, else
    ``(False, why not)``. Asked once, by a child that tries ``unshare(CLONE_NEWNET)``."""
    global _network
    if _network is None:
        if not sys.platform.startswith("linux"):
            _network = (False, "network namespaces are Linux's")
        elif os.geteuid() != 0:
            _network = (False, "the grader is not root, so it cannot give student code a network namespace")
        else:
            code = hiding.refused(CLONE_NEWNET)
            _network = (
                (True, "")
                if code == 0
                else (False, f"unshare(CLONE_NEWNET) is refused here: {os.strerror(code) if code > 0 else code}")
            )
    return _network


_network = None


class Started:
    """A command started by :func:`start`: ``process`` (a ``subprocess.Popen``), until
    :meth:`finish` waits for it and removes everything it left."""

    def __init__(self, process, sink, before, accounts, memory):
        self.process, self._sink, self._before, self._accounts, self._memory = process, sink, before, accounts, memory

    def finish(self, limit=None):
        """Wait up to ``limit`` seconds (None: do not wait), then end the command and every
        process it started; returns a :class:`Finished`."""
        stopped = None
        try:
            if limit is not None:
                try:
                    self.process.wait(timeout=limit)
                except subprocess.TimeoutExpired:
                    stopped = f"stopped after {limit:g} s (the time limit of this run)"
            elif self.process.poll() is None:
                stopped = "stopped by the grader"
        finally:
            for account in self._accounts:
                clean_up(self.process, account, self._before)
            if not self._accounts:
                clean_up(self.process, None, self._before)
            tail = read_tail(self._sink)
            self._sink.close()
        return Finished(self.process.returncode, stopped, tail)

    def output(self):
        """The end of what the command wrote so far."""
        return read_tail(self._sink)


def start(command, folder, confinement=NONE, environment=None, pass_fds=(), also_clean=None):
    """Start ``command`` (a list) in ``folder`` under ``confinement``, as described in the
    module docstring; returns a :class:`Started`. Its stdout and stderr go to an unnamed file
    of the grader's (the student's code can neither replace it nor point it elsewhere);
    ``pass_fds`` are left open in it. ``also_clean``: another account whose processes and
    files are removed when it finishes (a trusted command that starts student code)."""
    _become_subreaper()
    folder = pathlib.Path(folder)
    env = {k: os.environ[k] for k in KEPT_ENVIRONMENT if k in os.environ}
    env.update(
        {
            "HOME": str(folder),
            "TMPDIR": str(folder),
            "PYTHONNOUSERSITE": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
    )
    if confinement.guard:
        env["PYTHONPATH"] = confinement.guard
    env.update(environment or {})
    before = set(_descendants())
    sink = tempfile.TemporaryFile()
    try:
        process = subprocess.Popen(
            command,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=pass_fds,
            preexec_fn=_child_setup(confinement, folder),
        )
    except BaseException:
        sink.close()
        raise
    accounts = [a for a in dict.fromkeys([confinement.account, also_clean]) if a is not None]
    return Started(process, sink, before, accounts, confinement.memory)


def run(command, folder, limit, confinement=NONE, environment=None, also_clean=None):
    """Run ``command`` as :func:`start` does and wait for it, at most ``limit`` seconds;
    returns a :class:`Finished`."""
    started = start(command, folder, confinement, environment, also_clean=also_clean)
    try:
        return started.finish(limit)
    except BaseException:
        if started.process.returncode is None:
            started.finish()
        raise


def read_tail(file, size=TAIL_BYTES):
    """The last ``size`` bytes of an open binary file as text (never the whole of a huge one)."""
    file.seek(0, os.SEEK_END)
    file.seek(max(0, file.tell() - size))
    return file.read(size).decode("utf-8", errors="replace")


def open_private(path):
    """``path`` opened for reading without following a symbolic link (one that student code
    left where the grader reads would make it read another file with its own rights), and
    only when it is a regular file: a named pipe put there would block the grader's read
    for ever. Raises OSError otherwise."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(f"{path} is not a regular file")
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def clean_up(process, account, before=()):
    """Kill ``process``'s group, every new descendant of the grader and (under the student
    account) every process of that account; wait for what is the grader's to reap."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if account is not None:
        kill_account(account)
        remove_files_of(account)
    for _ in range(3):  # a process that forks while we look: look again
        left = [pid for pid in _descendants() if pid not in before]
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in left:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)  # re-parented to the grader (the subreaper): reap it
        if not left:
            break
    process.wait()


def kill_account(account):
    """End every process of ``account``: a helper becomes that user and calls
    ``kill(-1, SIGKILL)`` (every process it may signal, that is every one of that user)."""
    uid, gid = account
    for _ in range(3):
        pid = os.fork()
        if pid == 0:  # the helper: never returns
            try:
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)  # every process of the user except the caller itself
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


def _child_setup(confinement, folder):
    """What the child does between fork and exec (see the module docstring)."""

    def setup():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if confinement.memory is not None:
            resource.setrlimit(resource.RLIMIT_DATA, (confinement.memory, confinement.memory))
        if confinement.cut_network:
            hiding.unshare(CLONE_NEWNET)  # before the switch of user: it needs root
        if confinement.hidden:  # likewise; the folder it runs in and the guard stay in sight
            hiding.hide(confinement.hidden, (*confinement.kept, str(folder), confinement.guard or "/"))
        if confinement.account is not None:
            uid, gid = confinement.account
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it

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
