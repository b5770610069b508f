"""Run-level attribution: where every nanosecond of the analysed steps went, and the dominant cause.

Per rank and device, the analysed window (the union of the non-warmup steps' device intervals) is
split into parts that sum to it exactly, nothing counted twice:

* ``compute-bound``: time some compute kernel of a compute-bound class (GEMM, attention,
  convolution: ``kernel_classes.COMPUTE_BOUND_CLASSES``) was running; whole CUDA graphs count here
  (their kernels are not traced; a note says how much).
* ``memory-bound``: time no compute-bound kernel but some classified memory-bound one was running
  (elementwise, reductions, normalization, Triton pointwise, copies launched as kernels).
* ``unclassified``: time only kernels of unknown class (``kernel_classes.CLS_OTHER``: custom kernels,
  generated fusions no pattern names) were running. Neither bound is claimed for them, so no lever
  is drawn from this time; the kernel table lists their names for ``[kernel_patterns]``.
* one part per gap class: compute-idle time, summed from the classified gaps (clipped to the window).
  Idle time no gap covers (the engine's minimum gap size) is added to ``unattributed``.

``capture-boundary`` (idle at the capture's edges: work issued before it, the profiler shutting
down) is a part of step time like the others but not a cause: the verdict is taken on the captured
time, step time less that part (every other share divided by ``1 - capture-boundary``), and a note
says how much was left out.

The verdict (:func:`verdict`, the only one: analyze of one trace or several, scan jobs and diff sides
all call it on their summed split): if the steady-state idle (idle less ``one-time-cost``: one-time
work never makes a run unhealthy) is at most ``healthy_max_idle`` of step time the run is
``memory-bound`` when classified memory-bound kernels take at least ``memory_bound_min_share`` of busy
time (all of it, unclassified included: unknown kernels never make a run memory-bound), else
``healthy``; otherwise the largest idle class, ``unattributed`` included, is the dominant cause, and
its cost is its share of step time. ``one-time-cost`` is dominant only when it also reaches
``one_time_verdict_share`` of step time (then the window is not steady state and the verdict says
how to re-profile); below that the largest steady-state class is named, since one-time costs are
not what the run pays every step. The runner-up is the largest other named idle class (or
memory-bound when memory-bound kernels dominate busy time), never ``unattributed`` nor
``unclassified`` (neither names a fix).

The first response (``causes.first_response``, read by the renderers) follows the largest
piece of evidence inside the dominant class (``dominant_evidence``: the gaps' ``evidence_kind``): a
sync-stall held by recurring allocator calls gets the allocator fix, not "remove ``.item()``".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import grouped, intervals, schema
from traceread import kernel_classes as kc
from traceread.config import Thresholds
from traceread.engine.lanes import EventView, event_view
from traceread.note import (
    CAPTURE_EDGES,
    COMM_DURING_OTHER_IDLE,
    GAPS_EXCEED_IDLE,
    GRAPH_TIME,
    MEMORY_BOUND_NEXT,
    NOTHING_TO_ATTRIBUTE,
    UNCLASSIFIED_BUSY,
    Note,
)
from traceread.trace import Trace
from traceread.vocabulary import (
    BUSY_PARTS,
    CAPTURE_BOUNDARY,
    COMPUTE_BOUND,
    GAP_CLASSES,
    HEALTHY,
    IDLE_CAUSES,
    MEMORY_BOUND,
    NO_GPU_ACTIVITY,
    ONE_TIME_COST,
    PARTS,
    UNATTRIBUTED,
    UNCLASSIFIED,
    VERDICTS,
    part_col,
    share_col,
)

__all__ = ["Attribution", "Verdict", "attribute", "verdict", "table_verdict", "pooled_verdict", "shares_of", "evidence_split",
           "dominant_evidence", "dominant_idle", "BUSY_PARTS", "PARTS", "VERDICTS", "part_col", "share_col"]


@dataclass(frozen=True)
class Verdict:
    """A run's dominant cause (one of ``VERDICTS``) and its share of step time, and the runner-up."""

    cause: str
    share: float
    second: str | None = None  # None when no other cause costs any time
    second_share: float = 0.0


