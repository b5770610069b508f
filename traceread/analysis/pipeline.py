"""The steps of :func:`traceread.runner.analyze`: each piece run on one trace, and the job-level figures.

Per trace, :func:`found_steps` finds the steps (:mod:`traceread.engine.steps`) and :func:`finish_one` the
gaps (:mod:`traceread.engine.gaps`) and their classes (:mod:`traceread.rules`), the attribution
(:mod:`traceread.attribution`) and the scoreboard tables (:mod:`traceread.metrics`), each result
carrying a ``trace`` column; ``concat`` joins them over the traces. Over the job: :func:`overall_dominant` (the verdict and the runner-up),
:func:`run_mfu` and :func:`launch_stats`.

A table that fails on an input (a :class:`~traceread.errors.UserFacingError` or a bug in that table)
is listed in ``unavailable`` with the reason by :func:`guarded`, and the rest of the report is still
produced. A module of traceread that cannot be imported is never such a failure: it is a broken
install and raises. The pieces are imported where they run, so that importing the analysis (as
every renderer does) costs nothing until a trace is analysed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.errors import UserFacingError
from traceread.note import Note
from traceread.trace import Trace
from traceread.vocabulary import GAP_CLASSES, PARTS, part_col

if TYPE_CHECKING:
    from traceread.metrics.compact import CompactTables
    from traceread.metrics.mfu import MfuResult

T = TypeVar("T")


UNIT = ["trace", "rank", "device"]
STEP_OUT_COLUMNS = ["trace", "rank", "device", "step", "start_ns", "end_ns", "cpu_start_ns", "cpu_end_ns",
                    "busy_ns", "idle_ns", "warmup", "outlier"] + [part_col(c) for c in GAP_CLASSES]
GAP_MIN_COLUMNS = ["trace", "rank", "device", "step", "start_ns", "end_ns", "dur_ns", "offset_ns", "phase",
                   "class", "evidence"]
ATTR_COLUMNS = UNIT + ["step_ns"] + [part_col(p) for p in PARTS]


@dataclass(frozen=True)
class LaunchStats:
    """Launch figures of a run where launch-bound is the dominant or a large second cause.

    One scope for every figure: the first trace that has kernels (``trace``, its index, set when the
    analysis has several inputs; None with one). Its launch-bound gaps (count, total, median; launch
    calls inside them when the engine counted them), then its kernel table's launch statistics
    (None where it could not say): kernels shorter than their launch call, launch-to-start latency.
    """

    launch_bound_gaps: int
    launch_bound_idle_ns: int
    median_launch_bound_gap_ns: int
    launch_calls_in_those_gaps: int | None = None
    kernels: int | None = None
    shorter_than_launch: int | None = None
    shorter_than_launch_share: float | None = None
    median_kernel_ns: int | None = None
    median_launch_call_ns: int | None = None
    launch_to_start_p50_ns: int | None = None
    launch_to_start_p90_ns: int | None = None
    launch_to_start_p99_ns: int | None = None
    trace: int | None = None  # the input these figures are of, when there are several


@dataclass
class PerTrace:
    """One trace's results, already carrying the ``trace`` column."""

    steps: pd.DataFrame | None = None
    gaps: pd.DataFrame | None = None
    attribution: pd.DataFrame | None = None
    kernels: pd.DataFrame | None = None
    collectives: pd.DataFrame | None = None
    step_source: str = "unknown"
    notes: list[str | Note] = field(default_factory=list)  # in the order the report lists them
    unavailable: list[str] = field(default_factory=list)
    found: pd.DataFrame | None = None  # the steps as found (find_steps), without idle by class or trace
    sanity_at: int = 0  # where in ``notes`` the trace's sanity notes go (made by finish_one, beside the replay)
    # The attribution's dominant cause of this trace and its named evidence (``attribution.dominant_evidence``):
    # the analysis of this one trace reuses it rather than grouping every gap of that cause again.
    dominant: tuple[str, str] | None = None
    # The first rows of ``traceread kernels``' tables, for the report's compact section (metrics.compact)
    compact_tables: CompactTables | None = None
    # What reads no steps (sanity notes, kernel and compact tables), handed to ``beside`` by found_steps: its result
    steps_free: Callable[[], StepsFree] | None = None


