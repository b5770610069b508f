"""Steps: the analysis window every later analysis shares.

Where steps come from, in order of preference:

1. a named NVTX range (``step_range``, nsys input), numbered 0.. per rank;
2. ``ProfilerStep#N`` host annotations (``meta.steps`` or host-lane events; their GPU mirrors on
   the ``gpu_annotation`` lane are not counted again);
3. a marker repeating once per iteration: ``Optimizer.step#...`` (ends an iteration), else
   ``enumerate(DataLoader)#...`` (starts one) -- said so in the notes;
4. with no marker at all, inferred (:mod:`traceread.step_inference`): a repeating NVTX range /
   user annotation (``inferred:nvtx:<name>``), else the period of the kernel sequence
   (``inferred:kernel-period``);
5. the GPU-active span of the rank (first to last GPU op on any of its devices), as one step.

Each host step is extended onto each device of its rank so GPU lag is not read as idle: step N on
a device runs from max(host start of N, end of N-1 on that device) to max(host end of N, end of the
last GPU op launched during N). Consecutive steps on a device never overlap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread import heap, intervals, schema, step_inference
from traceread.config import Thresholds
from traceread.host_calls import PROFILER_STEP_RE
from traceread.lanes import HOST_LANES, OP_LANES, EventView, compute_union, event_view, rank_devices, subset
from traceread.trace import Trace

SOURCE_PROFILER_STEP = "ProfilerStep"
SOURCE_NVTX = "nvtx"
SOURCE_GPU_SPAN = "gpu-span"
_MARKERS = (("optimizer", "Optimizer.step", "end"), ("dataloader", "enumerate(DataLoader)", "start"))


@dataclass(frozen=True)
class StepResult:
    """Steps per rank x device (``schema.STEP_COLUMNS``), where they came from, and user notes."""

    steps: pd.DataFrame
    source: str
    notes: list[str] = field(default_factory=list)


def _empty_host() -> pd.DataFrame:
    return pd.DataFrame({"rank": pd.Series(dtype="int32"), "step": pd.Series(dtype="int64"),
                         "cpu_start_ns": pd.Series(dtype="int64"), "cpu_end_ns": pd.Series(dtype="int64")})


def _host_frame(rank, step, start, end) -> pd.DataFrame:
    df = pd.DataFrame({"rank": np.asarray(rank, dtype=np.int32), "step": np.asarray(step, dtype=np.int64),
                       "cpu_start_ns": np.asarray(start, dtype=np.int64),
                       "cpu_end_ns": np.asarray(end, dtype=np.int64)})
    # One row per (rank, step): duplicate annotations (several threads) span their union.
    df = df.groupby(["rank", "step"], as_index=False).agg(
        cpu_start_ns=("cpu_start_ns", "min"), cpu_end_ns=("cpu_end_ns", "max"))
    return df.sort_values(["rank", "cpu_start_ns", "step"], ignore_index=True)


def _numbered(v: EventView, rows: np.ndarray) -> pd.DataFrame:
    """Host ranges numbered 0.. per rank in start order."""
    df = pd.DataFrame({"rank": v.rank[rows], "s": v.start[rows], "e": v.end[rows]})
    df = df.sort_values(["rank", "s"], kind="stable", ignore_index=True)
    df["step"] = df.groupby("rank").cumcount()
    return _host_frame(df["rank"], df["step"], df["s"], df["e"])


def _from_nvtx(v: EventView, step_range: str) -> pd.DataFrame:
    host = v.rows((schema.LANE_CPU_ANNOTATION,))
    names = v.names_of(host)
    exact = names == step_range
    if not exact.any():
        pat = re.compile(step_range)
        uniq = np.unique(names.astype(str))
        hits = {n for n in uniq if pat.search(n)}
        exact = np.isin(names.astype(str), list(hits))
    return _numbered(v, host[exact])


def _from_profiler_steps(trace: Trace, v: EventView) -> tuple[pd.DataFrame, str]:
    meta_steps = trace.meta.steps
    if meta_steps is not None and len(meta_steps):
        names = meta_steps["name"].astype(str) if "name" in meta_steps else pd.Series(dtype=str)
        nvtx = trace.meta.format == "nsys" and not names.str.match(PROFILER_STEP_RE.pattern).all()
        df = _host_frame(meta_steps["rank"], meta_steps["step"], meta_steps["start_ns"], meta_steps["end_ns"])
        return df, SOURCE_NVTX if nvtx else SOURCE_PROFILER_STEP
    host = v.rows(HOST_LANES)
    num = v.step_number[v.name[host]]
    keep = num >= 0
    rows = host[keep]
    return _host_frame(v.rank[rows], num[keep], v.start[rows], v.end[rows]), SOURCE_PROFILER_STEP


def _gpu_spans(v: EventView) -> pd.DataFrame:
    """Per rank: first start and last end of any GPU op."""
    rows = v.rows(OP_LANES)
    df = pd.DataFrame({"rank": v.rank[rows], "s": v.start[rows], "e": v.end[rows]})
    return df.groupby("rank").agg(s=("s", "min"), e=("e", "max"))


def _from_marker(v: EventView, flag: str, boundary: str) -> pd.DataFrame:
    """Steps between consecutive per-iteration markers (nested repeats merged first).

    An iteration ends with its optimizer step (``boundary="end"``: marker end to next marker end)
    or starts with its next batch (``"start"``: marker start to next marker start). Activity
    outside the first and last marker has no known iteration boundary and is left out.
    """
    host = v.rows(HOST_LANES)
    rows = host[v.flag(flag, host)]
    parts = []
    for r in np.unique(v.rank[rows]):
        mine = rows[v.rank[rows] == r]
        ms, me = intervals.union(v.start[mine], v.end[mine])
        if len(ms) < 2:
            continue
        edge = me if boundary == "end" else ms
        parts.append(pd.DataFrame({"rank": r, "step": np.arange(len(edge) - 1), "s": edge[:-1], "e": edge[1:]}))
    if not parts:
        return _empty_host()
    df = pd.concat(parts, ignore_index=True)
    return _host_frame(df["rank"], df["step"], df["s"], df["e"])


def _from_gpu_span(v: EventView) -> pd.DataFrame:
    spans = _gpu_spans(v)
    return _host_frame(spans.index, np.zeros(len(spans)), spans["s"], spans["e"])


def _host_steps(trace: Trace, v: EventView, step_range: str | None,
                cfg: Thresholds) -> tuple[pd.DataFrame, str, list[str], bool]:
    """Host steps, their source, notes, and whether the bounds are GPU times (see ``_extend``)."""
    df, source, notes = _marked_steps(trace, v, step_range)
    if source != SOURCE_GPU_SPAN:
        return df, source, notes, False
    found = step_inference.from_repeating_range(v, cfg)
    layers = None
    if found is None:
        # A kernel sequence that repeats inside a single range spanning the work repeats layers: the
        # range is the step. Without repetition a single range (a wrapper around a whole program) is
        # not taken: the GPU span below is the step.
        period = step_inference.from_kernel_period(v, cfg)
        layers = step_inference.repeated_layers(v, cfg)
        spanning = step_inference.from_repeating_range(v, cfg, single=True) if period or layers else None
        found = spanning or period
    if found is not None:
        host = _host_frame(found.host["rank"], found.host["step"], found.host["cpu_start_ns"],
                           found.host["cpu_end_ns"])
        return host, found.source, notes + [found.note], found.gpu_time
    notes.append("No step markers: the GPU-active span of each rank is analysed as one step.")
    if layers:
        notes.append(step_inference.layers_note(layers))
    return df, source, notes, False


def _marked_steps(trace: Trace, v: EventView, step_range: str | None) -> tuple[pd.DataFrame, str, list[str]]:
    if step_range:
        df = _from_nvtx(v, step_range)
        if len(df):
            return df, SOURCE_NVTX, [f"Steps are the {len(df)} NVTX ranges matching {step_range!r}."]
        notes = [f"No NVTX range matches {step_range!r}; looking for other step markers."]
    else:
        notes = []
    df, source = _from_profiler_steps(trace, v)
    if len(df):
        return df, source, notes
    for flag, label, boundary in _MARKERS:
        df = _from_marker(v, flag, boundary)
        if len(df):
            notes.append(f"No step markers: steps inferred from repeated {label}#... calls, one per "
                         f"training iteration ({len(df)} steps between consecutive calls; activity "
                         "before the first and after the last call is left out).")
            return df, f"inferred:{label}", notes
    return _from_gpu_span(v), SOURCE_GPU_SPAN, notes


def _extend(v: EventView, host: pd.DataFrame, rank: int, device: int, gpu_time: bool = False) -> pd.DataFrame:
    """Host steps of ``rank`` stretched onto ``device`` for GPU lag (see module docstring).

    With ``gpu_time`` the bounds are already GPU times: GPU work joins the step it starts in."""
    h = host[host["rank"] == rank].sort_values("cpu_start_ns", kind="stable")
    cs, ce = h["cpu_start_ns"].to_numpy(), h["cpu_end_ns"].to_numpy()
    ops = v.rows(OP_LANES, rank=rank, device=device)
    launch = v.launch_of(ops)
    linked = launch >= 0
    ops, launch = subset(ops, linked), subset(launch, linked)
    ls = v.start[ops] if gpu_time else v.start[launch]
    idx = np.searchsorted(cs, ls, side="right") - 1
    ok = (idx >= 0) & (ls < ce[np.maximum(idx, 0)])
    last_op = np.full(len(cs), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last_op, idx[ok], v.end[ops[ok]])
    dev_end = np.maximum.accumulate(np.maximum(ce, last_op)) if len(cs) else ce
    prev_end = np.concatenate(([np.iinfo(np.int64).min], dev_end[:-1]))
    dev_start = np.maximum(cs, prev_end)
    return pd.DataFrame({
        "rank": np.int32(rank), "device": np.int32(device), "step": h["step"].to_numpy(),
        "start_ns": dev_start, "end_ns": dev_end, "cpu_start_ns": cs, "cpu_end_ns": ce,
    })


def outliers(steps: pd.DataFrame, cfg: Thresholds) -> np.ndarray:
    """Per step: longer than ``outlier_step_factor`` times its device's median non-warmup step."""
    length = (steps["end_ns"] - steps["start_ns"]).astype("float64")
    median = length.where(~steps["warmup"]).groupby([steps["rank"], steps["device"]]).transform("median")
    return (length > cfg.outlier_step_factor * median).to_numpy()


