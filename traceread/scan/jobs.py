"""Jobs of a scan: traceread.ranks groups the traces and analyses each job; this module only wires.

Grouping (rank identities -> jobs, captures, missing and duplicate ranks) and the job analysis
(clock alignment, stragglers) live in :mod:`traceread.ranks`, shared with ``analyze``. Here the
results become ``jobs/<job>.json``/``.md`` and the index rows; the GPU time lost per cause is the
sum of the member traces' figures.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

import pandas as pd

from traceread import __version__
from traceread.atomic import atomic_open
from traceread.scan.jobinputs import JobInputsFinder
from traceread.scan.whatifcols import job_whatif
from traceread.scan.work import SAFE_CHARS, Outcome, Settings
from traceread.vocabulary import GAP_CLASSES, PARTS, part_col

JOB_SCHEMA_VERSION = "1.2"


def safe_name(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name.replace(os.sep, "__").replace("/", "__")).strip("._")
    return s or "job"


def _ranks_text(ranks: list[int], world: int | None) -> str:
    shown = ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "")
    return f"{shown} of {world}" if world else shown or "?"


def _missing_text(group: dict[str, Any]) -> str:
    missing = group.get("missing_rank_count", len(group.get("missing_ranks", [])))
    dups = len(group.get("duplicate_ranks", []))
    parts = ([f"{missing:,} missing"] if missing else []) + ([f"{dups} claimed twice"] if dups else [])
    return f" ({', '.join(parts)})" if parts else ""


def trace_index_row(o: Outcome, job: str) -> dict[str, Any]:
    r = {k: v for k, v in o.row.items() if k != "units"}
    r.update(trace_id=o.trace_id, job=job, link_md=f"traces/{o.trace_id}.md", link_json=f"traces/{o.trace_id}.json",
             ranks_text=_ranks_text(list(r.get("ranks") or []), r.get("world_size")))
    return r


def _aggregate(members: list[Outcome], cfg: Any) -> dict[str, Any]:
    """The job's lost GPU time per cause, its dominant cause and share (the analyze verdict over its units)."""
    from traceread.attribution import pooled_verdict

    rows = [u for o in members for u in o.row.get("units", [])]
    sums = {p: sum(u.get(part_col(p), 0) for u in rows) for p in PARTS}  # plain sums: most jobs have one trace
    lost = {c: int(sums[c]) for c in GAP_CLASSES}
    total = int(sum(u["step_ns"] for u in rows))
    if len(members) == 1:
        dom, share = members[0].row["dominant_cause"], members[0].row["dominant_cost_share"]
    else:
        units = pd.DataFrame(rows, columns=["rank", "device", "step_ns"] + [part_col(p) for p in PARTS])
        run = pooled_verdict(units, cfg, [o.row["dominant_cause"] for o in members])  # analyze's, same units
        dom, share = run.cause, run.share
    medians = [o.row["median_step_ns"] for o in members if o.row.get("median_step_ns") is not None]
    mfus = [o.row["mfu"] for o in members if o.row.get("mfu") is not None]
    shares = {p: (float(sums[p]) / total) if total else 0.0 for p in PARTS}
    return {"lost_ns": lost, "gpu_ns": total, "shares": shares, "idle_share": (sum(lost.values()) / total) if total else None,
            "dominant_cause": dom, "dominant_cost_share": float(share),
            "median_step_ns": max(medians) if medians else None,
            "steps": max((o.row.get("steps", 0) for o in members), default=0),
            "mfu": min(mfus) if mfus else None,
            "gpus": sorted({g for o in members for g in o.row.get("gpus", [])}),
            "devices": len(rows), "whatif": job_whatif([o.row for o in members])}


def job_name(g: Any) -> str:
    """The job's directory relative to the scan root, then the group's name (capture index included)."""
    return f"{g.directory}/{g.name}" if g.directory else g.name


