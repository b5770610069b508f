"""The versioned JSON report: ``to_report(analysis) -> dict`` and ``render(analysis, out)``.

The shape is fixed by ``traceread/data/report.schema.json`` (``schema_version``): scripts depend on
it. Times are int64 ns in each trace's own time base: each ``traces`` entry
carries ``time_base`` and ``epoch_offset_ns`` (add it to any ``start_ns``/``end_ns`` of that trace
for Unix-epoch ns; null when the time base is not epoch). The ``job`` object's times are aligned ns
on its reference rank's clock (see ``traceread.ranks.job``). Kernel names are full
(not shortened); Python frames and host-call names are path-scrubbed like everywhere else. The
``steps`` and ``gaps`` tables are objects of equal-length columns (``json_tables``; schema 2.0):
``pandas.DataFrame(doc["gaps"])`` reads one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from importlib import resources
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traceread.analysis import SCHEMA_VERSION, Analysis, TraceSummary
from traceread.analysis.scope import analysis_scope
from traceread.metrics.compact import REPORT_TABLES, CompactTables
from traceread.render import json_tables, notes
from traceread.render.jobsection import section_record
from traceread.render.json_text import plain
from traceread.render.names import scrub_paths
from traceread.runner.write import write_pieces
from traceread.vocabulary import GAP_CLASSES, NO_GPU_ACTIVITY, PARTS, VERDICTS, part_col

if TYPE_CHECKING:
    from traceread.analysis import LaunchStats, Removal
    from traceread.metrics.mfu import MfuResult

# Gap fields beyond the fixed ones that help a script (overlap measurements, in the engine's names).
_GAP_EXTRA = ("dur_ns", "offset_ns", "phase", "comm_ns", "memcpy_htod_ns", "dataloader_ns", "sync_ns", "cpu_runtime_ns",
              "launch_count", "next_kernel_name", "longest_cpu_name", "python_frame", "evidence_kind",
              "comm_collective_ns", "comm_p2p_ns", "comm_type", "step_p2p_count")
_SCRUB = ("next_kernel_name", "longest_cpu_name", "python_frame")



def _compact(t: CompactTables) -> dict[str, Any]:
    """``{name: {"rows": [...], "total_rows": int, "note": str}}`` of the report's tables, in their order."""
    return {name: {"rows": t.frames[name].to_dict(orient="records"), "total_rows": t.rows[name],
                   "note": notes.text_or_empty(t.notes[name])} for name in REPORT_TABLES}

def schema() -> dict[str, Any]:
    """The JSON Schema of the report (draft 2020-12), its enums of classes and causes read off the cause
    records (``traceread.causes``; the shipped file lists the built-in ones, as tests/unit/causes/test_causes.py checks)."""
    doc: dict[str, Any] = json.loads(resources.files("traceread").joinpath("data/report.schema.json").read_text("utf-8"))
    defs, parts = doc["$defs"], doc["properties"]["attribution"]["items"]["properties"]["parts"]
    defs["gap_class"]["enum"] = list(GAP_CLASSES)
    defs["by_class_ns"]["required"] = list(GAP_CLASSES)
    defs["cause"]["enum"] = list(VERDICTS) + [NO_GPU_ACTIVITY]
    parts["required"] = list(PARTS)
    steps = doc["properties"]["steps"]  # a column of idle ns per gap class
    steps["required"] = [c for c in steps["required"] if not c.endswith("_ns") or c in steps["properties"]] + \
        [part_col(c) for c in GAP_CLASSES]
    parts["propertyNames"]["enum"] = list(PARTS)
    return doc


_STEP_BASE = ("trace", "rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier")


def _step_fields(a: Analysis) -> tuple[json_tables.Field, ...]:
    """The ``steps`` table's columns: the step, then its idle ns per gap class (``part_col``: as in
    scan's ``steps.parquet``)."""
    s = a.steps
    if not len(s.columns):
        return ()
    F = json_tables.Field
    return (*(F(c, s[c]) for c in _STEP_BASE), *(F(part_col(c), s[part_col(c)]) for c in GAP_CLASSES))


