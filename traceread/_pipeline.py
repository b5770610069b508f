"""Private helpers of :mod:`traceread.analysis`: run each piece on one trace and normalize its output.

Each piece (engine, rules, attribution, scoreboard) is called through its pinned interface; when a
piece is missing or fails on an input, the analysis degrades: the part is listed as unavailable with
the reason, and the rest of the report is still produced.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import kernel_classes as kc
from traceread import schema
from traceread.config import Thresholds
from traceread.errors import TracereadError
from traceread.trace import Trace

GAP_CLASSES = ("launch-bound", "comm-bound", "data-starved", "pipeline-bubble", "sync-stall", "one-time-cost",
               "unattributed")  # = rules.GAP_CLASSES (kept here so that this module imports no rules)
BUSY_PARTS = ("compute-bound", "memory-bound")
PARTS = BUSY_PARTS + GAP_CLASSES


def part_col(part: str) -> str:
    return part.replace("-", "_") + "_ns"


UNIT = ["trace", "rank", "device"]
STEP_OUT_COLUMNS = ["trace", "rank", "device", "step", "start_ns", "end_ns", "cpu_start_ns", "cpu_end_ns",
                    "busy_ns", "idle_ns", "warmup", "outlier"] + [part_col(c) for c in GAP_CLASSES]
GAP_MIN_COLUMNS = ["trace", "rank", "device", "step", "start_ns", "end_ns", "dur_ns", "offset_ns", "phase",
                   "class", "evidence"]
ATTR_COLUMNS = UNIT + ["step_ns"] + [part_col(p) for p in PARTS]


@dataclass
class PerTrace:
    """One trace's results, already carrying the ``trace`` column."""

    steps: pd.DataFrame | None = None
    gaps: pd.DataFrame | None = None
    attribution: pd.DataFrame | None = None
    kernels: pd.DataFrame | None = None
    collectives: pd.DataFrame | None = None
    step_source: str = "unknown"
    dominant: str | None = None
    dominant_share: float | None = None
    notes: list[str] = field(default_factory=list)


def concat(frames: list[pd.DataFrame | None], columns: list[str] | None) -> pd.DataFrame:
    """Concatenate per-trace frames; an empty frame with ``columns`` when there are none."""
    frames = [f for f in frames if f is not None and len(f)]
    if frames:
        return pd.concat(frames, ignore_index=True)
    return pd.DataFrame({c: pd.Series(dtype="int64") for c in (columns or ["trace"])})


def _with_trace(df: pd.DataFrame, index: int) -> pd.DataFrame:
    out = df.reset_index(drop=True).copy()
    out.insert(0, "trace", np.int32(index))
    return out


def run_one(index: int, trace: Trace, cfg: Thresholds, warmup_steps: int | None, step_range: str | None,
            notes: list[str], unavailable: list[str]) -> PerTrace:
    """Steps, gaps, classes, attribution, kernel and collective tables of one trace."""
    out = PerTrace()
    label = trace.meta.path.rsplit("/", 1)[-1]
    notes.extend(f"{label}: {w}" for w in trace.meta.warnings)  # the loader's caveats (truncation, epoch)
    from traceread.sanity import sanity_notes

    notes.extend(f"{label}: {n}" for n in sanity_notes(trace, cfg))
    try:
        from traceread.steps import find_steps
    except ImportError:
        unavailable.append("steps, gaps and attribution: the interval engine (traceread.steps) is not installed")
        return _tables(index, trace, None, out, unavailable)
    res = find_steps(trace, cfg, warmup_steps=warmup_steps, step_range=step_range)
    steps = res.steps.reset_index(drop=True)
    out.step_source = res.source
    notes.extend(f"{label}: {n}" if len(label) else n for n in res.notes)
    if steps.empty:
        unavailable.append(f"{label}: no steps and no GPU activity, so there is no window to analyse")
        return _tables(index, trace, steps, out, unavailable)

    gaps = _classified_gaps(trace, steps, cfg, notes, unavailable)
    out.steps = _with_trace(idle_by_class(steps, gaps), index)
    out.gaps = _with_trace(gaps, index)
    out.attribution = _attribution(trace, steps, gaps, cfg, index, out, notes, unavailable)
    return _tables(index, trace, steps, out, unavailable)


