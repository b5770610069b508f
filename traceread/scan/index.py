"""``index.json`` / ``index.md`` and ``failures.md``: the fleet overview of one scan.

One row per job and one per trace, worst first by the GPU time their dominant cause costs (idle
GPU-seconds of that class summed over the GPUs), with links to the reports. Plain data in, plain
data and text out; the caller writes the files.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from traceread.render.fmt import plural, table
from traceread.render.names import md_text
from traceread.scan.whatifcols import best_text
from traceread.vocabulary import GAP_CLASSES

INDEX_SCHEMA_VERSION = "1.3"


def dominant_lost_ns(row: dict[str, Any]) -> int:
    """GPU time the row's dominant cause costs (0 for busy verdicts: healthy, memory-bound)."""
    return int(row["lost_ns"].get(row["dominant_cause"], 0)) if row.get("dominant_cause") in GAP_CLASSES else 0


def worst_first(rows: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (-dominant_lost_ns(r), -sum(r["lost_ns"].values()), r[name]))


def index_doc(*, jobs: list[dict[str, Any]], traces: list[dict[str, Any]], failures: list[dict[str, Any]],
              scan: dict[str, Any]) -> dict[str, Any]:
    """The index as plain JSON data (``traceread/data/index.schema.json``)."""
    from traceread import __version__

    for r in jobs + traces:
        r["dominant_lost_ns"] = dominant_lost_ns(r)
    return {
        "schema_version": INDEX_SCHEMA_VERSION,
        "tool": {"name": "traceread", "version": __version__},
        "scan": scan,
        "jobs": worst_first(jobs, "job"),
        "traces": worst_first(traces, "trace_id"),
        "failures": [f for f in failures if f["kind"] != "not-trace"],
        "not_traces": [f for f in failures if f["kind"] == "not-trace"],
    }


def _s(ns: int | None) -> str:
    return "" if ns is None else f"{ns / 1e9:,.3f}"


def _ms(ns: int | None) -> str:
    return "" if ns is None else f"{ns / 1e6:,.2f} ms"


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def _lost(row: dict[str, Any]) -> str:
    parts = sorted(((v, c) for c, v in row["lost_ns"].items() if v > 0), reverse=True)
    return ", ".join(f"{c} {v / 1e9:,.3f}" for v, c in parts[:3])


def index_markdown(doc: dict[str, Any], traces: Iterable[dict[str, Any]] | None = None) -> str:
    """index.md; ``traces``: the trace rows, worst first, when ``doc`` does not hold them (a scan writes
    them row by row)."""
    s = doc["scan"]
    lines = ["# traceread scan", "",
             f"{plural(s['traces_ok'], 'trace')} analysed in {plural(len(doc['jobs']), 'job')}; "
             f"{len(doc['failures'])} failed, {len(doc['not_traces'])} not traces, "
             f"{plural(sum(s['skipped'].values()), 'other file')} skipped "
             f"([failures](failures.md)). Sorted by the GPU time the dominant cause costs, worst first; "
             "GPU time lost = idle GPU-seconds of that class summed over the job's GPUs; best fix = the fix the "
             "dependency replay predicts to save most GPU time over the analysed window (docs/whatif.md). A job's "
             "verdict sums its traces' rank/GPU pairs (the verdict `traceread analyze` gives those traces "
             "together); a trace's verdict is that file's alone.", ""]
    if doc["jobs"]:
        lines += ["## Jobs", ""]
        rows = [[f"[{md_text(j['job'])}]({j['link_md']})", j["ranks_text"], md_text(", ".join(j["gpus"])),
                 str(j["steps"]), _ms(j["median_step_ns"]), _pct(j["idle_share"]),
                 f"**{j['dominant_cause']}** {_pct(j['dominant_cost_share'])}", _s(j["dominant_lost_ns"]),
                 _pct(j["mfu"]), md_text(_lost(j)), md_text(j.get("stragglers_text", "")), best_text(j)]
                for j in doc["jobs"]]
        lines.append(table(["Job", "Ranks", "GPU", "Steps", "Median step", "Idle", "Verdict of the job",
                            "Lost GPU-s", "MFU", "Lost GPU-s by cause", "Stragglers", "Best fix (GPU-s saved)"], rows,
                           "lllrrrlrrlll"))
    if doc["traces"] or (traces is not None and s["traces_ok"]):
        lines += ["", "## Traces", ""]
        rows = [[f"[{md_text(t['path'])}]({t['link_md']})", md_text(t["job"]), t["ranks_text"],
                 md_text(", ".join(t["gpus"])), str(t["steps"]), _ms(t["median_step_ns"]), _pct(t["idle_share"]),
                 f"**{t['dominant_cause']}** {_pct(t['dominant_cost_share'])}", _s(t["dominant_lost_ns"]),
                 _pct(t["mfu"]), best_text(t)] for t in (doc["traces"] if traces is None else traces)]
        lines.append(table(["Trace", "Job", "Rank/world", "GPU", "Steps", "Median step", "Idle", "Verdict of the trace",
                            "Lost GPU-s", "MFU", "Best fix (GPU-s saved)"], rows, "llllrrrlrrl"))
    return "\n".join(lines) + "\n"


def failures_markdown(doc: dict[str, Any]) -> str:
    lines = ["# traceread scan: files not analysed", ""]
    lines += ["## Failures", ""]
    lines += [f"- {md_text(f['path'])}: {md_text(f['problem'])}" for f in doc["failures"]] or ["None."]
    lines += ["", "## Not traces", "",
              "JSON or SQLite files that turned out not to be traces (no `traceEvents`, no Nsight Systems tables).", ""]
    lines += [f"- {md_text(f['path'])}: {md_text(f['problem'])}" for f in doc["not_traces"]] or ["None."]
    skipped = doc["scan"]["skipped"]
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- {what}: {n}" for what, n in sorted(skipped.items())]
    return "\n".join(lines) + "\n"
