"""What student code must not reach: the instructor's files and the reference libraries.

A task earns its points only for code that computes the right values itself. Two things on
the grader's machine would compute them for it: the instructor's checkout (every reference
solution, readable by other users in a teacher's home folder) and a library that has the
same operations with their gradients (PyTorch, JAX, ...: CI's and many teachers'
environments have one). The sandbox (:mod:`.sandbox`) keeps both out of every student
process, in two layers:

* **the files are not there.** When the grader is root on Linux and the kernel allows it,
  each student process starts in mount and IPC namespaces of its own (``unshare``, before
  the switch to the student's account, which cannot undo it) where every folder at the top
  of the file system but the system's own (``VISIBLE``: ``/usr``, ``/etc``, ``/dev``,
  ``/proc``, ``/sys``, ...) is an empty read-only ``tmpfs``, and ``/tmp`` and ``/dev/shm``
  empty private ones (:func:`plan`, :func:`hide`): no copy of a reference anywhere on the
  machine is in sight (the instructor's checkout, a worktree of it, a scratch copy), nor
  what an earlier grading left. Only the folder the process runs in, the guard's, and the
  folders its Python runs from are bound back in, with every folder of a reference library
  that Python could import covered again.
* **the import fails at once, with a reason.** Every student process starts with a guard
  (a ``sitecustomize`` module on its ``PYTHONPATH``, :func:`guard_folder`) that makes
  ``import torch`` (and the others of ``REFERENCE_LIBRARIES``) raise ``ModuleNotFoundError``
  saying why. This layer also holds where the first cannot (a grader that is not root):
  there it keeps a student's own grade equal to the autograder's, whose Python has none of
  these libraries, but a process running as the grader's own user could remove it.

Where the first layer cannot be had and the grading must be isolated (``run_autograder``;
``homework grade`` run as root), :func:`isolation_problems` says what is left in reach, and
the grader refuses (:class:`~minitorch_attn.homework.instructor.GraderError`) with the one
command that fixes it.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

REFERENCE_LIBRARIES = (
    "torch",
    "functorch",
    "torchgen",
    "jax",
    "jaxlib",
    "flax",
    "tensorflow",
    "keras",
    "autograd",
    "mxnet",
    "paddle",
    "mlx",
    "chainer",
    "tinygrad",
    "micrograd",
    "minitorch",
    "theano",
    "aesara",
    "pytensor",
    "mygrad",
    "tangent",
    "thunder",
    "nnabla",
    "dynet",
    "sympy",
)
"""Top-level modules that compute the tasks' forward and backward passes for the student."""

GUARD = '''"""Run by the minitorch-attn grader before student code: no reference library may be imported."""
import sys


class NoReferenceLibrary:
    BLOCKED = frozenset({blocked!r})

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.BLOCKED:
            raise ModuleNotFoundError(
                f"No module named {{name!r}}: graded code may not import a library that computes what the tasks "
                f"ask (torch, jax, autograd, ...); the autograder has none. Write it with the array namespace",
                name=name)
        return None


sys.meta_path.insert(0, NoReferenceLibrary())
'''

CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
VISIBLE = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc", "sys"}
"""What stays in sight at the top of the file system: what programs run with, nothing of a user's."""
WRITABLE = ("/tmp", "/var/tmp", "/dev/shm")
"""Folders every user may write in: each student process gets empty ones of its own."""
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18


def guard_folder():
    """A folder with the guard's ``sitecustomize.py`` (see the module docstring), made once per
    grader in ``/tmp``, readable by every user and writable by the grader only; removed at exit."""
    global _guard
    if _guard is None:
        folder = tempfile.mkdtemp(prefix="minitorch-attn-guard-")
        (pathlib.Path(folder) / "sitecustomize.py").write_text(GUARD.format(blocked=sorted(REFERENCE_LIBRARIES)))
        os.chmod(pathlib.Path(folder) / "sitecustomize.py", 0o644)
        os.chmod(folder, 0o755)
        atexit.register(shutil.rmtree, folder, True)
        _guard = folder
    return _guard


_guard = None


def mount_namespaces():
    """Whether this process may give a child a mount namespace of its own (root on Linux,
    with ``CAP_SYS_ADMIN``; a container usually refuses). Asked once (:func:`refused`)."""
    global _namespaces
    if _namespaces is None:
        _namespaces = (
            sys.platform.startswith("linux") and os.geteuid() == 0 and refused(CLONE_NEWNS | CLONE_NEWIPC) == 0
        )
    return _namespaces


