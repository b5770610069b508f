"""The per-trace parts of the scan cache on disk: ``OUTDIR/.traceread-cache/<trace id>.<part>.msgpack``.

Written by the cache in the parent and by local workers themselves (``scan.work``); read by the
cache (:mod:`traceread.scan.cache`). Kept apart from the cache so that the worker, which the cache
reads outcomes of, does not import it. The parts are data (MessagePack, Arrow IPC for table rows:
:mod:`traceread.scan.cachecodec`), never pickles: an output folder is not a trusted place.
"""

from __future__ import annotations

import os
from typing import Any

from traceread.atomic import atomic_open
from traceread.scan import cachecodec

DIRNAME = ".traceread-cache"
BLOBS = ("row", "ranks", "rows")  # <trace id>.<part>.msgpack: index row; rank identities+summaries; table rows
SUFFIX = ".msgpack"


def blob_path(outdir: str, trace_id: str, part: str = "row") -> str:
    return os.path.join(outdir, DIRNAME, f"{trace_id}.{part}{SUFFIX}")


def write_blob(outdir: str, trace_id: str, part: str, value: Any) -> None:
    """One cache part of a trace (also written by the local workers themselves, see ``run_task``)."""
    data = cachecodec.encode_tables(value) if part == "rows" else cachecodec.encode(value)
    with atomic_open(blob_path(outdir, trace_id, part), "wb") as fh:
        fh.write(data)