def _gap_fields(a: Analysis) -> tuple[json_tables.Field, ...]:
    """The ``gaps`` table's columns (text path-scrubbed). The evidence sentence is not one: it is made from
    the other columns (``evidence_kind`` and the overlaps over the duration), as the Markdown and the
    CSV show it."""
    g = a.gaps
    if "class" not in g.columns:
        return ()
    F = json_tables.Field
    fixed = [F(c, g[c]) for c in ("trace", "rank", "device", "step", "start_ns", "end_ns", "class")]
    extra = [F(c, g[c], text=scrub_paths if c in _SCRUB else None) for c in _GAP_EXTRA if c in g.columns]
    return (*fixed, *extra)


def step_records(a: Analysis) -> dict[str, list]:
    """The report's ``steps`` table as ``{column: list}`` (what :func:`chunks` writes)."""
    return json_tables.columns_of(_step_fields(a), len(a.steps))


def gap_records(a: Analysis) -> dict[str, list]:
    """The report's ``gaps`` table as ``{column: list}`` (the slow form: :func:`chunks` writes it
    column by column, a chunk of rows at a time)."""
    return json_tables.columns_of(_gap_fields(a), len(a.gaps))


def chunks(a: Analysis, whole: Callable[[], Analysis] | None = None) -> Iterator[bytes]:
    """The bytes of :func:`dumps`, piece by piece: the gap and step tables column by column
    (``json_tables``); the same document as ``encode(to_report(a))``. ``whole``: ``a`` with its what-if
    (and its unavailable lines), asked for once the tables are written (``a`` is the analysis before it)."""
    doc = to_report(a, tables=False, replay=False)
    tables: dict[str, Any] = {"steps": (_step_fields(a), len(a.steps)), "gaps": (_gap_fields(a), len(a.gaps))}
    last = whole or (lambda: a)
    # written after the tables, as the document has always placed them
    late = {"whatif": lambda: _whatif(last()), "unavailable": lambda: list(last().unavailable)}
    yield from json_tables.document_chunks(doc, tables, late)
    yield b"\n"


def _attribution(a: Analysis) -> list[dict[str, Any]]:
    out = []
    for r in _records(a.attribution, ["trace", "rank", "device", "step_ns"] + [part_col(p) for p in PARTS]):
        step_ns = r["step_ns"] or 1
        parts = {p: {"ns": r.pop(part_col(p)), "share": 0.0} for p in PARTS}
        for v in parts.values():
            v["share"] = v["ns"] / step_ns
        out.append({**r, "parts": parts})
    return out


def _table(df: pd.DataFrame) -> list[dict[str, Any]]:
    return plain(_records(df, list(df.columns)))


