"""One side of a diff: the facts of its analysed captures, pooled, as plain data.

A side is one or more *captures* (repeated runs of the same job); each capture is the
:class:`~traceread.analysis.Analysis` of the traces of one run (all its ranks). Nothing here
recomputes what the analysis pipeline already has: per-step times come from ``Analysis.steps``,
attribution from ``Analysis.attribution``, kernel and collective tables from the analysis'
scoreboard, work per step from the roofline's recorded shapes and the job inputs.

Per-step values: a step of a synchronous job lasts as long as its slowest device, so each step
number's time is the maximum over the capture's units (as the MFU step time is measured); a step
flagged warmup or outlier on any unit is not steady. Captures pool their steady steps, in order.
Tables (kernels, host ops, collectives) cover each whole trace, as HTA's TraceDiff does, and are
divided by the side's number of profiled steps to give "per step" figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import schema
from traceread._pipeline import overall_dominant
from traceread.analysis import PARTS, Analysis, part_col
from traceread.config import Thresholds
from traceread.errors import TracereadError

STEP_MARKER_PREFIX = "ProfilerStep#"


@dataclass(frozen=True, eq=False)
class SideFacts:
    """Everything the comparison reads about one side (ns unless said otherwise)."""

    label: str
    paths: tuple[str, ...]
    formats: tuple[str, ...]
    gpu_models: tuple[str, ...]  # distinct device names ('' unknown dropped)
    world_size: int | None
    ranks: int  # distinct ranks per capture (the largest)
    captures: int
    step_sources: tuple[str, ...]
    steps_total: int  # profiled steps, all captures (the "per step" divisor of the tables)
    step_values: np.ndarray  # steady per-step times, captures pooled in order
    all_steps: pd.DataFrame  # capture, step, dur_ns, steady
    dominant_cause: str
    dominant_cost_share: float
    parts_per_step: dict[str, float]  # mean ns of each part per analysed step and device
    step_ns_per_step: float
    shares: dict[str, float]
    kernels: pd.DataFrame  # name, count, total_ns (whole traces, all captures)
    host_ops: pd.DataFrame  # name, count, total_ns
    collectives: pd.DataFrame  # collective, count, total_ns, exposed_ns
    per_rank: pd.DataFrame  # rank, step_ns, busy_ns, idle_ns, top_idle_class, top_idle_ns (per step)
    stragglers: tuple[dict[str, Any], ...]  # traceread.ranks' stragglers of each multi-rank capture (+ capture)
    shapes: pd.DataFrame  # op, input_dims, calls, kernel_ns, flops (heaviest first)
    flops_per_step: float | None  # recorded matmul/attention FLOPs per step (None: no shapes)
    tokens_per_step: float | None  # tokens per profiler step from the job inputs
    tokens_source: str
    throughput_values: np.ndarray | None  # per-step tokens/s of the steady steps
    mfu: dict[str, Any] | None
    mfu_hint: str
    notes: tuple[str, ...] = field(default=())

    @property
    def median_step_ns(self) -> float | None:
        return float(np.median(self.step_values)) if len(self.step_values) else None


def _per_step(a: Analysis, capture: int) -> pd.DataFrame:
    s = a.steps
    if s.empty:
        return pd.DataFrame({"capture": pd.Series(dtype="int64"), "step": pd.Series(dtype="int64"),
                             "dur_ns": pd.Series(dtype="int64"), "steady": pd.Series(dtype=bool)})
    f = s.assign(dur_ns=(s["end_ns"] - s["start_ns"]).astype(np.int64))
    per = f.groupby("step", sort=True).agg(dur_ns=("dur_ns", "max"), warmup=("warmup", "any"),
                                           outlier=("outlier", "any")).reset_index()
    steady = ~(per["warmup"] | per["outlier"]).to_numpy()
    return pd.DataFrame({"capture": capture, "step": per["step"].to_numpy(np.int64),
                         "dur_ns": per["dur_ns"].to_numpy(np.int64), "steady": steady})


def host_ops(a: Analysis) -> pd.DataFrame:
    """CPU ops and user annotations by name (count, total ns) over every trace of ``a``; step markers excluded."""
    frames = []
    for t in a.inputs:
        ev = t.events
        sel = ((ev["category"] == schema.CAT_CPU_OP).to_numpy() |
               (ev["lane"] == schema.LANE_CPU_ANNOTATION).to_numpy())
        h = ev.loc[sel, ["name", "start_ns", "end_ns"]]
        h = h[~h["name"].astype(str).str.startswith(STEP_MARKER_PREFIX).to_numpy()]
        frames.append(pd.DataFrame({"name": h["name"].astype(str).to_numpy(),
                                    "dur": (h["end_ns"] - h["start_ns"]).to_numpy(np.int64)}))
    return _sum_by(frames, "name", "dur")


def _sum_by(frames: list[pd.DataFrame], key: str, dur: str) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({key: pd.Series(dtype=object), "count": pd.Series(dtype="int64"),
                             "total_ns": pd.Series(dtype="int64")})
    f = pd.concat(frames, ignore_index=True)
    g = f.groupby(key, sort=False)[dur]
    return pd.DataFrame({"count": g.size(), "total_ns": g.sum()}).reset_index()


def _merge_counts(frames: list[pd.DataFrame], key: str) -> pd.DataFrame:
    """Tables of ``key, count, total_ns`` summed by ``key``."""
    frames = [f[[key, "count", "total_ns"]].assign(**{key: f[key].astype(str)}) for f in frames
              if len(f) and key in f.columns]
    if not frames:
        return pd.DataFrame({key: pd.Series(dtype=object), "count": pd.Series(dtype="int64"),
                             "total_ns": pd.Series(dtype="int64")})
    f = pd.concat(frames, ignore_index=True).astype({"count": "int64", "total_ns": "int64"})
    return f.groupby(key, sort=False)[["count", "total_ns"]].sum().reset_index()


def _unit_steps(a: Analysis) -> int:
    """Analysed (rank, device, step) rows: the attribution's window (non-warmup; all when every step is)."""
    if a.steps.empty:
        return 0
    n = int((~a.steps["warmup"]).sum())
    return n or len(a.steps)


