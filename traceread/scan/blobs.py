"""The per-trace parts of the scan cache on disk: ``OUTDIR/.traceread-cache/<trace id>.<part>.pkl``.

Written by the cache in the parent and by local workers themselves (``scan.work``); read by the
cache (:mod:`traceread.scan.cache`). Kept apart from the cache so that the worker, which the cache
reads outcomes of, does not import it.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from traceread.atomic import atomic_open

DIRNAME = ".traceread-cache"
BLOBS = ("row", "ranks", "rows")  # <trace id>.<part>.pkl: index row; rank identities+summaries; table rows


def blob_path(outdir: str, trace_id: str, part: str = "row") -> str:
    return os.path.join(outdir, DIRNAME, f"{trace_id}.{part}.pkl")


def write_blob(outdir: str, trace_id: str, part: str, value: Any) -> None:
    """One cache part of a trace (also written by the local workers themselves, see ``run_task``)."""
    with atomic_open(blob_path(outdir, trace_id, part), "wb") as fh:
        pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
