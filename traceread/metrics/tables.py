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

The report's compact part of them is :mod:`traceread.metrics.compact`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from traceread.metrics.collectives import collective_table
from traceread.metrics.copies import copy_summary
from traceread.metrics.host_api import host_api_summary
from traceread.metrics.mem_bandwidth import mem_bandwidth
from traceread.metrics.op_time import kernel_owners, module_table, op_table
from traceread.metrics.ranges import range_summary
from traceread.note import TABLE_EMPTY, Note
from traceread.trace import Trace

TABLES = ("ops", "modules", "ranges", "copies", "host_api", "collectives", "mem_bandwidth")


@dataclass(frozen=True, eq=False)
class KernelTables:
    """One DataFrame per table name of :data:`TABLES`, and a note per table (a :class:`~traceread.note.Note`
    worded by ``traceread.render.notes``, None when none)."""

    frames: dict[str, pd.DataFrame]
    notes: dict[str, Note | None]


def kernel_tables(trace: Trace) -> KernelTables:
    """Every table of :data:`TABLES` for ``trace``."""
    owners = kernel_owners(trace)  # shared by the op, module and bandwidth tables
    bw = mem_bandwidth(trace, owners)
    frames = {"ops": op_table(trace, owners), "modules": module_table(trace, owners), "ranges": range_summary(trace),
              "copies": copy_summary(trace), "host_api": host_api_summary(trace),
              "collectives": collective_table(trace), "mem_bandwidth": bw.table}
    notes: dict[str, Note | None] = {name: (Note.of(TABLE_EMPTY, table=name) if frames[name].empty else None)
                                     for name in TABLES}
    notes["mem_bandwidth"] = bw.note  # (its own: which kernels have no recorded bytes)
    return KernelTables(frames, notes)