def _records(df: pd.DataFrame, cols: list[str]) -> list[dict[str, Any]]:
    """Column-wise conversion to plain Python values (no per-cell pandas access): the small tables."""
    if df.empty:
        return []
    data = {}
    for c in cols:
        s = df[c]
        if isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object or pd.api.types.is_string_dtype(s):
            data[c] = ["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in s.tolist()]
        else:
            data[c] = s.to_numpy().tolist()
    return [dict(zip(cols, vals, strict=True)) for vals in zip(*(data[c] for c in cols), strict=True)]


def mfu_record(m: MfuResult) -> dict[str, Any]:
    """The report's ``mfu`` object: every field of the result, in order (tuples as lists)."""
    d = {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}
    d["warnings"], d["notes"] = notes.texts(m.warnings), notes.texts(m.notes)
    if "notes" in m.timing:  # the step timing's notes and warnings, as data: worded here
        d["timing"] = {**m.timing, "notes": [notes.text(n) for n in m.timing["notes"]],
                       "warnings": [notes.text(w) for w in m.timing.get("warnings", ())]}
    d["peak"] = {**m.peak, "warnings": [notes.text(w) for w in m.peak.get("warnings", ())]}
    return d


def removal_record(r: Removal) -> dict[str, Any]:
    """The report's ``removal`` object; ``mfu``/``mfu_without`` only when MFU is known."""
    d: dict[str, Any] = {"cause": r.cause, "step_time_ns": r.step_time_ns,
                         "step_time_without_ns": r.step_time_without_ns, "speedup": r.speedup}
    if r.mfu is not None:
        d["mfu"], d["mfu_without"] = r.mfu, r.mfu_without
    return d


def _whatif(a: Analysis) -> dict[str, Any] | None:
    """The report's ``whatif`` object (1.3), null when the replay could not run."""
    if a.whatif is None:
        return None
    from traceread.render.whatif import consistency_of, record

    return plain(record(a.whatif, consistency_of(a)))


def launch_stats_record(s: LaunchStats) -> dict[str, Any]:
    """The report's ``launch_stats`` object: name -> number, the figures the run could give, in order."""
    return {f.name: v for f in dataclasses.fields(s) if (v := getattr(s, f.name)) is not None}


def trace_entry(t: TraceSummary) -> dict[str, Any]:
    """One ``traces`` entry (shared by ``analyze --json`` and ``gaps --json``)."""
    return {"index": t.index, "path": t.path, "format": t.format, "generation": t.generation,
            "time_base": t.time_base, "epoch_offset_ns": t.epoch_offset_ns,
            "devices": [plain(d) for d in t.devices], "ranks": list(t.ranks),
            "world_size": t.world_size, "start_ns": t.start_ns, "end_ns": t.end_ns,
            "start_epoch_ns": t.start_epoch_ns, "end_epoch_ns": t.end_epoch_ns,
            "step_source": t.step_source, "truncated": t.truncated}


def to_report(a: Analysis, tables: bool = True, replay: bool = True) -> dict[str, Any]:
    """The whole report as plain JSON data (see the schema for every field); ``tables=False`` leaves
    ``steps`` and ``gaps`` empty (:func:`chunks` writes them column-wise), ``replay=False`` leaves
    ``whatif`` and ``unavailable`` None (:func:`chunks` reads them after the tables)."""
    from traceread import __version__

    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "traceread", "version": __version__},
        "traces": [trace_entry(t) for t in a.traces],
        "failures": [{"path": f.path, "problem": f.problem} for f in a.failures],
        "steps": step_records(a) if tables else {},
        "gaps": gap_records(a) if tables else {},
        "attribution": _attribution(a),
        "dominant_cause": a.dominant_cause,
        "dominant_cost_share": a.dominant_cost_share,
        "dominant_evidence": a.dominant_evidence,
        "second_cause": a.second_cause,
        "second_cost_share": a.second_cost_share,
        "verdict_scope": analysis_scope(a).to_dict(),
        "removal": plain(removal_record(a.removal)) if a.removal is not None else None,
        "mfu": plain(mfu_record(a.mfu)) if a.mfu is not None else None,
        "mfu_hint": a.mfu_hint or None,
        "kernels": _table(a.kernels) if len(a.kernels.columns) > 1 else [],
        "collectives": _table(a.collectives) if len(a.collectives.columns) > 1 else [],
        "kernels_tables": [None if t is None else {"trace": i, **plain(_compact(t))} for i, t in enumerate(a.tables)],
        "launch_stats": plain(launch_stats_record(a.launch_stats)) if a.launch_stats is not None else None,
        "whatif": _whatif(a) if replay else None,
        "notes": [scrub_paths(t) for t in notes.texts(a.notes)],
        "unavailable": list(a.unavailable) if replay else None,
        "thresholds": plain(a.cfg.to_dict()),
        "job": plain(section_record(a.job)) if a.job is not None else None,
    }


def dumps(a: Analysis) -> bytes:
    return b"".join(chunks(a))


def encode(report: dict[str, Any]) -> bytes:
    """The bytes of ``analyze --json`` for a :func:`to_report` document (its tables: one line per column)."""
    tables = {k: report[k] for k in ("steps", "gaps") if isinstance(report.get(k), dict)}
    return b"".join(json_tables.document_chunks(report, tables)) + b"\n"


def render(analysis: Analysis, out: IO[bytes], whole: Callable[[], Analysis] | None = None) -> None:
    """The JSON report of ``analysis`` to ``out`` (``whole``: as :func:`chunks`)."""
    write_pieces(out, chunks(analysis, whole))
