"""The tables HTA and ``nsys stats`` users reach for, of one loaded trace, in one place.

:func:`kernel_tables` returns a :class:`KernelTables`: one DataFrame per table (:data:`TABLES`, in
that order) and, per table, a note saying why it is empty or what it leaves out (never an invented
row). Each table is a pure function of the loaded frame, in its own module:

* ``ops``: GPU time per launching host op (:mod:`traceread.metrics.op_time`);
* ``modules``: GPU time per ``nn.Module`` when the trace records the hierarchy (same module);
* ``ranges``: the annotation/NVTX range summary (:mod:`traceread.metrics.ranges`);
* ``copies``: GPU copies and memsets by kind, bytes and GB/s (:mod:`traceread.metrics.copies`);
* ``host_api``: the CUDA/HIP API summary (:mod:`traceread.metrics.host_api`);
* ``collectives``: collectives with bus bandwidth (:mod:`traceread.metrics.collectives`, whole trace);
* ``mem_bandwidth``: achieved TB/s of memory-bound kernels with recorded bytes
  (:mod:`traceread.metrics.mem_bandwidth`).

:func:`report_tables` gives the report's compact part of them (:class:`ReportTables`): the first
:data:`TOP_ROWS` rows of the op, module, range, copy and host API tables, each the same rows and columns
as the full table's first rows, with the full table's row count. The analysis makes it beside its kernel
table (the collectives are its own collective table); only the rows shown are fully computed (the API
and range percentiles of the names shown, no bandwidth table), so the report's section costs little
beside the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from traceread.metrics.collectives import collective_table
from traceread.metrics.copies import copy_summary
from traceread.metrics.host_api import host_api_summary, host_api_top
from traceread.metrics.mem_bandwidth import mem_bandwidth
from traceread.metrics.op_time import NO_MODULES, kernel_owners, module_table, op_table
from traceread.metrics.ranges import range_summary, range_top
from traceread.trace import Trace

TOP_ROWS = 5  # rows of each table the report shows; ``traceread kernels`` has every row
REPORT_TABLES = ("ops", "modules", "ranges", "copies", "host_api")
TABLES = ("ops", "modules", "ranges", "copies", "host_api", "collectives", "mem_bandwidth")
_EMPTY = {
    "ops": "no GPU kernels in this trace",
    "modules": NO_MODULES,
    "ranges": "no annotation ranges (NVTX, record_function, ProfilerStep) in this trace",
    "copies": "no GPU copies or memsets in this trace",
    "host_api": "no CUDA/HIP runtime or driver calls in this trace",
    "collectives": "no communication kernels in this trace",
}


@dataclass(frozen=True, eq=False)
class KernelTables:
    """One DataFrame per table name of :data:`TABLES`, and a note per table ('' when none)."""

    frames: dict[str, pd.DataFrame]
    notes: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        """``{name: {"rows": [...], "note": str}}`` in :data:`TABLES` order (NaN stays NaN: the JSON
        writer makes it null)."""
        return {name: {"rows": self.frames[name].to_dict(orient="records"), "note": self.notes[name]}
                for name in TABLES}


def kernel_tables(trace: Trace) -> KernelTables:
    """Every table of :data:`TABLES` for ``trace``."""
    owners = kernel_owners(trace)  # shared by the op, module and bandwidth tables
    bw = mem_bandwidth(trace, owners)
    frames = {"ops": op_table(trace, owners), "modules": module_table(trace, owners), "ranges": range_summary(trace),
              "copies": copy_summary(trace), "host_api": host_api_summary(trace),
              "collectives": collective_table(trace), "mem_bandwidth": bw.table}
    notes = {name: (_EMPTY.get(name, "") if frames[name].empty else "") for name in TABLES}
    notes["mem_bandwidth"] = bw.note
    for name, frame in frames.items():
        frame.attrs["note"] = notes[name]  # the API hands the frames out alone: the note travels with each
    return KernelTables(frames, notes)


@dataclass(frozen=True, eq=False)
class ReportTables:
    """Of one input, per name of :data:`REPORT_TABLES`: the full table's first rows (``frames``), its number
    of rows (``rows``) and its note (``notes``, '' when none)."""

    frames: dict[str, pd.DataFrame]
    rows: dict[str, int]
    notes: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        """``{name: {"rows": [...], "total_rows": int, "note": str}}`` in :data:`REPORT_TABLES` order."""
        return {name: {"rows": self.frames[name].to_dict(orient="records"), "total_rows": self.rows[name],
                       "note": self.notes[name]} for name in REPORT_TABLES}


def report_tables(trace: Trace, top: int = TOP_ROWS) -> ReportTables:
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
    notes = {name: (_EMPTY.get(name, "") if rows[name] == 0 else "") for name in REPORT_TABLES}
    return ReportTables({k: v.reset_index(drop=True) for k, v in frames.items()}, rows, notes)
