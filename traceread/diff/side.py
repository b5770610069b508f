"""One side of a diff: the facts of its captures, pooled, as plain data.

A side is one or more *captures* (repeated runs of the same job); a capture is one run, all its
ranks. A :class:`Capture` holds the tables the analysis pipeline already made for it, read either
from an :class:`~traceread.analysis.Analysis` (:func:`capture_from_analysis`) or from the JSON
reports a ``traceread scan`` wrote (:func:`capture_from_reports`); nothing here recomputes them:
per-step times come from the steps table, attribution from the attribution table, kernels and
collectives from the scoreboard, stragglers from the job section of :mod:`traceread.ranks`, work
per step from the roofline's recorded shapes and the job inputs.

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
from traceread.analysis import Analysis
from traceread.attribution import pooled_verdict
from traceread.config import Thresholds
from traceread.errors import UserFacingError
from traceread.host_calls import PROFILER_STEP_PREFIX
from traceread.render.jsonout import mfu_record
from traceread.render.whatif import record as whatif_record
from traceread.vocabulary import CAPTURE_BOUNDARY, GAP_CLASSES, PARTS, part_col, part_of_col

_COUNT_COLUMNS = {"count": "int64", "total_ns": "int64"}


def _empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in columns.items()})


@dataclass(frozen=True, eq=False)
class Capture:
    """The analysis tables of one run (all its ranks). ``host_ops``/``shapes`` None: not available."""

    traces: tuple[dict[str, Any], ...]  # path, format, devices, world_size, step_source, ranks
    steps: pd.DataFrame  # rank, device, step, start_ns, end_ns, busy_ns, idle_ns, warmup, outlier, <class>_ns
    attribution: pd.DataFrame  # rank, device, step_ns, <part>_ns
    kernels: pd.DataFrame  # name, count, total_ns
    collectives: pd.DataFrame  # collective, count, total_ns, exposed_ns
    host_ops: pd.DataFrame | None  # name, count, total_ns
    shapes: pd.DataFrame | None  # op, input_dims, calls, kernel_ns, flops
    dominant_cause: str
    dominant_cost_share: float
    mfu: dict[str, Any] | None
    mfu_hint: str
    stragglers: tuple[dict[str, Any], ...]
    optimizer_steps_per_step: float | None  # Optimizer.step# markers per profiler step (None: unknown)
    whatif: dict[str, Any] | None = None  # the report's whatif object (the replay's predictions), one trace


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
    host_ops: pd.DataFrame | None  # name, count, total_ns; None: not available on this side
    collectives: pd.DataFrame  # collective, count, total_ns, exposed_ns
    per_rank: pd.DataFrame  # rank, step_ns, busy_ns, idle_ns, top_idle_class, top_idle_ns (per step)
    stragglers: tuple[dict[str, Any], ...]  # traceread.ranks' stragglers of each capture (+ capture index)
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


# --- captures from an Analysis ----------------------------------------------------------------------

def host_ops(a: Analysis) -> pd.DataFrame:
    """CPU ops and user annotations by name (count, total ns) over every trace of ``a``; step markers excluded."""
    frames = []
    for t in a.inputs:
        ev = t.events
        sel = ((ev["category"] == schema.CAT_CPU_OP).to_numpy() |
               (ev["lane"] == schema.LANE_CPU_ANNOTATION).to_numpy())
        h = ev.loc[sel, ["name", "start_ns", "end_ns"]]
        names = h["name"].astype(str)
        keep = ~names.str.startswith(PROFILER_STEP_PREFIX).to_numpy()
        frames.append(pd.DataFrame({"name": names.to_numpy()[keep],
                                    "total_ns": (h["end_ns"] - h["start_ns"]).to_numpy(np.int64)[keep]}))
    f = pd.concat(frames, ignore_index=True) if frames else _empty({"name": "object", "total_ns": "int64"})
    g = f.groupby("name", sort=False)["total_ns"]
    return pd.DataFrame({"count": g.size(), "total_ns": g.sum()}).reset_index().astype(_COUNT_COLUMNS)


def _shapes(a: Analysis, cfg: Thresholds, notes: list[str]) -> pd.DataFrame:
    """Recorded matmul/attention op signatures (op, input dims) with calls, kernel time and FLOPs per call."""
    from traceread.metrics.roofline import roofline

    frames = []
    for t in a.inputs:
        try:
            r = roofline(t, cfg)
        except UserFacingError as exc:
            notes.append(f"{t.meta.path}: recorded shapes not read ({exc})")
            continue
        if len(r.table):
            frames.append(r.table[["op", "input_dims", "calls", "kernel_ns", "flops"]])
    if not frames:
        return _empty({"op": "object", "input_dims": "object", "calls": "int64", "kernel_ns": "int64",
                       "flops": "float64"})
    return pd.concat(frames, ignore_index=True).assign(input_dims=lambda d: d["input_dims"].astype(str))


def _stragglers_of(a: Analysis) -> tuple[dict[str, Any], ...]:
    """The stragglers the analysis' job section (traceread.ranks) names, over its jobs."""
    section = a.job
    reports = [r for r in (section.reports if section is not None else ()) if r is not None]
    return tuple({"rank": s.rank, "cause": s.cause, "reason": s.reason,
                  "waited_on_ns": s.waited_on_ns} for r in reports for s in r.stragglers)