def _collectives(analyses: list[Analysis]) -> pd.DataFrame:
    frames = [a.collectives[["collective", "count", "total_ns", "exposed_ns"]] for a in analyses
              if len(a.collectives) and "collective" in a.collectives.columns]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="int64" if c != "collective" else object)
                             for c in ("collective", "count", "total_ns", "exposed_ns")})
    f = pd.concat(frames, ignore_index=True).astype({"count": "int64", "total_ns": "int64", "exposed_ns": "int64"})
    return f.groupby("collective", sort=False)[["count", "total_ns", "exposed_ns"]].sum().reset_index()


def _per_rank(analyses: list[Analysis]) -> pd.DataFrame:
    """Per rank, means per analysed step: step time, busy, idle and its largest class (ranks > 1 only)."""
    frames = [a.steps[~a.steps["warmup"]] for a in analyses if len(a.steps)]
    if not frames:
        return pd.DataFrame()
    s = pd.concat(frames, ignore_index=True)
    if s["rank"].nunique() < 2:
        return pd.DataFrame()
    s = s.assign(step_ns=s["end_ns"] - s["start_ns"])
    cls_cols = [part_col(c) for c in PARTS if part_col(c) in s.columns]
    g = s.groupby("rank", sort=True)[["step_ns", "busy_ns", "idle_ns"] + cls_cols].mean()
    top = g[cls_cols].idxmax(axis=1) if cls_cols else pd.Series("", index=g.index)
    out = g[["step_ns", "busy_ns", "idle_ns"]].reset_index()
    out["top_idle_class"] = [c[:-3].replace("_", "-") for c in top.to_numpy()]
    out["top_idle_ns"] = [float(g.loc[r, c]) for r, c in zip(g.index, top.to_numpy(), strict=True)]
    return out


def _stragglers(analyses: list[Analysis], cfg: Thresholds, notes: list[str]) -> tuple[dict[str, Any], ...]:
    """The stragglers :func:`traceread.ranks.analyze_job` names in each capture of several ranks."""
    out: list[dict[str, Any]] = []
    for ci, a in enumerate(analyses):
        if len({r for t in a.traces for r in t.ranks}) < 2:
            continue
        from traceread.ranks import analyze_job, identify, summarize

        idents = [i for t in a.inputs for i in identify(t)]
        try:
            report = analyze_job([summarize(a, i, cfg) for i in idents], cfg)
        except (TracereadError, ValueError) as exc:
            notes.append(f"capture {ci}: stragglers not judged ({exc})")
            continue
        out += [{"capture": ci, "rank": s.get("rank"), "cause": s.get("cause"), "reason": s.get("reason"),
                 "waited_on_ns": s.get("waited_on_ns")} for s in report.stragglers]
    return tuple(out)