@dataclass(frozen=True)
class Attribution:
    """Run-level split of step time.

    ``table``: one row per rank/device: ``rank, device, steps, step_ns``, ``<part>_ns`` (int64) and
    ``<part>_share`` (fraction of step_ns) for every part in ``PARTS``, and ``verdict`` (that unit's
    own dominant cause). The ``_ns`` parts of a row sum to its ``step_ns``.
    ``shares``: the same split over all units (fractions summing to 1).
    """

    table: pd.DataFrame
    shares: dict[str, float]
    dominant_cause: str
    dominant_cost_share: float
    notes: list[Note] = field(default_factory=list)  # as data: worded by traceread.render.notes
    dominant_evidence: str = ""  # the evidence_kind holding most of the dominant class's time

    def to_dict(self) -> dict[str, Any]:
        return {
            "dominant_cause": self.dominant_cause,
            "dominant_cost_share": self.dominant_cost_share,
            "dominant_evidence": self.dominant_evidence,
            "shares": dict(self.shares),
            "per_device": self.table.to_dict(orient="records"),
            "notes": [{"kind": n.kind, **n.fields} for n in self.notes],
        }


def attribute(trace: Trace, steps_df: pd.DataFrame, classified_gaps: pd.DataFrame,
              cfg: Thresholds) -> Attribution:
    """Split the analysed steps of every rank/device into busy and idle-by-class parts (module doc)."""
    notes: list[Note] = []
    steps = _analysed(steps_df)
    v = event_view(trace)
    # Kernels as rows of the engine's event view (no frame selection); each name's class found once.
    kern = v.lane_rows(schema.LANE_GPU_COMPUTE)
    names, by_name = v.distinct_names(kern)
    classes = kc.classify(names)
    graph_rows = v.cat[kern] == v.cat_codes.get(schema.CAT_GRAPH, -99)
    bound = kc.is_compute_bound_class(classes)[by_name] | graph_rows
    # A whole CUDA graph is compute-bound whatever its name; only named kernels can be unknown.
    known = ~(np.asarray(classes == kc.CLS_OTHER, bool)[by_name] & ~graph_rows)
    del names, by_name, classes
    rows = []
    graph_ns = 0
    gaps = classified_gaps if classified_gaps is not None else pd.DataFrame()
    # Units and each unit's gaps by numpy group-bys (pandas' cost per operation was most of this on a small
    # trace); each unit's gaps by row positions found once: a mask over the whole frame per unit would
    # cost time quadratic in the number of devices.
    s_rank, s_dev = steps["rank"].to_numpy(), steps["device"].to_numpy()
    unit_of, n_units = grouped.codes(s_rank, s_dev) if len(steps) else (np.zeros(0, np.int64), 0)
    firsts = grouped.first_rows(unit_of, n_units)
    gap_unit = _gap_units(gaps, s_rank[firsts], s_dev[firsts])
    gap_order = np.argsort(gap_unit, kind="stable")
    gap_bounds = np.searchsorted(gap_unit[gap_order], np.arange(n_units + 1))
    g_start = gaps["start_ns"].to_numpy(np.int64) if len(gap_unit) else np.zeros(0, np.int64)
    g_end = gaps["end_ns"].to_numpy(np.int64) if len(gap_unit) else np.zeros(0, np.int64)
    s_start, s_end = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
    for u, first in enumerate(firsts):
        rank, device = s_rank[first].item(), s_dev[first].item()
        mine_steps = np.flatnonzero(unit_of == u)
        ws, we = intervals.union(s_start[mine_steps], s_end[mine_steps])
        window = intervals.total_length(ws, we)
        # the unit's kernels in start order, sorted once for every measure below
        unit = v.rows((schema.LANE_GPU_COMPUTE,), rank=int(rank), device=int(device))  # sorted rows
        sel = intervals.sorted_positions(kern, unit)  # positions among the kernels, for their flags (one merge pass)
        t = v.start[unit]
        if not intervals.is_sorted(t):  # as intervals.by_start orders them, the positions alike
            order = np.argsort(t, kind="stable")
            unit, sel = unit[order], sel[order]
            del order
        mine = unit
        del t

        busy = _covered(v, mine, ws, we)
        cb = _covered(v, mine[bound[sel]], ws, we)
        # Precedence compute-bound > memory-bound > unclassified: time counts as unclassified only
        # when no classified kernel ran (the union of the classified kernels is the rest of busy).
        classified = _covered(v, mine[known[sel]], ws, we)
        graph_ns += _covered(v, mine[graph_rows[sel]], ws, we)
        row: dict[str, Any] = {"rank": int(rank), "device": int(device), "steps": int(len(mine_steps)),
                               "step_ns": window, part_col(COMPUTE_BOUND): cb,
                               part_col(MEMORY_BOUND): classified - cb, part_col(UNCLASSIFIED): busy - classified}
        at = gap_order[gap_bounds[u]:gap_bounds[u + 1]]  # the unit's gaps, in frame order
        row.update(_idle_by_class(gaps, at, g_start[at], g_end[at], rank, device, ws, we, window - busy, notes))
        rows.append(row)
    columns = ["rank", "device", "steps", "step_ns"] + [part_col(p) for p in PARTS]
    data: dict[str, Any] = {c: np.array([r[c] for r in rows], dtype=np.int32 if c in ("rank", "device") else np.int64)
                            for c in columns}
    denom = np.where(data["step_ns"] == 0, 1, data["step_ns"]).astype(np.float64)
    for p in PARTS:
        data[share_col(p)] = data[part_col(p)] / denom
    data["verdict"] = [verdict({p: float(data[share_col(p)][i]) for p in PARTS}, cfg).cause for i in range(len(rows))]
    table = pd.DataFrame(data)
    total_ns = int(table["step_ns"].sum()) if len(table) else 0
    shares = shares_of(table) or {p: 0.0 for p in PARTS}
    run = table_verdict(table, cfg)
    dominant, cost = run.cause, run.share
    if total_ns and graph_ns / total_ns >= cfg.note_min_share:
        notes.append(Note.of(GRAPH_TIME, graph_ns=graph_ns, total_ns=total_ns))
    busy_share = sum(shares[p] for p in BUSY_PARTS)
    if dominant in IDLE_CAUSES and busy_share and shares[MEMORY_BOUND] / busy_share >= cfg.memory_bound_min_share:
        notes.append(Note.of(MEMORY_BOUND_NEXT, share=shares[MEMORY_BOUND] / busy_share))
    if busy_share and shares[UNCLASSIFIED] >= cfg.note_min_share:
        notes.append(Note.of(UNCLASSIFIED_BUSY, share=shares[UNCLASSIFIED] / busy_share))
    notes.extend(_comm_note(gaps, total_ns, cfg))
    notes.extend(_boundary_note(gaps, shares, total_ns))
    if total_ns == 0:
        notes.append(Note.of(NOTHING_TO_ATTRIBUTE))
    evidence = dominant_evidence(gaps, dominant)
    return Attribution(table=table, shares=shares, dominant_cause=dominant, dominant_cost_share=cost,
                       notes=notes, dominant_evidence=evidence)