@dataclass
class StepsFree:
    """A trace's results that read neither its steps nor its gaps: its sanity notes, its kernel table (with the
    trace column) and its compact tables, each table's unavailable lines apart (the report lists them in the
    tables' order, the collective table's between them)."""

    sanity: list[Note]
    kernels: pd.DataFrame | None
    compact_tables: CompactTables | None
    kernels_unavailable: list[str]
    compact_unavailable: list[str]


def steps_free(index: int, trace: Trace, cfg: Thresholds) -> StepsFree:
    """:class:`StepsFree` of ``trace``."""
    from traceread.frame.sanity import sanity_notes
    from traceread.metrics.compact import compact_tables
    from traceread.metrics.kernels import kernel_table

    sanity = sanity_notes(trace, cfg)
    k_failed: list[str] = []
    k = guarded("kernel table", lambda: kernel_table(trace), k_failed)
    c_failed: list[str] = []
    compact = guarded("where the GPU time went (op, module, range, copy and API tables)",
                      lambda: compact_tables(trace), c_failed)
    return StepsFree(sanity, with_trace(k, index) if k is not None else None, compact, k_failed, c_failed)


def concat(frames: list[pd.DataFrame | None], columns: list[str] | None) -> pd.DataFrame:
    """Concatenate per-trace frames; an empty frame with ``columns`` when there are none."""
    kept = [f for f in frames if f is not None and len(f)]
    if len(kept) == 1 and _default_index(kept[0]):
        return kept[0]  # one trace: concatenating would copy every column (of millions of gaps, maybe)
    if kept:
        return pd.concat(kept, ignore_index=True)
    return pd.DataFrame({c: pd.Series(dtype="int64") for c in (columns or ["trace"])})


def _default_index(df: pd.DataFrame) -> bool:
    """Rows numbered 0..n-1, as ``ignore_index``/``reset_index`` would number them."""
    i = df.index
    return isinstance(i, pd.RangeIndex) and i.start == 0 and i.step == 1


def with_trace(df: pd.DataFrame, index: int) -> pd.DataFrame:
    # A new frame sharing the columns (not a deep copy of maybe millions of gaps); the column is added to it.
    out = df.copy(deep=False) if _default_index(df) else df.reset_index(drop=True)
    out.insert(0, "trace", np.int32(index))
    return out


def _label(trace: Trace) -> str:
    """The file name that prefixes a trace's notes and unavailable lines."""
    return trace.meta.path.rsplit("/", 1)[-1]


def _nothing() -> None:
    pass


def found_steps(index: int, trace: Trace, cfg: Thresholds, warmup_steps: int | None,
                step_range: str | None, between: Callable[[], None] = _nothing,
                beside: Callable[[Callable[[], Any]], Callable[[], Any]] | None = None) -> PerTrace:
    """One trace's caveats and its steps as found (``PerTrace.found``, without idle by class): the analysis
    starts its replay from these (``whatif.predict_staged``), then :func:`finish_one` does the rest. What
    reads no steps (:func:`steps_free`) is handed to ``beside`` first (the runner makes it on a thread while
    the steps are found); without ``beside``, :func:`finish_one` makes it."""
    out = PerTrace()
    if beside is not None:
        out.steps_free = beside(functools.partial(steps_free, index, trace, cfg))
    label = _label(trace)
    # the loader's caveats (truncation, epoch)
    out.notes.extend(w.under(label) if isinstance(w, Note) else f"{label}: {w}" for w in trace.meta.warnings)
    from traceread.engine.steps import find_steps

    out.sanity_at = len(out.notes)  # the sanity notes come next, made by finish_one (the replay starts before)
    res = find_steps(trace, cfg, warmup_steps=warmup_steps, step_range=step_range, between=between)
    out.found = res.steps.reset_index(drop=True)
    out.step_source = res.source
    out.notes.extend(n.under(label) if len(label) else n for n in res.notes)
    return out


def when_read(fn: Callable[[], Any]) -> Callable[[], Any]:
    """The default ``beside`` hook: nothing runs beside; the work is done where its result is read."""
    return fn


