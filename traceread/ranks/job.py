"""The job section: align ranks, time every matched collective, name stragglers and why.

``analyze_job(summaries, cfg, group=None) -> JobReport`` reads :class:`RankSummary` objects only
(plain data; a scan parent never holds frames) and returns plain data (``JobReport.to_dict()`` is
JSON-able). Times in the report are aligned ns on the reference rank's clock (epoch ns when the
reference's time base is epoch), except the per-rank offsets themselves.

Ranks are aligned through the process-group graph (:mod:`traceread.ranks.graph`); the calls linked by
matched pairs are one collective *instance* (members: the ranks in its group). Per instance: each
member's arrival (aligned start), its time in the call (aligned end minus arrival) and the last to
arrive; each member's wait for the last arriver is at most its own time in the call. Per rank: how
often it arrived last, how long the others waited for it there (``waited_on_ns``: per other rank the
union of those waits, summed) and how much of the others' waiting is attributed to it
(``attributed_wait_ns``: waits for a rank that was late only because it had itself waited are passed
on to whom it waited for, :mod:`traceread.ranks.blame`). Shares are of the others' own matched
windows, so none exceeds 100%.

A rank is a straggler when the waiting attributed to it is at least ``straggler_min_wait_share`` of
the others' time and ``straggler_min_excess`` x the median other rank's, its median lateness exceeds
``straggler_min_uncertainty_factor`` x the alignment's per-collective error ``end_spread_ns``, and the
most waiting is for it in at least ``straggler_min_step_share`` of the steps (else the imbalance moves
between ranks: no single straggler, and the verdict says so). When every rank of one pipeline stage is
slower (``stage_imbalance_min_excess``) the stage is named, not its ranks.

Why it was late: its lead before those collectives (from its previous collective's end to its
arrival, on its own clock) against the median rank of its pipeline stage present there (of all
others without a pipeline), split into compute busy time and compute-idle time by gap class; the
largest excess is the reason. When the lead explains less than half the lateness (a pipeline stage
builds its delay over the whole step), its per-step compute and own idle against its stage's median
rank; ``earlier-delay`` when neither does. ``JobReport.prediction``: the job step without the straggler /
with balanced stages, from each rank's own step in the what-if replay (:mod:`traceread.ranks.predict`).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceread import causes
from traceread.config import Thresholds
from traceread.note import ALIGNED_ENDS_DISAGREE, CLAIMS_NO_RANK, RANK_CLAIMED_TWICE, RANK_NOT_ALIGNED, Note
from traceread.ranks.align import RankAlignment, epoch_shift, primary_device
from traceread.ranks.blame import NOT_OWN, blame, stage_imbalance, stages, step_excess, step_parts
from traceread.ranks.evidence import (
    ClaimEvidence,
    bubble_text,
    confined_text,
    confined_waits,
    early_text,
    figures,
    implied_world,
    judge,
    median_lateness,
    start_skew,
    withheld_text,
)
from traceread.ranks.graph import align_graph, instances
from traceread.ranks.grouping import JobGroup
from traceread.ranks.inferred import infer_groups
from traceread.ranks.predict import job_prediction
from traceread.ranks.results import (
    JobPrediction,
    JobRank,
    JobStep,
    JobStepRow,
    PipelineStages,
    RankWaits,
    StageImbalance,
    Straggler,
    WaitingFor,
)
from traceread.ranks.summary import RankSummary, lead_col
from traceread.ranks.waiting import (
    fmt_ms,
    imbalance_record,
    others_class,
    rotating,
    rotation,
    step_culprits,
    verdict_text,
    waiting_for,
)
from traceread.vocabulary import GAP_CLASSES

COMPONENTS = ("compute",) + GAP_CLASSES + ("short-gaps",)
# Why a straggler reached a collective late: a gap class's reason is its record's (traceread.causes).
REASONS: dict[str, str] = {
    "compute": "its own compute: its kernels between collectives ran longer than the median rank's "
               "(slower kernels or more work on this rank)",
    **{c.name: str(c.job_reason) for c in causes.gap_classes()},
    "short-gaps": "many short idle gaps between its kernels (turnaround below the judged gap size)",
    "earlier-delay": "a delay before the interval its trace shows: its lead to the collective is no longer than "
                     "the others', so it reached the previous collective's end late already (or calls are missing)",
}


@dataclass(frozen=True, eq=False)
class JobReport:
    """Plain data; ``to_dict()`` is the ``job`` object of the JSON report (and ``jobs/<job>.json``)."""

    name: str
    ranks: tuple[JobRank, ...]
    alignment: tuple[RankAlignment, ...]
    matched_collectives: int
    collectives: tuple[dict[str, Any], ...]
    stragglers: tuple[Straggler, ...]  # worst first
    step: JobStep
    verdict: str
    group: dict[str, Any] | None = None
    notes: tuple[Note, ...] = ()  # as data: worded by traceread.render.notes (to_dict gives kind and data)
    unavailable: tuple[str, ...] = ()
    thresholds: dict[str, Any] = field(default_factory=dict)
    stages: PipelineStages | None = None  # pipeline stages read from p2p (count, ranks per stage, evidence)
    stage_imbalance: StageImbalance | None = None  # the slow stage, when every rank of one stage is slower
    waiting_for: WaitingFor | None = None  # whom the others' waiting is for: kind rank | stage | moving
    # what the job would step at without its straggler / with balanced stages (traceread.ranks.predict; None
    # without either, or without own steps)
    prediction: JobPrediction | None = None
    # what the job's figures can support: collectives, steps, ranks present (traceread.ranks.evidence)
    evidence: ClaimEvidence | None = None
    # the figures each claim of the verdict rests on, one line per claim (traceread.ranks.evidence.figures): the
    # Markdown job section lists them; the JSON carries the same figures in its fields and the verdict
    figures: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "group": self.group, "ranks": [r.to_dict() for r in self.ranks],
                "alignment": [a.to_dict() for a in self.alignment], "matched_collectives": self.matched_collectives,
                "collectives": list(self.collectives), "stragglers": [s.to_dict() for s in self.stragglers],
                "step": self.step.to_dict(), "verdict": self.verdict,
                "notes": [{"kind": n.kind, **({"label": n.label} if n.label else {}), **n.fields} for n in self.notes],
                "unavailable": list(self.unavailable), "thresholds": self.thresholds,
                "stages": self.stages.to_dict() if self.stages is not None else None,
                "stage_imbalance": self.stage_imbalance.to_dict() if self.stage_imbalance is not None else None,
                "waiting_for": self.waiting_for.to_dict() if self.waiting_for is not None else None,
                "prediction": self.prediction.to_dict() if self.prediction is not None else None,
                "evidence": self.evidence.to_dict() if self.evidence is not None else None}


def analyze_job(summaries: list[RankSummary], cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen
                group: JobGroup | None = None) -> JobReport:
    """Align the ranks of one capture and name its stragglers (see the module doc)."""
    name = group.name if group is not None else "job"
    notes: list[Note] = []
    unavailable: list[str] = []
    claims: dict[int, list[RankSummary]] = {}
    for s in summaries:
        if s.identity.rank is None:
            notes.append(Note.of(CLAIMS_NO_RANK).under(s.identity.label))
        else:
            claims.setdefault(int(s.identity.rank), []).append(s)
    for r, ss in sorted(claims.items()):
        if len(ss) > 1:
            notes.append(Note.of(RANK_CLAIMED_TWICE, rank=r, traces=tuple(x.identity.label for x in ss)))
    ranked = [ss[0] for r, ss in sorted(claims.items()) if len(ss) == 1]
    # the reference clock: the lowest rank that recorded collectives (one without cannot be aligned to)
    with_calls = [s for s in ranked if len(s.collectives["end_ns"])]
    if with_calls and with_calls[0] is not ranked[0]:
        ranked.remove(with_calls[0])
        ranked.insert(0, with_calls[0])
    thresholds = {k: getattr(cfg, k) for k in ("straggler_min_wait_share", "straggler_min_excess",
                                               "straggler_min_uncertainty_factor", "straggler_min_own_excess",
                                               "straggler_min_step_share", "stage_imbalance_min_excess")}
    gdict = group.to_dict() if group is not None else None
    base_ranks = tuple(JobRank(s.identity.claimed_rank, s.identity.label, s.identity.path, primary_device(s),
                               int(len(s.collectives["end_ns"]))) for s in ranked)
    if len(ranked) < 2:
        unavailable.append("alignment and stragglers: fewer than two distinct ranks")
        return JobReport(name, base_ranks, (), 0, (), (), _steps(ranked, {}), "not judged: fewer than two ranks",
                         gdict, tuple(notes), tuple(unavailable), thresholds)
    ranked, inferred = infer_groups(ranked, cfg.align_max_end_spread_ns)
    alignments, es = align_graph(ranked, cfg.align_max_end_spread_ns)
    off = {a.rank: a for a in alignments}
    for a in alignments:
        if a.offset_ns is None:
            notes.append(Note.of(RANK_NOT_ALIGNED, rank=a.rank, method=a.method))
        elif a.end_spread_ns is not None and a.end_spread_ns > cfg.align_max_end_spread_ns:
            notes.append(Note.of(ALIGNED_ENDS_DISAGREE, rank=a.rank, spread_ns=a.end_spread_ns))
    ok = [off[s.identity.claimed_rank].offset_ns is not None for s in ranked]
    usable = [s for s, good in zip(ranked, ok, strict=True) if good]
    rows = instances(ranked, es)[np.flatnonzero(ok)]
    table = _instances(usable, off, rows[:, (rows >= 0).sum(axis=0) >= 2])
    world = group.world_size if group is not None else None
    # no world size said (an nsys export named by rank): the present ranks' numbers may still show missing ones
    at_least = implied_world([s.identity.claimed_rank for s in ranked]) if world is None else None
    per_rank, strag, verdict, extra = _stragglers(usable, off, table, cfg, len(ranked), world, at_least)
    ranks = tuple(dataclasses.replace(b, waits=per_rank.get(b.rank), alignment=off[b.rank]) for b in base_ranks)
    step = _steps(usable, off)
    if inferred and extra["stages"] is not None:
        extra["stages"] = dataclasses.replace(extra["stages"], evidence=f"{extra['stages'].evidence}; {inferred}")
    prediction = job_prediction(usable, step, strag, extra["stage_imbalance"],
                                [list(r) for r in extra["stages"].ranks] if extra["stages"] else None, table)
    return JobReport(name, ranks, tuple(alignments), int(table["n"]), tuple(table["records"]), tuple(strag),
                     step, verdict, gdict, tuple(notes), tuple(unavailable), thresholds,
                     stages=extra["stages"], stage_imbalance=extra["stage_imbalance"],
                     waiting_for=extra["waiting_for"], prediction=prediction, evidence=extra["evidence"],
                     figures=tuple(extra["figures"]))


def _aligned(s: RankSummary, a: RankAlignment, t: np.ndarray, base: int) -> np.ndarray:
    """Aligned ns minus ``base`` (small enough for float64 to hold every ns exactly)."""
    return t.astype(np.int64) + (epoch_shift(s) - int(a.offset_ns or 0) - base)


def _instances(usable: list[RankSummary], off: dict[int, RankAlignment], rows: np.ndarray) -> dict[str, Any]:
    """Matrices (ranks x collective instances, in order of arrival) of aligned arrivals/ends, lead
    components and collective types; ``rows[i, j]`` is rank i's call in instance j (-1: not a member).

    Aligned times are held relative to ``base`` (the reference's first collective start) in float64
    with NaN for "not matched": exact to the ns for spans under 104 days; absolute epoch ns would
    lose up to 128 ns in a float64."""
    ref = usable[0]
    base = int(ref.collectives["start_ns"].min()) + epoch_shift(ref) if len(ref.collectives["start_ns"]) else 0
    n, k = rows.shape
    arr, end = np.full((n, k), np.nan), np.full((n, k), np.nan)
    comp = {c: np.full((n, k), np.nan) for c in COMPONENTS}
    types = np.full((n, k), "", dtype=object)
    steps = np.full((n, k), -1, dtype=np.int64)
    for i, s in enumerate(usable):
        cols = np.flatnonzero(rows[i] >= 0)
        own = rows[i, cols]
        c = s.collectives
        a = off[s.identity.claimed_rank]
        arr[i, cols] = _aligned(s, a, _arrival(c)[own], base)
        end[i, cols] = _aligned(s, a, c["end_ns"][own], base)
        types[i, cols] = c["collective"][own]
        steps[i, cols] = c["step"][own]
        lead = (c["start_ns"][own] - c["lead_start_ns"][own]).astype(np.float64)
        comp["compute"][i, cols] = c["lead_busy_ns"][own]
        idle_sum = np.zeros(len(own))
        for cls in GAP_CLASSES:
            comp[cls][i, cols] = c[lead_col(cls)][own]
            idle_sum += c[lead_col(cls)][own]
        comp["short-gaps"][i, cols] = np.maximum(lead - c["lead_busy_ns"][own] - idle_sum, 0)
    present = ~np.isnan(arr)
    with np.errstate(all="ignore"):
        order = np.argsort(np.nanmedian(arr, axis=0), kind="stable") if k else np.zeros(0, dtype=np.int64)
    arr, end, present, types, steps, rows = (x[:, order] for x in (arr, end, present, types, steps, rows))
    comp = {c: v[:, order] for c, v in comp.items()}
    last = np.nanargmax(arr, axis=0) if k else np.zeros(0, dtype=np.int64)
    first = np.argmax(present, axis=0) if k else np.zeros(0, dtype=np.int64)  # the member that describes it
    ranks = [s.identity.claimed_rank for s in usable]
    records = _records(usable, rows, first, ranks, last, arr, end, present, base)
    step_of = steps[first, np.arange(k)] if k else np.zeros(0, dtype=np.int64)
    return {"n": int(k), "arr": arr, "end": end, "comp": comp, "present": present, "last": last, "types": types,
            "step": step_of, "ranks": ranks, "records": records, "base": base,
            "off": {r: int(off[r].offset_ns or 0) for r in ranks}}


def _arrival(c: dict[str, np.ndarray]) -> np.ndarray:
    """When the rank was ready for each call: a kernel that started late waiting for a peer arrived when its rank
    got there (``ready_ns``, no later than the call's start; it may precede the device's previous collective's end,
    one on another stream); else, and for summaries of an older cache without it, its start."""
    start = c["start_ns"]
    ready = c.get("ready_ns")
    if ready is None or len(ready) != len(start):
        return start
    return np.where(ready <= start, ready, start)


def _records(usable: list[RankSummary], rows: np.ndarray, first: np.ndarray, ranks: list[int], last: np.ndarray,
             arr: np.ndarray, end: np.ndarray, present: np.ndarray, base: int) -> list[dict[str, Any]]:
    """One small dict per matched collective (the report's table), built column-wise."""
    def cells(values: np.ndarray, add: int = 0) -> list[list[Any]]:
        obj = (np.where(present, values, 0).astype(np.int64) + add).astype(object)  # int64 math: exact
        obj[~present] = None
        return obj.T.tolist()

    k = rows.shape[1]
    desc: dict[str, list[Any]] = {"pg": [""] * k, "seq": [-1] * k, "collective": [""] * k, "bytes": [-1] * k}
    for i, s in enumerate(usable):  # each instance described by its first member's call
        cols = np.flatnonzero(first == i)
        if len(cols) == 0:
            continue
        own = rows[i, cols]
        for key in desc:
            vals = s.collectives[key][own].tolist()
            for j, v in zip(cols.tolist(), vals, strict=True):
                desc[key][j] = v
    arrivals, waits = cells(arr, base), cells(end - arr)
    last_rank = np.asarray(ranks, dtype=np.int64)[last].tolist()
    return [{"pg": str(p), "seq": q, "index": j, "collective": str(c), "bytes": b, "last_rank": lr,
             "arrival_ns": av, "wait_ns": wv}
            for j, (p, q, c, b, lr, av, wv) in enumerate(zip(desc["pg"], desc["seq"], desc["collective"],
                                                               desc["bytes"], last_rank, arrivals, waits,
                                                               strict=True))]


def _stragglers(usable: list[RankSummary], off: dict[int, RankAlignment], t: dict[str, Any], cfg: Thresholds,
                n_present: int, world: int | None,
                world_at_least: int | None = None) -> tuple[dict[int, RankWaits], list[Straggler], str, dict[str, Any]]:
    ranks, n = t["ranks"], t["n"]
    extra: dict[str, Any] = {"stages": None, "stage_imbalance": None, "waiting_for": None, "evidence": None,
                             "figures": ()}
    ev = judge(n, len(np.unique(t["step"][t["step"] >= 0])) if n else 0, n_present, world, cfg, world_at_least)
    extra["evidence"] = ev
    if n == 0:
        return {}, [], "not judged: no collective matched across ranks", extra
    arr, end, present, last = t["arr"], t["end"], t["present"], t["last"]
    st = stages(t["types"], present, arr, ranks)
    ex = step_excess([step_parts(s.steps, primary_device(s)) for s in usable], st.stage)
    imb = stage_imbalance(ex, st, ranks, cfg.stage_imbalance_min_excess)
    own_steps = ex.own(cfg.straggler_min_own_excess)
    pos = {int(x): j for j, x in enumerate(ex.steps)}
    col = np.array([pos.get(int(x), -1) for x in t["step"]], dtype=np.int64)
    own = np.zeros((len(ranks), n), dtype=bool)
    ok = col >= 0
    own[:, ok] = own_steps[:, col[ok]]
    if own_steps.shape[1]:  # warm-up steps and calls outside steps: whether the rank's own delay is usual
        own[:, ~ok] = (own_steps.mean(axis=1) >= 0.5)[:, None]
    if imb is not None:
        own[st.stage == imb.stage] = True
    unc_all = max([float(a.end_spread_ns or 0) for a in off.values() if a.offset_ns is not None] + [1.0])
    b = blame(arr, end, present, last, own, unc_all)
    t["waits"], t["culprit"] = b.waits, b.culprit
    count = np.array([int((last == i).sum()) for i in range(len(ranks))], dtype=np.int64)
    others_time = np.array([b.window.sum() - b.window[i] for i in range(len(ranks))])
    others_wait = np.array([b.waiting.sum() - b.waiting[i] for i in range(len(ranks))])
    caused = b.direct.sum(axis=0) - np.diag(b.direct)
    blamed = b.attributed.sum(axis=0) - np.diag(b.attributed)
    waits = np.where(present, end - arr, np.nan)
    per_rank = {r: RankWaits(last_arrivals=int(count[i]), waited_on_ns=int(caused[i]),
                             attributed_wait_ns=int(blamed[i]), stage=int(st.stage[i]) if st.count > 1 else None,
                             share_of_others_time=float(blamed[i] / others_time[i]) if others_time[i] > 0 else 0.0,
                             mean_wait_ns=int(np.nanmean(waits[i])) if present[i].any() else None,
                             collectives_matched=int(present[i].sum())) for i, r in enumerate(ranks)}
    if st.count > 1:
        partial = (f"; read from the {ev.present_text} only: stages are counted among them, not in the whole "
                   "job") if ev.partial else ""
        extra["stages"] = PipelineStages(st.count, st.evidence + partial, tuple(
            tuple(r for r, s in zip(ranks, st.stage, strict=True) if s == k) for k in range(st.count)))
    culprits = step_culprits(b, t["step"], len(ranks))
    out: list[Straggler] = []
    loose: list[tuple[int, float, float, float]] = []
    moving: list[tuple[int, float]] = []
    early: list[tuple[int, float, int, float]] = []  # (rank, share, late arrivals, lateness at its first call)
    few: list[tuple[int, float, int, float, float]] = []  # (rank, share, collectives, their wait, alignment error)
    bubble: list[tuple[int, int, float, int, int]] = []  # (rank, stage, share, steps it was slower, steps)
    best_share = 0.0
    for i, r in enumerate(ranks):
        share = blamed[i] / others_time[i] if others_time[i] > 0 else 0.0
        best_share = max(best_share, share)
        m = last == i
        others = np.delete(blamed, i)
        med_other = float(np.median(others)) if len(others) else 0.0
        if share < cfg.straggler_min_wait_share or blamed[i] < cfg.straggler_min_excess * med_other:
            continue
        if imb is not None and st.stage[i] == imb.stage and not own_steps[i].mean() >= 0.5:
            continue  # one rank of the slow stage: the stage is named, not its ranks
        unc = max(float(off[r].end_spread_ns or 0), float(off[ranks[0]].end_spread_ns or 0),
                  float(off[r].uncertainty_ns or 0), 1.0)
        skew = start_skew(b, present, arr, i)
        if skew is not None or int(m.sum()) < cfg.straggler_min_late_collectives:
            early.append((r, share, int(m.sum()), skew if skew is not None else float("nan")))
            continue
        few_here = confined_waits(b, present, last, i, unc, cfg)
        if few_here is not None:
            few.append((r, share, few_here[0], few_here[1], unc))
            continue
        lateness = median_lateness(arr, present, i, m)
        # waits confined to a few collectives: judged on those, when the alignment's error is small against them
        big = m & (np.nanmax(np.where(present, b.waits, 0.0), axis=0) > cfg.straggler_min_uncertainty_factor * unc)
        confined = median_lateness(arr, present, i, big) if big.sum() >= cfg.straggler_min_late_collectives else 0.0
        if max(lateness, confined) <= cfg.straggler_min_uncertainty_factor * unc:
            loose.append((r, share, lateness, unc))
            continue
        # in a pipeline the others wait for the stages before them in every fill and drain: a rank is waited for
        # as a straggler (or in a moving imbalance) only when it was slower than its stage in the steps it led
        led = [pos[s] for s, c in culprits.items() if c == i and s in pos] or list(range(own_steps.shape[1]))
        if st.count > 1 and led and own_steps[i, led].mean() < cfg.straggler_min_step_share:
            bubble.append((r, int(st.stage[i]), share, int(own_steps[i, led].sum()), len(led)))
            continue
        steps_led = sum(1 for c in culprits.values() if c == i)
        if culprits and steps_led < cfg.straggler_min_step_share * len(culprits):
            moving.append((r, share))
            continue
        out.append(_entry(usable, t, st, ex, b, i, r, m, share, lateness, unc, others_wait[i], others_time[i]))
    out.sort(key=lambda e: -e.attributed_wait_ns)
    rot = rotation(ex, culprits)
    if not out and imb is None and not moving and not early and rotating(culprits, rot, blamed / np.maximum(
            others_time, 1), cfg):
        moving = [(r, float(blamed[i] / others_time[i]) if others_time[i] > 0 else 0.0) for i, r in enumerate(ranks)]
    would = withheld_text(ev, out, imb)
    if not ev.straggler_claims:
        out = []
    if not ev.stage_claims:
        imb = None
    if not ev.sufficient:
        moving = []
    verdict = verdict_text(out, imb, st, loose, moving, culprits, ranks, best_share, cfg, rot)
    if early and not out and imb is None and not moving:
        verdict = early_text(early, cfg)
    elif few and not out and imb is None:
        verdict = confined_text(few, n)
    elif bubble and not out and imb is None and not moving and not loose:
        verdict = bubble_text(bubble, cfg)
    if not ev.sufficient:
        top = int(np.argmax(blamed))
        verdict = (f"not judged: {ev.reason}; the figures alone: rank {ranks[top]} arrived last at {int(count[top])} "
                   f"of {n} and the others waited {fmt_ms(float(blamed[top]))} for it"
                   + ("; " + verdict[len("no straggler: "):] if early and verdict.startswith("no straggler") else ""))
    elif would:
        verdict = would
    elif ev.partial:
        verdict = f"{ev.present_text}: {verdict}"
    extra["stage_imbalance"] = imbalance_record(imb, b, st, usable, t, off) if imb is not None else None
    wf: WaitingFor | None = None
    if out:
        i = ranks.index(out[0].rank)
        wf = waiting_for(usable, off, t, b, [i], "rank", out[0].rank)
    elif imb is not None:
        members = [j for j in range(len(ranks)) if st.stage[j] == imb.stage]
        wf = waiting_for(usable, off, t, b, members, "stage", imb.stage)
    elif moving:
        wf = WaitingFor("moving", step_culprits={int(s): int(ranks[c]) for s, c in culprits.items()})
    extra["waiting_for"] = wf
    extra["figures"] = figures(ev, out, extra["stage_imbalance"], bool(moving) and wf is not None and wf.kind == "moving",
                               culprits, rot, few, early, loose, unc_all, cfg, ranks)
    if wf and wf.cls and wf.class_share is not None and wf.kind in ("rank", "stage"):
        verdict += (f"; the other ranks' largest idle class, {wf.cls} ({wf.class_time_share or 0.0:.0%} of their "
                    f"time), is {wf.class_share:.0%} waiting for {'it' if wf.kind == 'rank' else 'that stage'}")
    return per_rank, out, verdict, extra


def _entry(usable: list[RankSummary], t: dict[str, Any], st: Any, ex: Any, b: Any, i: int, r: int,
           m: np.ndarray, share: float, lateness: float, unc: float, others_wait: float,
           others_time: float) -> Straggler:
    ranks = t["ranks"]
    n = len(ranks)
    peers = (st.stage == st.stage[i]) & (np.arange(n) != i)
    basis = "lead"
    delta = {}
    for c in COMPONENTS:
        v = t["comp"][c][:, m]
        pv = np.where(t["present"][:, m], v, np.nan)[peers if peers.any() else np.arange(n) != i]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # instances with no stage peer: NaN, left out
            med = np.nanmedian(pv, axis=0) if len(pv) else np.full(v.shape[1], np.nan)
            d = v[i] - med
        delta[c] = float(np.nanmean(d)) if np.isfinite(d).any() else 0.0
        compared = int(np.isfinite(d).sum())
    lead_delta = sum(delta.values())
    cause = max(delta, key=lambda c: delta[c])
    step_ex = ex.median_excess(i)
    if lead_delta < 0.5 * lateness:  # its lead does not explain the lateness: a longer window may
        own = {c: v for c, v in step_ex.items() if c not in NOT_OWN}
        best = max(own, key=lambda c: own[c]) if own else None
        if best is not None and own[best] >= 0.5 * lateness:
            cause, basis = best, "step"
        else:
            cause = "earlier-delay"
    where = f"the median rank of its pipeline stage {int(st.stage[i])}" if st.count > 1 else "the median other rank"
    ev = [f"arrived last at {int(m.sum())} of {t['n']} matched collectives; the other ranks waited "
          f"{fmt_ms(float(b.direct[:, i].sum() - b.direct[i, i]))} for it there (median lateness {fmt_ms(lateness)}, "
          f"alignment uncertainty {fmt_ms(unc)})",
          f"before those collectives its lead (previous collective's end to its arrival) was {fmt_ms(lead_delta)} "
          f"longer than {where}'s: " + ", ".join(f"{c} {'+' if v >= 0 else ''}{fmt_ms(v)}"
                                                 for c, v in sorted(delta.items(), key=lambda kv: -kv[1])
                                                 if abs(v) >= 1000)
          if compared else "no rank of its stage took part in those collectives (pipeline transfers to other "
                           "stages): its leads have nothing alike to be compared with"]
    if basis == "step":
        ev.append(f"per step (median over {len(ex.steps)} steps) it spent {fmt_ms(step_ex[cause])} more in {cause} "
                  f"than {where}: the delay builds up over the whole step, not only just before each collective")
    if cause == "earlier-delay":
        ev.append("neither its lead nor its whole step explains half of its lateness: the delay lies before its "
                  "previous collective's end (an earlier delay carried over, or calls between are missing)")
    attributed = float(b.attributed[:, i].sum() - b.attributed[i, i])
    if others_wait > 0:
        ev.append(f"{fmt_ms(attributed)} ({attributed / others_wait:.0%}) of the other ranks' waiting in collectives "
                  "is for it, directly or through the ranks that waited for it first")
    cb, cb_total = others_class(usable, t, b, [i], "comm-bound")
    if cb_total > 0:
        ev.append(f"{fmt_ms(cb)} ({cb / cb_total:.0%}) of the comm-bound time on the other ranks is waiting for "
                  f"rank {r}, not slow interconnect")
    return Straggler(
        rank=r, waited_on_ns=int(b.direct[:, i].sum() - b.direct[i, i]), last_arrivals=int(m.sum()),
        matched_collectives=t["n"], median_lateness_ns=int(lateness), share_of_others_time=float(share),
        cause=cause, reason=REASONS[cause], cause_basis=basis, stage=int(st.stage[i]) if st.count > 1 else None,
        lead_excess_ns={c: int(v) for c, v in delta.items()}, step_excess_ns={c: int(v) for c, v in step_ex.items()},
        attributed_wait_ns=int(attributed), others_waiting_ns=int(others_wait),
        attributed_share=float(attributed / others_wait) if others_wait > 0 else 0.0,
        others_comm_bound_waiting_ns=int(cb), others_comm_bound_ns=int(cb_total), evidence=tuple(ev))


def _steps(usable: list[RankSummary], off: dict[int, RankAlignment]) -> JobStep:
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
        return JobStep(0, None, None, ranked=False)
    arr = np.array(rows, dtype=np.int64)
    per = []
    for step in np.unique(arr[:, 0]):
        x = arr[arr[:, 0] == step]
        if len(x) < 2 and len(usable) > 1:
            continue
        durs = x[:, 3] - x[:, 2]
        per.append(JobStepRow(step=int(step), job_step_ns=int(x[:, 3].max() - x[:, 2].min()),
                              unaligned_job_step_ns=int(x[:, 5].max() - x[:, 4].min()),
                              max_rank_step_ns=int(durs.max()), slowest_rank=int(x[durs.argmax(), 1]),
                              end_spread_ns=int(x[:, 3].max() - x[:, 3].min())))

    def med(values: list[int]) -> int | None:
        return int(np.median(values)) if per else None
    return JobStep(len(per), med([p.job_step_ns for p in per]), med([p.unaligned_job_step_ns for p in per]),
                   med([p.max_rank_step_ns for p in per]), med([p.end_spread_ns for p in per]), tuple(per))
