"""What a student's process leaves behind in the folders every user may write in, found and
removed after each run (:func:`remove_files_of`), so that nothing of one grading reaches the
next. :mod:`.sandbox` calls it when it cleans up after the student account.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat

SHARED_FOLDERS = (
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/run/lock",
    "/var/lock",
    "/dev/mqueue",
    "/var/crash",
    "/var/mail",
    "/run/shm",
)
"""The folders every user may write in on Linux systems (the ones present and writable by
all are cleaned, :func:`shared_folders`): what a student's run leaves there would reach the
next grading (``/run/lock`` too: it is not a temporary folder, but it is writable by all)."""


def shared_folders(candidates=SHARED_FOLDERS):
    """The folders of ``candidates`` that exist and that every user may write in (one entry
    for two names of the same folder, such as ``/var/lock`` and ``/run/lock``)."""
    found = {}
    for folder in candidates:
        with contextlib.suppress(OSError):
            info = os.stat(folder)
            if stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
                found.setdefault((info.st_dev, info.st_ino), folder)
    return list(found.values())


def remove_files_of(account, folders=None):
    """Remove what ``account`` left at the top of the folders every user may write in
    (:func:`shared_folders`: ``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock``, ...), so
    that nothing of one grading reaches the next."""
    for folder in shared_folders() if folders is None else folders:
        with contextlib.suppress(OSError):
            for entry in os.scandir(folder):
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != account[0]:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
