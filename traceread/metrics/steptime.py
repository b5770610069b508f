"""The optimizer-step time MFU divides by: median of steady steps, with spread and the step's anatomy.

Reads the steps frame (``schema.STEP_COLUMNS``, plus an optional ``trace`` column when several
traces were analysed together) and the host markers of the traces: ``Optimizer.step#...`` (one per
optimizer step) and ``enumerate(DataLoader)#...`` / ``DistributedDataParallel.forward`` (one per
micro-batch). A profiler step may hold several optimizer steps, or be one micro-batch of an
accumulated optimizer step; the optimizer-step period follows from the marker counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import schema
from traceread.config import Thresholds
from traceread.errors import MissingInputError
from traceread.host_calls import DATALOADER_PREFIX, OPTIMIZER_PREFIX
from traceread.note import (
    ALL_STEPS_FLAGGED,
    FEW_STEADY_STEPS,
    NOISY_STEPS,
    ONE_OPTIMIZER_STEP_ASSUMED,
    OPTIMIZER_STEP_SPANS,
    OPTIMIZER_STEPS_PER_PROFILER_STEP,
    TIMING_OUTLIERS_EXCLUDED,
    TIMING_WARMUP_EXCLUDED,
    Note,
)
from traceread.trace import Trace

MICROBATCH_PREFIXES: tuple[str, ...] = (DATALOADER_PREFIX,)
FORWARD_NAMES: tuple[str, ...] = ("DistributedDataParallel.forward", "FullyShardedDataParallel.forward")
_HOST_LANES = (schema.LANE_CPU_THREAD, schema.LANE_CPU_ANNOTATION)


@dataclass(frozen=True)
class StepTiming:
    """Optimizer-step time and how it was measured. Times in ns."""

    step_time_ns: int  # optimizer-step period (median steady profiler step, scaled by the markers)
    profiler_step_ns: int  # median steady profiler step
    n_steps: int  # steps in the frame
    n_steady: int  # steps used (not warmup, not outlier)
    n_warmup: int
    n_outlier: int
    min_ns: int
    max_ns: int
    p25_ns: int
    p75_ns: int
    cv: float  # std/mean of steady step times
    optimizer_steps_per_profiler_step: float | None  # None: no Optimizer.step# markers
    micro_batches_per_optimizer_step: float | None  # None: no micro-batch markers
    notes: tuple[Note, ...] = field(default=())  # as data: worded by traceread.render.notes
    warnings: tuple[Note, ...] = field(default=())  # as data: worded by traceread.render.notes

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


def _marker_counts(traces: list[Trace], steps: pd.DataFrame, prefixes: tuple[str, ...],
                   exact: tuple[str, ...] = ()) -> np.ndarray:
    """Per steps row: host events whose name starts with a prefix (or equals ``exact``) inside its host span."""
    counts = np.zeros(len(steps), dtype=np.int64)
    if steps.empty:
        return counts
    has_trace = "trace" in steps.columns
    for ti, trace in enumerate(traces):
        ev = trace.events
        host = ev[ev["lane"].isin(_HOST_LANES)]
        names = host["name"].astype("category")
        cats = [str(c) for c in names.cat.categories]
        wanted = [c for c in cats if c.startswith(prefixes) or c in exact] if (prefixes or exact) else []
        if not wanted:
            continue
        marks = host[names.isin(wanted).to_numpy()]
        sel = (steps["trace"].to_numpy() == ti) if has_trace else np.ones(len(steps), dtype=bool)
        for rank, grp in marks.groupby("rank", observed=True):
            rows = np.flatnonzero(sel & (steps["rank"].to_numpy() == rank))
            if not len(rows):
                continue
            g = grp.sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable")
            st, en = g["start_ns"].to_numpy(), g["end_ns"].to_numpy()
            # One marker recorded twice (op and annotation) or nested counts once: outermost only.
            outer = np.r_[True, st[1:] >= np.maximum.accumulate(en)[:-1]] if len(st) else np.zeros(0, bool)
            starts = st[outer]
            lo = np.searchsorted(starts, steps["cpu_start_ns"].to_numpy()[rows], side="left")
            hi = np.searchsorted(starts, steps["cpu_end_ns"].to_numpy()[rows], side="left")
            counts[rows] += hi - lo
    return counts


def _optimizer_counts(traces: list[Trace], steps: pd.DataFrame) -> np.ndarray:
    """Per steps row: optimizer steps, counted per optimizer class and the largest count kept.

    Models step several optimizers together (Shampoo + an EMA wrapper, dense + sparse): one
    ``Optimizer.step#`` marker per class is one optimizer step, not two.
    """
    names = sorted({str(n) for t in traces for n in t.events["name"].cat.categories
                    if str(n).startswith(OPTIMIZER_PREFIX)})
    out = np.zeros(len(steps), dtype=np.int64)
    for name in names:
        out = np.maximum(out, _marker_counts(traces, steps, (), (name,)))
    return out


def step_timing(traces: list[Trace], steps: pd.DataFrame, cfg: Thresholds, training: bool = True) -> StepTiming:
    """Optimizer-step time from the steps frame. Raises MissingInputError when there are no steps.

    ``training`` False (serving traces) keeps the profiler-step period and skips optimizer notes.
    """
    if steps is None or steps.empty:
        raise MissingInputError("no steps were found in the trace; MFU needs step boundaries "
                                "(ProfilerStep#N, an NVTX step range, or --step-range)")
    notes: list[Note] = []
    warnings: list[Note] = []
    key = ["step"]  # ranks (and their trace files) share step numbers: ProfilerStep#N is the same N
    s = steps.assign(dur=(steps["end_ns"] - steps["start_ns"]).astype(np.int64),
                     opt=_optimizer_counts(traces, steps),
                     mb=np.maximum(_marker_counts(traces, steps, MICROBATCH_PREFIXES),
                                   _marker_counts(traces, steps, (), FORWARD_NAMES)))
    # A step of a synchronous job lasts as long as its slowest device; a flag on any device drops it.
    per = s.groupby(key, sort=True).agg(dur=("dur", "max"), warmup=("warmup", "any"),
                                         outlier=("outlier", "any"), opt=("opt", "median"), mb=("mb", "median"))
    n_warm, n_out = int(per["warmup"].sum()), int(per["outlier"].sum())
    steady = per[~(per["warmup"] | per["outlier"])]
    if steady.empty:
        steady = per
        warnings.append(Note.of(ALL_STEPS_FLAGGED))
    d = steady["dur"].to_numpy(dtype=np.float64)
    med = float(np.median(d))
    cv = float(np.std(d) / np.mean(d)) if len(d) > 1 and np.mean(d) > 0 else 0.0
    if n_warm:
        notes.append(Note.of(TIMING_WARMUP_EXCLUDED, steps=n_warm))
    if n_out:
        longest = per.loc[per["outlier"], "dur"].max()
        notes.append(Note.of(TIMING_OUTLIERS_EXCLUDED, count=n_out, longest_ns=longest, median_ns=med))
    if len(d) < cfg.mfu_min_steady_steps:
        warnings.append(Note.of(FEW_STEADY_STEPS, count=len(d), needed=cfg.mfu_min_steady_steps))
    if cv > cfg.mfu_max_step_cv:
        warnings.append(Note.of(NOISY_STEPS, cv=cv, max_cv=cfg.mfu_max_step_cv))

    opt = steady["opt"].to_numpy(dtype=np.float64)
    mb = steady["mb"].to_numpy(dtype=np.float64)
    period = med
    opt_per: float | None = None
    mb_per: float | None = None
    if training and opt.sum() > 0:
        opt_per = float(opt.sum() / len(opt))
        if np.all(opt == opt[0]) and opt[0] > 1:
            period = med / opt[0]
            warnings.append(Note.of(OPTIMIZER_STEPS_PER_PROFILER_STEP, count=int(opt[0])))
        elif not np.all(opt == opt[0]) or opt[0] < 1:
            # Profiler steps are micro-batches: one optimizer step every len/sum profiler steps.
            period = med * len(opt) / float(opt.sum())
            warnings.append(Note.of(OPTIMIZER_STEP_SPANS, profiler_steps=float(len(opt) / opt.sum())))
        if mb.sum() > 0:
            mb_per = float(mb.sum() / opt.sum())
    elif training:
        notes.append(Note.of(ONE_OPTIMIZER_STEP_ASSUMED))
        if mb.sum() > 0:
            mb_per = float(mb.sum() / len(mb))
    return StepTiming(
        step_time_ns=int(round(period)), profiler_step_ns=int(round(med)), n_steps=len(per),
        n_steady=len(d), n_warmup=n_warm, n_outlier=n_out, min_ns=int(d.min()), max_ns=int(d.max()),
        p25_ns=int(np.percentile(d, 25)), p75_ns=int(np.percentile(d, 75)), cv=cv,
        optimizer_steps_per_profiler_step=opt_per, micro_batches_per_optimizer_step=mb_per,
        notes=tuple(notes), warnings=tuple(warnings))