def refused(flags):
    """0 when a child of this process may ``unshare(flags)``, else the errno of the refusal
    (asked by a child that tries, so this process keeps its namespaces)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            unshare(flags)
            code = 0
        except OSError as error:
            code = min(error.errno or 1, 255)
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


_namespaces = None


def what_python_sees(python):
    """``({reference library: [its folders or file]}, [folders python runs from])`` as
    ``python`` reports them (its prefixes, its executable's folder, its module search path); the
    libraries are found, not imported."""
    script = (
        "import importlib.util, json, os, sys\n"
        "found = {}\n"
        f"for name in {list(REFERENCE_LIBRARIES)!r}:\n"
        "    spec = importlib.util.find_spec(name)\n"
        "    if spec is not None:\n"
        "        found[name] = [os.path.realpath(p) for p in spec.submodule_search_locations or [spec.origin] if p]\n"
        "own = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), "
        "*vars(sys)['path'][1:]]\n"
        "print(json.dumps([found, [os.path.realpath(p) for p in own if p and os.path.isabs(p)]]))"
    )
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, cwd="/", env={"PATH": os.defpath})
    if done.returncode != 0:
        raise OSError(f"{python} could not say what it imports: {done.stderr.strip()[-300:]}")
    found, own = json.loads(done.stdout)
    return found, own


def plan(python, private=()):
    """``(hidden, kept)`` for student processes run by ``python``. Hidden: every entry at the
    top of the file system but the system's own (``VISIBLE``: programs, libraries,
    configuration, devices), so that no copy of a reference anywhere on the machine (a
    teacher's checkout, its worktrees, a scratch copy in ``/tmp``, ``private``) is in sight;
    and the folders of the reference libraries ``python`` could import. Kept, bound back in:
    the folders ``python`` runs from (its prefixes and module search path) that a hidden one
    holds. The folder a process runs in and the guard's are kept too (:func:`hide`)."""
    found, own = what_python_sees(python)
    libraries = sorted({path for paths in found.values() for path in paths})
    tops = sorted(
        os.path.join("/", name)
        for name in os.listdir("/")
        if name not in VISIBLE and not os.path.islink(os.path.join("/", name))
    )
    private = [os.path.realpath(p) for p in private if os.path.exists(p)]
    hidden = tops + [p for p in private if not any(_inside(p, top) for top in tops)] + libraries
    return tuple(dict.fromkeys(hidden + [p for p in WRITABLE if os.path.isdir(p)])), tuple(_outermost(own))


def hide(hidden, kept):
    """In the child, before it becomes the student: mount and IPC namespaces of its own in
    which each of ``hidden`` is an empty read-only folder (a file: ``/dev/null``; the shared
    folders of ``WRITABLE``, an empty writable one that vanishes with the process), except
    the folders of ``kept`` that a hidden one holds, bound back where they were. Raises
    OSError when the kernel refuses."""
    unshare(CLONE_NEWNS | CLONE_NEWIPC)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    kept = [p for p in _outermost(kept) if any(_inside(p, h) and p != h for h in hidden)]
    handles = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in kept}  # reachable once covered
    inside_kept = [p for p in hidden if any(_inside(p, k) for k in kept)]  # covered once their folder is back
    covered = [p for p in hidden if p not in inside_kept]
    for path in covered:
        _cover(path, writable=True)
    for path, handle in handles.items():
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)
        os.close(handle)
    for path in inside_kept:
        _cover(path, writable=False)
    for path in covered:
        if os.path.isdir(path) and path not in WRITABLE:
            _mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def isolation_problems(python, private_root, private_files, hidden, account):
    """What student code, run by ``python`` as ``account`` (None: the grader's own user) with
    ``hidden`` covered, could still reach (empty when nothing): a reference library it can
    import, a file of ``private_files`` (the reference solutions, in ``private_root``) that other users may read,
    or everything, when it runs as the grader's own user. Each says the command that fixes it."""
    problems = []
    libraries = [] if hidden else list(what_python_sees(python)[0])
    if libraries:
        problems.append(
            f"{python} has {', '.join(libraries)}"
            + (" (PyTorch)" if "torch" in libraries else "")
            + ", which would let student code compute the reference's values: grade with a Python "
            "without them (setup.sh installs none)"
        )
    if account is None:
        problems.append(
            f"student code cannot run under an account of its own with {python} (a folder above it is "
            f"private, or the grader is not root): make a virtual environment from the system's Python, "
            f"`/usr/bin/python3 -m venv /opt/minitorch-grader && /opt/minitorch-grader/bin/pip install "
            f"-e 'CHECKOUT[test]'`, and grade as root with /opt/minitorch-grader/bin/minitorch-attn"
        )
    readable = [path for path in private_files if not hidden and _readable_by_others(path)]
    if readable:
        problems.append(
            f"{readable[0]} (a reference solution) is readable by other users, student code's account "
            f"among them: `chmod 700 {private_root}` (keep the virtual environment outside it)"
        )
    return problems


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outermost(paths):
    paths = sorted({p for p in paths if os.path.isdir(p)})
    return [p for p in paths if not any(_inside(p, other) and p != other for other in paths)]


def _cover(path, writable):
    if os.path.isdir(path):
        flags = MS_NOSUID | MS_NODEV | (0 if writable else MS_RDONLY)
        size = "mode=1777,size=256m" if path in WRITABLE else "mode=0755,size=1m"
        _mount("tmpfs", path, "tmpfs", flags, size)
    elif os.path.exists(path):
        _mount("/dev/null", path, None, MS_BIND)


def _readable_by_others(path):
    path = pathlib.Path(os.path.realpath(path))
    try:
        return bool(path.stat().st_mode & 0o004) and all(parent.stat().st_mode & 0o001 for parent in path.parents)
    except OSError:
        return False


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _mount(source, target, kind, flags, data=None):
    def encode(s):
        return None if s is None else s.encode()

    if _libc().mount(encode(source), encode(target), encode(kind), ctypes.c_ulong(flags), encode(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mount {target}: {os.strerror(error)}")


def unshare(flags):
    """``unshare(2)`` for this process; OSError when the kernel refuses."""
    if _libc().unshare(flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
