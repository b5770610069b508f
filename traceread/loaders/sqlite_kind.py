"""Which profiler wrote an SQLite file: named from the tables it holds, never from its extension.

Five kinds are told apart (:func:`sqlite_kind`): an Nsight Systems export (``StringIds`` beside nsys
tables), a rocmProfileData database (RPD: ``rocpd_op``, ``rocpd_api``, ``rocpd_string`` tables), the
rocprofv3 "rocpd" database of ROCm 7 (tables suffixed with the session's UUID, ``rocpd_kernel_dispatch_<uuid>``,
behind ``rocpd_*`` views), a legacy rocprof v1 database (a ``KERN`` table), and any other SQLite file.
Only the schema is read (``sqlite_master``), read-only and immutable: nothing is written beside the input.
"""

from __future__ import annotations

import os
import re
import sqlite3
import urllib.parse

NSYS = "nsys"
RPD = "rpd"
ROCPD = "rocpd"
ROCPROF_V1 = "rocprof-v1"
UNKNOWN = "sqlite"

# What each kind is called in messages.
NAMES = {
    NSYS: "an Nsight Systems SQLite export",
    RPD: "a rocmProfileData (RPD) database",
    ROCPD: "a rocprofv3 rocpd database",
    ROCPROF_V1: "a legacy rocprof v1 database",
    UNKNOWN: "an SQLite database of no trace format traceread reads (not nsys, RPD, rocpd or rocprof)",
}
ROCPROF_V1_REFUSAL = "a legacy rocprof v1 database: not supported; re-profile with rocprofv3"

# Tables whose presence beside StringIds marks an nsys export (the nsys reader uses this list).
NSYS_MARKERS = ("META_DATA_EXPORT", "EXPORT_META_DATA", "TARGET_INFO_SESSION_START_TIME",
                "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API",
                "TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "PROCESSES", "ThreadNames")
RPD_TABLES = ("rocpd_op", "rocpd_api", "rocpd_string")
# rocpd (rocprofiler-sdk): every table carries the session's UUID as a suffix; the views drop it.
ROCPD_TABLE = re.compile(r"^rocpd_(kernel_dispatch|memory_copy|region|info_agent|string|metadata)_[0-9A-Za-z_]+$")
ROCPD_VIEWS = ("rocpd_kernel_dispatch", "rocpd_info_agent")
# rocprof v1 (rocprofiler 1.x) wrote its kernel records to a table named KERN.
ROCPROF_V1_TABLES = ("KERN",)


def read_only_uri(path: str) -> str:
    """SQLite URI opening ``path`` read-only and immutable (no lock, no journal or -shm beside it)."""
    return "file:" + urllib.parse.quote(os.fsencode(os.path.abspath(path))) + "?mode=ro&immutable=1"


def schema_names(path: str) -> tuple[set[str], set[str]]:
    """(table names, view names) of the SQLite file ``path``; raises sqlite3.DatabaseError when it
    is not a readable database."""
    conn = sqlite3.connect(read_only_uri(path), uri=True)
    try:
        conn.text_factory = bytes
        rows = conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
    finally:
        conn.close()
    tables: set[str] = set()
    views: set[str] = set()
    for kind, name in rows:
        text = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
        (views if kind in (b"view", "view") else tables).add(text)
    return tables, views


def classify(tables: set[str], views: set[str]) -> str:
    """The kind of a database holding ``tables`` and ``views`` (see the module doc)."""
    if "StringIds" in tables and any(t in tables for t in NSYS_MARKERS):
        return NSYS
    if all(t in tables for t in RPD_TABLES):
        return RPD
    if any(ROCPD_TABLE.match(t) for t in tables) or all(v in views for v in ROCPD_VIEWS):
        return ROCPD
    if any(t in tables for t in ROCPROF_V1_TABLES):
        return ROCPROF_V1
    return UNKNOWN


def sqlite_kind(path: str) -> str:
    """The kind of the SQLite file ``path`` (NSYS, RPD, ROCPD, ROCPROF_V1 or UNKNOWN); raises
    sqlite3.DatabaseError when its schema cannot be read."""
    return classify(*schema_names(path))
