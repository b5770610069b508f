"""ROCm profiler outputs -> the normalized events frame.

* rocprofv3 JSON (rocprofiler-sdk ``--output-format json``): :mod:`.v3json`;
* rocprofv3 rocpd SQLite (the ROCm 7 default output): :mod:`.rocpd`;
* rocmProfileData (RPD) SQLite: :mod:`.rpd`;
* the Chrome-trace JSON that rocmProfileData's ``rpd2tracing.py`` writes from an RPD: :mod:`.rpdjson`.

A legacy rocprof v1 database is refused by name. Formats are told apart by content
(:mod:`traceread.loaders.sqlite_kind` for SQLite, :func:`json_kind` for JSON), never by extension.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from traceread.loaders.rocprof.rocpd import load_rocpd
from traceread.loaders.rocprof.rpd import load_rpd
from traceread.loaders.rocprof.rpdjson import load_rpd_trace_json, looks_like_rpd_trace_json
from traceread.loaders.rocprof.v3json import load_rocprofv3_json, looks_like_rocprofv3_json

ROCPROFV3_JSON = "rocprofv3-json"
RPD_JSON = "rpd-json"
HEAD_BYTES = 64 << 10

if TYPE_CHECKING:
    from traceread.trace import Trace


def json_kind(path: str | os.PathLike[str]) -> str | None:
    """ROCPROFV3_JSON or RPD_JSON when the (plain or gzip) JSON file ``path`` is one, else None
    (read from its first uncompressed bytes; a file that cannot be read is None: its loader says why)."""
    from traceread.loaders.kineto.source import Source

    try:
        src = Source(os.fspath(path), ahead=False)
        try:
            head = src.read(HEAD_BYTES)
        finally:
            src.close()
    except Exception:  # noqa: BLE001 - any failure to read the head leaves the format to the default reader
        return None
    if looks_like_rocprofv3_json(head):
        return ROCPROFV3_JSON
    if looks_like_rpd_trace_json(head):
        return RPD_JSON
    return None


def load_rocm(path: str, kind: str, progress: bool = False) -> Trace:
    """Load ``path`` of ``kind`` (ROCPROFV3_JSON, RPD_JSON, or sqlite_kind's RPD / ROCPD)."""
    from traceread.loaders import sqlite_kind as K

    readers = {ROCPROFV3_JSON: load_rocprofv3_json, RPD_JSON: load_rpd_trace_json, K.RPD: load_rpd,
               K.ROCPD: load_rocpd}
    if kind not in readers:
        raise ValueError(f"not a ROCm format: {kind}")
    return readers[kind](path, progress=progress)


__all__ = ["HEAD_BYTES", "ROCPROFV3_JSON", "RPD_JSON", "json_kind", "load_rocm", "load_rocpd", "load_rocprofv3_json",
           "load_rpd", "load_rpd_trace_json", "looks_like_rocprofv3_json", "looks_like_rpd_trace_json"]