def _flag(steps: pd.DataFrame, source: str, cfg: Thresholds, warmup_steps: int | None,
          notes: list[str]) -> None:
    """Set ``warmup`` and ``outlier`` in place on a frame this module owns."""
    order_in_rank = steps.groupby(["rank", "device"]).cumcount().to_numpy()
    if warmup_steps is not None:
        steps["warmup"] = order_in_rank < warmup_steps
        if warmup_steps:
            notes.append(f"The first {warmup_steps} step(s) are warmup (--warmup-steps).")
    else:
        first = steps.groupby(["rank", "device"])["step"].transform("min").to_numpy()
        count = steps.groupby(["rank", "device"])["step"].transform("size").to_numpy()
        auto = (source == SOURCE_PROFILER_STEP) & (first == 0) & (count >= cfg.warmup_min_steps)
        steps["warmup"] = auto & (order_in_rank == 0)
        if steps["warmup"].any():
            notes.append("ProfilerStep#0 is marked warmup: the profiler schedule recorded no warmup "
                         "of its own.")
    steps["outlier"] = outliers(steps, cfg)
    n_out = int(steps["outlier"].sum())
    if n_out:
        notes.append(f"{n_out} step(s) longer than {cfg.outlier_step_factor:g}x the median step are "
                     "flagged as outliers (kept in the attribution, left out of medians).")


