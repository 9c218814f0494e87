"""Atomic file writes: a file is either the old one or the complete new one, never half.

:func:`write_atomically` writes into a temporary file in the target's folder, flushes it to
disk and renames it over the target (``os.replace`` is atomic on POSIX and Windows), so a
crash, a full disk or Ctrl-C while writing leaves any previous file as it was. Checkpoints,
exported weights and drawn graphs are written this way.
"""

from __future__ import annotations

import os
import tempfile


def write_atomically(path, content, suffix=""):
    """Write ``content`` to ``path`` atomically.

    Args:
        path: the file to write; its folder must exist.
        content: ``bytes``, or a function ``write(file)`` that writes into a binary file
            object (e.g. ``lambda f: numpy.savez(f, **arrays)``).
        suffix: the temporary file's suffix (some writers look at it).
    Raises:
        OSError: if the folder is missing or not writable, or writing fails; the temporary
            file is removed and any file already at ``path`` is left as it was.
    """
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, (bytes, bytearray)):
                f.write(content)
            else:
                content(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes it private; a saved file gets the usual mode
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        raise


def current_umask():
    """The process's file-mode creation mask (reading it means setting it: set back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