def _optimizer_steps(a: Analysis, cfg: Thresholds, notes: list[str]) -> float | None:
    from traceread.metrics.steptime import step_timing

    try:
        return step_timing(list(a.inputs), a.steps, cfg).optimizer_steps_per_profiler_step
    except UserFacingError as exc:
        notes.append(f"optimizer steps per profiler step: {exc}")
        return None


def capture_from_analysis(a: Analysis, cfg: Thresholds, notes: list[str]) -> Capture:
    """The tables of one analysed run (its ranks analysed together by :func:`traceread.runner.analyze`)."""
    traces = tuple({"path": t.path, "format": t.format, "devices": list(t.devices), "world_size": t.world_size,
                    "step_source": t.step_source, "ranks": list(t.ranks)} for t in a.traces)
    kernels = a.kernels[["name", "count", "total_ns"]] if len(a.kernels) and "name" in a.kernels.columns else \
        _empty({"name": "object", **_COUNT_COLUMNS})
    coll = a.collectives[["collective", "count", "total_ns", "exposed_ns"]] \
        if len(a.collectives) and "collective" in a.collectives.columns else \
        _empty({"collective": "object", "count": "int64", "total_ns": "int64", "exposed_ns": "int64"})
    return Capture(traces=traces, steps=a.steps, attribution=a.attribution, kernels=kernels, collectives=coll,
                   host_ops=host_ops(a), shapes=_shapes(a, cfg, notes), dominant_cause=a.dominant_cause,
                   dominant_cost_share=a.dominant_cost_share,
                   mfu=mfu_record(a.mfu) if a.mfu is not None else None, mfu_hint=a.mfu_hint,
                   stragglers=_stragglers_of(a), optimizer_steps_per_step=_optimizer_steps(a, cfg, notes),
                   whatif=whatif_record(a.whatif) if a.whatif is not None else None)


# --- captures from scan reports (the analyze JSON report of each trace) ------------------------------

_STEP_KEYS = ("rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier")


