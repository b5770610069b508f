"""Atomic output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from traceread.errors import OutputError, UsageError

# (device, inode) -> path of every file the running command read as an input: an output never replaces
# one. None outside a command (library use: a caller may rewrite a file it loaded, as the generators do)
_inputs: dict[tuple[int, int], str] | None = None


# Temporaries of atomic_open: ``.traceread-<writer pid>-<random>.tmp`` beside the target. A writer killed
# where it cannot clean up (SIGKILL, a power cut) leaves one; the next run that writes into that folder
# removes it (prune_stale). ``.traceread-<random>.tmp`` (no pid) is an older version's name.
TEMP_PREFIX = ".traceread-"
_TEMP = re.compile(r"\.traceread-(?:(\d{1,10})-)?[A-Za-z0-9_]{1,64}\.tmp")
_run_start = time.time()  # the run's start: a temporary without a pid older than this is stale
_pruned: set[str] = set()  # folders this process has pruned (once each: a scan writes thousands of files)


def guard_inputs() -> None:
    """A command starts (``cli.main``): from now on the files it reads are inputs no output may replace."""
    global _inputs, _run_start
    _inputs = {}
    _run_start = time.time()
    _pruned.clear()


def _started_at(pid: int) -> float | None:
    """When process ``pid`` started (Unix time), from /proc; None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            ticks = int(fh.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as fh:
            boot = next(int(line.split()[1]) for line in fh if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _writer_gone(pid: int, mtime: float) -> bool:
    """The process that wrote a temporary (at ``mtime``) is gone: no such pid, or the pid now names a
    process started after the file was last written (reused)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        pass
    born = _started_at(pid)
    return born is not None and born > mtime + 1


def prune_stale(directory: str, before: float | None = None) -> list[str]:
    """Remove the temporaries of atomic writes in ``directory`` whose writer is gone (or, named without a
    pid by an older version, last written before ``before``: default the run's start). Only regular files
    named by traceread's own pattern; a temporary whose writer still runs is never touched. Returns the
    names removed."""
    cutoff = _run_start if before is None else before
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = _TEMP.fullmatch(name)
        if m is None:
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                continue
            if _writer_gone(int(m.group(1)), st.st_mtime) if m.group(1) else st.st_mtime < cutoff:
                os.unlink(path)
                removed.append(name)
        except (OSError, ValueError):
            continue
    return removed


def _prune_once(directory: str) -> None:
    key = os.path.abspath(directory)
    if key not in _pruned:
        _pruned.add(key)
        prune_stale(directory)


def check_link(path: str) -> None:
    """OutputError when ``path`` is a symbolic link (or a chain of them) that another user planted in a
    sticky world-writable folder (``/tmp``): the kernel's protected_symlinks rule, which a rename over
    the link's target would sidestep (``-o /tmp/report.md`` replacing a file the victim owns). A link
    owned by this user or root, or in any other folder, is followed."""
    hops, p = 0, path
    while hops < 40:
        try:
            st = os.lstat(p)
        except (OSError, ValueError):
            return
        if not stat.S_ISLNK(st.st_mode):
            return
        folder = os.path.dirname(os.path.abspath(p))
        try:
            d = os.stat(folder)
        except OSError:
            return
        if d.st_mode & stat.S_ISVTX and d.st_mode & stat.S_IWOTH and st.st_uid not in (os.geteuid(), 0):
            raise OutputError(path, f"a symbolic link of another user (uid {st.st_uid}) in the shared folder "
                                    f"{folder}; not followed (remove it, or choose another name)")
        try:
            p = os.path.join(folder, os.readlink(p))
        except OSError:
            return
        hops += 1


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


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the program is (as SIGINT raises KeyboardInterrupt), so that every
    cleanup runs: an atomic write's temporary is removed, a scan stops its workers and waits for them."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


TERMINATING = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def _raise_terminated(signum: int, frame: object) -> None:
    for s in TERMINATING:  # once: a second signal must not cut the cleanup the first one started
        signal.signal(s, signal.SIG_IGN)
    raise Terminated(signum)


@contextlib.contextmanager
def termination_raises() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Terminated` (in the main thread; elsewhere, where no
    handler can be set, nothing changes); the previous handlers come back on the way out."""
    old: dict[Any, Any] = {}
    try:
        for s in TERMINATING:
            old[s] = signal.signal(s, _raise_terminated)
    except ValueError:  # not the main thread (the first one already refused): no handler can be set there
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def current_umask() -> int:
    """The process umask (read by setting it and putting it back: there is no getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w", release: Callable[[int], None] | None = None) -> Iterator[IO]:
    """Open ``path`` for writing so readers never see a half-written file. ``-`` is stdout.

    ``release``: given a read-only descriptor on the file the output replaces (a regular file), held across
    the rename, to close when it will: the replaced file's pages are freed when its last descriptor closes
    (tens of milliseconds for a report of a hundred megabytes), not by the rename (the runner closes it on a
    thread while the next output is made)."""
    check_not_input(path)
    if path == "-":
        if "b" in mode:
            yield sys.stdout.buffer
        else:
            yield sys.stdout
        return
    check_link(path)
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
    _prune_once(directory)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(path, exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; outputs get the usual permissions
        old = _held(target) if release is not None else None
        try:
            os.replace(tmp, target)
        except BaseException:
            if old is not None:
                os.close(old)
            raise
        if old is not None and release is not None:
            release(old)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
            raise OutputError(path, exc.strerror or str(exc)) from exc
        raise


def _held(path: str) -> int | None:
    """A read-only descriptor on the regular file at ``path``, or None (no such file, not a regular file, not
    readable: the replace then frees it as before). Opened without blocking and without following a link."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return fd


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
