"""Markdown and JSON of a :class:`~traceread.diff.compare.Diff` (renderers only render).

The JSON shape is fixed by ``traceread/data/diff.schema.json`` (``schema_version``). Times are ns;
"per step" figures are means per profiled step (tables) or per analysed step and device
(attribution). Kernel names are full in JSON and shortened in Markdown.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from importlib import resources
from typing import IO, Any, cast

import numpy as np
import pandas as pd

from traceread.diff.compare import DIFF_SCHEMA_VERSION, Diff
from traceread.diff.side import SideFacts
from traceread.diff.whatif import markdown as whatif_markdown
from traceread.diff.whatif import record as whatif_record
from traceread.printable import printable
from traceread.render.fmt import dur, pct, plural, table
from traceread.render.json_text import plain
from traceread.render.names import ShortNames, md_code, md_name, md_text

TOP_KERNELS = 12
TOP_HOST_OPS = 12
KERNEL_NAME_LEN = 110


def schema() -> dict[str, Any]:
    """The JSON Schema of the diff (draft 2020-12)."""
    return json.loads(resources.files("traceread").joinpath("data/diff.schema.json").read_text("utf-8"))


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    if df is None or df.empty:
        return []
    cols = list(df.columns)
    return [{c: plain(v) for c, v in zip(cols, row, strict=True)}
            for row in df.itertuples(index=False, name=None)]


def _side(s: SideFacts) -> dict[str, Any]:
    v = s.step_values
    mfu = s.mfu or {}
    return {
        "paths": list(s.paths), "formats": list(s.formats), "captures": s.captures, "gpu_models": list(s.gpu_models),
        "world_size": s.world_size, "step_source": list(s.step_sources),
        "dominant_cause": s.dominant_cause, "verdict_scope": _scope_kind(s), "dominant_cost_share": s.dominant_cost_share,
        "median_step_ns": plain(s.median_step_ns),
        "spread": {"min_ns": plain(v.min()) if len(v) else None, "p25_ns": plain(np.percentile(v, 25)) if len(v) else None,
                   "p75_ns": plain(np.percentile(v, 75)) if len(v) else None, "max_ns": plain(v.max()) if len(v) else None,
                   "cv": plain(float(np.std(v) / np.mean(v))) if len(v) > 1 and np.mean(v) > 0 else None},
        "steps": [int(x) for x in v],
        "steady_steps": int(len(v)), "profiled_steps": s.steps_total,
        "all_steps": _records(s.all_steps),
        "shares": {k: plain(x) for k, x in s.shares.items()},
        "mfu": plain(mfu.get("mfu")), "hfu": plain(mfu.get("hfu")),
        "tokens_per_step": plain(s.tokens_per_step),
        "tokens_per_s": plain(float(np.median(s.throughput_values))) if s.throughput_values is not None
        and len(s.throughput_values) else None,
        "recorded_flops_per_step": plain(s.flops_per_step),
    }


def to_json(d: Diff) -> dict[str, Any]:
    """The diff as plain data (``diff.schema.json``)."""
    from traceread import __version__

    t = d.test
    return {
        "schema_version": DIFF_SCHEMA_VERSION,
        "tool": {"name": "traceread", "version": __version__},
        "verdict": d.verdict, "reason": d.reason, "warnings": list(d.warnings),
        "metric": d.metric,
        "before": _side(d.before), "after": _side(d.after),
        "step_time_ratio": plain(d.step_time_ratio), "throughput_ratio": plain(d.throughput_ratio),
        "change_pct": plain(d.change_pct),
        "test": None if t is None else {k: ([plain(x) for x in v] if isinstance(v, list) else plain(v))
                                        for k, v in t.items()},
        "shift": d.shift, "first_fix": d.first_fix, "offsetting": d.offsetting,
        "comparability": d.comparability,
        "attribution": _records(d.attribution),
        "kernels": _records(d.kernels),
        "host_ops": _records(d.host_ops),
        "collectives": _records(d.collectives),
        "ranks": _records(d.ranks),
        "thresholds": {k: v for k, v in d.cfg.to_dict().items() if k.startswith("diff_")},
        "notes": list(d.notes),
        "whatif": whatif_record(d.whatif),
    }


def render_json(d: Diff, out: IO[bytes]) -> None:
    from traceread.render.json_text import dumps

    out.write(dumps(to_json(d)) + b"\n")


def _ratio(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"x{x:.3f}"


def _delta(x: float) -> str:
    return ("+" if x > 0 else "") + dur(x) if x else "0"


def _cnt(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.2f}".rstrip("0").rstrip(".")


def _scope_kind(s: SideFacts) -> str:
    """What a side's verdict speaks for (``traceread.analysis.scope``): one trace file, or one job."""
    return "trace" if len(s.paths) == 1 else "job"


