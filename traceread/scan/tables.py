"""``gaps.parquet``, ``steps.parquet`` and ``traces.parquet``: every gap, step and trace unit of the scan.

The gap and step rows are the per-trace JSON report's own rows, turned into Arrow tables by the
worker from the report it has just built (:func:`report_tables`; the parent never parses a
report) and kept in the cache, so a re-scan rebuilds the tables without reading any trace or report.

Written as the scan goes (:class:`TableWriter`): when a directory's jobs are final, its traces'
rows are appended, with a fixed schema, in row groups sized by rows (:data:`ROW_GROUP_ROWS`), not
one per trace: a row group per tiny trace made the footer most of the file, and its metadata, held
by the writer until the file closes, most of the parent's memory. The
parent holds at most one row group's rows per table (and a large trace's own rows). A parquet file cannot be read half-written (its footer comes last), so the rows go
to hidden temporary files in OUTDIR (``.gaps.parquet-*.tmp``, ...) that are renamed over the
tables at the end of the scan; until then the previous scan's tables stay readable. Every row
carries ``trace_id``, ``job``, ``rank`` and ``device``; row groups follow the order in which
directories finished (sort by ``trace_id`` for a fixed order). Times are the trace's own ns plus,
where the trace's time base is the Unix epoch, ``start_epoch_ns``/``end_epoch_ns``. Each
``traces.parquet`` row also carries its trace's verdict, ``dominant_cause`` and ``dominant_cost_share``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from typing import Any

from traceread.scan.whatifcols import FIXES, column, unit_columns
from traceread.vocabulary import GAP_CLASSES, PARTS, part_col

# A row group is written once this many rows (or ROW_GROUP_BYTES of them) are waiting; a trace with more
# rows than that is written at once, in row groups of this many rows
ROW_GROUP_ROWS = 1 << 16
ROW_GROUP_BYTES = 16 << 20
# small tables waiting for their row group are joined into one block every this many (each holds its own
# buffers and schema: ten thousand of them, a few rows each, would cost more than their rows)
JOIN_EVERY = 256

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
                       + [(part_col(p), pa.int64()) for p in PARTS]
                       + [("dominant_cause", pa.string()), ("dominant_cost_share", pa.float64())]
                       + [("dependency_error", pa.float64())] + [(column(f), pa.int64()) for f in FIXES])
    return {"gaps": gaps, "steps": steps, "traces": traces}


_INT64 = (-(1 << 63), (1 << 63) - 1)


def _epoch(values: list[int], offset: int | None) -> list[int | None]:
    """Epoch ns of ``values``; None where the offset is unknown or the sum leaves int64 (an epoch offset
    near 2^63 from the file: the trace's own times stay, its epoch times are unknown)."""
    if offset is None:
        return [None] * len(values)
    out: list[int | None] = [v + offset if v is not None else None for v in values]
    return [None] * len(values) if any(v is not None and not _INT64[0] <= v <= _INT64[1] for v in out) else out


def _ranks(cols: dict[str, list], rank_of_frame: dict[str, int | None] | None) -> None:
    """``rank``: the rank the trace claims (None when nothing says); ``frame_rank``: the report's number."""
    cols["frame_rank"] = cols["rank"]
    if rank_of_frame is not None:
        cols["rank"] = [rank_of_frame.get(str(r)) for r in cols["frame_rank"]]


def step_columns(doc: dict[str, Any], row: dict[str, Any]) -> dict[str, list]:
    """The step rows of one report (its ``steps`` table: columns, schema 2.0) as lists per column."""
    s, offset = doc.get("steps") or {}, row.get("epoch_offset_ns")
    n = len(s.get("rank", []))
    cols = {c: list(s.get(c, [None] * n)) for c in ("rank", "device", "step", "start_ns", "end_ns", "busy_ns",
                                                     "idle_ns", "warmup", "outlier")}
    _ranks(cols, row.get("rank_of_frame"))
    for c in GAP_CLASSES:
        cols[part_col(c)] = list(s.get(part_col(c), [0] * n))
    cols["start_epoch_ns"], cols["end_epoch_ns"] = _epoch(cols["start_ns"], offset), _epoch(cols["end_ns"], offset)
    return cols


def _table(schema: Any, cols: dict[str, list]) -> Any:
    import pyarrow as pa

    return pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in schema}, schema=schema)