def _step_rows(table: dict[str, list] | list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """A report's steps as rows: a table of columns (schema 2.0), or one object per step with its
    ``idle_by_class`` (1.x: a scan directory written before)."""
    if isinstance(table, list):
        return [{**{k: s[k] for k in _STEP_KEYS},
                 **{part_col(c): int((s.get("idle_by_class") or {}).get(c, 0)) for c in GAP_CLASSES}} for s in table]
    table = table or {}
    n = len(table.get("rank", []))
    columns = {k: table.get(k, [None] * n) for k in _STEP_KEYS}
    columns.update({part_col(c): table.get(part_col(c), [0] * n) for c in GAP_CLASSES})
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def capture_from_reports(reports: list[dict[str, Any]], cfg: Thresholds,
                         stragglers: tuple[dict[str, Any], ...] = ()) -> Capture:
    """One run from the ``analyze`` JSON reports of its traces (``report.schema.json``), as scan writes them.

    Host ops and recorded shapes are not in those reports: they stay unavailable (None).
    """
    traces, steps, attr, kernels, coll = [], [], [], [], []
    for i, doc in enumerate(reports):
        for t in doc.get("traces", []):
            traces.append({k: t.get(k) for k in ("path", "format", "devices", "world_size", "step_source", "ranks")})
        steps += [{"trace": i, **row} for row in _step_rows(doc.get("steps"))]
        for r in doc.get("attribution", []):
            row = {"trace": i, "rank": r["rank"], "device": r["device"], "step_ns": r["step_ns"]}
            row.update({part_col(p): int(((r.get("parts") or {}).get(p) or {}).get("ns", 0)) for p in PARTS})
            attr.append(row)
        kernels += [{"name": k["name"], "count": k["count"], "total_ns": k["total_ns"]} for k in doc.get("kernels", [])]
        coll += [{k: c.get(k) for k in ("collective", "count", "total_ns", "exposed_ns")}
                 for c in doc.get("collectives", [])]
    attribution = pd.DataFrame(attr, columns=["trace", "rank", "device", "step_ns"] + [part_col(p) for p in PARTS])
    if len(reports) == 1:
        dominant, share = reports[0].get("dominant_cause", "unattributed"), reports[0].get("dominant_cost_share", 0.0)
    else:
        run = pooled_verdict(attribution, cfg, [str(d.get("dominant_cause", "")) for d in reports])  # analyze's
        dominant, share = run.cause, run.share
    mfus = [d["mfu"] for d in reports if d.get("mfu")]
    opt = mfus[0].get("timing", {}).get("optimizer_steps_per_profiler_step") if mfus else None
    step_cols = ["trace", "rank", "device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier"]
    return Capture(
        traces=tuple(traces), steps=pd.DataFrame(steps, columns=step_cols + [part_col(c) for c in GAP_CLASSES]),
        attribution=attribution,
        kernels=pd.DataFrame(kernels, columns=["name", "count", "total_ns"]),
        collectives=pd.DataFrame(coll, columns=["collective", "count", "total_ns", "exposed_ns"]),
        host_ops=None, shapes=None, dominant_cause=str(dominant), dominant_cost_share=float(share),
        mfu=mfus[0] if len(mfus) == 1 and len(reports) == 1 else None,
        mfu_hint="" if mfus else (reports[0].get("mfu_hint", "") if reports else ""),
        stragglers=stragglers, optimizer_steps_per_step=opt,
        whatif=reports[0].get("whatif") if len(reports) == 1 else None)


# --- pooling captures into a side --------------------------------------------------------------------

def _per_step(c: Capture, capture: int) -> pd.DataFrame:
    s = c.steps
    if s.empty:
        return _empty({"capture": "int64", "step": "int64", "dur_ns": "int64", "steady": "bool"})
    f = s.assign(dur_ns=(s["end_ns"] - s["start_ns"]).astype(np.int64))
    boundary = part_col(CAPTURE_BOUNDARY)
    if boundary not in f.columns:
        f = f.assign(**{boundary: 0})
    per = f.groupby("step", sort=True).agg(dur_ns=("dur_ns", "max"), warmup=("warmup", "any"),
                                           outlier=("outlier", "any"), edge=(boundary, "max")).reset_index()
    steady = ~(per["warmup"].astype(bool) | per["outlier"].astype(bool)).to_numpy()
    # A step at the capture's edge (idle there because of work issued before the capture, or the profiler
    # shutting down) is not steady state either: its time is the capture's, not the run's
    clean = steady & ~(per["edge"].fillna(0).to_numpy() > 0)
    if clean.any():
        steady = clean
    return pd.DataFrame({"capture": capture, "step": per["step"].to_numpy(np.int64),
                         "dur_ns": per["dur_ns"].to_numpy(np.int64), "steady": steady})


def _merge(frames: list[pd.DataFrame | None], key: str, cols: list[str]) -> pd.DataFrame:
    """Tables keyed by ``key`` with the numeric ``cols``, summed by ``key``."""
    frames = [f[[key] + cols].assign(**{key: f[key].astype(str)}) for f in frames if f is not None and len(f)]
    if not frames:
        return _empty({key: "object", **{c: "int64" for c in cols}})
    f = pd.concat(frames, ignore_index=True).astype({c: "int64" for c in cols})
    return f.groupby(key, sort=False)[cols].sum().reset_index()


def _unit_steps(c: Capture) -> int:
    """Analysed (rank, device, step) rows: the attribution's window (non-warmup; all when every step is)."""
    if c.steps.empty:
        return 0
    n = int((~c.steps["warmup"].astype(bool)).sum())
    return n or len(c.steps)


def _per_rank(captures: list[Capture]) -> pd.DataFrame:
    """Per rank, means per analysed step: step time, busy, idle and its largest class (ranks > 1 only)."""
    frames = [c.steps[~c.steps["warmup"].astype(bool)] for c in captures if len(c.steps)]
    if not frames:
        return pd.DataFrame()
    s = pd.concat(frames, ignore_index=True)
    if s["rank"].nunique() < 2:
        return pd.DataFrame()
    s = s.assign(step_ns=s["end_ns"] - s["start_ns"])
    cls_cols = [part_col(c) for c in GAP_CLASSES if part_col(c) in s.columns]
    g = s.groupby("rank", sort=True)[["step_ns", "busy_ns", "idle_ns"] + cls_cols].mean()
    top = g[cls_cols].idxmax(axis=1)
    out = g[["step_ns", "busy_ns", "idle_ns"]].reset_index()
    out["top_idle_class"] = [part_of_col(c) for c in top.to_numpy()]
    out["top_idle_ns"] = [float(g.loc[r, c]) for r, c in zip(g.index, top.to_numpy(), strict=True)]
    return out


def _heaviest_shapes(captures: list[Capture]) -> pd.DataFrame:
    frames = [c.shapes for c in captures if c.shapes is not None and len(c.shapes)]
    if not frames:
        return _empty({"op": "object", "input_dims": "object", "calls": "int64", "kernel_ns": "int64",
                       "flops": "float64"})
    f = pd.concat(frames, ignore_index=True)
    g = f.groupby(["op", "input_dims"], sort=False).agg(calls=("calls", "sum"), kernel_ns=("kernel_ns", "sum"),
                                                         flops=("flops", "first")).reset_index()
    return g.sort_values(["kernel_ns", "op"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _tokens(workload: Any, captures: list[Capture]) -> tuple[float | None, str]:
    """Tokens per *profiler* step: the workload's tokens per optimizer step x Optimizer.step# markers per step."""
    tok = workload.tokens() if workload is not None else None
    if tok is None:
        return None, ""
    tokens, how = tok
    factor = captures[0].optimizer_steps_per_step or 1.0  # no Optimizer.step# markers: one per step
    if abs(factor - 1.0) > 1e-9:
        how += f" x {factor:.3g} optimizer steps per profiler step"
    return float(tokens) * factor, how


def _pooled_mfu(captures: list[Capture]) -> dict[str, Any] | None:
    """One capture: its MFU result; several: the median MFU and HFU of the captures (all must have one)."""
    got = [c.mfu for c in captures if c.mfu]
    if not got or len(got) != len(captures):
        return None
    if len(got) == 1:
        return got[0]
    return {k: float(np.median([m[k] for m in got])) for k in ("mfu", "hfu", "tokens_per_s")
            if all(m.get(k) is not None for m in got)}


def summarize_side(label: str, captures: list[Capture], workload: Any, cfg: Thresholds,
                   notes: list[str] | None = None) -> SideFacts:
    """The facts of one side (module doc): its captures pooled."""
    notes = list(notes or [])
    steps = pd.concat([_per_step(c, i) for i, c in enumerate(captures)], ignore_index=True)
    steady = steps[steps["steady"]]
    if steady.empty and len(steps):
        notes.append(f"{label}: every step is warmup or outlier; all {len(steps)} steps are compared")
        steady = steps
    values = steady["dur_ns"].to_numpy(np.float64)
    attrs = [c.attribution for c in captures if len(c.attribution)]
    attribution = pd.concat(attrs, ignore_index=True) if attrs else captures[0].attribution
    if len(captures) == 1:
        dominant, share = captures[0].dominant_cause, captures[0].dominant_cost_share
    else:
        run = pooled_verdict(attribution, cfg, [c.dominant_cause for c in captures])  # analyze's, same units
        dominant, share = run.cause, run.share
    analysed = sum(_unit_steps(c) for c in captures)  # per-step parts are means per device and step
    total = float(attribution["step_ns"].sum()) if len(attribution) else 0.0
    per_step = {p: (float(attribution[part_col(p)].sum()) / analysed if analysed else 0.0) for p in PARTS}
    shares = {p: (float(attribution[part_col(p)].sum()) / total if total else 0.0) for p in PARTS}
    shapes = _heaviest_shapes(captures)
    n_steps = int(len(steps))
    flops = float((shapes["flops"] * shapes["calls"]).sum()) / n_steps if len(shapes) and n_steps else None
    tokens, how = _tokens(workload, captures)
    tput = tokens / (values / 1e9) if tokens is not None and len(values) else None
    traces = [t for c in captures for t in c.traces]
    models = tuple(sorted({str(d.get("name") or "") for t in traces for d in (t.get("devices") or [])} - {""}))
    worlds = {t["world_size"] for t in traces if t.get("world_size")}
    no_host = any(c.host_ops is None for c in captures)
    if no_host:
        notes.append(f"{label}: host ops are not in the scan reports; give the traces themselves to compare them")
    return SideFacts(
        label=label, paths=tuple(str(t.get("path")) for t in traces),
        formats=tuple(sorted({str(t.get("format")) for t in traces})), gpu_models=models,
        world_size=max(worlds) if worlds else None,
        ranks=max(len({r for t in c.traces for r in (t.get("ranks") or [])}) for c in captures),
        captures=len(captures), step_sources=tuple(sorted({str(t.get("step_source")) for t in traces})),
        steps_total=n_steps, step_values=values, all_steps=steps, dominant_cause=dominant,
        dominant_cost_share=float(share), parts_per_step=per_step,
        step_ns_per_step=total / analysed if analysed else 0.0, shares=shares,
        kernels=_merge([c.kernels for c in captures], "name", ["count", "total_ns"]),
        host_ops=None if no_host else _merge([c.host_ops for c in captures], "name", ["count", "total_ns"]),
        collectives=_merge([c.collectives for c in captures], "collective", ["count", "total_ns", "exposed_ns"]),
        per_rank=_per_rank(captures),
        stragglers=tuple({**s, "capture": i} for i, c in enumerate(captures) for s in c.stragglers),
        shapes=shapes, flops_per_step=flops, tokens_per_step=tokens, tokens_source=how, throughput_values=tput,
        mfu=_pooled_mfu(captures), mfu_hint=captures[0].mfu_hint, notes=tuple(notes))