def find_steps(trace: Trace, cfg: Thresholds, warmup_steps: int | None = None,
               step_range: str | None = None) -> StepResult:
    """Steps per rank x device.

    Returns a :class:`StepResult` whose ``steps`` frame has ``schema.STEP_COLUMNS`` (ns, int64),
    one row per rank x device x step, sorted by rank, device, start. ``busy_ns`` is the union of
    the device's compute kernels inside the device-extended step; ``idle_ns`` the rest.
    """
    v = event_view(trace)
    host, source, notes, gpu_time = _host_steps(trace, v, step_range, cfg)
    unended = (host["cpu_end_ns"] <= host["cpu_start_ns"]).to_numpy()
    if unended.any():  # a step marker with no end or no duration: the run crashed or the file was cut mid-step
        notes.append(f"{int(unended.sum())} step marker(s) without a duration (no end recorded) are left out.")
        host = host[~unended]
    pairs = rank_devices(v)
    parts = [_extend(v, host, r, d, gpu_time) for r, d in pairs if (host["rank"] == r).any()]
    unmarked = sorted({r for r, _ in pairs if not (host["rank"] == r).any()})
    if unmarked:
        notes.append(f"Rank(s) {', '.join(map(str, unmarked))} ran GPU work but carry no step markers; "
                     "they are left out of step analyses.")
    if parts:
        steps = pd.concat(parts, ignore_index=True)
    else:
        steps = pd.DataFrame({c: pd.Series(dtype="int64") for c in
                              ("rank", "device", "step", "start_ns", "end_ns", "cpu_start_ns", "cpu_end_ns")})
    busy = np.zeros(len(steps), dtype=np.int64)
    for (r, d), grp in schema.rank_device_rows(steps).items():
        us, ue = compute_union(v, int(r), int(d))
        busy[grp] = intervals.overlap_with_union(steps["start_ns"].to_numpy()[grp],
                                                 steps["end_ns"].to_numpy()[grp], us, ue)
    steps["busy_ns"] = busy
    steps["idle_ns"] = steps["end_ns"] - steps["start_ns"] - busy
    _flag(steps, source, cfg, warmup_steps, notes)
    steps = steps[list(schema.STEP_COLUMNS)].astype({k: v[0] for k, v in schema.STEP_COLUMNS.items()})
    heap.trim()  # building the event view freed large temporaries: return their pages
    return StepResult(steps.reset_index(drop=True), source, notes)