def job_file(name: str, directory: str, used: set[str]) -> str:
    """``jobs/<file>.json`` stem of job ``name``, the same whichever other directories the scan holds.

    The safe name alone (``/`` -> ``__``, other odd characters -> ``_``) could map jobs of two
    directories to one file; where it is lossy (a ``__`` of its own, or a directory with odd
    characters) a short hash of the exact job name is appended instead of a counter that would
    depend on which other jobs exist. ``used``: the files of this directory's jobs so far (two
    stems of one directory that differ only in odd characters get ``-2``, ``-3`` in group order).
    """
    base = safe_name(name)
    leaf = name[len(directory) + 1:] if directory else name
    if "__" in name or "__" in safe_name(leaf) or (directory and safe_name(directory) != directory.replace("/", "__")) \
            or len(base) > SAFE_CHARS:
        if len(base) > SAFE_CHARS:  # a deep tree: jobs/<name> must stay a valid file name (NAME_MAX)
            base = base[:SAFE_CHARS // 2] + "~" + base[-(SAFE_CHARS // 2 - 1):]
        base += "-" + hashlib.blake2b(name.encode("utf-8", "surrogateescape"), digest_size=3).hexdigest()
    file, n = base, 1
    while file in used:
        n += 1
        file = f"{base}-{n}"
    used.add(file)
    return file


def build_directory_jobs(done: list[Outcome], settings: Settings, finder: JobInputsFinder
                         ) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """Group the analysed traces of one directory into jobs and analyse each (every grouping key holds the
    directory, so a directory's jobs need nothing from other directories: the scan builds them as soon
    as its files are done). Returns the job documents (``jobs/<job>.json``), trace id -> job name, and
    job file -> its Markdown."""
    from traceread import ranks
    from traceread.render.jobsection import group_markdown, job_record

    by_rel = {o.rel: o for o in done}
    identities: list[ranks.RankIdentity] = []
    summary_of: dict[tuple[str, int], ranks.RankSummary] = {}
    for o in done:
        assert o.identities is not None and o.summaries is not None  # read first: Cache.load_ranks
        identities += o.identities
        summary_of.update((s.identity.key, s) for s in o.summaries)
    groups = ranks.group_jobs(identities, settings.rank_pattern, settings.cfg)
    jobs: list[dict[str, Any]] = []
    job_of: dict[str, str] = {}
    used: set[str] = set()
    md: dict[str, str] = {}
    for g in groups:
        members = [by_rel[p] for p in g.paths if p in by_rel]
        name = job_name(g)
        file = job_file(name, g.directory, used)
        report = ranks.analyze_job([summary_of[m.key] for m in g.members if m.key in summary_of], settings.cfg,
                                   group=g)
        doc: dict[str, Any] = {"schema_version": JOB_SCHEMA_VERSION,
                               "tool": {"name": "traceread", "version": __version__}, "job": name, "file": file}
        doc["traces"] = [{"trace_id": o.trace_id, "path": o.rel, "link": f"../traces/{o.trace_id}.md",
                          "ranks": o.row.get("ranks", []), "job_inputs": finder.sources.get(o.rel)}
                         for o in members]
        doc.update(_aggregate(members, settings.cfg))
        rep = job_record(report)
        rep.pop("name")
        doc.update(rep)
        doc["world_size"] = g.world_size
        if report.step.median_job_step_ns:
            doc["median_step_ns"] = int(report.step.median_job_step_ns)  # on aligned windows
        for o in members:
            job_of.setdefault(o.trace_id, name)
        jobs.append(doc)
        md[file] = job_markdown(doc, group_markdown(g, report, level=2))
    for o in done:  # a trace whose file holds no rank identity (no events) is its own job
        if o.trace_id not in job_of:
            job_of[o.trace_id] = o.rel
    return jobs, job_of, md


_ROW_KEYS = ("job", "file", "world_size", "gpus", "devices", "steps", "median_step_ns", "gpu_ns", "idle_share",
             "dominant_cause", "dominant_cost_share", "mfu", "lost_ns", "shares", "verdict", "matched_collectives",
             "whatif")


def job_row(j: dict[str, Any]) -> dict[str, Any]:
    """The job's row in index.json: the headline figures, not the per-collective detail."""
    r = {k: j.get(k) for k in _ROW_KEYS}
    group = j.get("group") or {}
    ranks = sorted({x for t in j["traces"] for x in t["ranks"]})
    strag = [{k: s.get(k) for k in ("rank", "waited_on_ns", "last_arrivals", "cause", "stage", "attributed_wait_ns")}
             for s in j.get("stragglers", [])]
    r.update(link_md=f"jobs/{j['file']}.md", link_json=f"jobs/{j['file']}.json",
             trace_ids=[t["trace_id"] for t in j["traces"]],
             ranks_text=_ranks_text(ranks, j.get("world_size")) + _missing_text(group),
             missing_ranks=group.get("missing_rank_count", len(group.get("missing_ranks", []))), duplicate_ranks=len(group.get("duplicate_ranks", [])),
             rule=group.get("rule"), stragglers=strag, waiting_for=_waiting_text(j),
             stage_imbalance=j.get("stage_imbalance"), prediction=j.get("prediction"),
             stragglers_text="; ".join(f"rank {s['rank']} ({s['waited_on_ns'] / 1e6:,.2f} ms waited on, {s['cause']})"
                                       for s in strag))
    return r


def _waiting_text(j: dict[str, Any]) -> str | None:
    """Whom the job's other ranks wait for, in a few words (None when it is not one rank, stage or a moving one)."""
    wf = j.get("waiting_for") or {}
    kind = wf.get("kind")
    if kind == "rank":
        return f"rank {wf['rank']}"
    if kind == "stage":
        return f"pipeline stage {wf['stage']} (rebalance layers across stages)"
    if kind == "moving":
        return "no single rank: the slowest rank changes from step to step"
    return None


def job_markdown(j: dict[str, Any], section: str) -> str:
    """``jobs/<job>.md``: where the job's GPU time goes, its grouping, alignment and stragglers, its traces."""
    from traceread.render.names import md_text

    lost = sorted(((v, c) for c, v in j["lost_ns"].items() if v > 0), reverse=True)
    lines = [f"# Job {md_text(j['job'])}", "",
             f"{len(j['traces'])} trace(s), {j['devices']} GPU(s). Verdict for the job (its traces together, as "
             f"`traceread analyze` gives it): **{j['dominant_cause']}**, "
             f"{100 * j['dominant_cost_share']:.1f}% of step time"
             + (f"; MFU {100 * j['mfu']:.1f}% (lowest of its ranks)" if j.get("mfu") is not None else "") + "."]
    if lost:
        lines += ["", "GPU time lost (idle GPU-seconds summed over the job's GPUs): "
                  + ", ".join(f"{c} {v / 1e9:,.3f} s" for v, c in lost) + "."]
    lines += ["", section, "", "## Traces", ""]
    lines += [f"- [{md_text(t['path'])}]({t['link']}): rank(s) {', '.join(map(str, t['ranks'])) or '?'}"
              + (f"; job inputs from {md_text(t['job_inputs'])}" if t.get("job_inputs") else "")
              for t in j["traces"]]
    return "\n".join(lines) + "\n"


def write_jobs(out: str, jobs: list[dict[str, Any]], md: dict[str, str]) -> None:
    from traceread.render.json_text import dumps
    from traceread.scan.owner import record

    record(out, [f"jobs/{j['file']}{x}" for j in jobs for x in (".json", ".md")])  # before they exist
    for j in jobs:
        base = os.path.join(out, "jobs", j["file"])
        with atomic_open(base + ".json", "wb") as fh:
            fh.write(dumps(j) + b"\n")
        with atomic_open(base + ".md", "w") as fh:
            fh.write(md[j["file"]])
