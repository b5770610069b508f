"""What a scan's ``--out`` folder may hold, and what a scan may delete there.

A scan deletes only files it wrote: every report and job file is recorded in the folder's manifest
(``OUT/.traceread-scan.manifest``) *before* it is written (by the parent or a worker: one appended
line each, ``O_APPEND``), and pruning removes a stale file only when the manifest names it. A folder
with a manifest is one a scan owns. An ``--out`` that holds a scanned tree, or lies inside one, is
refused unless a scan owns it (and, inside a tree, ``--allow-out-inside`` is given): ``scan traces
--out .`` from the folder above ``traces/`` once pruned the user's traces as stale reports.

One scan at a time writes into a folder: the scan holds an exclusive ``flock`` on
``OUT/.traceread-scan.lock`` (never removed: removing a lock file races with its next taker) while
it runs; a second scan into the same folder is refused in one line (exit 2). The workers inherit
the descriptor, so a killed parent's workers still hold the lock until they have exited.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterable

from traceread.errors import UsageError

MANIFEST = ".traceread-scan.manifest"
LOCK = ".traceread-scan.lock"
HEADER = "traceread scan manifest 1\n"
MANAGED = ("traces", "jobs")  # the subfolders whose files are pruned (by the manifest)
# what a manifest line may name: a report or job file of the managed subfolders (trace ids and job file
# names are made of these characters); any other line is ignored, so a planted line deletes nothing
_ENTRY = re.compile(r"(?:traces|jobs)/[A-Za-z0-9._~-]+\.(?:json|md)")


def manifest_path(out: str) -> str:
    return os.path.join(out, MANIFEST)


def owned(out: str) -> bool:
    """Whether ``out`` is a folder a scan wrote (its manifest is there, a regular file with the header)."""
    try:
        with open(manifest_path(out), encoding="utf-8", errors="replace") as fh:
            return fh.readline() == HEADER
    except OSError:
        return False


def _inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies under it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_out(roots: list[str], out: str, allow_inside: bool) -> None:
    """UsageError (exit 2, one line) for an ``--out`` that would mix a scan's outputs with its inputs."""
    real_out = os.path.realpath(out)
    mine = owned(out)
    for r in roots:
        if not os.path.exists(r):
            raise UsageError(f"{r}: no such file or directory")
        real = os.path.realpath(r)
        if real != real_out and _inside(real, real_out):  # the tree is inside --out
            if not mine:
                raise UsageError(f"--out {out} holds the scanned tree {r} and is not a scan's folder: a scan would "
                                 "write and prune reports among its inputs; choose another directory")
            if any(_inside(real, os.path.join(real_out, d)) for d in (*MANAGED, ".traceread-cache")):
                raise UsageError(f"{r} lies inside the scan outputs of --out {out}; scan the traces, not the reports")
        elif os.path.isdir(real) and _inside(real_out, real):  # --out is inside the tree (or is the tree)
            if not allow_inside:
                raise UsageError(f"--out {out} lies inside the scanned tree {r}; choose another directory or pass "
                                 "--allow-out-inside (it is then skipped while scanning)")
            if not mine and _has_entries(out):
                raise UsageError(f"--out {out} lies inside the scanned tree {r} and holds files no scan wrote; "
                                 "give a new or empty folder (or one an earlier scan wrote)")


def _has_entries(out: str) -> bool:
    try:
        with os.scandir(out) as it:
            return any(True for _ in it)
    except OSError:
        return False


class OutLock:
    """The scan's exclusive hold on ``out`` (see the module doc); ``release`` or process exit lets go."""

    def __init__(self, out: str) -> None:
        path = os.path.join(out, LOCK)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = b""
            with contextlib.suppress(OSError):
                holder = os.pread(fd, 32, 0).strip()
            os.close(fd)
            who = f" (pid {holder.decode()})" if holder.isdigit() else ""
            raise UsageError(f"--out {out}: another scan{who} is writing there now; wait for it to finish or choose "
                             "another directory") from None
        except OSError:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


def start_manifest(out: str) -> None:
    """Make ``out`` a scan's folder: the manifest, with its header, unless it is there already."""
    path = manifest_path(out)
    if owned(out):
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, HEADER.encode())
    finally:
        os.close(fd)


def record(out: str, rels: Iterable[str]) -> None:
    """Add ``rels`` (``traces/<id>.json`` ...) to the manifest of ``out``, before they are written: one
    ``write`` of whole lines to a file opened ``O_APPEND``, so workers writing at once never interleave.
    A folder without a manifest (not set up by a scan: a worker run on its own) records nothing."""
    data = "".join(f"{r}\n" for r in rels).encode()
    if not data:
        return
    try:
        fd = os.open(manifest_path(out), os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def recorded(out: str) -> set[str]:
    """The files the manifest of ``out`` names (only well-formed report and job file names)."""
    try:
        with open(manifest_path(out), encoding="utf-8", errors="replace") as fh:
            if fh.readline() != HEADER:
                return set()
            return {line.rstrip("\n") for line in fh if _ENTRY.fullmatch(line.rstrip("\n"))}
    except OSError:
        return set()


def prune(out: str, keep: set[str]) -> None:
    """Remove the recorded files not in ``keep`` (relative names), then rewrite the manifest with the
    recorded files still there. Files the manifest does not name are never touched."""
    from traceread.atomic import atomic_open

    names = recorded(out)
    for rel in names - keep:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(out, rel))
    left = sorted(rel for rel in names if os.path.lexists(os.path.join(out, rel)))
    with atomic_open(manifest_path(out), "w") as fh:
        fh.write(HEADER + "".join(f"{r}\n" for r in left))
