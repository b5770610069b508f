"""``gaps.parquet``, ``steps.parquet`` and ``traces.parquet``: every gap, step and trace unit of the scan.

The gap and step rows are the per-trace JSON report's own rows, turned into Arrow tables by the
worker from the report it has just built (:func:`report_tables`; the parent never parses a
report) and kept in the cache, so a re-scan rebuilds the tables without reading any trace or report.

Written as the scan goes (:class:`TableWriter`): when a directory's jobs are final, its traces'
rows are appended, one row group per trace with a fixed schema, so the parent holds one trace's
rows at a time. A parquet file cannot be read half-written (its footer comes last), so the rows go
to hidden temporary files in OUTDIR (``.gaps.parquet-*.tmp``, ...) that are renamed over the
tables at the end of the scan; until then the previous scan's tables stay readable. Every row
carries ``trace_id``, ``job``, ``rank`` and ``device``; row groups follow the order in which
directories finished (sort by ``trace_id`` for a fixed order). Times are the trace's own ns plus,
where the trace's time base is the Unix epoch, ``start_epoch_ns``/``end_epoch_ns``.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterable
from typing import Any

from traceread.analysis import GAP_CLASSES, PARTS, part_col

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


def gap_columns(doc: dict[str, Any], row: dict[str, Any]) -> dict[str, list]:
    g, offset = doc.get("gaps") or [], row.get("epoch_offset_ns")
    cols = _columns(g, ("rank", "device", "step", "start_ns", "end_ns", "class", "evidence", "phase") + _GAP_NUM + _GAP_TEXT)
    _ranks(cols, row.get("rank_of_frame"))
    # the JSON report writes a non-finite number as null: so does the table
    cols["phase"] = [v if v is None or math.isfinite(v) else None for v in cols["phase"]]
    cols["start_epoch_ns"], cols["end_epoch_ns"] = _epoch(cols["start_ns"], offset), _epoch(cols["end_ns"], offset)
    return cols


def step_columns(doc: dict[str, Any], row: dict[str, Any]) -> dict[str, list]:
    s, offset = doc.get("steps") or [], row.get("epoch_offset_ns")
    cols = _columns(s, ("rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier"))
    _ranks(cols, row.get("rank_of_frame"))
    for c in GAP_CLASSES:
        cols[part_col(c)] = [r["idle_by_class"][c] for r in s]
    cols["start_epoch_ns"], cols["end_epoch_ns"] = _epoch(cols["start_ns"], offset), _epoch(cols["end_ns"], offset)
    return cols


def _table(schema: Any, cols: dict[str, list]) -> Any:
    import pyarrow as pa

    return pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in schema}, schema=schema)


def report_tables(doc: dict[str, Any], row: dict[str, Any], trace_id: str) -> dict[str, bytes]:
    """Worker side: the gap and step rows of one per-trace report (``doc``, as written) as Arrow IPC
    streams with the tables' schemas, their ``job`` column blank (the job is known only once the
    directory is grouped). Bytes travel, cache and are read back far cheaper than Python lists."""
    import pyarrow as pa

    schemas = _schemas()
    out = {}
    for name, cols in (("gaps", gap_columns(doc, row)), ("steps", step_columns(doc, row))):
        n = len(cols["rank"])
        table = _table(schemas[name], {**cols, "trace_id": [trace_id] * n, "job": [""] * n})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, schemas[name]) as w:
            w.write_table(table)
        out[name] = sink.getvalue().to_pybytes()
    return out


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


class TableWriter:
    """The three tables of one scan, appended to trace by trace and renamed into place by :meth:`commit`."""

    def __init__(self, outdir: str) -> None:
        import pyarrow.parquet as pq

        self.outdir = outdir
        self.schemas = _schemas()
        self.counts = dict.fromkeys(self.schemas, 0)
        self.tmp: dict[str, str] = {}
        self.writers: dict[str, Any] = {}
        try:
            for name, schema in self.schemas.items():
                fd, self.tmp[name] = tempfile.mkstemp(prefix=f".{name}.parquet-", suffix=".tmp", dir=outdir)
                os.close(fd)
                self.writers[name] = pq.ParquetWriter(self.tmp[name], schema, compression="zstd")
        except BaseException:
            self.abort()
            raise

    def add(self, trace_id: str, job: str, row: dict[str, Any], streams: dict[str, bytes]) -> None:
        """Append one trace's rows: ``row`` its index row, ``streams`` its :func:`report_tables`."""
        import pyarrow as pa

        for name in ("gaps", "steps"):
            table = pa.ipc.open_stream(streams[name]).read_all()
            if table.num_rows:
                i = table.schema.get_field_index("job")
                table = table.set_column(i, table.schema.field(i), pa.array([job] * table.num_rows, pa.string()))
                self._write(name, table)
        self._write("traces", _table(self.schemas["traces"], trace_columns(row, trace_id, job)))

    def _write(self, name: str, table: Any) -> None:
        if table.num_rows:
            self.writers[name].write_table(table)
            self.counts[name] += table.num_rows

    def commit(self) -> dict[str, int]:
        """Close the files and rename them over ``gaps/steps/traces.parquet``; returns the row counts."""
        from traceread.atomic import _umask

        for w in self.writers.values():
            w.close()
        self.writers = {}
        for name, tmp in self.tmp.items():
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, os.path.join(self.outdir, f"{name}.parquet"))
        self.tmp = {}
        return dict(self.counts)

    def abort(self) -> None:
        """Drop the unfinished files (the previous tables stay)."""
        for w in self.writers.values():
            with contextlib.suppress(Exception):
                w.close()
        for tmp in self.tmp.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.writers, self.tmp = {}, {}