def evidence_split(gaps: pd.DataFrame, cause: str) -> dict[str, int]:
    """Idle ns of the ``cause`` gaps by their named evidence (``evidence_kind``), largest first."""
    if gaps is None or not len(gaps) or "class" not in gaps.columns or "evidence_kind" not in gaps.columns:
        return {}
    # on the categorical's codes (no string per gap), and only the two columns read, as numpy arrays
    # (not a frame selection of the two columns, which builds a new frame per call)
    hit = class_mask(gaps["class"], cause)
    if not hit.any():
        return {}
    idx = np.flatnonzero(hit)
    dur = gaps["dur_ns"].to_numpy(np.int64)[idx]
    kind = gaps["evidence_kind"]
    # Summed by code (no string per gap), then named as ``astype(str)`` names them: a missing kind
    # is 'nan' under pandas 2 and stays missing (left out of the sums) under pandas 3; by name in
    # string order, then largest first (ties keep that order), as a group-by of the names sorts them.
    if isinstance(kind.dtype, pd.CategoricalDtype):
        missing = pd.Series(pd.Categorical([None], categories=["-"])).astype(str).iloc[0]
        names = [*kind.cat.categories.astype(str), None if pd.isna(missing) else str(missing)]
        codes = kind.cat.codes.to_numpy()[idx].astype(np.intp) % len(names)  # -1 (missing): the last name
    else:  # plain (Arrow) strings: factorized on the selected rows (dictionary-encoded, no object per gap)
        sel = kind.iloc[idx]
        found, uniq = pd.factorize(sel)
        if kind.dtype == object and any(type(u) is not str for u in uniq):
            # 1 and 1.0 factorize as one kind but read as two texts: by the selected rows' texts (rare)
            sel = sel.astype(str)
            found, uniq = pd.factorize(sel)
        names = [str(u) for u in pd.Series(uniq, dtype=sel.dtype).astype(str)]
        codes = np.asarray(found).astype(np.intp)
        lost = codes < 0
        if lost.any():
            # missing kinds named by their own texts, as the group-by of texts names them: None and
            # NaN are 'None' and 'nan' under pandas 2 (two names), missing (left out) under pandas 3
            texts, text_names = pd.factorize(sel[lost].astype(str))
            extra = [str(u) for u in text_names] + [None]
            codes[lost] = len(names) + np.asarray(texts).astype(np.intp) % len(extra)
            names += extra
    by_code = np.zeros(len(names), dtype=np.int64)
    np.add.at(by_code, codes, dur)
    totals: dict[str, int] = {}
    for code in np.flatnonzero(np.bincount(codes, minlength=len(names))):
        name = names[int(code)]
        if name is not None:
            totals[name] = totals.get(name, 0) + int(by_code[code])
    named = sorted(totals.items())
    return dict(sorted(named, key=lambda kv: -kv[1]))  # sorted() is stable


