"""The compiled reader of the nsys loader's integer columns (``_cread.c``), when it can run.

``read.Export.chunks`` hands each rowid slice to :func:`fetch` first: the C steps the same SQL
through SQLite's C API with the GIL released and writes int64s straight into a numpy buffer. It
opens its own connection with the same file name and flags as ``read._connect`` (read-only URI, or
the private copy), from the libsqlite3 that Python's sqlite3 module loaded, found at run time (no
SQLite headers or library at build time). When the extension was not built, the library or a symbol
is missing, or ``TRACEREAD_NO_CREAD=1``, :func:`enabled` is false and ``read._fetch`` (Python's
sqlite3, the exact twin) reads every slice; it also reads any slice the C declines (a value that is
not an INTEGER, any SQLite error), so hostile files give the errors they always gave.

Why it is kept: no library traceread uses reads SQLite into numpy. Python's ``sqlite3`` (which
``pandas.read_sql`` also steps through) makes a Python int and a row tuple per value, under the GIL;
the C steps the statement and stores each ``sqlite3_column_int64`` into the buffer, without the GIL.
Without it (``TRACEREAD_NO_CREAD=1``) ``analyze`` of the nsys 5M-kernel export takes 1.51x the CPU and
the wall time (peak unchanged): ``scripts/bench_analyze.py --baseline HEAD --env-after
TRACEREAD_NO_CREAD=1 --sizes '' --gaps-kernels 0 --skip-nsys-ai --repeat 2``.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType

import numpy as np

from traceread.extensions import optional, switched_off

DISABLE_ENV = "TRACEREAD_NO_CREAD"
# sqlite3_open_v2 flags (sqlite3.h), as Python's sqlite3.connect passes them.
_OPEN_READWRITE, _OPEN_CREATE, _OPEN_URI = 0x2, 0x4, 0x40
# No per-call mutex: each connection is used by one thread at a time (one per reader thread), and
# SQLite's serialized mode locked and unlocked it twice per value read (two calls per value, for nothing).
_OPEN_NOMUTEX = 0x8000


def _library_path() -> str | None:
    """The libsqlite3 this process's sqlite3 module uses: the mapped file, else the linker's find."""
    import _sqlite3  # noqa: F401 - loads libsqlite3 (sqlite3 imports it too)

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.rstrip("\n").split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
                if "libsqlite3" in os.path.basename(path) and os.path.isfile(path):
                    return path
    except OSError:  # no /proc (macOS): the dynamic linker's search
        pass
    import ctypes.util  # here: importing ctypes costs every command a few ms

    return ctypes.util.find_library("sqlite3")


@functools.cache
def _module() -> ModuleType | None:
    """The extension with SQLite's functions bound, or None (not built, no library, a symbol missing)."""
    mod = optional("traceread.loaders.nsys._cread")
    if mod is None:  # built without a compiler: Python's sqlite3 reads (same values, more CPU)
        return None
    path = _library_path()
    if path is None:
        return None
    try:
        mod.bind_library(path)
    except OSError:
        return None
    return mod


def enabled() -> bool:
    """Whether slices go to the compiled reader first (built, bound, and not switched off)."""
    return not switched_off(DISABLE_ENV) and _module() is not None


def connect(source: str, private: bool) -> object | None:
    """A C connection to ``source`` opened as ``read._connect`` opens it, or None (read with Python)."""
    mod = _module()
    if mod is None:
        return None
    from traceread.loaders.nsys.read import read_only_uri

    name, flags = (source, _OPEN_READWRITE | _OPEN_CREATE) if private else \
        (read_only_uri(source), _OPEN_READWRITE | _OPEN_CREATE | _OPEN_URI)
    try:
        return mod.open(os.fsencode(name), flags | _OPEN_NOMUTEX)
    except OSError:
        return None


def close(conn: object) -> None:
    mod = _module()
    if mod is not None:
        mod.close(conn)


def fetch(conn: object, sql: str, args: tuple[int, int], buf: np.ndarray) -> np.ndarray | None:
    """The slice's values as (rows, columns) (``read._fetch``'s values, each column contiguous), or
    None where the C declines (then ``read._fetch`` reads it). ``buf`` is (columns, most rows) int64,
    C-contiguous; pages past the rows written are never touched."""
    mod = _module()
    if mod is None:
        return None
    try:
        n = mod.fetch(conn, sql.encode(), args[0], args[1], buf)
    except (OverflowError, ValueError):  # a bound past int64: Python's sqlite3 says what it says
        return None
    return None if n < 0 else buf[:, :n].T

