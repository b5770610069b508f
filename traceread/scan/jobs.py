"""Jobs of a scan: traceread.ranks groups the traces and analyses each job; this module only wires.

Grouping (rank identities -> jobs, captures, missing and duplicate ranks) and the job analysis
(clock alignment, stragglers) live in :mod:`traceread.ranks`, shared with ``analyze``. Here the
results become ``jobs/<job>.json``/``.md`` and the index rows; the GPU time lost per cause is the
sum of the member traces' figures.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pandas as pd

from traceread.analysis import GAP_CLASSES, PARTS, part_col
from traceread.atomic import atomic_open
from traceread.scan.jobinputs import JobInputsFinder
from traceread.scan.work import Outcome, Settings

JOB_SCHEMA_VERSION = "1.0"


def safe_name(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace(os.sep, "__").replace("/", "__")).strip("._")
    return s or "job"


def _ranks_text(ranks: list[int], world: int | None) -> str:
    shown = ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "")
    return f"{shown} of {world}" if world else shown or "?"


def trace_index_row(o: Outcome, job: str) -> dict[str, Any]:
    r = {k: v for k, v in o.row.items() if k != "units"}
    r.update(trace_id=o.trace_id, job=job, link_md=f"traces/{o.trace_id}.md", link_json=f"traces/{o.trace_id}.json",
             ranks_text=_ranks_text(list(r.get("ranks") or []), r.get("world_size")))
    return r


def _aggregate(members: list[Outcome], cfg: Any) -> dict[str, Any]:
    """The job's lost GPU time per cause, its dominant cause and share (the analyze verdict over its units)."""
    from traceread._pipeline import overall_dominant

    units = pd.DataFrame([u for o in members for u in o.row.get("units", [])],
                         columns=["rank", "device", "step_ns"] + [part_col(p) for p in PARTS])
    lost = {c: int(units[part_col(c)].sum()) for c in GAP_CLASSES}
    total = int(units["step_ns"].sum())
    if len(members) == 1:
        dom, share = members[0].row["dominant_cause"], members[0].row["dominant_cost_share"]
    else:
        dom, share, _, _ = overall_dominant(units, [], cfg)
    medians = [o.row["median_step_ns"] for o in members if o.row.get("median_step_ns") is not None]
    mfus = [o.row["mfu"] for o in members if o.row.get("mfu") is not None]
    shares = {p: (float(units[part_col(p)].sum()) / total) if total else 0.0 for p in PARTS}
    return {"lost_ns": lost, "gpu_ns": total, "shares": shares, "idle_share": (sum(lost.values()) / total) if total else None,
            "dominant_cause": dom, "dominant_cost_share": float(share),
            "median_step_ns": max(medians) if medians else None,
            "steps": max((o.row.get("steps", 0) for o in members), default=0),
            "mfu": min(mfus) if mfus else None,
            "gpus": sorted({g for o in members for g in o.row.get("gpus", [])}),
            "devices": int(len(units))}


def build_jobs(done: list[Outcome], settings: Settings, finder: JobInputsFinder) -> tuple[list[dict[str, Any]],
                                                                                          dict[str, str]]:
    """Group the analysed traces into jobs; returns the job documents and trace id -> job name."""
    by_rel = {o.rel: o for o in done}
    groups = _groups(done, settings)
    jobs, job_of, used = [], {}, set()
    for name, rels, extra in groups:
        members = [by_rel[r] for r in rels if r in by_rel]
        if not members:
            continue
        file = safe_name(name)
        n = 1
        while file in used:
            n += 1
            file = f"{safe_name(name)}-{n}"
        used.add(file)
        doc: dict[str, Any] = {"schema_version": JOB_SCHEMA_VERSION, "job": name, "file": file}
        doc["traces"] = [{"trace_id": o.trace_id, "path": o.rel, "link": f"../traces/{o.trace_id}.md",
                          "ranks": o.row.get("ranks", []), "job_inputs": finder.sources.get(o.rel)}
                         for o in members]
        doc.update(_aggregate(members, settings.cfg))
        doc.update(extra)
        for o in members:
            job_of.setdefault(o.trace_id, name)
        jobs.append(doc)
    return jobs, job_of


def _groups(done: list[Outcome], settings: Settings) -> list[tuple[str, list[str], dict[str, Any]]]:
    """(job name, member rels, job-report fields) per job, from traceread.ranks."""
    try:
        from traceread import ranks
    except ImportError:  # pre-merge: one job per trace until traceread.ranks is in
        return [(os.path.splitext(o.rel)[0], [o.rel], {"grouping": "one job per trace (traceread.ranks missing)"})
                for o in done]
    raise NotImplementedError(ranks)


def job_row(j: dict[str, Any]) -> dict[str, Any]:
    r = {k: v for k, v in j.items() if k not in ("traces", "schema_version")}
    ranks = sorted({x for t in j["traces"] for x in t["ranks"]})
    r.update(link_md=f"jobs/{j['file']}.md", link_json=f"jobs/{j['file']}.json", trace_ids=[t["trace_id"] for t in j["traces"]],
             ranks_text=_ranks_text(ranks, j.get("world_size")))
    return r


def job_markdown(j: dict[str, Any]) -> str:
    from traceread.render.names import md_text

    lines = [f"# Job {md_text(j['job'])}", "", f"Dominant cause: **{j['dominant_cause']}**, "
             f"{100 * j['dominant_cost_share']:.1f}% of step time.", "", "## Traces", ""]
    lines += [f"- [{md_text(t['path'])}]({t['link']}) ranks {t['ranks']}" for t in j["traces"]]
    return "\n".join(lines) + "\n"


def write_jobs(out: str, jobs: list[dict[str, Any]]) -> None:
    from traceread.cli.output import dumps

    for j in jobs:
        base = os.path.join(out, "jobs", j["file"])
        with atomic_open(base + ".json", "wb") as fh:
            fh.write(dumps(j) + b"\n")
        with atomic_open(base + ".md", "w") as fh:
            fh.write(job_markdown(j))