_GAP_NUMBERS = ("rank", "device", "step", "start_ns", "end_ns", "phase") + _GAP_NUM


def gap_numbers(gaps: Any) -> dict[str, Any] | None:
    """The numeric gap columns of an Analysis' ``gaps`` frame, copied (the frame can then go), for
    :func:`gap_table`: the report writes these same columns' values (``to_numpy().tolist()``). None
    where a column is not of the table's kind (the report's values are then converted instead)."""
    import numpy as np

    out = {}
    for c in _GAP_NUMBERS:
        if c not in gaps.columns:
            continue
        dt = gaps[c].dtype
        dt = getattr(dt, "subtype", dt)  # the engine's sparse overlap columns: their dense values
        if not isinstance(dt, np.dtype) or dt.kind not in ("fiu" if c == "phase" else "iu"):
            return None
        out[c] = np.array(gaps[c].to_numpy(), dtype=dt)  # a copy: no view keeps the frame's block alive
    return out


def gap_texts(gaps: Any, cfg: Any) -> dict[str, list[str]]:
    """The text gap columns of an Analysis' ``gaps`` frame as the report writes them (``class``, the
    path-scrubbed ``evidence`` and names; '' for missing), for :func:`gap_table`: converted column by
    column (names once per category), never a record per gap; the evidence made from its data
    (``rules.evidence``, ``cfg``: the analysis' thresholds)."""
    import numpy as np
    import pandas as pd

    from traceread.render.json_tables import text_values
    from traceread.render.names import scrub_paths
    from traceread.rules.evidence import evidence_text, is_data

    out = {}
    for c in ("class", "evidence") + _GAP_TEXT:
        if c == "evidence" and "class" in gaps.columns and any(k == c or is_data(k) for k in gaps.columns):
            out[c] = text_values(evidence_text(gaps, None, cfg).tolist(), scrub_paths)
            continue
        if c not in gaps.columns:
            continue
        s, scrub = gaps[c], scrub_paths if c != "class" else None
        if isinstance(s.dtype, pd.CategoricalDtype):
            table = np.array(text_values(s.cat.categories.tolist(), scrub) + [""], dtype=object)
            out[c] = table[s.cat.codes.to_numpy()].tolist()
        else:
            values = s.to_numpy(dtype=object)
            out[c] = text_values(values.tolist(), scrub)
    return out


def gap_table(doc: dict[str, Any], row: dict[str, Any], trace_id: str, numbers: dict[str, Any] | None = None,
              texts: dict[str, list[str]] | None = None) -> Any:
    """The gaps table of one report (its ``gaps`` table's columns, schema 2.0; ``rank`` the rank the
    trace claims, ``frame_rank`` the report's number, epoch times where the offset is known), converted
    by Arrow itself, the columns from ``numbers`` and ``texts`` (:func:`gap_numbers`, :func:`gap_texts`
    of the frame the report was made from) where given: the evidence sentence, which the report does
    not write, comes from ``texts`` only."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = _schemas()["gaps"]
    g = doc.get("gaps") or {}
    names: tuple[str, ...] = ("rank", "device", "step", "start_ns", "end_ns", "class", "evidence", "phase") + _GAP_NUM + _GAP_TEXT
    given = {**(numbers or {}), **(texts or {})}
    rows = len(next(iter(g.values()))) if g else len(next(iter(given.values()))) if given else 0
    if any(len(v) != rows for v in given.values()):  # not the report's rows: the report's columns alone
        given = {}
    names = tuple(c for c in names if c not in given)
    # the report's columns (missing ones, and every one without gaps, read as null)
    cols = {n: pa.array(g[n], type=schema.field(n).type) if n in g else pa.nulls(rows, schema.field(n).type)
            for n in names}
    n, offset, rank_of_frame = rows, row.get("epoch_offset_ns"), row.get("rank_of_frame")
    cols.update({c: pa.array(v, type=schema.field(c).type) for c, v in given.items()})
    cols["frame_rank"] = cols["rank"]
    if rank_of_frame is not None:  # the rank each frame number claims; null where the trace says none
        keys = pa.array([int(k) for k in rank_of_frame], pa.int32())
        values = pa.array(list(rank_of_frame.values()), pa.int32())
        cols["rank"] = values.take(pc.index_in(cols["frame_rank"], value_set=keys))
    phase = cols["phase"]  # the JSON report writes a non-finite number as null: so does the table
    cols["phase"] = pc.if_else(pc.is_finite(phase), phase, pa.scalar(None, pa.float64()))
    for end in ("start", "end"):
        cols[f"{end}_epoch_ns"] = pa.nulls(n, pa.int64())
        if offset is not None and _INT64[0] <= offset <= _INT64[1]:
            with contextlib.suppress(pa.ArrowInvalid):  # past int64: unknown, as in _epoch
                cols[f"{end}_epoch_ns"] = pc.add_checked(cols[f"{end}_ns"], pa.scalar(offset, pa.int64()))
    cols["trace_id"] = pa.array([trace_id] * n, pa.string())
    cols["job"] = pa.array([""] * n, pa.string())
    return pa.table([cols[f.name] for f in schema], schema=schema)


def report_tables(doc: dict[str, Any], row: dict[str, Any], trace_id: str,
                  numbers: dict[str, Any] | None = None, texts: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Worker side: the gap and step rows of one per-trace report (``doc``, as written) as Arrow IPC
    streams with the tables' schemas, their ``job`` column blank (the job is known only once the
    directory is grouped; ``numbers``: see :func:`gap_table`), each a ``pyarrow.Buffer`` (pickled as its bytes). Bytes travel, cache and are
    read back far cheaper than Python lists."""
    schemas = _schemas()
    cols = step_columns(doc, row)
    n = len(cols["rank"])
    tables = {"gaps": gap_table(doc, row, trace_id, numbers, texts),
              "steps": _table(schemas["steps"], {**cols, "trace_id": [trace_id] * n, "job": [""] * n})}
    return {name: _ipc(table) for name, table in tables.items()}