def _scope_text(s: SideFacts) -> str:
    if _scope_kind(s) == "trace":
        return f"the trace {md_code(os.path.basename(s.paths[0]))}"
    pooled = f", {s.captures} captures pooled" if s.captures > 1 else ""
    return f"the job of {plural(len(s.paths), 'trace')} ({plural(s.ranks, 'rank')}{pooled})"


def _md_steps(d: Diff) -> list[str]:
    b, a = d.before, d.after
    rows = []
    for s in (b, a):
        v = s.step_values
        spread = f"{dur(np.percentile(v, 25))} - {dur(np.percentile(v, 75))}" if len(v) else "n/a"
        mfu = f"{pct(s.mfu.get('mfu'))} / {pct(s.mfu.get('hfu'))}" if s.mfu else "n/a"
        tput = f"{np.median(s.throughput_values):,.0f}" if s.throughput_values is not None and len(
            s.throughput_values) else "n/a"
        rows.append([s.label, str(len(v)), dur(s.median_step_ns) if s.median_step_ns else "n/a", spread,
                     tput, mfu, md_text(s.dominant_cause), pct(s.dominant_cost_share, 0)])
    out = ["## Step time", "",
           table(["side", "steady steps", "median step", "p25 - p75", "tokens/s", "MFU / HFU", "dominant cause", "cost"],
                 rows, "lrrrrrlr"), ""]
    out.append(f"The dominant cause before is for {_scope_text(b)}, after for {_scope_text(a)}: the verdict "
               "`traceread analyze` gives the same files.")
    out.append("")
    for s in (b, a):
        if len(s.step_values):
            out.append(f"Per-step times {s.label}: " + ", ".join(dur(x) for x in s.step_values[:40]) +
                       (" ..." if len(s.step_values) > 40 else "") + ".")
    out.append("")
    if d.test:
        t = d.test
        out += [f"Test: {t['name']} on the {t['values']}: U = {t['statistic']:.1f}, p = {t['p_value']:.3g}; "
                f"{t['confidence']:.0%} {t['interval_name']}: {t['interval'][0]:.3f} - {t['interval'][1]:.3f} "
                f"(blocks of {t['block_length'][0]}/{t['block_length'][1]} steps, {t['samples']} resamples, "
                f"seed {t['seed']}).", ""]
    return out


def _md_attribution(d: Diff) -> list[str]:
    rows = []
    for r in cast("Iterable[Any]", d.attribution.itertuples(index=False)):  # columns untyped
        if not (r.ns_per_step_before or r.ns_per_step_after):
            continue
        rel = "new" if r.relative_delta is None and r.ns_per_step_after else pct(r.relative_delta, 0)
        rows.append([f"{r.kind}: {r.part}", dur(r.ns_per_step_before), pct(r.share_before),
                     dur(r.ns_per_step_after), pct(r.share_after), _delta(r.delta_ns_per_step), rel])
    return ["## Where the step time went (mean per step and GPU)", "",
            table(["part", "before", "share", "after", "share", "delta", "relative"], rows, "lrrrrrr"), "",
            d.shift, "", f"First fix for the new dominant cause: {md_text(d.first_fix)}", ""]


