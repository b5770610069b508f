"""The report's compact part of ``traceread kernels``' tables (:mod:`traceread.metrics.tables`).

:func:`compact_tables` gives a :class:`CompactTables`: the first :data:`TOP_ROWS` rows of the op, module,
range, copy and host API tables, each the same rows and columns as the full table's first rows, with
the full table's row count and note. The analysis makes it beside its kernel table, while the trace's
event view is live (the collectives are its own collective table); only the rows shown are fully
computed (the API and range statistics of the names shown; no bandwidth table), and this module imports
only those tables' modules, so the report's section costs little beside the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from traceread.metrics.copies import copy_summary
from traceread.metrics.host_api import host_api_top
from traceread.metrics.op_time import NO_MODULES, kernel_owners, module_table, op_table
from traceread.metrics.ranges import range_top
from traceread.trace import Trace

TOP_ROWS = 5  # rows of each table the report shows; ``traceread kernels`` has every row
REPORT_TABLES = ("ops", "modules", "ranges", "copies", "host_api")
EMPTY = {  # why a table is empty (``traceread kernels`` says the same)
    "ops": "no GPU kernels in this trace",
    "modules": NO_MODULES,
    "ranges": "no annotation ranges (NVTX, record_function, ProfilerStep) in this trace",
    "copies": "no GPU copies or memsets in this trace",
    "host_api": "no CUDA/HIP runtime or driver calls in this trace",
}


@dataclass(frozen=True, eq=False)
class CompactTables:
    """Of one input, per name of :data:`REPORT_TABLES`: the full table's first rows (``frames``), its number
    of rows (``rows``) and its note (``notes``, '' when none)."""

    frames: dict[str, pd.DataFrame]
    rows: dict[str, int]
    notes: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        """``{name: {"rows": [...], "total_rows": int, "note": str}}`` in :data:`REPORT_TABLES` order."""
        return {name: {"rows": self.frames[name].to_dict(orient="records"), "total_rows": self.rows[name],
                       "note": self.notes[name]} for name in REPORT_TABLES}


def compact_tables(trace: Trace, top: int = TOP_ROWS) -> CompactTables:
    """The first ``top`` rows of each table of :data:`REPORT_TABLES` for ``trace`` (module docstring)."""
    owners = kernel_owners(trace)
    ops = op_table(trace, owners)
    modules = module_table(trace, owners)  # empty at once when no module frame is recorded
    copies = copy_summary(trace)
    ranges, n_ranges = range_top(trace, top)
    api, n_api = host_api_top(trace, top)
    frames = {"ops": ops.head(top), "modules": modules.head(top), "ranges": ranges, "copies": copies.head(top),
              "host_api": api}
    rows = {"ops": len(ops), "modules": len(modules), "ranges": n_ranges, "copies": len(copies), "host_api": n_api}
    notes = {name: (EMPTY[name] if rows[name] == 0 else "") for name in REPORT_TABLES}
    return CompactTables({k: v.reset_index(drop=True) for k, v in frames.items()}, rows, notes)