def _ipc(table: Any) -> Any:
    """``table`` as one Arrow IPC stream in a buffer of exactly its size (sized by a dry run: a growing
    stream doubles its buffer, and copying it out to ``bytes`` would hold the rows twice more)."""
    import pyarrow as pa

    def write(sink: Any) -> None:
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)

    size = pa.MockOutputStream()
    write(size)
    buf = pa.allocate_buffer(size.size())
    write(pa.FixedSizeBufferWriter(buf))
    return buf


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
                 ("time_base", row["time_base"]),
                 ("epoch_offset_ns", off if off is None or _INT64[0] <= off <= _INT64[1] else None), ("start_ns", row["start_ns"]),
                 ("end_ns", row["end_ns"]), ("steps", row["steps"]), ("median_step_ns", row["median_step_ns"])):
        cols[k] = [v] * n
    cols["start_epoch_ns"], cols["end_epoch_ns"] = _epoch(cols["start_ns"], off), _epoch(cols["end_ns"], off)
    cols["step_ns"] = [u["step_ns"] for u in units]
    for p in PARTS:
        cols[part_col(p)] = [u.get(part_col(p), 0) for u in units]
    # The trace's verdict (its index.json row's), on each of its rows: filter or group the units by it.
    cols["dominant_cause"] = [row.get("dominant_cause")] * n
    share = row.get("dominant_cost_share")
    cols["dominant_cost_share"] = [float(share) if share is not None else None] * n
    cols.update(unit_columns(row, units))
    return cols


def _dictionary_columns(schema: Any) -> list[str]:
    """Columns worth parquet's dictionary encoding: text and the few-valued keys. By default every column
    is tried, and the unique ns times (nearly all of the rows) make it fall back after the work: named
    columns only, the tables write in less CPU time and to smaller files."""
    import pyarrow as pa

    return [f.name for f in schema if pa.types.is_string(f.type) or f.name in ("rank", "device", "frame_rank", "step")]


