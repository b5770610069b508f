"""Atomic output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import queue
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
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
    if os.path.isdir(path):
        raise OutputError(path, "it is a folder; give a file name")
    if _special(path):
        # /dev/null, /dev/stdout, a named pipe: written in place. There is nothing to replace atomically,
        # and renaming a file over it would put a regular file where the device was.
        with _errors_named(path), open(path, mode, encoding=None if "b" in mode else "utf-8") as out:
            yield out
        return
    # A link to a file: that file is replaced (beside it), the link kept.
    target = os.path.realpath(path) if os.path.islink(path) else path
    directory = os.path.dirname(os.path.abspath(target))
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
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise OutputError(path, exc.strerror or str(exc)) from exc
        raise


def _special(path: str) -> bool:
    """``path`` exists and is not a regular file or a folder (a device, a pipe, a socket), links followed,
    or names a descriptor (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``: the file already open)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)) or \
        os.path.abspath(path).startswith(("/dev/", "/proc/"))


@contextlib.contextmanager
def _errors_named(path: str) -> Iterator[None]:
    """An OSError (other than a closed pipe: the reader went away) as an OutputError naming ``path``."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        raise OutputError(path, exc.strerror or str(exc)) from exc


# Pieces made ahead of the file's writes (a writer's pieces are about 1 MB: rowjoin.PIECE_BYTES). At least a
# table block's (16-30 MB, joined at once): with 4, the thread encoding the next block waited to hand over the
# pieces of the last (0.04-0.08 s of a 1.1 GB trace's JSON), which are held in memory anyway.
WRITE_AHEAD_PIECES = 32


def write_pieces(fh: IO[bytes], pieces: Iterable[bytes]) -> None:
    """Write ``pieces`` to ``fh`` in order, each write on a thread of its own while the next pieces are
    made: a table writer's formatting (CPU) and the kernel's copying into the page cache (which holds no
    GIL; half the time of a 3.5 GB gap table) overlap. At most ``WRITE_AHEAD_PIECES`` wait. The first
    error of either side is raised here, and nothing is written after it."""
    ahead: queue.Queue[bytes | None] = queue.Queue(maxsize=WRITE_AHEAD_PIECES)
    failed: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        while (piece := ahead.get()) is not None:
            if stop.is_set():
                continue  # drained, unwritten: the caller stops
            try:
                fh.write(piece)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                failed.append(exc)
                stop.set()

    writer = threading.Thread(target=write, name="traceread-write", daemon=True)
    writer.start()
    try:
        for piece in pieces:
            if stop.is_set():
                break
            ahead.put(piece)
    except BaseException:
        stop.set()
        raise
    finally:
        ahead.put(None)  # the writer drains what is queued, so there is room
        writer.join()
    if failed:
        raise failed[0]
