"""nsys CPU sampling: which function each host thread was running, sample by sample (side table ``cpu_samples``).

With CPU sampling on (``nsys profile --sample=cpu``, the default on Linux), every sample is a row of
``COMPOSITE_EVENTS`` (its time and thread) and its call stack rows of ``SAMPLING_CALLCHAINS`` (``id``: the
sample, ``stackDepth`` 0: the frame it was taken in, ``symbol``: a ``StringIds`` id). A thread is sampled
only while it runs on a CPU, so its samples show where it computed when no range or call was recorded (the
host's own work between GPU kernels). Only the innermost frame's function is kept, never the module (a
path). Exports without these tables (or columns) have no such table.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from traceread.loaders.nsys.read import Export, split_global

TABLE = "cpu_samples"
_NEEDED = {"COMPOSITE_EVENTS": ("id", "start", "globalTid"), "SAMPLING_CALLCHAINS": ("id", "symbol", "stackDepth")}
# A symbol that is not a function's name: an unresolved address, or a path (privacy: no file or user names).
_NOT_A_NAME = re.compile(r"^(?:0x[0-9a-fA-F]+|\[.*\])$|[/\\]")
_MAX_NAME = 120  # characters of a function name kept (C++ signatures run long)


def cpu_samples(ex: Export, pid_rank: dict[int, int]) -> pd.DataFrame | None:
    """One row per CPU sample of a process with events (``pid_rank``: its rank): ``rank``, ``tid``,
    ``time_ns`` (the export's time base, as the events') and ``function`` (the innermost frame's name; ''
    where it is unresolved or not a name); sorted by thread and time. None where the export has no samples."""
    if not all(ex.has(t, c) for t, cols in _NEEDED.items() for c in cols):
        return None
    leaf = ("(SELECT s.symbol FROM SAMPLING_CALLCHAINS s WHERE s.id = COMPOSITE_EVENTS.id AND s.stackDepth = 0 "
            "LIMIT 1)")
    c = ex.ints("COMPOSITE_EVENTS", {"start": "start", "gtid": "globalTid", "symbol": leaf})
    if len(c["start"]) == 0:
        return None
    pid, tid = split_global(c["gtid"])
    keys = np.array(sorted(pid_rank), dtype=np.int64)
    if len(keys) == 0:
        return None
    pos = np.minimum(np.searchsorted(keys, pid), len(keys) - 1)
    known = (keys[pos] == pid) & (c["gtid"] >= 0)
    ranks = np.array([pid_rank[int(k)] for k in keys], dtype=np.int32)[pos]
    sym, code = np.unique(c["symbol"], return_inverse=True)
    names = np.array([_name(s) for s in ex.string_of(sym)], dtype=object) if len(sym) else np.zeros(0, object)
    names[sym < 0] = ""
    uniq, remap = np.unique(names.astype(str), return_inverse=True)
    keep = np.flatnonzero(known)
    order = keep[np.lexsort((c["start"][keep], tid[keep], ranks[keep]))]
    return pd.DataFrame({
        "rank": ranks[order], "tid": tid[order].astype(np.int64), "time_ns": c["start"][order].astype(np.int64),
        "function": pd.Categorical.from_codes(remap[code[order]].astype(np.int32),
                                              categories=pd.Index(uniq.astype(object), dtype=object)),
    })


def _name(symbol: object) -> str:
    s = str(symbol).strip()
    return "" if not s or _NOT_A_NAME.search(s) else s[:_MAX_NAME]
