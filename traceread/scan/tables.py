"""``gaps.parquet``, ``steps.parquet`` and ``traces.parquet``: every gap, step and trace unit of the scan.

Built from the per-trace JSON reports (the same rows, so counts agree with them by construction and
a re-scan rebuilds them from cached reports without reading any trace). Written one row group per
trace with a fixed schema, so the parent holds one trace's rows at a time. Every row carries
``trace_id``, ``job``, ``rank`` and ``device``; times are the trace's own ns plus, where the trace's
time base is the Unix epoch, ``start_epoch_ns``/``end_epoch_ns``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import orjson

from traceread.analysis import GAP_CLASSES, PARTS, part_col
from traceread.atomic import atomic_open

_GAP_NUM = ("dur_ns", "comm_ns", "memcpy_htod_ns", "dataloader_ns", "sync_ns", "cpu_runtime_ns", "launch_count")
_GAP_TEXT = ("next_kernel_name", "longest_cpu_name", "python_frame")


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    key = [("trace_id", pa.string()), ("job", pa.string()), ("rank", pa.int32()), ("device", pa.int32()),
           ("frame_rank", pa.int32())]
    span = [("start_ns", pa.int64()), ("end_ns", pa.int64()), ("start_epoch_ns", pa.int64()),
            ("end_epoch_ns", pa.int64())]
    gaps = pa.schema(key + [("step", pa.int64())] + span + [("class", pa.string()), ("evidence", pa.string())]
                     + [(c, pa.int64()) for c in _GAP_NUM] + [("phase", pa.float64())]
                     + [(c, pa.string()) for c in _GAP_TEXT])
    steps = pa.schema(key + [("step", pa.int64())] + span
                      + [("busy_ns", pa.int64()), ("idle_ns", pa.int64()), ("warmup", pa.bool_()),
                         ("outlier", pa.bool_())] + [(part_col(c), pa.int64()) for c in GAP_CLASSES])
    traces = pa.schema(key + [("path", pa.string()), ("format", pa.string()), ("gpu", pa.string()),
                              ("time_base", pa.string()), ("epoch_offset_ns", pa.int64())] + span
                       + [("steps", pa.int64()), ("median_step_ns", pa.int64()), ("step_ns", pa.int64())]
                       + [(part_col(p), pa.int64()) for p in PARTS])
    return {"gaps": gaps, "steps": steps, "traces": traces}


def _epoch(values: list[int], offset: int | None) -> list[int | None]:
    return [None] * len(values) if offset is None else [v + offset for v in values]


def _columns(records: list[dict[str, Any]], names: Iterable[str]) -> dict[str, list]:
    return {n: [r.get(n) for r in records] for n in names}


def _ranks(cols: dict[str, list], rank_of_frame: dict[str, int | None] | None) -> None:
    """``rank``: the rank the trace claims (None when nothing says); ``frame_rank``: the report's number."""
    cols["frame_rank"] = cols["rank"]
    if rank_of_frame is not None:
        cols["rank"] = [rank_of_frame.get(str(r)) for r in cols["frame_rank"]]


def gap_columns(doc: dict[str, Any], trace_id: str, job: str, row: dict[str, Any]) -> dict[str, list]:
    g, offset = doc.get("gaps") or [], row.get("epoch_offset_ns")
    cols = _columns(g, ("rank", "device", "step", "start_ns", "end_ns", "class", "evidence", "phase") + _GAP_NUM + _GAP_TEXT)
    _ranks(cols, row.get("rank_of_frame"))
    cols["trace_id"], cols["job"] = [trace_id] * len(g), [job] * len(g)
    cols["start_epoch_ns"], cols["end_epoch_ns"] = _epoch(cols["start_ns"], offset), _epoch(cols["end_ns"], offset)
    return cols


def step_columns(doc: dict[str, Any], trace_id: str, job: str, row: dict[str, Any]) -> dict[str, list]:
    s, offset = doc.get("steps") or [], row.get("epoch_offset_ns")
    cols = _columns(s, ("rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier"))
    _ranks(cols, row.get("rank_of_frame"))
    for c in GAP_CLASSES:
        cols[part_col(c)] = [r["idle_by_class"][c] for r in s]
    cols["trace_id"], cols["job"] = [trace_id] * len(s), [job] * len(s)
    cols["start_epoch_ns"], cols["end_epoch_ns"] = _epoch(cols["start_ns"], offset), _epoch(cols["end_ns"], offset)
    return cols


def trace_columns(row: dict[str, Any], trace_id: str, job: str) -> dict[str, list]:
    units = row.get("units") or [{"rank": (row["ranks"] or [None])[0], "device": None, "step_ns": 0}]
    n, off = len(units), row.get("epoch_offset_ns")
    cols: dict[str, list] = {"trace_id": [trace_id] * n, "job": [job] * n,
                             "rank": [u["rank"] for u in units], "device": [u["device"] for u in units]}
    if row.get("units"):
        _ranks(cols, row.get("rank_of_frame"))
    else:  # no analysable window: one row for the trace, with the rank it claims
        cols["frame_rank"] = [None]
    for k, v in (("path", row["path"]), ("format", row["format"]), ("gpu", ", ".join(row["gpus"])),
                 ("time_base", row["time_base"]), ("epoch_offset_ns", off), ("start_ns", row["start_ns"]),
                 ("end_ns", row["end_ns"]), ("steps", row["steps"]), ("median_step_ns", row["median_step_ns"])):
        cols[k] = [v] * n
    cols["start_epoch_ns"], cols["end_epoch_ns"] = _epoch(cols["start_ns"], off), _epoch(cols["end_ns"], off)
    cols["step_ns"] = [u["step_ns"] for u in units]
    for p in PARTS:
        cols[part_col(p)] = [u.get(part_col(p), 0) for u in units]
    return cols


def write_tables(outdir: str, traces: list[tuple[str, str, dict[str, Any]]]) -> dict[str, int]:
    """Write the three parquet files; ``traces`` is (trace_id, job, index row) in output order.

    Returns the row count of each table.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = _schemas()
    counts = dict.fromkeys(schemas, 0)
    with atomic_open(os.path.join(outdir, "gaps.parquet"), "wb") as gf, \
            atomic_open(os.path.join(outdir, "steps.parquet"), "wb") as sf, \
            atomic_open(os.path.join(outdir, "traces.parquet"), "wb") as tf:
        writers = {name: pq.ParquetWriter(fh, schemas[name], compression="zstd")
                   for name, fh in (("gaps", gf), ("steps", sf), ("traces", tf))}
        try:
            for trace_id, job, row in traces:
                with open(os.path.join(outdir, "traces", trace_id + ".json"), "rb") as fh:
                    doc = orjson.loads(fh.read())
                for name, cols in (("gaps", gap_columns(doc, trace_id, job, row)),
                                   ("steps", step_columns(doc, trace_id, job, row)),
                                   ("traces", trace_columns(row, trace_id, job))):
                    table = pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in schemas[name]},
                                     schema=schemas[name])
                    if table.num_rows:
                        writers[name].write_table(table)
                        counts[name] += table.num_rows
                del doc
        finally:
            for w in writers.values():
                w.close()
    return counts