class TableWriter:
    """The three tables of one scan, appended to trace by trace and renamed into place by :meth:`commit`."""

    def __init__(self, outdir: str) -> None:
        import pyarrow.parquet as pq

        self.outdir = outdir
        self.schemas = _schemas()
        self.counts = dict.fromkeys(self.schemas, 0)
        self.tmp: dict[str, str] = {}
        self.locks: list[int] = []  # the temporary files' descriptors, locked while this scan writes them
        self.writers: dict[str, Any] = {}
        # per table: the rows waiting for their row group, as joined blocks then the tables added since
        self.blocks: dict[str, list[Any]] = {name: [] for name in self.schemas}
        self.recent: dict[str, list[Any]] = {name: [] for name in self.schemas}
        self.waiting: dict[str, tuple[int, int]] = dict.fromkeys(self.schemas, (0, 0))  # rows, bytes
        self.row_groups = dict.fromkeys(self.schemas, 0)
        try:
            for name, schema in self.schemas.items():
                fd, self.tmp[name] = tempfile.mkstemp(prefix=f".{name}.parquet-", suffix=".tmp", dir=outdir)
                self.locks.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: nobody else holds it
                self.writers[name] = pq.ParquetWriter(self.tmp[name], schema, compression="zstd",
                                                      use_dictionary=_dictionary_columns(schema))
        except BaseException:
            self.abort()
            raise

    def add(self, trace_id: str, job: str, row: dict[str, Any], streams: dict[str, Any]) -> None:
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
        """Queue ``table``'s rows; a row group is written once enough wait."""
        import pyarrow as pa

        if not table.num_rows:
            return
        self.counts[name] += table.num_rows
        rows, size = self.waiting[name]
        self.waiting[name] = rows, size = rows + table.num_rows, size + table.nbytes
        self.recent[name].append(table)
        if rows >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
            self._flush(name)
        elif len(self.recent[name]) >= JOIN_EVERY:
            self.blocks[name].append(pa.concat_tables(self.recent[name]).combine_chunks())
            self.recent[name] = []

    def _flush(self, name: str, final: bool = False) -> None:
        """Write the waiting rows of table ``name`` in row groups of ``ROW_GROUP_ROWS``; fewer rows wait for
        more (a large trace's remainder), unless ``final`` or they pass ``ROW_GROUP_BYTES``."""
        import pyarrow as pa

        tables = self.blocks[name] + self.recent[name]
        self.blocks[name], self.recent[name], self.waiting[name] = [], [], (0, 0)
        if not tables:
            return
        rows = pa.concat_tables(tables).combine_chunks()
        del tables
        n = rows.num_rows
        full = n if final or rows.nbytes >= ROW_GROUP_BYTES else n - n % ROW_GROUP_ROWS
        for start in range(0, full, ROW_GROUP_ROWS):
            self.writers[name].write_table(rows.slice(start, min(ROW_GROUP_ROWS, full - start)),
                                           row_group_size=ROW_GROUP_ROWS)
            self.row_groups[name] += 1
        if full < n:
            rest = rows.slice(full)
            self.recent[name], self.waiting[name] = [rest], (rest.num_rows, rest.nbytes)

    def commit(self) -> dict[str, int]:
        """Close the files and rename them over ``gaps/steps/traces.parquet``; returns the row counts."""
        from traceread.atomic import current_umask

        for name in self.writers:
            self._flush(name, final=True)
        for w in self.writers.values():
            w.close()
        self.writers = {}
        for name, tmp in self.tmp.items():
            os.chmod(tmp, 0o666 & ~current_umask())
            os.replace(tmp, os.path.join(self.outdir, f"{name}.parquet"))
        self.tmp = {}
        self._unlock()
        return dict(self.counts)

    def _unlock(self) -> None:
        for fd in self.locks:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.locks = []

    def abort(self) -> None:
        """Drop the unfinished files (the previous tables stay)."""
        for w in self.writers.values():
            with contextlib.suppress(Exception):
                w.close()
        for tmp in self.tmp.values():
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.writers, self.tmp = {}, {}
        self.blocks = {name: [] for name in self.schemas}
        self.recent = {name: [] for name in self.schemas}
        self._unlock()


def remove_stale_tables(outdir: str) -> None:
    """Remove the table files of a scan that was killed while writing them (SIGKILL, a power cut: its
    ``.gaps.parquet-*.tmp`` ...). A file still locked belongs to a scan running now, and is left."""
    try:
        names = os.listdir(outdir)
    except OSError:
        return
    for name in names:
        if not (name.startswith(tuple(f".{t}.parquet-" for t in ("gaps", "steps", "traces"))) and name.endswith(".tmp")):
            continue
        path = os.path.join(outdir, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # only when no living scan holds it
            os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)