def finish_one(index: int, trace: Trace, cfg: Thresholds, out: PerTrace,
               classified: Callable[[pd.DataFrame, pd.DataFrame], None] | None = None,
               between: Callable[[], None] = _nothing,
               beside: Callable[[Callable[[], Any]], Callable[[], Any]] = when_read) -> PerTrace:
    """Gaps, classes, attribution, kernel and collective tables of one trace, from its steps as found
    (``out.found``: :func:`found_steps`), and its sanity notes (after the loader's caveats, made here so
    that the replay starts before them); notes and unavailable lines go to ``out``. ``classified`` is
    given ``out.steps`` and ``out.gaps`` as soon as the gaps are classified (the what-if replay beside
    the rules starts its fixes then, beside the attribution and tables). ``between`` is called after the rules
    and after the tables (the runner gives the freed heap pages back there). The kernel, collective and compact
    tables and the sanity notes read neither the gaps nor the rules: what reads no steps either was handed to
    ``beside`` by :func:`found_steps` (here, when it was not), the collective table is handed to it before the
    gaps are found (the runner makes them on threads meanwhile), and all are put in place after the
    attribution."""
    from traceread.frame.sanity import has_kernels

    label = _label(trace)
    steps = out.found if out.found is not None else pd.DataFrame()
    free = out.steps_free or beside(functools.partial(steps_free, index, trace, cfg))
    out.steps_free = None
    if steps.empty or not has_kernels(trace):  # (copies and memsets alone: no compute to be idle between)
        from traceread.frame.sanity import missing_gpu_activity
        from traceread.metrics.copies import data_movement_only

        made = free()
        why = data_movement_only(trace) or missing_gpu_activity(trace) or "no steps could be found"
        out.unavailable.append(f"{label}: no GPU activity to analyse: {why}")
        return _with_tables(out, label, made, _collectives(index, trace, steps))

    collectives = beside(functools.partial(_collectives, index, trace, steps))
    gaps = _classified_gaps(trace, steps, cfg, out.notes, between)
    between()  # the rules' temporaries are freed: their pages go back, not into the peak of what follows
    out.steps = with_trace(idle_by_class(steps, gaps), index)
    out.gaps = with_trace(gaps, index)
    if classified is not None:
        classified(out.steps, out.gaps)
    out.attribution = _attribution(trace, steps, gaps, cfg, index, out, out.notes)
    _with_tables(out, label, free(), collectives())  # (unavailable lines after the attribution's, as they were made)
    between()
    return out


def _collectives(index: int, trace: Trace, steps: pd.DataFrame) -> tuple[pd.DataFrame | None, list[str]]:
    """The trace's collective table (with the trace column; None when empty or not made) and its unavailable lines."""
    from traceread.metrics.collectives import collective_table

    failed: list[str] = []
    c = guarded("collective table", lambda: collective_table(trace, steps), failed)
    return (with_trace(c, index) if c is not None and len(c) else None), failed


def _with_tables(out: PerTrace, label: str, made: StepsFree,
                 collectives: tuple[pd.DataFrame | None, list[str]]) -> PerTrace:
    """``out`` with the sanity notes of ``made`` in their place (as if made first: after the loader's caveats),
    its tables and ``collectives``; their unavailable lines in the tables' order."""
    out.notes[out.sanity_at:out.sanity_at] = [n.under(label) for n in made.sanity]
    out.kernels, out.compact_tables = made.kernels, made.compact_tables
    out.collectives = collectives[0]
    out.unavailable.extend([*made.kernels_unavailable, *collectives[1], *made.compact_unavailable])
    return out


def pool_jobs(traces: list[Trace], per: list[PerTrace], groups: list[Any] | None, cfg: Thresholds,
              unavailable: list[str]) -> None:
    """One class per recurring gap across the files of each job (``rules.across``): the files whose gaps
    changed get their gaps, idle by class and attribution again (the per-rank tables a straggler's stated
    cause is read from)."""
    if groups is None or len(traces) < 2:
        return
    from traceread.rules.across import Classified, pool_traces

    by_path = {t.meta.path: i for i, t in enumerate(traces)}
    for group in groups:
        idx = sorted({by_path[m.path] for m in group.members if m.path in by_path})
        items: list[Classified] = []
        for i in list(idx):
            g = per[i].gaps
            if g is None or not len(g) or per[i].found is None:
                idx.remove(i)
            else:
                items.append(Classified(g, per[i].found, traces[i]))
        if len(items) < 2:
            continue
        new = guarded("recurring gaps across ranks", functools.partial(pool_traces, items, cfg), unavailable)
        for i, gaps in zip(idx, new or [None] * len(idx), strict=True):
            if gaps is not None:
                _reclassified(i, traces[i], cfg, per[i], gaps.drop(columns="trace"))