def class_mask(col: pd.Series, value: str) -> np.ndarray:
    """Bool per row: ``col == value``, on a categorical's codes (no comparison per string)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = col.cat.categories
        if value not in cats:
            return np.zeros(len(col), dtype=bool)
        return col.cat.codes.to_numpy() == cats.get_loc(value)
    return (col == value).to_numpy(bool)


def dominant_evidence(gaps: pd.DataFrame, cause: str) -> str:
    """The named evidence holding most of ``cause``'s idle time ('' when none is recorded)."""
    split = evidence_split(gaps, cause)
    return next(iter(split), "")


def _analysed(steps_df: pd.DataFrame) -> pd.DataFrame:
    """Non-warmup steps (all steps when every step is warmup, so a short trace still has a window)."""
    if steps_df is None or steps_df.empty:
        return pd.DataFrame(columns=list(schema.STEP_COLUMNS))
    keep = ~steps_df["warmup"].to_numpy(bool)
    return steps_df[keep] if keep.any() else steps_df


def _covered(v: EventView, rows: np.ndarray, ws: np.ndarray, we: np.ndarray) -> int:
    """Length of the union of the ``rows``' intervals inside the window union ``(ws, we)``."""
    return int(intervals.rows_covered(v.start, v.end, rows, ws, we).sum())


