"""Atomic output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

from traceread.errors import OutputError, UsageError

# (device, inode) -> path of every file the running command read as an input: an output never replaces
# one. None outside a command (library use: a caller may rewrite a file it loaded, as the generators do)
_inputs: dict[tuple[int, int], str] | None = None


def guard_inputs() -> None:
    """A command starts (``cli.main``): from now on the files it reads are inputs no output may replace."""
    global _inputs
    _inputs = {}


def note_input(path: str) -> None:
    """Remember ``path`` (a trace, a job or config file just read) as an input of the running command."""
    if _inputs is None:
        return
    with contextlib.suppress(OSError, ValueError):
        st = os.stat(path)
        _inputs[(st.st_dev, st.st_ino)] = os.path.abspath(path)


def check_not_input(path: str) -> None:
    """UsageError when ``path`` is (resolving links: the same file as) an input of this command:
    ``analyze v.json -o v.json`` would replace the trace with its own report."""
    if path == "-" or not _inputs:
        return
    try:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        if key not in _inputs:
            return
        # still that input (in a long-lived process, such as a test run, an inode may have been reused)
        first = os.stat(_inputs[key])
    except (OSError, ValueError):
        return
    if (first.st_dev, first.st_ino) == key:
        raise UsageError(f"{path}: is an input of this command; an output never replaces an input "
                         "(choose another file name)")


def current_umask() -> int:
    """The process umask (read by setting it and putting it back: there is no getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w") -> Iterator[IO]:
    """Open ``path`` for writing so readers never see a half-written file. ``-`` is stdout."""
    check_not_input(path)
    if path == "-":
        if "b" in mode:
            yield sys.stdout.buffer
        else:
            yield sys.stdout
        return
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise OutputError(path, "it is a folder; give a file name")
    if not os.path.isdir(directory):
        raise OutputError(path, f"folder {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".traceread-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; outputs get the usual permissions
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise OutputError(path, exc.strerror or str(exc)) from exc
        raise