def _md_kernels(d: Diff) -> list[str]:
    k = d.kernels
    if k.empty:
        return ["## Kernels", "", "No kernels on either side.", ""]
    rows = []
    shown = k.head(TOP_KERNELS)
    short = ShortNames(shown["name"], max_len=KERNEL_NAME_LEN)  # distinct kernels read apart
    for r in shown.itertuples(index=False):
        by = "" if r.matched_by in ("name", "") else f" (matched by {r.matched_by})"
        rows.append([md_name(r.name, short=short) + by, r.status, f"{_cnt(r.count_before)} -> {_cnt(r.count_after)}",
                     f"{dur(r.mean_ns_before) if r.count_before else '-'} -> "
                     f"{dur(r.mean_ns_after) if r.count_after else '-'}",
                     _delta(r.delta_ns_per_step), _delta(r.delta_from_count_ns), _delta(r.delta_from_duration_ns)])
    new = int((k["status"] == "new").sum())
    gone = int((k["status"] == "vanished").sum())
    keyed = int((k["matched_by"] == "key").sum())
    out = ["## Kernels that changed most (GPU time per step)", "",
           table(["kernel", "status", "calls per step", "mean duration", "delta per step", "from calls",
                  "from duration"], rows, "llrrrrr"), "",
           f"{new} new and {gone} vanished kernel name(s); {keyed} matched across spellings by the "
           "spelling-neutral key.", ""]
    return out


def _md_host_ops(d: Diff) -> list[str]:
    h = d.host_ops
    shown = h[h["status"] != "same count"].head(TOP_HOST_OPS)
    if shown.empty:
        return ["## Host ops", "", "The same host ops with the same counts on both sides.", ""]
    rows = [[md_name(r.name, 60), r.status, f"{r.count_before} -> {r.count_after}",
             f"{dur(r.total_ns_before)} -> {dur(r.total_ns_after)}"] for r in shown.itertuples(index=False)]
    return ["## Host ops added, removed and changed (whole traces)", "",
            table(["op", "status", "count", "total time"], rows, "llrr"), ""]


def _md_collectives(d: Diff) -> list[str]:
    c = d.collectives
    if c.empty:
        return []
    rows = [[md_text(r.collective), f"{_cnt(r.count_per_step_before)} -> {_cnt(r.count_per_step_after)}",
             f"{dur(r.ns_per_step_before)} -> {dur(r.ns_per_step_after)}",
             f"{dur(r.exposed_ns_per_step_before)} -> {dur(r.exposed_ns_per_step_after)}"]
            for r in cast("Iterable[Any]", c.itertuples(index=False))]
    return ["## Collectives (per step)", "", table(["collective", "calls", "time", "exposed"], rows, "lrrr"), ""]


def _md_ranks(d: Diff) -> list[str]:
    r = d.ranks
    if r is None or r.empty:
        return []
    rows = []
    for x in cast("Iterable[Any]", r.itertuples(index=False)):
        flag = {(True, False): f"straggler gone (was: {x.straggler_cause_before})",
                (False, True): f"straggler appeared ({x.straggler_cause_after})",
                (True, True): f"straggler ({x.straggler_cause_before} -> {x.straggler_cause_after})"}.get(
            (bool(x.straggler_before), bool(x.straggler_after)), "")
        rows.append([str(int(x.rank)), dur(x.step_ns_before) if pd.notna(x.step_ns_before) else "-",
                     dur(x.step_ns_after) if pd.notna(x.step_ns_after) else "-",
                     _delta(x.delta_busy_ns) if pd.notna(x.delta_busy_ns) else "-", md_text(flag)])
    return ["## Ranks (mean per step)", "", table(["rank", "step before", "step after", "busy delta", ""], rows,
                                                  "rrrrl"), ""]