def _classified_gaps(trace: Trace, steps: pd.DataFrame, cfg: Thresholds, notes: list[str],
                     unavailable: list[str]) -> pd.DataFrame:
    from traceread.gaps import find_gaps

    gaps = find_gaps(trace, steps, cfg)
    try:
        from traceread.rules import classify
    except ImportError:
        unavailable.append("gap classes: the rules (traceread.rules) are not installed; every gap is unattributed")
        gaps = gaps.copy()
        gaps["class"] = "unattributed"
        gaps["evidence"] = "not classified: rules unavailable"
        return gaps
    out = classify(gaps, steps, trace, cfg)
    # What the rules could not judge (bubbles with few steps). Popped, not read: pandas deep-copies
    # attrs into every frame derived from this one, a cost per operation that grows with the notes.
    notes.extend(out.attrs.pop("notes", []))
    return out.reset_index(drop=True)


def idle_by_class(steps: pd.DataFrame, gaps: pd.DataFrame) -> pd.DataFrame:
    """Steps plus ``<class>_ns``: idle summed by gap class (vectorized group-by)."""
    out = steps.copy()
    keys = ["rank", "device", "step"]
    if len(gaps):
        pivot = (gaps.groupby(keys + ["class"], observed=True)["dur_ns"].sum()
                 .unstack("class", fill_value=0))
    else:
        pivot = pd.DataFrame(index=pd.MultiIndex.from_arrays([[], [], []], names=keys))
    index = out.set_index(keys).index
    for cls in GAP_CLASSES:
        col = pivot[cls] if cls in pivot.columns else pd.Series(0, index=pivot.index, dtype="int64")
        out[part_col(cls)] = index.map(col).fillna(0).astype("int64").to_numpy()
    # Idle no gap covers (shorter than the engine's minimum gap) is unattributed, so the classes sum
    # to idle_ns, as the attribution counts it.
    covered = out[[part_col(c) for c in GAP_CLASSES]].sum(axis=1).to_numpy()
    rest = np.maximum(out["idle_ns"].to_numpy() - covered, 0)
    out[part_col("unattributed")] = out[part_col("unattributed")].to_numpy() + rest
    return out


def _attribution(trace: Trace, steps: pd.DataFrame, gaps: pd.DataFrame, cfg: Thresholds, index: int,
                 out: PerTrace, notes: list[str], unavailable: list[str]) -> pd.DataFrame:
    try:
        from traceread.attribution import attribute
    except ImportError:
        unavailable.append("busy-time split: traceread.attribution is not installed; compute-bound and "
                           "memory-bound busy time estimated from each kernel class's share of kernel time")
        assert out.steps is not None  # set by the caller just before
        return _with_trace(_fallback_attribution(trace, out.steps), index)
    attr = attribute(trace, steps, gaps, cfg)
    out.dominant = getattr(attr, "dominant_cause", None)
    share = getattr(attr, "dominant_cost_share", None)
    out.dominant_share = float(share) if share is not None else None
    notes.extend(getattr(attr, "notes", []) or [])
    frame = _find_frame(attr)
    return _with_trace(normalize_attribution(frame), index)


def _find_frame(attr: Any) -> pd.DataFrame:
    if isinstance(attr, pd.DataFrame):
        return attr
    for name in ("table", "per_device", "frame", "by_device", "df", "parts"):
        val = getattr(attr, name, None)
        if isinstance(val, pd.DataFrame):
            return val
    for f in dataclasses.fields(attr):
        val = getattr(attr, f.name)
        if isinstance(val, pd.DataFrame):
            return val
    raise TypeError("attribution result carries no DataFrame")


def normalize_attribution(frame: pd.DataFrame) -> pd.DataFrame:
    """Map the attribution table (wide ``<part>_ns`` or long part/ns rows) onto ``ATTR_COLUMNS``."""
    df = frame.reset_index() if not {"rank", "device"} <= set(frame.columns) else frame
    long_key = next((c for c in ("part", "component", "cause", "class", "kind") if c in df.columns), None)
    if long_key is not None and "ns" in df.columns:
        df = (df.pivot_table(index=["rank", "device"], columns=long_key, values="ns", aggfunc="sum",
                             fill_value=0, observed=True).reset_index())
        df.columns = [str(c) for c in df.columns]
    res = pd.DataFrame({"rank": df["rank"].astype("int32"), "device": df["device"].astype("int32")})
    for part in PARTS:
        cands = [f"{part}_ns", part_col(part), part, part.replace("-", "_")]
        col = next((c for c in cands if c in df.columns), None)
        res[part_col(part)] = df[col].fillna(0).astype("int64").to_numpy() if col else 0
    parts_sum = res[[part_col(p) for p in PARTS]].sum(axis=1)
    res["step_ns"] = df["step_ns"].astype("int64").to_numpy() if "step_ns" in df.columns else parts_sum
    return res[["rank", "device", "step_ns"] + [part_col(p) for p in PARTS]]