def _gap_units(gaps: pd.DataFrame, u_rank: np.ndarray, u_dev: np.ndarray) -> np.ndarray:
    """Per gap, the position of its (rank, device) among the units ``(u_rank, u_dev)`` (-1: none of them);
    no gaps when they carry no class."""
    if not len(gaps) or "class" not in gaps.columns:
        return np.zeros(0, dtype=np.int64)
    return grouped.lookup([u_rank, u_dev], [gaps["rank"].to_numpy(), gaps["device"].to_numpy()])


def _idle_by_class(gaps: pd.DataFrame, at: np.ndarray, start: np.ndarray, end: np.ndarray, rank: int, device: int,
                   ws: np.ndarray, we: np.ndarray, idle: int, notes: list[Note]) -> dict[str, int]:
    """Idle ns per gap class inside the window; the parts sum to ``idle`` exactly (the unit's gaps: the rows
    ``at`` of ``gaps``, from ``start`` to ``end``)."""
    out = {part_col(c): 0 for c in GAP_CLASSES}
    if len(at):
        inside = intervals.overlap_with_union(start, end, ws, we)
        cls = gaps["class"]
        if isinstance(cls.dtype, pd.CategoricalDtype):  # by code: no class-name string per gap
            names = cls.cat.categories.astype(str)
            present, inverse = np.unique(cls.cat.codes.to_numpy()[at], return_inverse=True)
            sums = np.zeros(len(present), dtype=np.int64)
            np.add.at(sums, inverse.reshape(-1), inside)
            for k, total in zip(present.tolist(), sums.tolist(), strict=True):
                name = names[k] if k >= 0 else "nan"
                if name in GAP_CLASSES:
                    out[part_col(name)] = int(total)
        else:
            by_name = pd.Series(inside).groupby(cls.iloc[at].astype(str).to_numpy()).sum()
            for c, v in by_name.items():
                if c in GAP_CLASSES:
                    out[part_col(c)] = int(v)
    found = sum(out.values())
    if found > idle and found:
        # Gaps overlapping each other or busy time would count twice: scale back onto the idle time.
        notes.append(Note.of(GAPS_EXCEED_IDLE, rank=rank, device=device, excess_ns=found - idle))
        scaled = {k: int(v * idle // found) for k, v in out.items()}
        big = max(scaled, key=scaled.__getitem__)
        scaled[big] += idle - sum(scaled.values())
        out = scaled
    else:
        out[part_col("unattributed")] += idle - found
    return out


def _comm_note(gaps: pd.DataFrame, total_ns: int, cfg: Thresholds) -> list[Note]:
    """Communication that ran during idle gaps the rules gave to another cause (it was not waited for)."""
    if not total_ns or not len(gaps) or "comm_ns" not in gaps.columns or "class" not in gaps.columns:
        return []
    other = (gaps["class"] != "comm-bound").to_numpy()
    hidden = int(gaps["comm_ns"].to_numpy(np.int64)[other].sum())
    if hidden / total_ns < cfg.note_min_share:
        return []
    return [Note.of(COMM_DURING_OTHER_IDLE, hidden_ns=hidden, total_ns=total_ns)]


def _boundary_note(gaps: pd.DataFrame, shares: Mapping[str, float], total_ns: int) -> list[Note]:
    """How much step time lies at the capture's edges, and what it was (it is in no cause's share)."""
    share = shares.get(CAPTURE_BOUNDARY, 0.0)
    if not total_ns or share <= 0:
        return []
    split = evidence_split(gaps, CAPTURE_BOUNDARY)
    return [Note.of(CAPTURE_EDGES, share=share, split=tuple(split.items()))]


def verdict(shares: Mapping[str, float], cfg: Thresholds) -> Verdict:
    """The verdict of a split of step time (module doc; docs/rules.md "Run level").

    ``shares``: every part of ``PARTS`` as a fraction of step time (summing to 1). The verdict is
    taken on the captured time (``capture-boundary`` left out, the other shares rescaled to it).
    Healthy when the steady-state idle (one-time cost left out too) is at most ``healthy_max_idle``
    (``<=``) and one-time cost does not make the window not steady state, else the largest idle cause,
    unattributed included.
    """
    captured = 1.0 - shares.get(CAPTURE_BOUNDARY, 0.0)
    if captured <= 0:
        return Verdict(UNATTRIBUTED, 0.0)
    shares = {p: (0.0 if p == CAPTURE_BOUNDARY else shares.get(p, 0.0) / captured) for p in PARTS}
    # Health is judged on the steady-state idle: one-time cost (like the capture boundary, left out
    # above) is not what the run pays every step, so it never makes a run unhealthy.
    steady = sum(shares[c] for c in IDLE_CAUSES if c != ONE_TIME_COST)
    # Unclassified busy time (splits read from reports before schema 1.2 lack it: 0) counts in busy
    # time but never towards memory-bound.
    busy = sum(shares[p] for p in BUSY_PARTS)
    memory_heavy = bool(busy) and shares[MEMORY_BOUND] / busy >= cfg.memory_bound_min_share
    cause, share = dominant_idle(shares, cfg)
    # A window mostly one-time work is not steady state: the verdict says so (re-profile) whatever the
    # rest; else a steady-state idle at most healthy_max_idle is healthy (no cause under it headlines).
    not_steady = cause == ONE_TIME_COST and share >= cfg.one_time_verdict_share
    if steady <= cfg.healthy_max_idle and not not_steady:
        cause, share = (MEMORY_BOUND, shares[MEMORY_BOUND]) if memory_heavy else (HEALTHY, steady)
    # The runner-up names a fix too, so never unattributed (it has none).
    others = [(shares[c], c) for c in IDLE_CAUSES if c not in (UNATTRIBUTED, cause)]
    if cause in IDLE_CAUSES and memory_heavy:
        others.append((shares[MEMORY_BOUND], MEMORY_BOUND))
    second_share, second = max(others, default=(0.0, None))
    if second_share <= 0:
        return Verdict(cause, float(share))
    return Verdict(cause, float(share), second, float(second_share))


def shares_of(table: pd.DataFrame) -> dict[str, float] | None:
    """Each part's share of the step time summed over the table's units (``<part>_ns`` and
    ``step_ns`` columns, one row per unit); None when the table holds no step time."""
    total_ns = int(table["step_ns"].sum()) if len(table) else 0
    if not total_ns:
        return None
    return {p: float(table[part_col(p)].sum()) / total_ns for p in PARTS}


def table_verdict(table: pd.DataFrame, cfg: Thresholds) -> Verdict:
    """The :func:`verdict` of a table of units (one trace's, a job's or a diff side's), summed over
    them; ``unattributed`` at 0% when there is no step time."""
    shares = shares_of(table)
    return verdict(shares, cfg) if shares is not None else Verdict(UNATTRIBUTED, 0.0)


def pooled_verdict(table: pd.DataFrame, cfg: Thresholds, member_causes: list[str]) -> Verdict:
    """The verdict of several analysed members pooled (a scan job's traces, a diff side's captures):
    :func:`table_verdict` of their units, or ``no-gpu-activity`` when every member had none, as
    ``analyze`` gives the same files together."""
    if member_causes and all(c == NO_GPU_ACTIVITY for c in member_causes):
        return Verdict(NO_GPU_ACTIVITY, 0.0)
    return table_verdict(table, cfg)


def dominant_idle(shares: Mapping[str, float], cfg: Thresholds) -> tuple[str, float]:
    """The largest idle cause; one-time-cost only when it reaches ``one_time_verdict_share`` (module doc)."""
    cls = max(IDLE_CAUSES, key=lambda c: shares[c])
    if cls == ONE_TIME_COST and shares[cls] < cfg.one_time_verdict_share:
        steady = max((c for c in IDLE_CAUSES if c != cls), key=lambda c: shares[c])
        if shares[steady] > 0:
            cls = steady
    return cls, shares[cls]
