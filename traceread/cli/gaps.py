"""``traceread gaps TRACE``: steps and every compute-idle gap, with what overlapped each."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import click
import numpy as np
import pandas as pd

from traceread.analysis import SCHEMA_VERSION, summarize_trace
from traceread.analysis.pipeline import idle_by_class
from traceread.atomic import atomic_open
from traceread.cli.output import emit_chunks, json_option, output_path
from traceread.config import Thresholds, parse_set_options
from traceread.engine.gaps import FRACTION_COLUMNS, OVERLAP_KINDS, with_fractions
from traceread.engine.step_totals import step_totals
from traceread.note import Note
from traceread.render import csv_table, json_tables, rowjoin
from traceread.render.fmt import ViewerClock, dur, plural
from traceread.render.notes import text as note_text
from traceread.rules.evidence import EvidenceChunks, shown_columns
from traceread.runner import load
from traceread.runner.ahead import mapped_ahead
from traceread.runner.gaps import classified_gaps, gaps_heap
from traceread.runner.write import write_pieces
from traceread.vocabulary import GAP_CLASSES, part_col

_STEP_FIELDS = ["rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier"]
# Not in the JSON table (schema 2.0: its columns carry no derivation) nor, without --derived, in the CSV:
# the fractions of the duration and the evidence sentence made from them (the sentence costs as much as
# the rest of the CSV: a user asks for it)
_DERIVED = frozenset((*FRACTION_COLUMNS, "evidence"))
_NAME_WIDTH = 60  # kernel names run to kilobytes (templates); the table shows their start
_TOP_GAP_COLS = ["rank", "device", "step", "start", "duration", "class", "comm_frac", "cpu_runtime_frac",
                 "sync_frac", "launch_count", "next_kernel_name"]


def _columns(gaps: pd.DataFrame, cfg: Thresholds) -> list[tuple[str, pd.Series | None,
                                                              Callable[[int, int], np.ndarray] | None]]:
    """The written gap columns in ``with_fractions`` order, evidence after class: (name, the frame's
    column, or a function of rows [lo, hi) for what is made per chunk: the fractions and the
    evidence text, made from the evidence data by ``rules.evidence``)."""
    dur = gaps["dur_ns"].to_numpy(dtype=np.float64)
    kind_of = dict(zip(FRACTION_COLUMNS, OVERLAP_KINDS, strict=True))

    def fraction(ns: pd.Series) -> Callable[[int, int], np.ndarray]:
        if isinstance(ns.dtype, pd.SparseDtype):  # the engine's overlap columns
            rows = rowjoin.SparseRows(ns.array)
            return lambda lo, hi: rows(lo, hi).astype(np.float64) / dur[lo:hi]
        values = ns.array
        return lambda lo, hi: np.asarray(values[lo:hi], dtype=np.float64) / dur[lo:hi]

    out: list[tuple[str, pd.Series | None, Callable[[int, int], np.ndarray] | None]] = []
    for c in shown_columns(with_fractions(gaps.iloc[:0])):  # the order, from the definitions themselves
        if c == "evidence":
            out.append((c, None, EvidenceChunks(gaps, cfg)))
        elif c in gaps.columns:
            out.append((str(c), gaps[c], None))
        else:
            out.append((str(c), None, fraction(gaps[f"{kind_of[c]}_ns"])))
    return out


def _table(totals: pd.DataFrame, gaps: pd.DataFrame, source: str, notes: list[Note], top: int,
           clock: ViewerClock, min_listed_ns: int) -> str:
    """The text table: times as the trace's viewer shows them (``clock``), durations in ms/us; the
    raw ns stay in the JSON and CSV. Gaps under ``min_listed_ns`` (the smallest judged gap) are
    counted but not listed among the longest: a trace with few gaps would list 1 ns ones."""
    st = totals[["rank", "device", "step"]].copy()
    st["start"] = [clock(x) for x in totals["start_ns"].to_numpy()]
    for col, src in (("step_time", "step_ns"), ("busy", "busy_ns"), ("idle", "idle_ns")):
        st[col] = [dur(x) for x in totals[src].to_numpy()]
    st["idle_%"] = (100 * totals["idle_ns"] / totals["step_ns"].clip(lower=1)).round(1).to_numpy()
    st["gap_count"] = totals["gap_count"].to_numpy()
    lines = [f"steps (source: {source}); times are {clock.meaning}", *map(note_text, notes), "",
             st.to_string(index=False), ""]
    # The shown rows picked from the one column (a selection of the whole frame copied every column).
    dur_ns = gaps["dur_ns"].to_numpy()
    at = np.flatnonzero(dur_ns >= min_listed_ns)
    shown = pd.Series(dur_ns[at], index=at).nlargest(top).index.to_numpy() if top > 0 else at[:0]
    longest = with_fractions(gaps.iloc[shown])
    longest = longest.assign(start=[clock(x) for x in longest["start_ns"].to_numpy()],
                             duration=[dur(x) for x in longest["dur_ns"].to_numpy()])[_TOP_GAP_COLS]
    longest = longest.astype({"next_kernel_name": str})
    longest["next_kernel_name"] = longest["next_kernel_name"].str.slice(0, _NAME_WIDTH)
    shorter = len(gaps) - len(at)
    skipped = f" ({shorter} under {dur(min_listed_ns)}, the smallest judged gap, not listed)" if shorter else ""
    lines += [f"{plural(len(gaps), 'gap')}; the {len(longest)} longest{skipped}:",
              longest.to_string(index=False) if len(longest) else "(none)"]
    return "\n".join(lines)


@click.command("gaps")
@click.argument("trace", type=click.Path(dir_okay=False))
@json_option
@click.option("--csv", "csv_path", metavar="PATH", default=None, callback=output_path, help="Write the gaps table as CSV.")
@click.option("--derived", is_flag=True, default=False,
              help="In the CSV, also each overlap's share of the gap (X_frac = X_ns / dur_ns) and the evidence "
                   "sentence (made per gap: slower).")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Mark the first K steps as warmup.")
@click.option("--step-range", default=None, metavar="NAME", help="NVTX range to use as the step marker.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True, help="Longest gaps shown in the table.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Override a threshold.")
def command(trace: str, json_path: str | None, csv_path: str | None, derived: bool, warmup_steps: int | None,
            step_range: str | None, top: int, sets: tuple[str, ...]) -> None:
    """Steps and every compute-idle gap of each GPU, with what overlapped each gap."""
    cfg = Thresholds().with_overrides(parse_set_options(sets))
    with gaps_heap():  # freed heap pages reused by the next stage, not given back and faulted in again
        _command(trace, cfg, json_path, csv_path, derived, warmup_steps, step_range, top)


def _command(trace: str, cfg: Thresholds, json_path: str | None, csv_path: str | None, derived: bool,
             warmup_steps: int | None, step_range: str | None, top: int) -> None:
    tr = load(trace, progress=True, step_range=step_range)
    # the evidence data feeds the sentences only: --csv --derived writes them, nothing else here does
    result, gaps = classified_gaps(tr, cfg, warmup_steps, step_range, evidence_data=bool(csv_path and derived))
    gaps.attrs.pop("notes", None)  # not shown here; pandas would deep-copy it into every derived frame
    totals = step_totals(result.steps, gaps).assign(start_ns=result.steps["start_ns"].to_numpy())  # same rows
    columns = _columns(gaps, cfg)
    if csv_path:
        # Column-wise, a chunk of rows at a time (text cells shown with \xNN for controls, as pandas'
        # writer was given them); bytes written as they come. The JSON's columns, and with --derived
        # the fractions and sentences made from them, in their old places.
        shown = [csv_table.CsvColumn(n, v, f) for n, v, f in columns if derived or n not in _DERIVED]
        with atomic_open(csv_path, "wb") as fh:
            write_pieces(fh, csv_table.csv_chunks(shown, len(gaps), ahead=mapped_ahead))

    def chunks() -> Iterator[bytes]:
        # The same ``traces`` header as ``analyze --json``: time base and epoch offset map every
        # start_ns/end_ns below back to the file and to Unix-epoch time. Tables written column by
        # column, as the report's (schema 2.0): no fraction of the duration, one line per column.
        # (imported for JSON only: the report's writer and what it imports)
        from traceread.render.jsonout import trace_entry

        steps = idle_by_class(result.steps, gaps)
        F = json_tables.Field
        step_fields = (*(F(c, steps[c]) for c in _STEP_FIELDS), *(F(part_col(c), steps[part_col(c)]) for c in GAP_CLASSES))
        gap_fields = tuple(F(n, v, chunk=f) for n, v, f in columns if n not in _DERIVED)
        doc = {"schema_version": SCHEMA_VERSION, "traces": [trace_entry(summary)], "steps": {}, "gaps": {}}
        yield from json_tables.document_chunks(doc, {"steps": (step_fields, len(steps)),
                                                     "gaps": (gap_fields, len(gaps))})

    summary = summarize_trace(0, tr, result.source)
    clock = ViewerClock(summary.format, summary.start_ns)
    emit_chunks(_table(totals, gaps, result.source, result.notes, top, clock, cfg.min_judged_gap_ns), chunks,
                json_path)