def _reclassified(index: int, trace: Trace, cfg: Thresholds, out: PerTrace, gaps: pd.DataFrame) -> None:
    """``out`` with the gaps ``gaps`` (classes changed): idle by class and attribution again (its notes
    were said the first time)."""
    steps = out.found if out.found is not None else pd.DataFrame()
    out.steps = with_trace(idle_by_class(steps, gaps), index)
    out.gaps = with_trace(gaps, index)
    out.attribution = _attribution(trace, steps, gaps, cfg, index, out, [])


def _classified_gaps(trace: Trace, steps: pd.DataFrame, cfg: Thresholds, notes: list[str | Note],
                     between: Callable[[], None] = _nothing) -> pd.DataFrame:
    from traceread.engine.gaps import find_gaps
    from traceread.rules import classify

    out = classify(find_gaps(trace, steps, cfg, between), steps, trace, cfg, text=False, between=between)
    # What the rules could not judge (bubbles with few steps). Popped, not read: pandas deep-copies
    # attrs into every frame derived from this one, a cost per operation that grows with the notes.
    notes.extend(out.attrs.pop("notes", []))
    return out.reset_index(drop=True)


def idle_by_class(steps: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """Steps plus ``<class>_ns``: idle summed by gap class (one pass over the gaps' codes)."""
    out = steps.copy()
    parts = _idle_parts(steps, gaps)
    for j, cls in enumerate(GAP_CLASSES):
        out[part_col(cls)] = parts[:, j].copy()
    # Idle no gap covers (shorter than the engine's minimum gap) is unattributed, so the classes sum
    # to idle_ns, as the attribution counts it.
    rest = np.maximum(out["idle_ns"].to_numpy() - parts.sum(axis=1), 0)
    out[part_col("unattributed")] = out[part_col("unattributed")].to_numpy() + rest
    return out


def _idle_parts(steps: pd.DataFrame, gaps: pd.DataFrame) -> np.ndarray:
    """Per step row and class of ``GAP_CLASSES``: the idle ns of its gaps (int64). A gap counts for
    every step row of its (rank, device, step). Keys and classes as integer codes: each gap's place among
    the steps' distinct (rank, device, step) from one key lookup (``grouped.lookup``, a dense table for these few keys; a
    group-by of the gaps on four keys, then a mapping back onto the steps, hashes every key of every gap)."""
    from traceread.grouped import codes, first_rows, lookup

    parts = np.zeros((len(steps), len(GAP_CLASSES)), dtype=np.int64)
    if not len(gaps) or not len(steps):
        return parts
    keys = ("rank", "device", "step")
    levels = [steps[c].to_numpy().astype(np.int64) for c in keys]
    inverse, n = codes(*levels)  # each step row's distinct (rank, device, step)
    first = first_rows(inverse, n)
    at = lookup([lv[first] for lv in levels], [gaps[c].to_numpy() for c in keys])
    cls = gaps["class"]
    if isinstance(cls.dtype, pd.CategoricalDtype):
        names, class_codes = [str(c) for c in cls.cat.categories], cls.cat.codes.to_numpy()
    else:
        class_codes, uniq = pd.factorize(cls.to_numpy(dtype=object))
        names = [str(c) for c in uniq]
    to_part = np.array([GAP_CLASSES.index(c) if c in GAP_CLASSES else -1 for c in names] + [-1], dtype=np.int64)
    part = to_part[class_codes]  # a missing class (-1) reads the trailing -1
    ok = (at >= 0) & (part >= 0)
    slot, dur = at[ok] * len(GAP_CLASSES) + part[ok], gaps["dur_ns"].to_numpy(np.int64)[ok]
    size = n * len(GAP_CLASSES)
    if int(np.abs(dur).sum()) < _EXACT_FLOAT:  # every partial sum is an exact float: bincount's sums are exact
        sums = np.bincount(slot, weights=dur, minlength=size).astype(np.int64)
    else:
        sums = np.zeros(size, dtype=np.int64)
        np.add.at(sums, slot, dur)
    return sums.reshape(n, len(GAP_CLASSES))[inverse]


_EXACT_FLOAT = 1 << 53  # integers up to here add exactly as float64


def _attribution(trace: Trace, steps: pd.DataFrame, gaps: pd.DataFrame, cfg: Thresholds, index: int,
                 out: PerTrace, notes: list[str | Note]) -> pd.DataFrame:
    from traceread.attribution import attribute

    attr = attribute(trace, steps, gaps, cfg)
    notes.extend(attr.notes)
    out.dominant = (attr.dominant_cause, attr.dominant_evidence)
    # The attribution's table also holds per-unit shares and verdicts; the analysis keeps the ns parts.
    frame = attr.table[["rank", "device", "step_ns"] + [part_col(p) for p in PARTS]]
    return with_trace(frame.astype({"rank": "int32", "device": "int32"}), index)


def guarded(what: str, fn: Callable[[], T], unavailable: list[str]) -> T | None:
    """Run one table of the report; its failure is listed as unavailable (with the reason), never a crash.

    An ImportError is not caught: a module of traceread that is missing is a broken install.
    """
    try:
        return fn()
    except ImportError:
        raise
    except UserFacingError as exc:
        unavailable.append(f"{what}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a bug in one table must not cost the whole report
        unavailable.append(f"{what}: failed ({type(exc).__name__}: {exc})")
    return None


def run_mfu(workload: Any, traces: list[Trace], steps: pd.DataFrame, cfg: Thresholds,
            unavailable: list[str]) -> tuple[MfuResult | None, str]:
    """The MFU result, or None and the sentence saying how to get it."""
    hint = ("MFU not computed: give the model size and tokens per step (--params N --tokens-per-step T, "
            "or --global-batch B --seq-len S), or --job job.toml")
    if workload is None or steps.empty:
        return None, hint
    from traceread.metrics.mfu import compute_mfu

    try:
        res = compute_mfu(workload, traces, steps, cfg)
    except UserFacingError as exc:
        return None, f"MFU not computed: {exc}"
    except Exception as exc:  # noqa: BLE001 - report the rest even if MFU has a bug
        unavailable.append(f"MFU: failed ({type(exc).__name__}: {exc})")
        return None, "MFU not computed: the MFU computation failed (see the method notes)"
    return res, ""


def launch_stats(traces: list[Trace], gaps: pd.DataFrame, dominant: str, second: str | None,
                 second_share: float, cfg: Thresholds, unavailable: list[str]) -> LaunchStats | None:
    """:class:`LaunchStats` when launch-bound is the dominant or a large second cause, else None."""
    matters = dominant == "launch-bound" or (second == "launch-bound" and second_share >= cfg.report_second_min_share)
    if not matters or gaps.empty:
        return None
    from traceread.attribution import class_mask
    from traceread.metrics.kernels import launch_stats as kernel_launch_stats

    out: dict[str, Any] = {}  # LaunchStats' fields
    scope = None  # the first trace with kernels: the gap figures are of its gaps (one scope)
    for index, trace in enumerate(traces):
        st = guarded("launch statistics", functools.partial(kernel_launch_stats, trace), unavailable) or {}
        if not st.get("kernels"):
            continue
        scope = index
        for key in ("kernels", "shorter_than_launch", "shorter_than_launch_share", "median_kernel_ns",
                    "median_launch_call_ns"):
            if st.get(key) is not None:
                out[key] = st[key]
        for q, v in (st.get("launch_latency_ns") or {}).items():
            if q in ("p50", "p90", "p99") and v is not None:
                out[f"launch_to_start_{q}_ns"] = v
        break
    # The few columns read as arrays, not a copy of every launch-bound row (most rows of a launch-bound export).
    lb = class_mask(gaps["class"], "launch-bound")
    if scope is not None and len(traces) > 1:
        lb &= gaps["trace"].to_numpy() == scope
        out["trace"] = scope
    dur = gaps["dur_ns"].to_numpy()[lb]
    out.update(launch_bound_gaps=int(len(dur)), launch_bound_idle_ns=int(dur.sum()),
               median_launch_bound_gap_ns=int(np.median(dur)) if len(dur) else 0)
    if "launch_count" in gaps.columns and len(dur):
        out["launch_calls_in_those_gaps"] = int(gaps["launch_count"].to_numpy()[lb].sum())
    return LaunchStats(**out)
