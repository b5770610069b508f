"""Steps: the analysis window every later analysis shares.

Where steps come from, in order of preference:

1. a named NVTX range (``step_range``, nsys input), numbered 0.. per rank;
2. ``ProfilerStep#N`` host annotations (``meta.steps`` or host-lane events; their GPU mirrors on
   the ``gpu_annotation`` lane are not counted again);
3. a marker repeating once per iteration: ``Optimizer.step#...`` (ends an iteration), else
   ``enumerate(DataLoader)#...`` (starts one) -- said so in the notes;
4. with no marker at all, inferred (:mod:`traceread.engine.step_inference`): a repeating NVTX range /
   user annotation (``inferred:nvtx:<name>``), else the period of the kernel sequence
   (``inferred:kernel-period``);
5. the GPU-active span of the rank (first to last GPU op on any of its devices), as one step.

Each host step is extended onto each device of its rank so GPU lag is not read as idle: step N on
a device runs from max(host start of N, end of N-1 on that device) to max(host end of N, end of the
last GPU op launched during N). Consecutive steps on a device never overlap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread import grouped, intervals, schema
from traceread.config import Thresholds
from traceread.engine import step_inference
from traceread.engine.lanes import (
    HOST_LANES,
    OP_LANES,
    EventView,
    compute_union,
    event_view,
    rank_devices,
    subset,
)
from traceread.host_calls import PROFILER_STEP_RE
from traceread.note import (
    COLLAPSED_STEPS,
    FIRST_STEP_WARMUP,
    GPU_SPAN_STEP,
    NO_NVTX_MATCH,
    OUTLIER_STEPS,
    STEPS_FROM_MARKER,
    STEPS_NVTX_RANGES,
    UNENDED_MARKERS,
    UNMARKED_RANKS,
    WARMUP_GIVEN,
    Note,
)
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
    notes: list[Note] = field(default_factory=list)  # as data: worded by traceread.render.notes


def _empty_host() -> pd.DataFrame:
    return pd.DataFrame({"rank": pd.Series(dtype="int32"), "step": pd.Series(dtype="int64"),
                         "cpu_start_ns": pd.Series(dtype="int64"), "cpu_end_ns": pd.Series(dtype="int64")})


def _host_frame(rank, step, start, end) -> pd.DataFrame:
    """One row per (rank, step), sorted by rank, start, step: duplicate annotations (several threads)
    span their union. numpy group-bys: pandas' per-operation cost was most of this on a small trace."""
    rank, step = np.asarray(rank, dtype=np.int32), np.asarray(step, dtype=np.int64)
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    code, n = grouped.codes(rank, step)
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, code, start)
    np.maximum.at(hi, code, end)
    first = grouped.first_rows(code, n)
    rank, step = rank[first], step[first]
    order = np.lexsort((step, lo, rank))
    return pd.DataFrame({"rank": rank[order], "step": step[order], "cpu_start_ns": lo[order], "cpu_end_ns": hi[order]})


def _numbered(v: EventView, rows: np.ndarray) -> pd.DataFrame:
    """Host ranges numbered 0.. per rank in start order."""
    rank, start, end = v.rank[rows], v.start[rows], v.end[rows]
    order = np.lexsort((start, rank))  # stable
    rank, start, end = rank[order], start[order], end[order]
    code, n = grouped.codes(rank)
    return _host_frame(rank, grouped.cumcount(code, n), start, end)


def _from_nvtx(v: EventView, step_range: str) -> pd.DataFrame:
    host = v.rows((schema.LANE_CPU_ANNOTATION,))
    names = v.names_of(host)
    exact = names == step_range
    if not exact.any():
        from traceread import bounds

        # the user's regex over names the trace chooses: refused if it can backtrack for ever, timed
        pat = bounds.user_pattern(step_range, "--step-range")
        uniq = np.unique(names.astype(str))
        hits = {n for n, hit in zip(uniq, bounds.search_names(pat, uniq, "--step-range"), strict=True) if hit}
        exact = np.isin(names.astype(str), list(hits))
    return _numbered(v, host[exact])


def _from_profiler_steps(trace: Trace, v: EventView) -> tuple[pd.DataFrame, str]:
    meta_steps = trace.meta.steps
    if meta_steps is not None and len(meta_steps):
        nvtx = trace.meta.format == "nsys" and not _names(meta_steps).str.match(PROFILER_STEP_RE.pattern).all()
        df = _host_frame(meta_steps["rank"], meta_steps["step"], meta_steps["start_ns"], meta_steps["end_ns"])
        named = trace.meta.extra.get("step_source")  # a loader that found steps another way names it (xplane)
        return df, named if isinstance(named, str) and named else SOURCE_NVTX if nvtx else SOURCE_PROFILER_STEP
    host = v.rows(HOST_LANES)
    num = v.step_number[v.name[host]]
    keep = num >= 0
    rows = host[keep]
    return _host_frame(v.rank[rows], num[keep], v.start[rows], v.end[rows]), SOURCE_PROFILER_STEP


