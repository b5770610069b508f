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

import pandas as pd

from traceread.metrics.copies import copy_summary
from traceread.metrics.host_api import host_api_top
from traceread.metrics.op_time import kernel_owners, module_table, op_table
from traceread.metrics.ranges import range_top
from traceread.note import TABLE_EMPTY, Note
from traceread.trace import Trace

TOP_ROWS = 5  # rows of each table the report shows; ``traceread kernels`` has every row
REPORT_TABLES = ("ops", "modules", "ranges", "copies", "host_api")


@dataclass(frozen=True, eq=False)
class CompactTables:
    """Of one input, per name of :data:`REPORT_TABLES`: the full table's first rows (``frames``), its number
    of rows (``rows``) and its note (``notes``: why it is empty, a :class:`~traceread.note.Note` worded by
    ``traceread.render.notes``; None when it has rows)."""

    frames: dict[str, pd.DataFrame]
    rows: dict[str, int]
    notes: dict[str, Note | None]


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
    notes = {name: (Note.of(TABLE_EMPTY, table=name) if rows[name] == 0 else None) for name in REPORT_TABLES}
    return CompactTables({k: v.reset_index(drop=True) for k, v in frames.items()}, rows, notes)