def render_markdown(d: Diff, out: IO[str], title: str = "traceread diff") -> None:
    b, a = d.before, d.after
    names = lambda s: ", ".join(f"`{p.rsplit('/', 1)[-1]}`" for p in s.paths)  # noqa: E731
    lines = [f"# {title}", "", f"Before: {names(b)}. After: {names(a)}.", "",
             f"## Verdict: {d.verdict}", "", md_text(d.reason[0].upper() + d.reason[1:]) + ".", "",
             f"Step time x{d.step_time_ratio:.3f} (median after / before)." if d.step_time_ratio else "", ""]
    if d.throughput_ratio is not None:
        lines += [f"Throughput {_ratio(d.throughput_ratio)} tokens/s.", ""]
    if d.warnings:
        lines += ["Warnings:", ""] + [f"- {md_text(w)}" for w in d.warnings] + [""]
    if d.whatif is not None and d.whatif.sentence:
        lines += [md_text(d.whatif.sentence), ""]
    lines += _md_steps(d) + _md_attribution(d) + whatif_markdown(d.whatif) + _md_kernels(d) + _md_host_ops(d) + \
        _md_collectives(d) + _md_ranks(d)
    w = d.comparability["work_per_step"]
    lines += ["## Method", "",
              f"- Comparability: GPU {md_text(', '.join(b.gpu_models) or 'unknown')} / "
              f"{md_text(', '.join(a.gpu_models) or 'unknown')}; "
              f"world size {b.world_size or 'unknown'} / {a.world_size or 'unknown'}; steps from "
              f"{', '.join(b.step_sources)} / {', '.join(a.step_sources)}; work per step: {md_text(w['why'])}.",
              f"- Verdict rule: significant when p < {d.cfg.diff_alpha:g}, the interval excludes 1 and the median "
              f"moved by at least {d.cfg.diff_min_change:.0%}; inconclusive under {d.cfg.diff_min_steps} steady "
              "steps per side.",
              "- Kernels and host ops cover the whole traces, divided by each side's profiled steps; kernels are "
              "matched by full name, then by a key without `void`, parameter lists, casts and whitespace "
              "(template arguments kept)."]
    lines += [f"- {md_text(n)}" for n in d.notes]
    out.write(printable("\n".join(x for x in lines if x is not None).replace("\n\n\n", "\n\n") + "\n", layout=True))


def scan_to_json(j: Any) -> dict[str, Any]:
    """Two scan outputs diffed job by job (``jobs``: one diff object per job, as for two traces)."""
    from traceread import __version__

    jobs = [{"job": name, **to_json(d)} for name, d in j.diffs]
    worst = [x for x in jobs if x["verdict"] == j.verdict]
    return {"schema_version": DIFF_SCHEMA_VERSION, "tool": {"name": "traceread", "version": __version__},
            "verdict": j.verdict, "reason": f"the worst verdict of {len(jobs)} job(s): {worst[0]['job']}: "
                                            f"{worst[0]['reason']}",
            "jobs": jobs, "only_before": list(j.only_before), "only_after": list(j.only_after)}


def render_scan_markdown(j: Any, out: IO[str]) -> None:
    rows = [[md_text(name), d.verdict, _ratio(d.step_time_ratio), md_text(d.before.dominant_cause),
             md_text(d.after.dominant_cause)] for name, d in j.diffs]
    lines = ["# traceread diff: scan outputs, job by job", "", f"Overall: {j.verdict} (the worst job's verdict).", "",
             table(["job", "verdict", "step time", "dominant before", "dominant after"], rows, "llrll"), ""]
    checked = [f"- {md_text(name)}: {md_text(d.whatif.sentence)}" for name, d in j.diffs
               if d.whatif is not None and d.whatif.sentence]
    lines += checked + ([""] if checked else [])
    for label, names in (("before", j.only_before), ("after", j.only_after)):
        if names:
            lines += [f"Only in the {label} scan: " + ", ".join(md_text(n) for n in names) + ".", ""]
    out.write(printable("\n".join(lines) + "\n", layout=True))
    for name, d in j.diffs:
        render_markdown(d, out, title=f"Job {md_text(name)}")
