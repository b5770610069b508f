"""The diagnosis pipeline: steps -> gaps -> rules -> attribution -> kernels/collectives/MFU.

``analyze(traces, job, cfg) -> Analysis`` reads loaded traces and returns plain data (a frozen
dataclass of DataFrames, dicts and strings); it does no I/O. Every renderer (Markdown, JSON, the
timeline picture, Perfetto) reads an :class:`Analysis` and nothing else. Whatever could not be
computed is listed in ``Analysis.unavailable`` with the reason, never silently skipped.

Several traces are analysed together as one job: each trace goes through the pipeline on its own
and the tables are concatenated with a ``trace`` column (the input's index), so two files that both
call themselves rank 0 stay apart. A *unit* is one (trace, rank, device).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import _pipeline as pipe
from traceread._pipeline import BUSY_PARTS, GAP_CLASSES, PARTS, UNIT, part_col
from traceread.config import Thresholds
from traceread.trace import Trace

SCHEMA_VERSION = "1.1"
CAUSES: tuple[str, ...] = GAP_CLASSES + ("memory-bound", "healthy")
__all__ = ["analyze", "Analysis", "TraceSummary", "Failure", "GAP_CLASSES", "BUSY_PARTS", "PARTS", "CAUSES",
           "part_col", "SCHEMA_VERSION"]


@dataclass(frozen=True)
class TraceSummary:
    """One input as the report header and JSON ``traces`` show it (no host or user names)."""

    index: int
    path: str  # as given on the command line
    format: str
    generation: str
    time_base: str
    devices: tuple[dict[str, Any], ...]  # DeviceInfo.to_dict() of the devices the trace used or listed
    ranks: tuple[int, ...]
    world_size: int | None
    start_ns: int  # first event: "ms from the trace start" is measured from here
    end_ns: int
    step_source: str
    truncated: bool = False

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True)
class Failure:
    """An input that could not be read: its path and the one-line problem."""

    path: str
    problem: str


@dataclass(frozen=True, eq=False)
class Analysis:
    """Everything the renderers show. Times are int64 ns in each trace's own time base.

    * ``steps``: one row per unit and step: ``trace, rank, device, step, start_ns, end_ns, busy_ns,
      idle_ns, warmup, outlier`` plus ``<class>_ns`` idle by gap class (``part_col``).
    * ``gaps``: every classified compute-idle gap (the engine's columns, ``class``, ``evidence``, ``trace``).
    * ``attribution``: one row per unit: ``trace, rank, device, step_ns`` and ``<part>_ns`` for every
      part in ``PARTS``; the parts sum to ``step_ns``.
    * ``kernels`` / ``collectives``: the scoreboard tables with a ``trace`` column.
    * ``mfu``: ``{"mfu", "hfu", "tflops_per_gpu", "step_time_ns", "inputs", ...}`` or None, with
      ``mfu_hint`` saying why not / which flags add it.
    * ``removal``: the upper bound of removing the dominant cause (see ``_removal``), or None.
    """

    traces: tuple[TraceSummary, ...]
    steps: pd.DataFrame
    gaps: pd.DataFrame
    attribution: pd.DataFrame
    dominant_cause: str
    dominant_cost_share: float
    second_cause: str | None
    second_cost_share: float
    removal: dict[str, Any] | None
    mfu: dict[str, Any] | None
    mfu_hint: str
    kernels: pd.DataFrame
    collectives: pd.DataFrame
    launch_stats: dict[str, Any] | None
    notes: tuple[str, ...]
    unavailable: tuple[str, ...]
    cfg: Thresholds
    top_gaps: int = 10
    failures: tuple[Failure, ...] = ()
    inputs: tuple[Trace, ...] = field(default=(), repr=False)  # for timeline renderers only

    @property
    def units(self) -> pd.DataFrame:
        return self.attribution[UNIT]

    def unit_label(self, trace: int, rank: int, device: int) -> str:
        """``rank 0 / GPU 1``; prefixed with the file when two inputs share a rank number."""
        label = f"rank {rank} / GPU {device}"
        ranks = [r for t in self.traces for r in t.ranks]
        if len(ranks) != len(set(ranks)) and len(self.traces) > 1:
            label = f"{self.traces[trace].name}: {label}"
        return label

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as plain data (``traceread/data/report.schema.json``)."""
        from traceread.render.jsonout import to_report

        return to_report(self)

    def shares(self) -> dict[str, float]:
        """Each part's share of total step time over every unit (sums to 1 when there are steps)."""
        if self.attribution.empty:
            return {p: 0.0 for p in PARTS}
        total = float(self.attribution["step_ns"].sum()) or 1.0
        return {p: float(self.attribution[part_col(p)].sum()) / total for p in PARTS}

    def steady_steps(self) -> pd.DataFrame:
        """Steps that count for medians: neither warmup nor outlier (all steps if none are left)."""
        s = self.steps
        keep = s[~(s["warmup"] | s["outlier"])]
        return keep if len(keep) else s


def analyze(
    traces: list[Trace] | tuple[Trace, ...],
    job: Any = None,
    cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen, never mutated
    top_gaps: int = 10,
    warmup_steps: int | None = None,
    step_range: str | None = None,
    failures: tuple[Failure, ...] | list[Failure] = (),
) -> Analysis:
    """Run the whole diagnosis on ``traces`` (loaded, one job) and return an :class:`Analysis`.

    ``job`` is a ``traceread.job.JobInputs`` (MFU inputs) or None; ``failures`` are inputs the caller
    could not load, carried through so every report lists them.
    """
    notes: list[str] = []
    unavailable: list[str] = []
    per = [pipe.run_one(i, t, cfg, warmup_steps, step_range, notes, unavailable) for i, t in enumerate(traces)]
    steps = pipe.concat([p.steps for p in per], pipe.STEP_OUT_COLUMNS)
    gaps = pipe.concat([p.gaps for p in per], pipe.GAP_MIN_COLUMNS)
    attribution = pipe.concat([p.attribution for p in per], pipe.ATTR_COLUMNS)
    kernels = pipe.concat([p.kernels for p in per], None)
    collectives = pipe.concat([p.collectives for p in per], None)

    dominant, share, second, second_share = pipe.overall_dominant(attribution, per, cfg)
    mfu, mfu_hint = pipe.run_mfu(job, list(traces), steps, cfg, unavailable)
    removal = _removal(steps, dominant, mfu)
    launch = pipe.launch_stats(list(traces), gaps, dominant, second, second_share, cfg, unavailable)
    summaries = tuple(_summarize(i, t, p.step_source) for i, (t, p) in enumerate(zip(traces, per, strict=True)))
    return Analysis(
        traces=summaries, steps=steps, gaps=gaps, attribution=attribution,
        dominant_cause=dominant, dominant_cost_share=share,
        second_cause=second, second_cost_share=second_share, removal=removal,
        mfu=mfu, mfu_hint=mfu_hint, kernels=kernels, collectives=collectives, launch_stats=launch,
        notes=tuple(dict.fromkeys(notes)), unavailable=tuple(dict.fromkeys(unavailable)),
        cfg=cfg, top_gaps=top_gaps, failures=tuple(failures), inputs=tuple(traces),
    )


def _removal(steps: pd.DataFrame, cause: str, mfu: dict[str, Any] | None) -> dict[str, Any] | None:
    """Upper bound of removing ``cause``'s idle time: median step time with and without it.

    Per steady step, step time minus that class's idle (nothing else moves closer: an upper
    bound). MFU scales inversely with step time. None when the cause is not an idle class.
    """
    if cause not in GAP_CLASSES or steps.empty:
        return None
    keep = steps[~(steps["warmup"] | steps["outlier"])]
    keep = keep if len(keep) else steps
    # The job's step is its slowest device's step: the max over every rank/GPU of the same step
    # number (the inputs are ranks of one job, so step numbers line up).
    step_ns = (keep["end_ns"] - keep["start_ns"]).to_numpy()
    cost = keep[part_col(cause)].to_numpy()
    frame = pd.DataFrame({"step": keep["step"].to_numpy(), "before": step_ns, "after": step_ns - cost})
    per_step = frame.groupby("step", sort=True)[["before", "after"]].max()
    before = int(np.median(per_step["before"].to_numpy()))
    after = int(np.median(per_step["after"].to_numpy()))
    out: dict[str, Any] = {"cause": cause, "step_time_ns": before, "step_time_without_ns": after,
                           "speedup": (before / after) if after > 0 else None}
    if mfu and mfu.get("mfu") is not None and after > 0:
        out["mfu"] = float(mfu["mfu"])
        out["mfu_without"] = float(mfu["mfu"]) * before / after
    return out


def _summarize(index: int, trace: Trace, step_source: str) -> TraceSummary:
    """The header facts of one input."""
    ev = trace.events
    used = [d.to_dict() for d in trace.meta.devices if d.used] or [d.to_dict() for d in trace.meta.devices]
    ranks = sorted({int(r) for r in ev["rank"].unique()}) if len(ev) else [r.rank for r in trace.meta.ranks]
    return TraceSummary(
        index=index, path=trace.meta.path, format=trace.meta.format, generation=trace.meta.generation,
        time_base=trace.meta.time_base, devices=tuple(used), ranks=tuple(ranks),
        world_size=trace.meta.world_size,
        start_ns=int(ev["start_ns"].min()) if len(ev) else 0,
        end_ns=int(ev["end_ns"].max()) if len(ev) else 0,
        step_source=step_source, truncated=bool(trace.meta.truncated),
    )
