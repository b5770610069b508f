"""Per-trace summary: what ``traceread info`` shows. An analysis: reads a Trace, returns plain data.

Nothing here echoes host names, user names or the file's own recorded paths: only facts the
loaders already normalized (devices, ranks, time base, counts, warnings).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from traceread import schema
from traceread.note import Note
from traceread.trace import Trace, job_digest


@dataclass(frozen=True)
class TraceSummary:
    """One trace at a glance. Times in ns of the trace's time base; counts are rows of the frame."""

    path: str
    format: str
    generation: str
    devices_used: list[dict[str, Any]]  # name, id, sm_count, memory_bytes, compute_capability
    devices_listed_unused: int  # listed by the trace (e.g. GPUs 0-7) but without any GPU event
    ranks: list[dict[str, Any]]  # rank, rank_source, world_size, world_size_source
    time_base: str
    epoch_offset_ns: int | None
    start_ns: int | None  # first event start (instants excluded: markers can sit far outside)
    end_ns: int | None  # last event end
    span_ns: int
    events: int
    events_per_lane: dict[str, int]
    events_per_category: dict[str, int]
    events_per_raw_category: dict[str, int]
    profiler_steps: int
    step_range: tuple[int, int] | None  # first and last ProfilerStep number
    profiler_options: dict[str, Any]
    truncated: bool
    warnings: list[Note | str] = field(default_factory=list)  # worded by traceread.render.notes
    # Chrome-trace counter samples (``ph: C``: MTIA/XPU counters...): not rows of the frame, counted
    counter_events: int = 0
    # the job's digest when the file names its job (Kineto PT_PROFILER_JOB_*): the values are environment
    # values and never shown; the traces of one job (name and version) share the digest
    job_digest: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _counts(values: Any, order: tuple[str, ...] | None = None) -> dict[str, int]:
    """Rows per category of a categorical column (by its codes: a bincount, not value_counts' hashing)."""
    cats = values.cat.categories
    counts = np.bincount(values.cat.codes.to_numpy().astype(np.intp) + 1, minlength=len(cats) + 1)[1:]
    out = {str(k): int(v) for k, v in zip(cats, counts.tolist(), strict=True) if v}
    if order is None:
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))
    return {k: out[k] for k in order if k in out}


def summarize(trace: Trace) -> TraceSummary:
    """The summary of one loaded trace."""
    ev = trace.events
    meta = trace.meta
    timed = (ev["lane"] != schema.LANE_INSTANT).to_numpy()
    if not timed.any():
        timed = np.ones(len(ev), bool)
    starts = ev["start_ns"].to_numpy()[timed]
    ends = ev["end_ns"].to_numpy()[timed]
    start = int(starts.min()) if len(starts) else None
    end = int(ends.max()) if len(ends) else None
    steps = meta.steps
    n_steps = 0 if steps is None else len(steps)
    step_range = None
    if steps is not None and n_steps:
        step_range = (int(steps["step"].min()), int(steps["step"].max()))
    used = [d for d in meta.devices if d.used]
    return TraceSummary(
        path=meta.path,
        format=meta.format,
        generation=meta.generation,
        devices_used=[{k: v for k, v in d.to_dict().items() if k != "used"} for d in used],
        devices_listed_unused=sum(1 for d in meta.devices if not d.used),
        ranks=[r.to_dict() for r in meta.ranks],
        time_base=meta.time_base,
        epoch_offset_ns=meta.epoch_offset_ns,
        start_ns=start,
        end_ns=end,
        span_ns=(end - start) if start is not None and end is not None else 0,
        events=len(ev),
        events_per_lane=_counts(ev["lane"], schema.LANES),
        events_per_category=_counts(ev["category"], schema.CATEGORIES),
        events_per_raw_category=_counts(ev["raw_category"]),
        profiler_steps=n_steps,
        step_range=step_range,
        profiler_options=dict(meta.profiler_options),
        truncated=meta.truncated,
        warnings=list(meta.warnings),
        counter_events=int(meta.extra.get("counter_events", 0) or 0),
        job_digest=job_digest(meta.job),
    )