def _fallback_attribution(trace: Trace, steps: pd.DataFrame) -> pd.DataFrame:
    """Idle by class from the gaps (exact); busy split by kernel-class share of kernel time (estimate)."""
    ev = trace.events
    kern = ev[ev["lane"] == schema.LANE_GPU_COMPUTE]
    compute = kc.is_compute_bound_class(kc.classify(kern["name"]))
    dur = (kern["end_ns"] - kern["start_ns"]).to_numpy()
    dev = kern["device"].to_numpy()
    rows = []
    for (rank, device), g in steps.groupby(["rank", "device"], sort=True):
        sel = dev == device
        total = dur[sel].sum()
        frac = float(dur[sel & compute].sum() / total) if total else 0.0
        busy = int(g["busy_ns"].sum())
        row: dict[str, Any] = {"rank": rank, "device": device, "step_ns": int((g["end_ns"] - g["start_ns"]).sum()),
               part_col("compute-bound"): int(round(busy * frac))}
        row[part_col("memory-bound")] = busy - row[part_col("compute-bound")]
        for cls in GAP_CLASSES:
            row[part_col(cls)] = int(g[part_col(cls)].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def _guarded(what: str, fn, unavailable: list[str]):
    """Run an optional piece; a failure is reported as unavailable (with its reason), never a crash."""
    try:
        return fn()
    except ImportError:
        unavailable.append(f"{what}: its module is not installed")
    except TracereadError as exc:
        unavailable.append(f"{what}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a bug in one table must not cost the whole report
        unavailable.append(f"{what}: failed ({type(exc).__name__}: {exc})")
    return None


def _kernel_table(trace: Trace) -> pd.DataFrame:
    from traceread.metrics.kernels import kernel_table

    return kernel_table(trace)


def _collective_table(trace: Trace, steps: pd.DataFrame) -> pd.DataFrame:
    from traceread.metrics.collectives import collective_table

    return collective_table(trace, steps)


def _tables(index: int, trace: Trace, steps: pd.DataFrame | None, out: PerTrace,
            unavailable: list[str]) -> PerTrace:
    k = _guarded("kernel table", lambda: _kernel_table(trace), unavailable)
    out.kernels = _with_trace(k, index) if k is not None else None
    if steps is not None:
        c = _guarded("collective table", lambda: _collective_table(trace, steps), unavailable)
        out.collectives = _with_trace(c, index) if c is not None and len(c) else None
    return out


def overall_dominant(attribution: pd.DataFrame, per: list[PerTrace],
                     cfg: Thresholds) -> tuple[str, float, str | None, float]:
    """The job's dominant cause and its share of step time, and the runner-up.

    One trace: the attribution's own verdict. Several: summed over every unit, the largest idle
    class; when idle is small, memory-bound or healthy by the same thresholds the rules use.
    """
    if attribution.empty:
        return "unattributed", 0.0, None, 0.0
    total = attribution[[part_col(p) for p in PARTS]].sum()
    step_ns = float(attribution["step_ns"].sum()) or 1.0
    shares = {p: float(total[part_col(p)]) / step_ns for p in PARTS}
    idle = sum(shares[c] for c in GAP_CLASSES)
    busy = shares["compute-bound"] + shares["memory-bound"]
    ranked = sorted(((shares[c], c) for c in GAP_CLASSES if c != "unattributed"), reverse=True)
    if len(per) == 1 and per[0].dominant is not None:
        dominant = per[0].dominant
        share = per[0].dominant_share if per[0].dominant_share is not None else shares.get(dominant, 0.0)
    elif idle < cfg.healthy_max_idle:
        mem = busy and shares["memory-bound"] / busy >= cfg.memory_bound_min_share
        dominant = "memory-bound" if mem else "healthy"
        share = shares["memory-bound"] if mem else idle
    else:
        share, dominant = ranked[0] if ranked and ranked[0][0] > 0 else (shares["unattributed"], "unattributed")
        if dominant == "one-time-cost" and share < cfg.one_time_verdict_share and len(ranked) > 1 \
                and ranked[1][0] > 0:  # one-time costs dominate only when large (attribution.dominant_idle)
            share, dominant = ranked[1]
    candidates = [(s, c) for s, c in ranked if c != dominant]
    if dominant not in ("memory-bound", "healthy") and busy and \
            shares["memory-bound"] / busy >= cfg.memory_bound_min_share:
        candidates.append((shares["memory-bound"], "memory-bound"))
    candidates.sort(reverse=True)
    second, second_share = (candidates[0][1], candidates[0][0]) if candidates and candidates[0][0] > 0 \
        else (None, 0.0)
    return dominant, float(share), second, float(second_share)


def run_mfu(job: Any, traces: list[Trace], steps: pd.DataFrame, cfg: Thresholds,
            unavailable: list[str]) -> tuple[dict[str, Any] | None, str]:
    """MFU as a plain dict, or None and the sentence saying how to get it."""
    hint = ("MFU not computed: give the model size and tokens per step (--params N --tokens-per-step T, "
            "or --global-batch B --seq-len S), or --job job.toml")
    if job is None or steps.empty:
        return None, hint
    try:
        from traceread.metrics.mfu import compute_mfu
    except ImportError:
        unavailable.append("MFU: traceread.metrics.mfu is not installed")
        return None, "MFU not computed: the MFU module is not available in this build"
    try:
        res = compute_mfu(job, traces, steps, cfg)
    except TracereadError as exc:
        return None, f"MFU not computed: {exc}"
    except Exception as exc:  # noqa: BLE001 - report the rest even if MFU has a bug
        unavailable.append(f"MFU: failed ({type(exc).__name__}: {exc})")
        return None, "MFU not computed: the MFU computation failed (see the method notes)"
    return mfu_dict(res), ""


def mfu_dict(res: Any) -> dict[str, Any]:
    """An MfuResult as a dict with at least ``mfu, hfu, tflops_per_gpu, step_time_ns, inputs``."""
    if hasattr(res, "to_dict"):
        d = dict(res.to_dict())
    elif dataclasses.is_dataclass(res) and not isinstance(res, type):
        d = dataclasses.asdict(res)
    else:
        d = dict(res)
    d.setdefault("inputs", {})
    for key in ("mfu", "hfu", "tflops_per_gpu", "step_time_ns"):
        d.setdefault(key, None)
    return d


def launch_stats(traces: list[Trace], gaps: pd.DataFrame, dominant: str, second: str | None,
                 second_share: float, cfg: Thresholds, unavailable: list[str]) -> dict[str, Any] | None:
    """Launch figures when launch-bound is the dominant or a large second cause (flat: name -> number).

    The launch-bound gaps (count, total, median), then the scoreboard's launch statistics of the
    first trace that has kernels: kernels shorter than their launch call, launch-to-start latency.
    """
    matters = dominant == "launch-bound" or (second == "launch-bound" and second_share >= cfg.report_second_min_share)
    if not matters or gaps.empty:
        return None
    lb = gaps[gaps["class"] == "launch-bound"]
    dur = lb["dur_ns"].to_numpy()
    out: dict[str, Any] = {
        "launch_bound_gaps": int(len(lb)),
        "launch_bound_idle_ns": int(dur.sum()),
        "median_launch_bound_gap_ns": int(np.median(dur)) if len(dur) else 0,
    }
    if "launch_count" in lb.columns and len(lb):
        out["launch_calls_in_those_gaps"] = int(lb["launch_count"].sum())
    try:
        from traceread.metrics.kernels import launch_stats as kernel_launch_stats
    except ImportError:
        unavailable.append("launch statistics: traceread.metrics.kernels is not installed")
        return out
    for trace in traces:
        st = _guarded("launch statistics", lambda t=trace: kernel_launch_stats(t), unavailable) or {}
        if not st.get("kernels"):
            continue
        for key in ("kernels", "shorter_than_launch", "shorter_than_launch_share", "median_kernel_ns",
                    "median_launch_call_ns"):
            if st.get(key) is not None:
                out[key] = st[key]
        for q, v in (st.get("launch_latency_ns") or {}).items():
            if q in ("p50", "p90", "p99") and v is not None:
                out[f"launch_to_start_{q}_ns"] = v
        break
    return out
