"""Who a trace (or each process of an nsys export) is within its job: :class:`RankIdentity`.

An identity is small, frozen and picklable, so scan workers can send it to the parent. It holds no
user, host or environment value: only the path as given, the format, rank facts and where they came
from, process-group names and sizes, the GPU model, the time window, and digests of the job the
file names (never its name).

Rank sources, in order of trust:

* ``distributedInfo``: the Kineto file's own ``distributedInfo.rank`` (and ``world_size``);
* ``nsys-process``: one process of an nsys export holding several (ordered by first CUDA device);
* ``filename``: the file name matched by the rank pattern (a named ``rank`` group);
* ``None``: nothing says which rank this is. Never defaulted to 0.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from traceread import schema
from traceread.limits import RANK_MAX, int_text
from traceread.trace import EpochWindow, Trace, job_digest

# rank-3, rank_3, rank3, worker3, worker-3 (the digits after the word); a user's --rank-pattern
# replaces it and must have a named group ``rank`` (``world`` optional).
DEFAULT_RANK_PATTERN = r"(?:rank|worker)[-_]?(?P<rank>\d+)(?:of(?P<world>\d+))?"

SOURCE_DISTRIBUTED = "distributedInfo"
SOURCE_NSYS_PROCESS = "nsys-process"
SOURCE_FILENAME = "filename"


@dataclass(frozen=True)
class RankIdentity(EpochWindow):
    """One rank as a trace records it. Times are ns in the trace's own time base.

    ``start_epoch_ns``/``end_epoch_ns`` are None when the time base is not ``epoch``.
    ``frame_rank`` is the value of the events frame's ``rank`` column for this rank (the loader's
    number: 0 when the file says nothing), used to select its events; ``rank`` is what the trace
    actually claims (None when nothing does). ``member`` is the position of this rank inside its
    file (0 for a Kineto file; the process index in an nsys export), ``members_in_file`` how many
    ranks the file holds.
    """

    path: str
    format: str
    rank: int | None
    world_size: int | None
    rank_source: str | None
    frame_rank: int
    member: int
    members_in_file: int
    devices: tuple[int, ...]
    gpu_model: str
    backend: str | None
    process_groups: tuple[tuple[str, str, int | None], ...]  # (pg_name, pg_desc, pg_size) from pg_config
    time_base: str
    epoch_offset_ns: int | None
    start_ns: int
    end_ns: int
    n_events: int
    # digests of the job the file names (Kineto PT_PROFILER_JOB_*: name and version; and with the
    # attempt index), '' when it names none: the values are environment values, never held here
    job_digest: str = ""
    attempt_digest: str = ""

    @property
    def key(self) -> tuple[str, int]:
        """Unique per identity: (path, member)."""
        return (self.path, self.member)

    @property
    def claimed_rank(self) -> int:
        """``rank`` for a trace known to claim one (the ranks a job aligns); ValueError otherwise."""
        if self.rank is None:
            raise ValueError(f"{self.label} claims no rank")
        return int(self.rank)

    @property
    def label(self) -> str:
        base = os.path.basename(self.path)
        return f"{base}[{self.member}]" if self.members_in_file > 1 else base

    def to_dict(self) -> dict:
        return {"path": self.path, "format": self.format, "rank": self.rank, "world_size": self.world_size,
                "rank_source": self.rank_source, "member": self.member, "devices": list(self.devices),
                "gpu_model": self.gpu_model, "backend": self.backend,
                "process_groups": [{"pg_name": n, "pg_desc": d, "pg_size": s} for n, d, s in self.process_groups],
                "time_base": self.time_base, "epoch_offset_ns": self.epoch_offset_ns,
                "start_ns": self.start_ns, "end_ns": self.end_ns,
                "start_epoch_ns": self.start_epoch_ns, "end_epoch_ns": self.end_epoch_ns}


def compile_rank_pattern(pattern: str | None) -> re.Pattern[str]:
    """The rank pattern (``DEFAULT_RANK_PATTERN`` when None); raises ValueError without a ``rank`` group."""
    from traceread import bounds

    # a file name is short, but a pattern that can backtrack for ever is refused as everywhere
    rx = bounds.user_pattern(pattern or DEFAULT_RANK_PATTERN, "rank pattern", re.I)
    if "rank" not in rx.groupindex:
        raise ValueError(f"rank pattern {pattern!r} has no named group 'rank' (write (?P<rank>\\d+))")
    return rx


def rank_from_name(path: str, pattern: str | re.Pattern[str] | None = None) -> tuple[int | None, int | None]:
    """(rank, world size or None) from the file name, or (None, None) when the pattern does not match."""
    rx = pattern if isinstance(pattern, re.Pattern) else compile_rank_pattern(pattern)
    m = rx.search(os.path.basename(path))
    if not m or m.group("rank") is None:
        return None, None
    world = m.groupdict().get("world")
    # a number outside 0..2^31-1 (the frame's int32 rank; see ``limits``) names no rank
    rank = int_text(m.group("rank"), 0, RANK_MAX)
    return rank, (int_text(world, 1, RANK_MAX) if world and rank is not None else None)


def rank_count(trace: Trace) -> int:
    """How many ranks :func:`identify` finds in ``trace`` (without reading their times and devices)."""
    return len(_frame_ranks(trace))


def _frame_ranks(trace: Trace) -> list[int]:
    """The frame ranks :func:`identify` reports, in order: the metadata's, else the events' (one without a pass
    to sort them when every event holds the same), else rank 0."""
    if trace.meta.ranks:
        return [r.rank for r in sorted(trace.meta.ranks, key=lambda r: r.rank)]
    ranks = trace.events["rank"].to_numpy()
    if len(ranks) == 0:
        return [0]
    if np.min(ranks) == np.max(ranks):
        return [int(ranks[0])]
    return sorted({int(r) for r in np.unique(ranks)})


def identify(trace: Trace, path: str | None = None, rank_pattern: str | None = None) -> list[RankIdentity]:
    """Every rank ``trace`` holds, in frame-rank order (one for Kineto, one per process for nsys)."""
    meta = trace.meta
    path = path or meta.path
    ev = trace.events
    ranks = ev["rank"].to_numpy()
    timed = (ev["lane"] != schema.LANE_INSTANT).to_numpy()
    gpu = ev["lane"].isin(list(schema.GPU_LANES)).to_numpy()
    infos = sorted(meta.ranks, key=lambda r: r.rank) or []
    frame_ranks = _frame_ranks(trace)
    dist = meta.distributed or {}
    pgs = tuple((str(p.get("pg_name", "")), str(p.get("pg_desc", "")),
                 p.get("pg_size") if isinstance(p.get("pg_size"), int) and 0 < p["pg_size"] <= RANK_MAX + 1 else None)
                for p in dist.get("pg_config", []) or [] if isinstance(p, dict))
    backend = dist.get("backend") if isinstance(dist.get("backend"), str) else None
    name_rank, name_world = rank_from_name(path, rank_pattern)
    out = []
    for member, fr in enumerate(frame_ranks):
        info = next((r for r in infos if r.rank == fr), None)
        sel = ranks == fr
        t = sel & timed if (sel & timed).any() else sel
        start = int(ev["start_ns"].to_numpy()[t].min()) if t.any() else 0
        end = int(ev["end_ns"].to_numpy()[t].max()) if t.any() else 0
        rank, world, source = _claimed(meta.format, info, len(frame_ranks), fr, name_rank, name_world)
        devs = tuple(sorted({int(d) for d in np.unique(ev["device"].to_numpy()[sel & gpu]) if d >= 0}))
        models = [d.name for d in meta.devices if d.rank == fr and d.name and (d.used or not devs)]
        out.append(RankIdentity(
            path=path, format=meta.format, rank=rank, world_size=world, rank_source=source, frame_rank=fr,
            member=member, members_in_file=len(frame_ranks), devices=devs,
            gpu_model=models[0] if models else "", backend=backend, process_groups=pgs,
            time_base=meta.time_base, epoch_offset_ns=meta.epoch_offset_if_epoch, start_ns=start, end_ns=end,
            n_events=int(sel.sum()), job_digest=job_digest(meta.job), attempt_digest=job_digest(meta.job, attempt=True)))
    return out


def _claimed(fmt: str, info, n_in_file: int, frame_rank: int, name_rank: int | None,
             name_world: int | None) -> tuple[int | None, int | None, str | None]:
    """(rank, world size, source) the file actually claims for one of its ranks."""
    world = info.world_size if info is not None and info.world_size else None
    if info is not None and info.rank_source == SOURCE_DISTRIBUTED:
        return info.rank, world, SOURCE_DISTRIBUTED
    if fmt == "nsys" and n_in_file > 1:
        return frame_rank, world, SOURCE_NSYS_PROCESS
    if name_rank is not None:
        return name_rank, world or name_world, SOURCE_FILENAME
    return None, world, None
