"""The job section: align ranks, time every matched collective, name stragglers and why.

``analyze_job(summaries, cfg, group=None) -> JobReport`` reads :class:`RankSummary` objects only
(plain data; a scan parent never holds frames) and returns plain data (``JobReport.to_dict()`` is
JSON-able). Times in the report are aligned ns on the reference rank's clock (epoch ns when the
reference's time base is epoch), except the per-rank offsets themselves.

Per matched collective: each rank's arrival (aligned start), its wait (aligned end minus arrival)
and the last to arrive. Per rank: how often it arrived last and how long the other ranks waited
for it (``waited_on_ns``: over the collectives it reached last, the sum over the other ranks of
its arrival minus theirs). A rank is a straggler only when that wait is significant
(``straggler_min_wait_share`` of the others' time, ``straggler_min_excess`` x the median other rank's,
and its median lateness above ``straggler_min_uncertainty_factor`` x the alignment's per-collective
error ``end_spread_ns``).
Why it was late: its lead before those collectives (from its previous collective's end to its
arrival, on its own clock) against the median other rank's, split into compute busy time and
compute-idle time by gap class; the largest excess is the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceread import intervals
from traceread.config import Thresholds
from traceread.ranks.align import METHOD_NONE, RankAlignment, align, epoch_shift, primary_device
from traceread.ranks.grouping import JobGroup
from traceread.ranks.summary import RankSummary, lead_col
from traceread.vocabulary import GAP_CLASSES

COMPONENTS = ("compute",) + GAP_CLASSES + ("short-gaps",)
REASONS = {
    "compute": "its own compute: its kernels between collectives ran longer than the median rank's "
               "(slower kernels or more work on this rank)",
    "data-starved": "a data stall: it waited for the data loader / host-to-device batch copy before the collective",
    "launch-bound": "launch overhead: its GPU waited for the host to dispatch kernels",
    "sync-stall": "a host sync: the host blocked on the GPU, then launched late",
    "unattributed": "host work with no GPU activity (unattributed idle) before the collective",
    "comm-bound": "waiting on other communication before the collective",
    "pipeline-bubble": "a pipeline bubble before the collective",
    "one-time-cost": "one-time work (compilation, graph capture, module loading, first launches, context setup, "
                     "allocator growth) before the collective",
    "capture-boundary": "the capture's edge: its GPU was busy with work issued before the capture began, or the "
                        "profiler was shutting down (not a cause)",
    "short-gaps": "many short idle gaps between its kernels (turnaround below the judged gap size)",
    "earlier-delay": "a delay before the interval its trace shows: its lead to the collective is no longer than "
                     "the others', so it reached the previous collective's end late already (or calls are missing)",
}


@dataclass(frozen=True, eq=False)
class JobReport:
    """Plain data; ``to_dict()`` is the ``job`` object of the JSON report (and ``jobs/<job>.json``)."""

    name: str
    ranks: tuple[dict[str, Any], ...]
    alignment: tuple[RankAlignment, ...]
    matched_collectives: int
    collectives: tuple[dict[str, Any], ...]
    stragglers: tuple[dict[str, Any], ...]
    step: dict[str, Any]
    verdict: str
    group: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()
    thresholds: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "group": self.group, "ranks": list(self.ranks),
                "alignment": [a.to_dict() for a in self.alignment], "matched_collectives": self.matched_collectives,
                "collectives": list(self.collectives), "stragglers": list(self.stragglers), "step": self.step,
                "verdict": self.verdict, "notes": list(self.notes), "unavailable": list(self.unavailable),
                "thresholds": self.thresholds}


def _fmt_ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if abs(ns) < 1e8 else f"{ns / 1e9:.3f} s"


def analyze_job(summaries: list[RankSummary], cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen
                group: JobGroup | None = None) -> JobReport:
    """Align the ranks of one capture and name its stragglers (see the module doc)."""
    name = group.name if group is not None else "job"
    notes: list[str] = []
    unavailable: list[str] = []
    claims: dict[int, list[RankSummary]] = {}
    for s in summaries:
        if s.identity.rank is None:
            notes.append(f"{s.identity.label}: claims no rank, left out of the alignment")
        else:
            claims.setdefault(int(s.identity.rank), []).append(s)
    for r, ss in sorted(claims.items()):
        if len(ss) > 1:
            notes.append(f"rank {r} is claimed by {len(ss)} traces ({', '.join(x.identity.label for x in ss)}): "
                         "left out of the alignment, neither replaces the other")
    ranked = [ss[0] for r, ss in sorted(claims.items()) if len(ss) == 1]
    # the reference clock: the lowest rank that recorded collectives (one without cannot be aligned to)
    with_calls = [s for s in ranked if len(s.collectives["end_ns"])]
    if with_calls and with_calls[0] is not ranked[0]:
        ranked.remove(with_calls[0])
        ranked.insert(0, with_calls[0])
    thresholds = {k: getattr(cfg, k) for k in ("straggler_min_wait_share", "straggler_min_excess",
                                               "straggler_min_uncertainty_factor")}
    gdict = group.to_dict() if group is not None else None
    base_ranks: tuple[dict[str, Any], ...] = tuple({"rank": s.identity.claimed_rank, "trace": s.identity.label, "path": s.identity.path,
                        "device": primary_device(s), "collectives": int(len(s.collectives["end_ns"]))}
                       for s in ranked)
    if len(ranked) < 2:
        unavailable.append("alignment and stragglers: fewer than two distinct ranks")
        return JobReport(name, base_ranks, (), 0, (), (), _steps(ranked, {}), "not judged: fewer than two ranks",
                         gdict, tuple(notes), tuple(unavailable), thresholds)
    alignments, matches = align(ranked, cfg.align_max_end_spread_ns)
    off = {a.rank: a for a in alignments}
    for a in alignments:
        if a.offset_ns is None:
            notes.append(f"rank {a.rank}: {METHOD_NONE}; its arrivals are not compared")
        elif a.end_spread_ns is not None and a.end_spread_ns > cfg.align_max_end_spread_ns:
            notes.append(f"rank {a.rank}: matched collectives' end times still disagree by {_fmt_ms(a.end_spread_ns)} "
                         "(robust spread) after alignment, where one collective ends within microseconds on every "
                         "rank: the matched calls may not be the same collectives (no sequence number or process "
                         "group recorded); its offset and waits are unreliable")
    usable = [s for s in ranked if off[s.identity.claimed_rank].offset_ns is not None]
    table = _instances(usable, off, matches)
    per_rank, strag, verdict = _stragglers(usable, off, table, cfg)
    ranks = tuple({**b, **per_rank.get(b["rank"], {}), **off[b["rank"]].to_dict()} for b in base_ranks)
    return JobReport(name, ranks, tuple(alignments), int(table["n"]), tuple(table["records"]), tuple(strag),
                     _steps(usable, off), verdict, gdict, tuple(notes), tuple(unavailable), thresholds)


def _aligned(s: RankSummary, a: RankAlignment, t: np.ndarray, base: int) -> np.ndarray:
    """Aligned ns minus ``base`` (small enough for float64 to hold every ns exactly)."""
    return t.astype(np.int64) + (epoch_shift(s) - int(a.offset_ns or 0) - base)


def _instances(usable: list[RankSummary], off: dict[int, RankAlignment], matches: dict) -> dict[str, Any]:
    """Matrices (ranks x reference collectives) of aligned arrivals/ends and lead components.

    Aligned times are held relative to ``base`` (the reference's first collective start) in float64
    with NaN for "not matched": exact to the ns for spans under 104 days; absolute epoch ns would
    lose up to 128 ns in a float64."""
    ref = usable[0]
    k = len(ref.collectives["end_ns"])
    base = int(ref.collectives["start_ns"].min()) + epoch_shift(ref) if k else 0
    n = len(usable)
    arr = np.full((n, k), np.nan)
    end = np.full((n, k), np.nan)
    comp = {c: np.full((n, k), np.nan) for c in COMPONENTS}
    for i, s in enumerate(usable):
        rank = s.identity.claimed_rank
        if i == 0:
            cols = np.arange(k)
            own = np.arange(k)
        else:
            pairs = matches.get(rank, {})
            if not pairs:
                continue
            cols = np.concatenate([p[0] for p in pairs.values()])
            own = np.concatenate([p[1] for p in pairs.values()])
        c = s.collectives
        a = off[rank]
        arr[i, cols] = _aligned(s, a, c["start_ns"][own], base)
        end[i, cols] = _aligned(s, a, c["end_ns"][own], base)
        lead = (c["start_ns"][own] - c["lead_start_ns"][own]).astype(np.float64)
        comp["compute"][i, cols] = c["lead_busy_ns"][own]
        idle_sum = np.zeros(len(own))
        for cls in GAP_CLASSES:
            comp[cls][i, cols] = c[lead_col(cls)][own]
            idle_sum += c[lead_col(cls)][own]
        comp["short-gaps"][i, cols] = np.maximum(lead - c["lead_busy_ns"][own] - idle_sum, 0)
    present = ~np.isnan(arr)
    keep = present.sum(axis=0) >= 2
    arr, end = arr[:, keep], end[:, keep]
    comp = {c: v[:, keep] for c, v in comp.items()}
    present = present[:, keep]
    last = np.nanargmax(arr, axis=0) if arr.shape[1] else np.zeros(0, dtype=np.int64)
    last_arr = arr[last, np.arange(arr.shape[1])] if arr.shape[1] else np.zeros(0)
    waits_for_last = np.where(present, last_arr[None, :] - arr, 0.0)
    rc = ref.collectives
    ref_rows = np.flatnonzero(keep)
    ranks = [s.identity.claimed_rank for s in usable]
    records = _records(rc, ref_rows, ranks, last, arr, end, present, base)
    return {"n": int(arr.shape[1]), "arr": arr, "end": end, "comp": comp, "present": present, "last": last,
            "waits_for_last": waits_for_last, "ranks": ranks, "records": records, "base": base}


def _records(rc: dict, rows: np.ndarray, ranks: list[int], last: np.ndarray, arr: np.ndarray, end: np.ndarray,
             present: np.ndarray, base: int) -> list[dict[str, Any]]:
    """One small dict per matched collective (the report's table), built column-wise."""
    def cells(values: np.ndarray, add: int = 0) -> list[list[Any]]:
        obj = (np.where(present, values, 0).astype(np.int64) + add).astype(object)  # int64 math: exact
        obj[~present] = None
        return obj.T.tolist()

    arrivals, waits = cells(arr, base), cells(end - arr)
    cols = {"pg": rc["pg"][rows].tolist(), "seq": rc["seq"][rows].tolist(),
            "collective": rc["collective"][rows].tolist(), "bytes": rc["bytes"][rows].tolist(),
            "last_rank": np.asarray(ranks, dtype=np.int64)[last].tolist()}
    return [{"pg": str(p), "seq": q, "index": j, "collective": str(c), "bytes": b, "last_rank": lr,
             "arrival_ns": av, "wait_ns": wv}
            for j, (p, q, c, b, lr, av, wv) in enumerate(zip(cols["pg"], cols["seq"], cols["collective"],
                                                               cols["bytes"], cols["last_rank"], arrivals, waits,
                                                               strict=True))]


def _stragglers(usable: list[RankSummary], off: dict[int, RankAlignment], t: dict[str, Any],
                cfg: Thresholds) -> tuple[dict[int, dict], list[dict], str]:
    ranks, n = t["ranks"], t["n"]
    if n == 0:
        return {}, [], "not judged: no collective matched across ranks"
    arr, end, present, last, wfl = t["arr"], t["end"], t["present"], t["last"], t["waits_for_last"]
    caused = np.zeros(len(ranks))
    count = np.zeros(len(ranks), dtype=np.int64)
    for i in range(len(ranks)):
        m = last == i
        count[i] = int(m.sum())
        caused[i] = float(wfl[:, m].sum())
    span = float(np.nanmax(end) - np.nanmin(arr))
    waits = np.where(present, end - arr, np.nan)
    per_rank = {r: {"last_arrivals": int(count[i]), "waited_on_ns": int(caused[i]),
                    "mean_wait_ns": int(np.nanmean(waits[i])) if present[i].any() else None,
                    "collectives_matched": int(present[i].sum())} for i, r in enumerate(ranks)}
    out: list[dict[str, Any]] = []
    loose: list[tuple[int, float, float, float]] = []
    best_share = 0.0
    for i, r in enumerate(ranks):
        others = np.delete(caused, i)
        share = caused[i] / ((len(ranks) - 1) * span) if span > 0 else 0.0
        best_share = max(best_share, share)
        m = last == i
        if not m.any():
            continue
        med_other = float(np.median(others)) if len(others) else 0.0
        late = arr[i, m] - np.nanmedian(np.where(present[:, m], arr[:, m], np.nan)[np.arange(len(ranks)) != i],
                                        axis=0)
        lateness = float(np.median(late))
        unc = max(float(off[r].end_spread_ns or 0), float(off[ranks[0]].end_spread_ns or 0),
                  float(off[r].uncertainty_ns or 0), 1.0)
        if share < cfg.straggler_min_wait_share or caused[i] < cfg.straggler_min_excess * med_other:
            continue
        if lateness <= cfg.straggler_min_uncertainty_factor * unc:
            loose.append((r, share, lateness, unc))
            continue
        out.append(_entry(usable, off, t, i, r, m, caused[i], share, lateness, unc))
    out.sort(key=lambda e: -e["waited_on_ns"])
    if out:
        s = out[0]
        verdict = (f"rank {s['rank']} holds the job back: the other ranks waited {_fmt_ms(s['waited_on_ns'])} for it "
                   f"({s['share_of_others_time']:.1%} of their time); cause: {s['cause']}")
    elif loose:
        r, share, lateness, unc = max(loose, key=lambda x: x[1])
        verdict = (f"not judged: rank {r} would cost the others {share:.1%} of their time, but its median lateness "
                   f"({_fmt_ms(lateness)}) is within {cfg.straggler_min_uncertainty_factor:g}x the alignment's "
                   f"per-collective error ({_fmt_ms(unc)}): the clocks are not aligned well enough to name it")
    else:
        verdict = (f"balanced: no rank causes a significant wait (the largest, {best_share:.2%} of the others' time, "
                   f"is under the {cfg.straggler_min_wait_share:.0%} threshold or not above the median rank's)")
    return per_rank, out, verdict


def _entry(usable: list[RankSummary], off: dict[int, RankAlignment], t: dict[str, Any], i: int, r: int,
           m: np.ndarray, caused: float, share: float, lateness: float, unc: float) -> dict[str, Any]:
    ranks = t["ranks"]
    others = np.arange(len(ranks)) != i
    delta = {}
    for c in COMPONENTS:
        v = t["comp"][c][:, m]
        med = np.nanmedian(np.where(t["present"][:, m], v, np.nan)[others], axis=0)
        delta[c] = float(np.nanmean(v[i] - med))
    lead_delta = sum(delta.values())
    cause = max(delta, key=lambda c: delta[c])
    if lead_delta < 0.5 * lateness:  # its lead does not explain the lateness: the delay came before it
        cause = "earlier-delay"
    ev = [f"arrived last at {int(m.sum())} of {t['n']} matched collectives; the other ranks waited "
          f"{_fmt_ms(caused)} for it in all (median lateness {_fmt_ms(lateness)} per collective, alignment "
          f"uncertainty {_fmt_ms(unc)})",
          f"before those collectives its lead (previous collective's end to its arrival) was {_fmt_ms(lead_delta)} "
          "longer than the median rank's: " + ", ".join(f"{c} {'+' if v >= 0 else ''}{_fmt_ms(v)}"
                                                         for c, v in sorted(delta.items(), key=lambda kv: -kv[1])
                                                         if abs(v) >= 1000)]
    if cause == "earlier-delay":
        ev.append("the lead difference explains less than half of its lateness: the delay lies before its previous "
                  "collective's end (an earlier delay carried over, or calls between are missing from the trace)")
    cb, cb_total = _others_comm_bound(usable, off, t, i, m)
    entry = {"rank": r, "waited_on_ns": int(caused), "last_arrivals": int(m.sum()), "matched_collectives": t["n"],
             "median_lateness_ns": int(lateness), "share_of_others_time": float(share), "cause": cause,
             "reason": REASONS[cause], "lead_excess_ns": {c: int(v) for c, v in delta.items()},
             "others_comm_bound_waiting_ns": int(cb), "others_comm_bound_ns": int(cb_total), "evidence": ev}
    if cb_total > 0:
        ev.append(f"{_fmt_ms(cb)} ({cb / cb_total:.0%}) of the comm-bound time on the other ranks is waiting for "
                  f"rank {r}, not slow interconnect")
    return entry


def _others_comm_bound(usable: list[RankSummary], off: dict[int, RankAlignment], t: dict[str, Any], i: int,
                       m: np.ndarray) -> tuple[float, float]:
    """Comm-bound idle on the other ranks inside their waits for rank ``i`` (and their comm-bound total)."""
    arr, present = t["arr"], t["present"]
    inside = total = 0.0
    for j, s in enumerate(usable):
        if j == i:
            continue
        g = s.gaps
        sel = (g["class"] == "comm-bound") & (g["device"] == primary_device(s)) if len(g["class"]) else \
            np.zeros(0, dtype=bool)
        if not sel.any():
            continue
        us, ue = intervals.union(g["start_ns"][sel], g["end_ns"][sel])
        total += float((ue - us).sum())
        ok = m & present[j]
        shift = int(off[s.identity.claimed_rank].offset_ns or 0) - epoch_shift(s) + int(t["base"])
        qs = arr[j, ok].astype(np.int64) + shift
        qe = arr[i, ok].astype(np.int64) + shift
        qs, qe = intervals.union(qs, qe)
        inside += float(intervals.overlap_with_union(qs, qe, us, ue).sum())
    return inside, total


def _steps(usable: list[RankSummary], off: dict[int, RankAlignment]) -> dict[str, Any]:
    """Job step time on aligned windows: per step number, last end minus first start over ranks."""
    rows = []
    for s in usable:
        st = s.steps
        if len(st["step"]) == 0:
            continue
        a = off.get(int(s.identity.rank)) if s.identity.rank is not None else None
        steady = ~(st["warmup"].astype(bool) | st["outlier"].astype(bool))
        keep = steady if steady.any() else np.ones(len(st["step"]), dtype=bool)
        o = int(a.offset_ns) if a is not None and a.offset_ns is not None else 0
        for k in np.flatnonzero(keep):
            raw_s = int(st["start_ns"][k]) + epoch_shift(s)
            raw_e = int(st["end_ns"][k]) + epoch_shift(s)
            rows.append((int(st["step"][k]), int(s.identity.rank or 0), raw_s - o, raw_e - o, raw_s, raw_e))
    if not rows:
        return {"steps": 0, "median_job_step_ns": None, "median_unaligned_job_step_ns": None, "per_step": []}
    arr = np.array(rows, dtype=np.int64)
    per = []
    for step in np.unique(arr[:, 0]):
        x = arr[arr[:, 0] == step]
        if len(x) < 2 and len(usable) > 1:
            continue
        durs = x[:, 3] - x[:, 2]
        per.append({"step": int(step), "job_step_ns": int(x[:, 3].max() - x[:, 2].min()),
                    "unaligned_job_step_ns": int(x[:, 5].max() - x[:, 4].min()),
                    "max_rank_step_ns": int(durs.max()), "slowest_rank": int(x[durs.argmax(), 1]),
                    "end_spread_ns": int(x[:, 3].max() - x[:, 3].min())})
    def med(key):
        return (int(np.median([p[key] for p in per])) if per else None)
    return {"steps": len(per), "median_job_step_ns": med("job_step_ns"),
            "median_unaligned_job_step_ns": med("unaligned_job_step_ns"),
            "median_max_rank_step_ns": med("max_rank_step_ns"), "median_end_spread_ns": med("end_spread_ns"),
            "per_step": per}