def _names(meta_steps: pd.DataFrame) -> pd.Series:
    return meta_steps["name"].astype(str) if "name" in meta_steps else pd.Series(dtype=str)


def _gpu_spans(v: EventView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rank (ascending): the rank, first start and last end of any GPU op."""
    rows = v.rows(OP_LANES)
    code, n = grouped.codes(v.rank[rows])
    start, end = v.start[rows].astype(np.int64), v.end[rows].astype(np.int64)
    lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, code, start)
    np.maximum.at(hi, code, end)
    return v.rank[rows][grouped.first_rows(code, n)], lo, hi


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
    rank, start, end = _gpu_spans(v)
    return _host_frame(rank, np.zeros(len(rank)), start, end)


def _host_steps(trace: Trace, v: EventView, step_range: str | None,
                cfg: Thresholds) -> tuple[pd.DataFrame, str, list[Note], bool]:
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
    notes.append(Note.of(GPU_SPAN_STEP))
    if layers:
        notes.append(step_inference.layers_note(layers))
    return df, source, notes, False


def _marked_steps(trace: Trace, v: EventView, step_range: str | None) -> tuple[pd.DataFrame, str, list[Note]]:
    if step_range:
        df = _from_nvtx(v, step_range)
        if len(df):
            return df, SOURCE_NVTX, [Note.of(STEPS_NVTX_RANGES, count=len(df), pattern=step_range)]
        notes: list[Note] = [Note.of(NO_NVTX_MATCH, pattern=step_range)]
    else:
        notes = []
    df, source = _from_profiler_steps(trace, v)
    if len(df):
        return df, source, notes
    for flag, label, boundary in _MARKERS:
        df = _from_marker(v, flag, boundary)
        if len(df):
            notes.append(Note.of(STEPS_FROM_MARKER, label=label, count=len(df)))
            return df, f"inferred:{label}", notes
    return _from_gpu_span(v), SOURCE_GPU_SPAN, notes


# The columns of the steps frame as built before the frame itself (``_extend``, ``find_steps``).
_Cols = dict[str, np.ndarray]


def _extend(v: EventView, host: _Cols, rank: int, device: int, gpu_time: bool = False) -> _Cols:
    """Host steps of ``rank`` stretched onto ``device`` for GPU lag (see module docstring).

    With ``gpu_time`` the bounds are already GPU times: GPU work joins the step it starts in."""
    mine = np.flatnonzero(host["rank"] == rank)
    mine = mine[np.argsort(host["cpu_start_ns"][mine], kind="stable")]
    cs, ce = host["cpu_start_ns"][mine], host["cpu_end_ns"][mine]
    ops = v.rows(OP_LANES, rank=rank, device=device)
    launch = v.launch_of(ops)
    linked = launch >= 0
    ops, launch = subset(ops, linked), subset(launch, linked)
    ls = v.start[ops] if gpu_time else v.start[launch]
    idx = np.searchsorted(cs, ls, side="right") - 1
    ok = (idx >= 0) & (ls < ce[np.maximum(idx, 0)])
    last_op = np.full(len(cs), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(last_op, subset(idx, ok), v.end[subset(ops, ok)])  # (no copies when every op is in a step)
    dev_end = np.maximum.accumulate(np.maximum(ce, last_op)) if len(cs) else ce
    prev_end = np.concatenate(([np.iinfo(np.int64).min], dev_end[:-1]))
    dev_start = np.maximum(cs, prev_end)
    return {"rank": np.full(len(cs), rank, dtype=np.int32), "device": np.full(len(cs), device, dtype=np.int32),
            "step": host["step"][mine], "start_ns": dev_start, "end_ns": dev_end, "cpu_start_ns": cs, "cpu_end_ns": ce}


def _note_collapsed(v: EventView, steps: _Cols, notes: list[Note]) -> None:
    """Say why steps have no GPU time left: work linked to an earlier step ran past them. When GPU
    ops start before the launch call their correlation id names (impossible: the ids are permuted
    or damaged), the links are what stretched a step over the ones after it."""
    collapsed = int(((steps["end_ns"] <= steps["start_ns"]) & (steps["cpu_end_ns"] > steps["cpu_start_ns"])).sum())
    if not collapsed:
        return
    ops = v.rows(OP_LANES)
    launch = v.launch_of(ops)
    linked = launch >= 0
    early = int((v.start[ops[linked]] < v.start[launch[linked]]).sum())
    notes.append(Note.of(COLLAPSED_STEPS, count=collapsed, early=early, linked=int(linked.sum())))


def outliers(steps: pd.DataFrame, cfg: Thresholds) -> np.ndarray:
    """Per step: longer than ``outlier_step_factor`` times its device's median non-warmup step."""
    return _outliers(steps["rank"].to_numpy(), steps["device"].to_numpy(), steps["start_ns"].to_numpy(),
                     steps["end_ns"].to_numpy(), steps["warmup"].to_numpy(bool), cfg)


def _outliers(rank: np.ndarray, device: np.ndarray, start: np.ndarray, end: np.ndarray, warmup: np.ndarray,
              cfg: Thresholds) -> np.ndarray:
    length = (end - start).astype(np.float64)
    code, n = grouped.codes(rank, device)
    median = grouped.median(np.where(warmup, np.nan, length), code, n)[code]
    return length > cfg.outlier_step_factor * median


def _flag(steps: _Cols, source: str, cfg: Thresholds, warmup_steps: int | None, notes: list[Note]) -> None:
    """Set ``warmup`` and ``outlier`` in ``steps`` (numpy group-bys: pandas' per-operation cost was
    most of this on a small trace)."""
    code, n = grouped.codes(steps["rank"], steps["device"])
    order_in_rank = grouped.cumcount(code, n)
    if warmup_steps is not None:
        steps["warmup"] = order_in_rank < warmup_steps
        if warmup_steps:
            notes.append(Note.of(WARMUP_GIVEN, steps=warmup_steps))
    else:
        first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, code, steps["step"])
        count = grouped.sizes(code, n)
        auto = (source == SOURCE_PROFILER_STEP) & (first[code] == 0) & (count[code] >= cfg.warmup_min_steps)
        steps["warmup"] = auto & (order_in_rank == 0)
        if steps["warmup"].any():
            notes.append(Note.of(FIRST_STEP_WARMUP))
    steps["outlier"] = _outliers(steps["rank"], steps["device"], steps["start_ns"], steps["end_ns"],
                                 steps["warmup"], cfg)
    n_out = int(steps["outlier"].sum())
    if n_out:
        notes.append(Note.of(OUTLIER_STEPS, count=n_out, factor=cfg.outlier_step_factor))


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def find_steps(trace: Trace, cfg: Thresholds, warmup_steps: int | None = None,
               step_range: str | None = None, between: Callable[[], None] = _nothing) -> StepResult:
    """Steps per rank x device.

    Returns a :class:`StepResult` whose ``steps`` frame has ``schema.STEP_COLUMNS`` (ns, int64),
    one row per rank x device x step, sorted by rank, device, start. ``busy_ns`` is the union of
    the device's compute kernels inside the device-extended step; ``idle_ns`` the rest. ``between`` is
    called once the steps are made (building the event view freed large temporaries by then).
    """
    v = event_view(trace)
    frame, source, notes, gpu_time = _host_steps(trace, v, step_range, cfg)
    # The steps are built as arrays and made a frame once (a frame per device, a concat and a cast
    # cost more than the work on a small trace).
    host = {c: frame[c].to_numpy() for c in ("rank", "step", "cpu_start_ns", "cpu_end_ns")}
    unended = host["cpu_end_ns"] <= host["cpu_start_ns"]
    if unended.any():  # a step marker with no end or no duration: the run crashed or the file was cut mid-step
        notes.append(Note.of(UNENDED_MARKERS, count=int(unended.sum())))
        host = {c: a[~unended] for c, a in host.items()}
    pairs = rank_devices(v)
    marked = set(np.unique(host["rank"]).tolist())
    parts = [_extend(v, host, r, d, gpu_time) for r, d in pairs if r in marked]
    unmarked = sorted({r for r, _ in pairs if r not in marked})
    if unmarked:
        notes.append(Note.of(UNMARKED_RANKS, ranks=tuple(unmarked)))
    busy = []
    for (r, d), part in zip(((r, d) for r, d in pairs if r in marked), parts, strict=True):
        us, ue = compute_union(v, int(r), int(d))
        busy.append(intervals.overlap_with_union(part["start_ns"], part["end_ns"], us, ue).astype(np.int64))
    steps: _Cols = {c: (np.concatenate([p[c] for p in parts]) if parts else np.zeros(0, dtype=np.int64))
                    for c in ("rank", "device", "step", "start_ns", "end_ns", "cpu_start_ns", "cpu_end_ns")}
    steps["busy_ns"] = np.concatenate(busy) if busy else np.zeros(0, dtype=np.int64)
    steps["idle_ns"] = steps["end_ns"] - steps["start_ns"] - steps["busy_ns"]
    _note_collapsed(v, steps, notes)
    _flag(steps, source, cfg, warmup_steps, notes)
    out = pd.DataFrame({c: steps[c].astype(t[0], copy=False) for c, t in schema.STEP_COLUMNS.items()})
    between()  # building the event view freed large temporaries: their pages can go back
    return StepResult(out, source, notes)
