"""Reading a ROCm SQLite database: opened read-only and immutable, integer columns fetched in bulk."""

from __future__ import annotations

import itertools
import os
import sqlite3

import numpy as np

from traceread.errors import TraceReadError
from traceread.loaders.sqlite_kind import read_only_uri
from traceread.note import SIDE_FILE, Note


def connect(path: str) -> sqlite3.Connection:
    """``path`` opened read-only and immutable: no lock taken, nothing written beside it."""
    conn = sqlite3.connect(read_only_uri(path), uri=True)
    conn.text_factory = bytes  # decoded once per distinct string, with replacement
    return conn


def side_file_warning(path: str) -> list[Note]:
    """A note when a -wal or -journal lies beside the database (a writer was active: its last rows may be missing)."""
    found = [sfx for sfx in ("-wal", "-journal") if os.path.exists(path + sfx)]
    return [Note.of(SIDE_FILE, suffix=found[0])] if found else []


def ints(conn: sqlite3.Connection, sql: str, ncols: int, args: tuple = ()) -> list[np.ndarray]:
    """The integer columns of ``sql`` (NULL must be coalesced in the query), row-major fetched in C."""
    flat = np.fromiter(itertools.chain.from_iterable(conn.execute(sql, args)), dtype=np.int64)
    arr = flat.reshape(-1, ncols)
    return [np.ascontiguousarray(arr[:, i]) for i in range(ncols)]


def text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b if isinstance(b, str) else b.decode("utf-8", "replace")


def strings(conn: sqlite3.Connection, sql: str) -> tuple[np.ndarray, np.ndarray]:
    """(sorted ids, their strings) of a two-column (id, text) query."""
    rows = conn.execute(sql).fetchall()
    ids = np.fromiter((r[0] if isinstance(r[0], int) else -1 for r in rows), dtype=np.int64, count=len(rows))
    vals = np.array([text(r[1]) for r in rows] + [""], dtype=object)[:-1]
    order = np.argsort(ids, kind="stable")
    return ids[order], vals[order]


def lookup(keys: np.ndarray, vals: np.ndarray, ids: np.ndarray, default: object = "") -> np.ndarray:
    """``vals`` at each of ``ids`` (``keys`` sorted), ``default`` where an id is not a key."""
    out = np.full(len(ids), default, dtype=vals.dtype if vals.dtype != object else object)
    if len(keys) and len(ids):
        pos = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
        ok = keys[pos] == ids
        out[ok] = vals[pos[ok]]
    return out


def refuse(path: str, what: str, exc: BaseException) -> TraceReadError:
    """A damaged or incomplete database of format ``what``, on one line."""
    msg = " ".join(str(exc).split())
    return TraceReadError(path, f"not a readable {what} ({msg[:200]})")
