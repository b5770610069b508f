"""``traceread gaps TRACE``: steps and every compute-idle gap, with what overlapped each."""

from __future__ import annotations

import io
from collections.abc import Iterator

import click
import pandas as pd

from traceread.analysis import SCHEMA_VERSION, summarize_trace
from traceread.atomic import atomic_open
from traceread.cli.output import emit_chunks, json_option
from traceread.config import Thresholds, parse_set_options
from traceread.gaps import find_gaps, step_totals, with_fractions
from traceread.loaders import load
from traceread.pipeline import idle_by_class
from traceread.printable import CONTROL_CHARS, printable
from traceread.render import json_tables
from traceread.render.jsonout import trace_entry
from traceread.rules import classify
from traceread.steps import find_steps
from traceread.vocabulary import GAP_CLASSES, part_col


def _printable_cells(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with control characters in its text cells shown as ``\\xNN`` (only cells that hold one
    are rewritten; numeric columns untouched)."""
    out = df
    for c in df.columns:
        if not (df[c].dtype == object or isinstance(df[c].dtype, pd.CategoricalDtype)
                or pd.api.types.is_string_dtype(df[c].dtype)):
            continue
        text = df[c].astype(str)
        bad = text.str.contains(CONTROL_CHARS, regex=True).to_numpy()
        if bad.any():
            if out is df:
                out = df.copy()
            out[c] = text.where(~bad, text[bad].map(printable))
    return out


_STEP_FIELDS = ["rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier"]
_CSV_CHUNK_ROWS = 65_536  # rows converted and written at a time (bounds memory, not a threshold)
_NAME_WIDTH = 60  # kernel names run to kilobytes (templates); the table shows their start
_TOP_GAP_COLS = ["rank", "device", "step", "start_ns", "dur_ns", "class", "comm_frac", "cpu_runtime_frac",
                 "sync_frac", "launch_count", "next_kernel_name"]


def _table(totals: pd.DataFrame, gaps: pd.DataFrame, source: str, notes: list[str], top: int) -> str:
    st = totals[["rank", "device", "step", "step_ns", "busy_ns", "idle_ns", "gap_count"]].copy()
    st.insert(6, "idle_%", (100 * st["idle_ns"] / st["step_ns"].clip(lower=1)).round(1))
    lines = [f"steps (source: {source})", *notes, "", st.to_string(index=False), ""]
    longest = with_fractions(gaps.nlargest(top, "dur_ns"))[_TOP_GAP_COLS].astype({"next_kernel_name": str})
    longest["next_kernel_name"] = longest["next_kernel_name"].str.slice(0, _NAME_WIDTH)
    lines += [f"{len(gaps)} gaps; the {len(longest)} longest:",
              longest.to_string(index=False) if len(longest) else "(none)"]
    return "\n".join(lines)


@click.command("gaps")
@click.argument("trace", type=click.Path(dir_okay=False))
@json_option
@click.option("--csv", "csv_path", metavar="PATH", default=None, help="Write the gaps table as CSV.")
@click.option("--warmup-steps", type=int, default=None, help="Mark the first K steps as warmup.")
@click.option("--step-range", default=None, metavar="NAME", help="NVTX range to use as the step marker.")
@click.option("--top", type=int, default=10, show_default=True, help="Longest gaps shown in the table.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Override a threshold.")
def command(trace: str, json_path: str | None, csv_path: str | None, warmup_steps: int | None,
            step_range: str | None, top: int, sets: tuple[str, ...]) -> None:
    """Steps and every compute-idle gap of each GPU, with what overlapped each gap."""
    cfg = Thresholds().with_overrides(parse_set_options(sets))
    tr = load(trace, progress=True, step_range=step_range)
    result = find_steps(tr, cfg, warmup_steps=warmup_steps, step_range=step_range)
    gaps = classify(find_gaps(tr, result.steps, cfg), result.steps, tr, cfg)
    gaps.attrs.pop("notes", None)  # not shown here; pandas would deep-copy it into every derived frame
    totals = step_totals(result.steps, gaps)
    steps = idle_by_class(result.steps, gaps)
    if csv_path:
        with atomic_open(csv_path, "w") as fh:
            # A chunk of rows at a time: the fractions and escaped text exist for those rows only.
            for lo in range(0, max(len(gaps), 1), _CSV_CHUNK_ROWS):
                part = with_fractions(gaps.iloc[lo:lo + _CSV_CHUNK_ROWS])  # every X_ns with its X_frac
                # (cells escaped before the writer: csv (pandas 2, Python 3.10) refuses some controls;
                # the chunk's text escaped again as a whole, as every text sink is: pandas writes a
                # row at a time, and a writer escaping each write was a Python call per gap)
                text = io.StringIO()
                _printable_cells(part).to_csv(text, index=False, header=lo == 0)
                fh.write(printable(text.getvalue(), layout=True))

    def chunks() -> Iterator[bytes]:
        # The same ``traces`` header as ``analyze --json``: time base and epoch offset map every
        # start_ns/end_ns below back to the file and to Unix-epoch time. Tables written column-wise.
        F = json_tables.Field
        step_fields = (*(F(c, steps[c]) for c in _STEP_FIELDS),
                       F("idle_by_class", group=tuple(F(c, steps[part_col(c)]) for c in GAP_CLASSES)))
        full = with_fractions(gaps)
        gap_fields = tuple(F(str(c), full[c], raw=True) for c in full.columns)
        doc = {"schema_version": SCHEMA_VERSION, "traces": [trace_entry(summarize_trace(0, tr, result.source))],
               "steps": [], "gaps": []}
        yield from json_tables.document_chunks(doc, {"steps": (step_fields, len(steps)),
                                                     "gaps": (gap_fields, len(full))})

    emit_chunks(_table(totals, gaps, result.source, result.notes, top), chunks, json_path)
