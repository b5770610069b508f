"""A process and its descendants, and their resident memory, read from /proc (Linux): what the
benchmark scripts sample to report a contender's peak memory, children (loader workers) included."""

from __future__ import annotations

import os

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def process_tree(pid: int) -> list[int]:
    """``pid`` first, then every descendant still running (those already gone are skipped)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return out


def rss_bytes(pid: int) -> int:
    """Resident memory of one process, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * PAGE_BYTES
    except (OSError, IndexError, ValueError):
        return 0
