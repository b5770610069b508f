"""Markdown of the job section (``Analysis.job``): grouping with evidence, alignment, stragglers.

Shared by the ``analyze`` report and the scan's ``jobs/<job>.md`` (``group_markdown``).
"""

from __future__ import annotations

from typing import Any

from traceread.ranks.grouping import JobGroup, missing_text, ranges
from traceread.ranks.job import JobReport
from traceread.ranks.section import JobSection
from traceread.render import notes as note_words
from traceread.render.fmt import dur, pct, plural, table
from traceread.render.names import md_code, md_text


def _opt_dur(ns: Any) -> str:
    return "n/a" if ns is None else dur(ns)


def section(job: JobSection | None) -> str:
    """The ``## Job`` section of the analyze report, or '' when there is none."""
    if job is None:
        return ""
    lines = ["## Job", "", md_text(job.summary[0].upper() + job.summary[1:]) + "."]
    if job.separate:
        rows = [(md_code(g.name), md_text(g.rule), str(len(g.members)), ranges(g.ranks) or "none",
                 str(g.world_size or "?"), missing_text(g.missing_ranks, g.missing_count) or "-",
                 ", ".join(str(r) for r, _ in g.duplicate_ranks) or "-") for g in job.groups]
        lines += ["", table(["Job / capture", "Rule", "Traces", "Ranks", "World", "Missing", "Duplicate"], rows,
                            "llrlrll")]
    for g, rep in zip(job.groups, job.reports, strict=True):
        lines += ["", group_markdown(g, rep, level=3)]
    return "\n".join(lines)


def _opt(v: Any) -> str:
    return "-" if v is None else str(v)


def _stages_markdown(rep: JobReport, h: str) -> list[str]:
    """Pipeline stages read from the p2p transfers, the slow stage and whom the others wait for."""
    out: list[str] = []
    wf = rep.waiting_for
    if rep.stages:
        ev = rep.stages.evidence
        out += ["", f"{h}# Pipeline stages", "", md_text(ev[0].upper() + ev[1:])
                + ": " + "; ".join(f"stage {k}: ranks {ranges(r)}" for k, r in enumerate(rep.stages.ranks)) + "."]
    imb = rep.stage_imbalance
    if imb:
        out += ["", f"Stage {imb.stage} is the slowest: compute {dur(imb.compute_per_step_ns)} per step against "
                    f"{dur(imb.others_compute_per_step_ns)} on the other stages' median rank ({imb.excess:+.0%}); "
                    f"{pct(imb.attributed_share)} of the other ranks' waiting in collectives is for it. "
                    f"Fix: {md_text(imb.fix)}."]
    pred = rep.prediction
    said = [] if pred is None else [
        f"{label} {dur(ns)}" for ns, label in ((pred.straggler_free_step_ns, "without the straggler"),
                                              (pred.balanced_stages_step_ns, "with balanced stages")) if ns is not None]
    if said and pred is not None:
        out += ["", "Predicted job step " + "; ".join(said)
                + (f" ({md_text(str(pred.method))})" if pred.method else "") + "."]
    if wf is not None and wf.kind == "moving":
        steps = wf.step_culprits or {}
        out += ["", "Most waiting per step is for: " + ", ".join(f"step {k}: rank {v}" for k, v in steps.items())
                + " (no single straggler)."]
    return out


def group_markdown(g: JobGroup, rep: JobReport | None, level: int = 2) -> str:
    """One job (capture): its grouping evidence, then alignment and stragglers when it has a report."""
    h = "#" * level
    lines = [f"{h} {md_code(g.name)}", ""]
    lines += [f"- {md_text(e)}" for e in g.evidence]
    if rep is None:
        return "\n".join(lines)
    lines += ["", f"**{md_text(rep.verdict[0].upper() + rep.verdict[1:])}.**"]
    if rep.figures:
        lines += ["", "Evidence:"] + [f"- {md_text(x)}" for x in rep.figures]
    st = rep.step
    if st.median_job_step_ns:
        lines += ["", f"Job step time on aligned windows: {dur(st.median_job_step_ns)} median over "
                      f"{plural(st.steps, 'step')} (from raw timestamps: {_opt_dur(st.median_unaligned_job_step_ns)}); "
                      f"the slowest rank's own step: {_opt_dur(st.median_max_rank_step_ns)}; ranks end "
                      f"within {_opt_dur(st.median_end_spread_ns)} of each other."]
    lines += _stages_markdown(rep, h)
    if rep.stragglers:
        rows: list[tuple[str, ...]] = [(str(s.rank), _opt(s.stage), dur(s.attributed_wait_ns),
                 pct(s.attributed_share), pct(s.share_of_others_time),
                 f"{s.last_arrivals} / {s.matched_collectives}", dur(s.median_lateness_ns),
                 md_text(s.cause)) for s in rep.stragglers]
        lines += ["", f"{h}# Stragglers", "", table(["Rank", "Stage", "Others waited", "Of their waiting",
                                                     "Of their time", "Last arrivals", "Median lateness", "Why"],
                                                    rows, "rrrrrrrl")]
        for s in rep.stragglers:
            lines += ["", f"Rank {s.rank}: {md_text(s.reason)}."]
            lines += [f"- {md_text(e)}" for e in s.evidence]
    by_rank = {r.rank: r for r in rep.ranks}
    rows = []
    for a in rep.alignment:
        r = by_rank.get(a.rank)
        w = r.waits if r is not None else None
        rows.append((str(a.rank),) + ((_opt(r.stage if r is not None else None),) if rep.stages else ())
                    + (md_code(r.trace if r is not None else ""),
                       "n/a" if a.offset_ns is None else f"{a.offset_ns / 1e6:+,.3f} ms",
                       _opt_dur(a.uncertainty_ns), _opt_dur(a.end_spread_ns), str(a.matched),
                       str(w.last_arrivals) if w is not None else "", _opt_dur(w.waited_on_ns if w is not None else None),
                       md_text(a.method)))
    if rows:
        lines += ["", f"{h}# Clock alignment and arrivals", "",
                  f"{rep.matched_collectives} collectives matched across ranks. Offset: the rank's clock minus "
                  "the reference rank's; spread: the error of one collective's aligned times.", "",
                  table(["Rank"] + (["Stage"] if rep.stages else []) + ["Trace", "Offset", "Uncertainty", "Spread",
                         "Matched", "Last", "Others waited", "Method"], rows, ("rr" if rep.stages else "r") + "lrrrrrrl")]
    lines += [f"- {md_text(note_words.text(n))}" for n in rep.notes] + [f"- Not computed: {md_text(u)}" for u in rep.unavailable]
    return "\n".join(lines)


def job_record(rep: JobReport) -> dict[str, Any]:
    """``rep.to_dict()`` with its notes worded (the ``job`` object of the JSON report, ``jobs/<job>.json``)."""
    return {**rep.to_dict(), "notes": [note_words.text(n) for n in rep.notes]}


def section_record(sec: JobSection) -> dict[str, Any]:
    """``sec.to_dict()`` with each job's notes worded."""
    return {"summary": sec.summary, "separate": sec.separate,
            "groups": [{**g.to_dict(), "report": job_record(r) if r is not None else None}
                       for g, r in zip(sec.groups, sec.reports, strict=True)]}