def _shapes(analyses: list[Analysis], cfg: Thresholds, notes: list[str]) -> pd.DataFrame:
    """Recorded matmul/attention op signatures (op, input dims) with calls, kernel time and FLOPs per call."""
    from traceread.metrics.roofline import roofline

    frames = []
    for a in analyses:
        for t in a.inputs:
            try:
                r = roofline(t, cfg)
            except TracereadError as exc:
                notes.append(f"{t.meta.path}: recorded shapes not read ({exc})")
                continue
            if len(r.table):
                frames.append(r.table[["op", "input_dims", "calls", "kernel_ns", "flops"]])
    if not frames:
        return pd.DataFrame({"op": pd.Series(dtype=object), "input_dims": pd.Series(dtype=object),
                             "calls": pd.Series(dtype="int64"), "kernel_ns": pd.Series(dtype="int64"),
                             "flops": pd.Series(dtype="float64")})
    f = pd.concat(frames, ignore_index=True).assign(input_dims=lambda d: d["input_dims"].astype(str))
    g = f.groupby(["op", "input_dims"], sort=False).agg(calls=("calls", "sum"), kernel_ns=("kernel_ns", "sum"),
                                                         flops=("flops", "first")).reset_index()
    return g.sort_values(["kernel_ns", "op"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _tokens(job: Any, analyses: list[Analysis], cfg: Thresholds, notes: list[str]) -> tuple[float | None, str]:
    """Tokens per *profiler* step from the job inputs (optimizer steps per profiler step from the markers)."""
    tok = job.tokens() if job is not None else None
    if tok is None:
        return None, ""
    tokens, how = tok
    from traceread.metrics.steptime import step_timing

    a = analyses[0]
    try:
        timing = step_timing(list(a.inputs), a.steps, cfg)
    except TracereadError as exc:
        notes.append(f"tokens per step: {exc}")
        return float(tokens), how
    factor = timing.optimizer_steps_per_profiler_step or 1.0  # no Optimizer.step# markers: one per step
    if abs(factor - 1.0) > 1e-9:
        how += f" x {factor:.3g} optimizer steps per profiler step"
    return float(tokens) * factor, how


def summarize_side(label: str, analyses: list[Analysis], job: Any, cfg: Thresholds) -> SideFacts:
    """The facts of one side (module doc); ``analyses`` holds one Analysis per capture."""
    notes: list[str] = []
    steps = pd.concat([_per_step(a, i) for i, a in enumerate(analyses)], ignore_index=True)
    steady = steps[steps["steady"]]
    if steady.empty and len(steps):
        notes.append(f"{label}: every step is warmup or outlier; all {len(steps)} steps are compared")
        steady = steps
    values = steady["dur_ns"].to_numpy(np.float64)
    attribution = pd.concat([a.attribution for a in analyses if len(a.attribution)], ignore_index=True) \
        if any(len(a.attribution) for a in analyses) else analyses[0].attribution
    if len(analyses) == 1:
        dominant, share = analyses[0].dominant_cause, analyses[0].dominant_cost_share
    else:
        dominant, share, _, _ = overall_dominant(attribution, [], cfg)
    analysed = sum(_unit_steps(a) for a in analyses)  # per-step parts are means per device and step
    per_step = {p: (float(attribution[part_col(p)].sum()) / analysed if analysed else 0.0) for p in PARTS}
    step_ns = float(attribution["step_ns"].sum()) / analysed if analysed and len(attribution) else 0.0
    total = float(attribution["step_ns"].sum()) if len(attribution) else 0.0
    shares = {p: (float(attribution[part_col(p)].sum()) / total if total else 0.0) for p in PARTS}
    shapes = _shapes(analyses, cfg, notes)
    n_steps = int(len(steps))
    flops = float((shapes["flops"] * shapes["calls"]).sum()) / n_steps if len(shapes) and n_steps else None
    tokens, how = _tokens(job, analyses, cfg, notes)
    tput = tokens / (values / 1e9) if tokens is not None and len(values) else None
    traces = [t for a in analyses for t in a.traces]
    models = tuple(sorted({str(d.get("name") or "") for t in traces for d in t.devices} - {""}))
    worlds = {t.world_size for t in traces if t.world_size}
    mfu = analyses[0].mfu if len(analyses) == 1 else None
    return SideFacts(
        label=label, paths=tuple(t.path for t in traces), formats=tuple(sorted({t.format for t in traces})),
        gpu_models=models, world_size=max(worlds) if worlds else None,
        ranks=max(len({r for t in a.traces for r in t.ranks}) for a in analyses), captures=len(analyses),
        step_sources=tuple(sorted({t.step_source for t in traces})), steps_total=n_steps,
        step_values=values, all_steps=steps, dominant_cause=dominant, dominant_cost_share=float(share),
        parts_per_step=per_step, step_ns_per_step=step_ns, shares=shares,
        kernels=_merge_counts([a.kernels for a in analyses], "name"),
        host_ops=_merge_counts([host_ops(a) for a in analyses], "name"),
        collectives=_collectives(analyses), per_rank=_per_rank(analyses),
        stragglers=_stragglers(analyses, cfg, notes), shapes=shapes, flops_per_step=flops,
        tokens_per_step=tokens, tokens_source=how, throughput_values=tput, mfu=mfu,
        mfu_hint=analyses[0].mfu_hint, notes=tuple(notes))
