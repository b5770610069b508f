"""Group rank identities into jobs and captures: :func:`group_jobs` -> list of :class:`JobGroup`.

Rules, in order (each group's ``evidence`` says which applied):

1. File metadata: Kineto ``distributedInfo`` (world size, backend, ``pg_config`` names and sizes)
   makes traces of one directory candidates for one job; an nsys export holding several processes is
   one job on its own (its processes are its ranks, on one clock).
2. File names: traces without rank metadata whose names match the rank pattern (named group ``rank``)
   and are equal once the rank is blanked out are candidates for one job.
   A job the files name (Kineto ``PT_PROFILER_JOB_NAME``/``_VERSION``) is part of the key: traces of
   different named jobs never share a group; each job attempt (``_ATTEMPT_INDEX``) is a capture of its own.
3. Time: candidates form one *capture* only where their epoch windows overlap (within
   ``Thresholds.capture_window_slack_ns``); windows apart are separate captures (separate groups)
   of the same job key, never blended. Traces whose time base is not epoch cannot be placed in time:
   they stay one capture per key, and the evidence says so.

Duplicate ranks (two traces claim one rank) and ranks missing against the world size are named; a
trace that claims no rank is its own job, never rank 0.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from traceread.config import Thresholds
from traceread.ranks.identity import (
    SOURCE_DISTRIBUTED,
    SOURCE_FILENAME,
    SOURCE_NSYS_PROCESS,
    RankIdentity,
    compile_rank_pattern,
)

RULE_METADATA = "metadata"
RULE_NSYS_EXPORT = "nsys-export"
RULE_FILENAME = "filename"
RULE_SINGLE = "single"
RULE_METADATA_RANK_ONLY = "metadata-rank-only"
# missing ranks named one by one in a job; past this many they are counted ("and N more"): the world size
# comes from the file, and a list of every missing rank of a huge claimed world would make a huge job report
MISSING_LISTED = 1024


@dataclass(frozen=True)
class JobGroup:
    """One capture of one job: ranks profiled together. Plain, frozen, picklable.

    ``name`` is stable and unique within one :func:`group_jobs` result; ``job_key`` is shared by the
    captures of one job (``capture`` of ``captures``). ``duplicate_ranks`` maps a rank claimed by
    several members to their labels; ``unranked`` are members that claim no rank.
    """

    name: str
    job_key: str
    directory: str
    rule: str
    capture: int
    captures: int
    members: tuple[RankIdentity, ...]
    world_size: int | None
    ranks: tuple[int, ...]
    missing_ranks: tuple[int, ...]  # the first MISSING_LISTED of them; missing_count: all of them
    duplicate_ranks: tuple[tuple[int, tuple[str, ...]], ...]
    unranked: tuple[str, ...]
    start_epoch_ns: int | None
    end_epoch_ns: int | None
    evidence: tuple[str, ...]
    missing_count: int = 0

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m.path for m in self.members))

    def to_dict(self) -> dict:
        return {"name": self.name, "job_key": self.job_key, "directory": self.directory, "rule": self.rule,
                "capture": self.capture, "captures": self.captures,
                "members": [m.to_dict() for m in self.members], "world_size": self.world_size,
                "ranks": list(self.ranks), "missing_ranks": list(self.missing_ranks),
                "missing_ranks_text": missing_text(self.missing_ranks, self.missing_count),
                "missing_rank_count": self.missing_count,
                "duplicate_ranks": [{"rank": r, "traces": list(t)} for r, t in self.duplicate_ranks],
                "unranked": list(self.unranked), "start_epoch_ns": self.start_epoch_ns,
                "end_epoch_ns": self.end_epoch_ns, "evidence": list(self.evidence)}


def ranges(values: tuple[int, ...] | list[int]) -> str:
    """``0-3, 7, 9-11`` for a sorted list of ints."""
    out: list[str] = []
    vals = sorted(values)
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ", ".join(out)


def missing_text(listed: tuple[int, ...] | list[int], count: int) -> str:
    """:func:`ranges` of the missing ranks listed, and how many more are missing past the listing cap."""
    more = count - len(listed)
    return ranges(listed) + (f" and {more:,} more" if more > 0 else "")


def _missing(world: int, claimed: dict[int, list[str]]) -> tuple[tuple[int, ...], int]:
    """The first :data:`MISSING_LISTED` ranks of ``range(world)`` that no member claims, and how many are
    missing in all. The world size comes from the file: it never sizes a list (a 1 KB trace may claim
    10^9 ranks); the loop runs at most MISSING_LISTED + len(claimed) times."""
    listed: list[int] = []
    r = 0
    while r < world and len(listed) < MISSING_LISTED:
        if r not in claimed:
            listed.append(r)
        r += 1
    return tuple(listed), world - sum(1 for c in claimed if 0 <= c < world)


def _utc(ns: int | None) -> str:
    if ns is None:
        return "?"
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(ns: int) -> str:
    s = ns / 1e9
    if s >= 1000:
        return f"{s:.0f} s ({s / 60:.0f} min)"
    return f"{s:.1f} s" if s >= 10 else f"{s:.2f} s"


def _stem(path: str, rx: re.Pattern[str]) -> str:
    """The file name without trace extensions, its rank digits replaced by ``*``."""
    base = os.path.basename(path)
    for ext in (".gz", ".json", ".tmp", ".sqlite", ".trace", ".pt"):
        base = base[: -len(ext)] if base.endswith(ext) else base
    for ext in (".json", ".trace", ".pt"):
        base = base[: -len(ext)] if base.endswith(ext) else base
    m = rx.search(base)
    if m:
        a, b = m.span("rank")
        base = base[:a] + "*" + base[b:]
    return base


def _bucket(ident: RankIdentity, rx: re.Pattern[str]) -> tuple[tuple, str, str]:
    """(bucket key, rule, job key text) of one identity.

    A job the file names (Kineto ``PT_PROFILER_JOB_*``: ``job_digest``) is part of every key: traces
    of two jobs never share a group, and ranks whose distributedInfo holds only the rank are one job
    when they name the same one. Its attempts are split into captures (:func:`_captures`)."""
    d = os.path.dirname(ident.path)
    jd = ident.job_digest
    named = f", job {jd}" if jd else ""
    if ident.rank_source == SOURCE_DISTRIBUTED and not (ident.world_size or ident.backend or ident.process_groups
                                                         or jd):
        # distributedInfo with only a rank: nothing ties such traces into one job but overlapping windows
        return ("meta-rank-only", d), RULE_METADATA_RANK_ONLY, ""
    if ident.rank_source == SOURCE_DISTRIBUTED:
        pgs = tuple(sorted(ident.process_groups, key=str))
        return (("meta", d, ident.world_size, ident.backend, pgs, jd), RULE_METADATA,
                f"{d or '.'}: world {ident.world_size or '?'}, backend {ident.backend or '?'}, "
                f"{len(pgs)} process groups{named}")
    if ident.rank_source == SOURCE_NSYS_PROCESS:
        return ("export", ident.path), RULE_NSYS_EXPORT, ident.path
    if ident.rank_source == SOURCE_FILENAME:
        stem = _stem(ident.path, rx)
        return ("name", d, stem, ident.world_size, jd), RULE_FILENAME, os.path.join(d, stem) + named
    return ("single", ident.path, ident.member), RULE_SINGLE, ident.label


def _captures(items: list[RankIdentity], slack_ns: int) -> tuple[list[list[RankIdentity]], bool]:
    """:func:`_split_captures` within each job attempt the files name (``attempt_digest``): two attempts
    of one job are separate captures even where their windows touch (a restart right after a failure)."""
    attempts: dict[str, list[RankIdentity]] = {}
    for i in items:
        attempts.setdefault(i.attempt_digest, []).append(i)
    if len(attempts) == 1:
        return _split_captures(items, slack_ns)
    caps: list[list[RankIdentity]] = []
    comparable = True
    for part in attempts.values():
        c, ok = _split_captures(part, slack_ns)
        caps += c
        comparable &= ok
    # in time order (untimed ones last), as _split_captures orders one attempt's
    caps.sort(key=lambda c: (min((m.start_epoch_ns for m in c if m.start_epoch_ns is not None), default=1 << 62),
                             c[0].path, c[0].member))
    return caps, comparable


def _split_captures(items: list[RankIdentity], slack_ns: int) -> tuple[list[list[RankIdentity]], bool]:
    """Captures by overlapping epoch windows; (captures, whether times could be compared)."""
    timed = [i for i in items if i.start_epoch_ns is not None]
    untimed = [i for i in items if i.start_epoch_ns is None]
    caps: list[list[RankIdentity]] = []
    end = None
    for i in sorted(timed, key=lambda x: (x.start_epoch_ns, x.path, x.member)):
        s, e = i.start_epoch_ns, i.end_epoch_ns
        assert s is not None and e is not None  # timed: both ends are on the epoch
        if caps and end is not None and s <= end + slack_ns:
            caps[-1].append(i)
            end = max(end, e)
        else:
            caps.append([i])
            end = e
    if untimed:
        caps.append(untimed)
    return caps, not untimed


def group_jobs(identities: list[RankIdentity], rank_pattern: str | None = None,
               cfg: Thresholds = Thresholds()) -> list[JobGroup]:  # noqa: B008 - frozen
    """Group ``identities`` (of any number of files) into captures of jobs; see the module doc."""
    rx = compile_rank_pattern(rank_pattern)
    buckets: dict[tuple, tuple[str, str, list[RankIdentity]]] = {}
    for ident in identities:
        key, rule, job_key = _bucket(ident, rx)
        buckets.setdefault(key, (rule, job_key, []))[2].append(ident)
    groups: list[JobGroup] = []
    for _key, (rule, job_key, items) in buckets.items():
        caps, comparable = _captures(items, cfg.capture_window_slack_ns)
        if rule == RULE_METADATA_RANK_ONLY:  # each capture is a job of its own
            for cap in caps:
                groups.append(_group(rule, f"{os.path.dirname(cap[0].path) or '.'}: {cap[0].label} (rank only)",
                                     0, [cap], comparable, cap, rx))
            continue
        for ci, cap in enumerate(caps):
            groups.append(_group(rule, job_key, ci, caps, comparable, cap, rx))
    groups.sort(key=lambda g: (g.directory, g.start_epoch_ns if g.start_epoch_ns is not None else -1, g.name))
    return _unique_names(groups)


def _group(rule: str, job_key: str, ci: int, caps: list[list[RankIdentity]], comparable: bool,
           cap: list[RankIdentity], rx: re.Pattern[str]) -> JobGroup:
    members = tuple(sorted(cap, key=lambda m: (m.rank if m.rank is not None else 1 << 30, m.path, m.member)))
    worlds = sorted({m.world_size for m in members if m.world_size})
    world = worlds[-1] if worlds else None
    claimed: dict[int, list[str]] = {}
    for m in members:
        if m.rank is not None:
            claimed.setdefault(m.rank, []).append(m.label)
    ranks = tuple(sorted(claimed))
    dups = tuple((r, tuple(labels)) for r, labels in sorted(claimed.items()) if len(labels) > 1)
    unranked = tuple(m.label for m in members if m.rank is None)
    if world is None and rule == RULE_NSYS_EXPORT:
        world = len(members)
    missing, n_missing = _missing(world, claimed) if world else ((), 0)
    starts = [m.start_epoch_ns for m in members if m.start_epoch_ns is not None]
    ends = [m.end_epoch_ns for m in members if m.end_epoch_ns is not None]
    start, end = (min(starts), max(ends)) if starts else (None, None)
    ev = _evidence(rule, members, world, worlds, ranks, missing, dups, unranked, start, end, comparable, n_missing)
    if len(caps) > 1:
        others = [f"capture {j} at {_utc(min((m.start_epoch_ns or 0) for m in c))}"
                  for j, c in enumerate(caps) if j != ci]
        gap = _nearest_gap(cap, caps, ci)
        ev.append(f"same job key as {len(caps) - 1} other capture(s) ({'; '.join(others)})"
                  + (f", {gap} apart" if gap else "") + ": separate profiled windows, reported separately, "
                  "not blended")
    stem = _stem(members[0].path, rx) if rule != RULE_SINGLE else os.path.basename(members[0].path)
    name = stem + (f"@capture{ci}" if len(caps) > 1 else "")
    return JobGroup(name=name, job_key=job_key, directory=os.path.dirname(members[0].path), rule=rule, capture=ci,
                    captures=len(caps), members=members, world_size=world, ranks=ranks, missing_ranks=missing,
                    duplicate_ranks=dups, unranked=unranked, start_epoch_ns=start, end_epoch_ns=end,
                    evidence=tuple(ev), missing_count=n_missing)


def _nearest_gap(cap: list[RankIdentity], caps: list[list[RankIdentity]], ci: int) -> str:
    """The time between this capture's window and the nearest other capture's (end to start)."""
    def window(c: list[RankIdentity]) -> tuple[int, int] | None:
        s = [m.start_epoch_ns for m in c if m.start_epoch_ns is not None]
        e = [m.end_epoch_ns for m in c if m.end_epoch_ns is not None]
        return (min(s), max(e)) if s else None

    mine = window(cap)
    if mine is None:
        return ""
    best = None
    for j, c in enumerate(caps):
        theirs = window(c)
        if j != ci and theirs:
            d = max(theirs[0] - mine[1], mine[0] - theirs[1], 0)
            best = d if best is None else min(best, d)
    return _seconds(best) if best is not None else ""


def _evidence(rule: str, members: tuple[RankIdentity, ...], world: int | None, worlds: list[int],
              ranks: tuple[int, ...], missing: tuple[int, ...], dups: tuple, unranked: tuple[str, ...],
              start: int | None, end: int | None, comparable: bool, n_missing: int = 0) -> list[str]:
    n = len({m.path for m in members})
    ev: list[str] = []
    if rule == RULE_METADATA:
        m = members[0]
        ev.append(f"{n} trace(s) grouped by file metadata (Kineto distributedInfo): world size {world or 'unknown'}, "
                  f"backend {m.backend or 'not recorded'}, {len(m.process_groups)} process group(s) in pg_config, "
                  "same directory")
    elif rule == RULE_METADATA_RANK_ONLY:
        ev.append(f"{n} trace(s) whose distributedInfo records only the rank (no world size, backend or pg_config), "
                  "in one directory: grouped only because their recorded windows overlap")
    elif rule == RULE_NSYS_EXPORT:
        ev.append(f"one nsys export holding {len(members)} processes with GPU work: each process is a rank "
                  "(ordered by first CUDA device), all on the export's one clock")
    elif rule == RULE_FILENAME:
        ev.append(f"{n} trace(s) grouped by file name (rank pattern), no rank metadata in the files, same directory")
    else:
        ev.append("no rank recorded (no distributedInfo, no rank in the file name): a job of its own")
    named = sorted({m.job_digest for m in members} - {""})
    if named:  # one, as the job digest is part of every grouping key
        attempts = sorted({m.attempt_digest for m in members})
        ev.append(f"the file{'s' if n > 1 else ''} name{'' if n > 1 else 's'} job {', '.join(named)} "
                  f"(digest of PT_PROFILER_JOB_NAME and _VERSION; the values are environment values, not shown), "
                  + (f"attempt {attempts[0]}" if len(attempts) == 1 else f"{len(attempts)} attempts")
                  + " (digest with _ATTEMPT_INDEX)")
    if len(worlds) > 1:
        ev.append(f"members disagree on the world size ({', '.join(map(str, worlds))}); the largest is used")
    if start is not None and end is not None and n > 1 and comparable:
        ev.append(f"recorded windows overlap: {_utc(start)}, {_seconds(end - start)} in all")
    elif not comparable and n > 1:
        ev.append("time base is not epoch for some traces: their windows cannot be compared, so separate "
                  "captures of this job cannot be told apart")
    elif start is not None and end is not None:
        ev.append(f"recorded window: {_utc(start)}, {_seconds(end - start)}")
    if world:
        if missing:
            ev.append(f"{n_missing:,} of {world:,} ranks have no trace: {missing_text(missing, n_missing)}")
        else:
            ev.append(f"all {world} ranks present")
    elif ranks:
        ev.append("world size not recorded: missing ranks cannot be named")
    for r, labels in dups:
        same = len({(m.start_ns, m.end_ns) for m in members if m.rank == r}) == 1
        ev.append(f"rank {r} is claimed by {len(labels)} traces ({', '.join(labels)})"
                  + (" with identical timestamps (copies of one trace?)" if same else "")
                  + ": a duplicate, both kept, neither replaces the other; the rank is left out of alignment")
    if unranked and rule != RULE_SINGLE:
        ev.append(f"{len(unranked)} member(s) claim no rank: {', '.join(unranked)}")
    return ev


def _unique_names(groups: list[JobGroup]) -> list[JobGroup]:
    import dataclasses

    seen: dict[str, int] = {}
    out = []
    for g in groups:
        n = seen.get(g.name, 0)
        seen[g.name] = n + 1
        out.append(g if n == 0 else dataclasses.replace(g, name=f"{g.name}~{n + 1}"))
    return out
