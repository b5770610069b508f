"""The Markdown diagnosis report: ``render(analysis, out)``.

Sections, in this order: header, verdict, scoreboard, where the step time goes, what removing the
dominant cause buys, the job (grouping, alignment, stragglers; several ranks only), largest gaps,
kernels/collectives/launches, where the GPU time went (:mod:`traceread.render.gputime`), per-step table,
what to do next, method notes. Names are shortened and escaped (see :mod:`traceread.render.names`);
nothing from the trace other than device names, kernel/op names and path-scrubbed Python frames is shown.
"""

from __future__ import annotations

from typing import IO, Any, cast

import numpy as np
import pandas as pd

from traceread import causes
from traceread.analysis import Analysis
from traceread.analysis.scope import analysis_scope
from traceread.config import Thresholds
from traceread.metrics.copies import MOVEMENT_ONLY
from traceread.printable import printable
from traceread.render import advice, gputime, jobsection, jsonout, notes
from traceread.render.fmt import ViewerClock, bar, dur, ms, other_lanes, pct, table
from traceread.render.names import ShortNames, md_code, md_name, md_text
from traceread.vocabulary import BUSY_PARTS, CAPTURE_BOUNDARY, GAP_CLASSES, PARTS, UNCLASSIFIED, part_col

TOP_KERNELS = 10  # rows of the kernel table a reader scans; the JSON has all of them
MFU_CONVENTION = "6·N·tokens per optimizer step / (step time · GPUs · dense peak)"
MAX_STEP_ROWS = 30  # per-step rows per rank/GPU before the table stops being read
MAX_STEP_SECTIONS = 8  # rank/GPU pairs given a per-step table


def render(analysis: Analysis, out: IO[str], verbose: bool = False) -> None:
    out.write(to_markdown(analysis, verbose=verbose))


def to_markdown(a: Analysis, verbose: bool = False) -> str:
    """The report; ``verbose`` adds the appendix of every threshold in force (the JSON always has them)."""
    sections = [_header(a), _verdict(a), _scoreboard(a), _where(a), _removal(a), jobsection.section(a.job),
                _gaps(a), _kernels(a), gputime.section(a), _per_step(a), _next(a), _method(a),
                _thresholds_appendix(a) if verbose else ""]
    # Names are escaped where they are formatted; this catches any other text from the trace.
    return printable("\n\n".join(s.rstrip() for s in sections if s) + "\n", layout=True)


def _label(a: Analysis, row: pd.Series | dict) -> str:
    return a.unit_label(int(row["trace"]), int(row["rank"]), int(row["device"]))


def _header(a: Analysis) -> str:
    lines = ["# traceread diagnosis", ""]
    rows = []
    for t in a.traces:
        devs = ", ".join(f"GPU {d['id']}: {md_text(d['name'] or 'unknown device')}" for d in t.devices) or "none"
        ranks = ", ".join(str(r) for r in t.ranks) or "?"
        ws = f" of {t.world_size}" if t.world_size else ""
        rows.append([md_code(t.name), md_text(f"{t.format} ({t.generation})"), devs, ranks + ws])
    lines.append(table(["Trace", "Format", "Devices", "Ranks"], rows))
    s = a.steps
    if len(s):
        per_unit = s.groupby(["trace", "rank", "device"]).size()
        n_steps = int(s["step"].nunique())
        warm = sorted(int(x) for x in s.loc[s["warmup"], "step"].unique())
        outl = sorted(int(x) for x in s.loc[s["outlier"] & ~s["warmup"], "step"].unique())
        excl = []
        if warm:
            excl.append("warmup " + ", ".join(map(str, warm)))
        if outl:
            excl.append("outlier " + ", ".join(map(str, outl)))
        sources = ", ".join(sorted({t.step_source for t in a.traces}))
        pairs = f"{len(per_unit)} rank/GPU pair" + ("s" if len(per_unit) != 1 else "")
        lines += ["", f"- Steps: {n_steps - len(warm) - len(outl)} analysed of {n_steps} "
                  f"({md_text(sources)}; {pairs}); excluded: "
                  f"{'; '.join(excl) if excl else 'none'}."]
        for t in a.traces:
            ts = s[s["trace"] == t.index]
            if len(ts):
                lo, hi = int(ts["start_ns"].min()), int(ts["end_ns"].max())
                clock = _clock(t)
                lines.append(f"- Window{(' of ' + md_code(t.name)) if len(a.traces) > 1 else ''}: "
                             f"{clock(lo)} to {clock(hi)} ({ms(hi - lo)}); times here are {clock.meaning} "
                             f"(the JSON keeps ns in the {t.time_base} time base).")
    for t in a.traces:
        if t.truncated:
            lines.append(f"- **Truncated**: {md_code(t.name)} ended early; the events before the cut were analysed.")
    for f in a.failures:
        lines.append(f"- **Not analysed**: {md_code(f.path.rsplit('/', 1)[-1])}: {md_text(f.problem)}")
    return "\n".join(lines)


def _clock(t) -> ViewerClock:
    return ViewerClock(t.format, t.start_ns)


def _verdict(a: Analysis) -> str:
    if a.dominant_cause == "no-gpu-activity":
        why = a.refusal or "no launch call either: was the capture CPU-only (`ProfilerActivity.CUDA` not enabled)?"
        if MOVEMENT_ONLY in why:  # copies and memsets are there: the GPU computed nothing
            return "## Verdict\n\nNothing to diagnose on a GPU: " + md_text(why)
        return ("## Verdict\n\nNo GPU activity in the trace (no kernels, copies or memsets): nothing to "
                "diagnose on a GPU. What is missing: " + md_text(why))
    if a.steps.empty:
        return "## Verdict\n\nNo steps could be analysed; see the method notes."
    text = advice.verdict(a.dominant_cause, a.dominant_cost_share, a.dominant_evidence)
    if a.second_cause and a.second_cost_share >= a.cfg.report_second_min_share:
        text += (f" Next largest: {a.second_cause}, {a.second_cost_share:.0%} of step time "
                 f"({advice.meaning(a.second_cause)}).")
    total = int(a.attribution["step_ns"].sum()) if len(a.attribution) else 0
    edge = int(a.attribution[part_col(CAPTURE_BOUNDARY)].sum()) if total else 0
    if edge:
        whole = "over 99%" if 0.995 <= edge / total < 1 else f"{edge / total:.0%}"
        text += (f" Shares here are of the captured step time: {whole} of step time lies at the "
                 "capture's edges (capture-boundary, not a cause; see the notes).")
    scope = analysis_scope(a)  # which units the verdict sums (trace, job or all inputs)
    said = md_text("This verdict is " + scope.text(lambda _: "NAMEMARK") + ".").replace("NAMEMARK", md_code(scope.name))
    return "## Verdict\n\n" + md_text(text) + "\n\n" + said


def _scoreboard(a: Analysis) -> str:
    head = "## Scoreboard\n\n"
    m = a.mfu
    if m is None:
        return head + md_text(a.mfu_hint or "MFU not computed.")
    rows = [["MFU", pct(m.mfu)], ["HFU", pct(m.hfu)],
            ["Achieved TFLOP/s per GPU", f"{m.tflops_per_gpu:.1f}" if m.tflops_per_gpu else "n/a"],
            ["Headroom to 50% MFU", f"{100 * float(m.headroom_to_50):.1f} points"],
            ["Optimizer-step time (median)", ms(m.step_time_ns) if m.step_time_ns else "n/a"]]
    if m.tokens_per_s:
        rows.append(["Tokens/s", f"{float(m.tokens_per_s):,.0f}"])
    if m.mfu_with_attention is not None:
        rows.append(["MFU incl. attention FLOPs (PaLM convention)", pct(m.mfu_with_attention)])
    if m.mbu is not None:
        rows.append(["Memory-bandwidth utilization", pct(m.mbu)])
    for key, v in m.inputs.items():
        if isinstance(v, dict):
            if v.get("value") is None:
                continue
            val = v["value"]
            val = f"{val:,}" if isinstance(val, int) else f"{val:.4g}" if isinstance(val, float) else val
            text = f"{val} ({v.get('source', '')})"
        else:
            text = str(v)
        rows.append([md_text("input: " + key.replace("_", " ")), md_text(text)])
    out = head + table(["Figure", "Value"], rows, "lr")
    if m.formula:
        out += "\n\n" + md_text(m.formula)
    for w in notes.texts(m.warnings):
        out += f"\n\n- **Warning**: {md_text(w)}"
    return out


def _share_rows(attr: pd.DataFrame) -> list[tuple[str, int, float]]:
    total = attr[[part_col(p) for p in PARTS]].sum()
    step_ns = float(attr["step_ns"].sum()) or 1.0
    return [(p, int(total[part_col(p)]), float(total[part_col(p)]) / step_ns) for p in PARTS]


def _where(a: Analysis) -> str:
    if a.attribution.empty:
        return ""
    lines = ["## Where the step time goes", ""]
    # Unclassified busy time is shown only when some kernel had no class (most traces have none).
    rows = [[md_text(causes.get(p).part_label), ms(ns), pct(sh), bar(sh)]
            for p, ns, sh in _share_rows(a.attribution) if ns or p != UNCLASSIFIED]
    total_ns = int(a.attribution["step_ns"].sum())
    rows.append(["**total**", ms(total_ns), pct(1.0 if total_ns else 0.0), ""])
    lines.append(table(["Part of step time", "Time", "Share", "Share bar"], rows, "lrrl"))
    if len(a.attribution) > 1:
        lines += ["", "Per rank and GPU:", ""]
        # The last column is each rank/GPU's own verdict, by the rule that gives the run's.
        headers = ["Rank / GPU", "Median step", "Busy", "Idle"] + list(GAP_CLASSES) + ["Verdict of the rank/GPU"]
        steady = a.steady_steps()
        # Medians of every unit at once (a mask per row would be quadratic in the number of GPUs).
        medians = (steady["end_ns"] - steady["start_ns"]).astype(np.float64).groupby(
            [steady["trace"], steady["rank"], steady["device"]]).median().to_dict() if len(steady) else {}
        rows = []
        for (_, r), own in zip(a.attribution.iterrows(), a.findings.unit_verdicts(), strict=True):
            med = float(medians.get((r["trace"], r["rank"], r["device"]), 0.0))
            step_ns = float(r["step_ns"]) or 1.0
            busy = sum(r[part_col(p)] for p in BUSY_PARTS) / step_ns
            shares = {c: r[part_col(c)] / step_ns for c in GAP_CLASSES}
            rows.append([md_text(_label(a, r)), ms(med), pct(busy), pct(1 - busy)]
                        + [pct(shares[c]) for c in GAP_CLASSES] + [f"{own.cause} {bar(own.share, 10)}"])
        lines.append(table(headers, rows, "lrrr" + "r" * len(GAP_CLASSES) + "l"))
    return "\n".join(lines)


def _removal(a: Analysis) -> str:
    if a.whatif is not None:  # the replay's prediction per fix replaces the upper bound
        from traceread.render.whatif import section

        return section(a)
    head = "## What removing the dominant cause would buy\n\n"
    r = a.removal
    if r is None:
        if a.dominant_cause == "memory-bound":
            return head + ("The dominant cost is busy time, not idle time: the gain from fusion depends on "
                           "how much faster the fused kernels run, which a trace cannot bound.")
        if a.dominant_cause == "healthy":
            return head + "Idle time is already small; the remaining headroom is inside the kernels."
        return ""
    text = (f"Without its {r.cause} idle time the median step would drop from {ms(r.step_time_ns)} to "
            f"{ms(r.step_time_without_ns)}")
    if r.speedup:
        text += f" ({r.speedup:.2f}x faster)"
    text += ", an upper bound: nothing else moves closer."
    if r.mfu_without is not None:
        text += f" MFU would rise from {pct(r.mfu)} to at most {pct(r.mfu_without)}."
    return head + md_text(text)


def _gaps(a: Analysis) -> str:
    g = a.gaps
    if g.empty:
        return ""
    # Gaps under the smallest judged gap are counted but never listed (a short trace would list 1 ns ones).
    largest = a.findings.largest_gaps()
    top = largest.rows  # "Other lanes" shows X_frac
    clocks = {t.index: _clock(t) for t in a.traces}
    rows = []
    for _, r in top.iterrows():
        clock = clocks.get(int(r["trace"]), ViewerClock("kineto", 0))
        rows.append([clock(r["start_ns"]), dur(r["dur_ns"]), md_text(_label(a, r)), str(int(r["step"])),
                     f"**{r['class']}**", md_text(str(r["evidence"])), other_lanes(r)])
    meanings = sorted({c.meaning for c in clocks.values()})
    where = meanings[0] if len(meanings) == 1 else "as each trace's viewer shows it (" + "; ".join(meanings) + ")"
    short = largest.unlisted  # said only when it shortens the table
    skipped = f" ({short:,} under {dur(a.cfg.min_judged_gap_ns)}, the smallest judged gap, not listed)" if short else ""
    return (f"## Largest gaps\n\nThe {len(top)} longest of {len(g):,} compute-idle gaps{skipped}; start is {where}.\n\n"
            + table(["Start", "Duration", "Rank / GPU", "Step", "Class", "Evidence", "Other lanes"], rows,
                    "rrlrlll"))


def _col(df: pd.DataFrame, *names: str) -> str | None:
    return next((n for n in names if n in df.columns), None)


def _kernels(a: Analysis) -> str:
    parts = []
    k = a.kernels
    name_c, total_c = _col(k, "name", "kernel"), _col(k, "total_ns", "gpu_ns", "time_ns")
    if len(k) and name_c and total_c:
        cls_c, cnt_c = _col(k, "class", "kernel_class", "cls"), _col(k, "count", "calls", "n")
        inputs = int(k["trace"].nunique()) if "trace" in k.columns else 1
        if inputs > 1 and cnt_c:
            # Several inputs (ranks): one row per kernel, summed, with the number of inputs it ran in,
            # instead of the same collective kernel once per rank.
            keys = [name_c] + ([cls_c] if cls_c else [])
            k = k.groupby(keys, sort=False, observed=True).agg(
                **{cnt_c: (cnt_c, "sum"), total_c: (total_c, "sum"), "inputs": ("trace", "nunique")}).reset_index()
        top = k.nlargest(TOP_KERNELS, total_c, keep="first")
        all_ns = float(k[total_c].sum()) or 1.0
        short = ShortNames(k[name_c].astype(str), shown=top[name_c].astype(str))  # distinct kernels stay distinct rows
        rows = [[md_name(r[name_c], short=short), md_text(r[cls_c]) if cls_c else "", f"{int(r[cnt_c]):,}" if cnt_c else "",
                 ms(r[total_c]), dur(r[total_c] / max(int(r[cnt_c]), 1)) if cnt_c else "", pct(r[total_c] / all_ns)]
                + ([f"{int(r['inputs'])} of {inputs}"] if "inputs" in top.columns else [])
                for _, r in top.iterrows()]
        many = "inputs" in top.columns
        parts.append("### Top kernels by GPU time\n\n"
                     + (f"Summed over the {inputs} inputs; 'Inputs' counts those it ran in.\n\n" if many else "")
                     + table(["Kernel", "Class", "Count", "Total", "Mean", "Share"] + (["Inputs"] if many else []),
                             rows, "llrrrr" + ("r" if many else "")))
    c = a.collectives
    if len(c) and "trace" in c.columns and len(c.columns) > 1:
        # Columns the trace did not record (message size, group) stay out rather than sit empty.
        cols = [x for x in c.columns if x != "trace"]
        cells = [[_cell(x, r[x]) for x in cols] for _, r in c.iterrows()]
        keep = [i for i in range(len(cols)) if any(row[i] for row in cells)]
        cols, rows = [cols[i] for i in keep], [[row[i] for i in keep] for row in cells]
        headers = [md_text(x.removesuffix("_ns").replace("_", " ")) for x in cols]
        if len(a.traces) > 1:
            headers.insert(0, "Trace")
            for row, (_, r) in zip(rows, c.iterrows(), strict=True):
                row.insert(0, md_code(a.traces[int(r["trace"])].name))
        parts.append("### Collectives\n\n" + table(headers, rows))
    if a.launch_stats is not None:
        rows = [[md_text(key.removesuffix("_ns").replace("launch_bound", "launch-bound").replace("_", " ")),
                 _stat(key, v)]
                for key, v in jsonout.launch_stats_record(a.launch_stats).items() if key != "trace"]
        one = a.launch_stats.trace  # several inputs: every figure is of one of them
        scope = "" if one is None else f"Of {md_code(a.traces[one].name)}, gaps and kernels alike.\n\n"
        parts.append("### Launch statistics\n\n" + scope + table(["Statistic", "Value"], rows, "lr"))
    return "## Kernels, collectives and launches\n\n" + "\n\n".join(parts) if parts else ""


def _stat(key: str, v: Any) -> str:
    if key.endswith("_ns"):
        return dur(float(v))
    if key.endswith("_share"):
        return pct(float(v))
    return f"{v:,}" if isinstance(v, (int, np.integer)) else md_text(str(v))


def _cell(col: str, v: Any) -> str:
    if v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and np.isnan(v)):
        return ""
    if col.endswith("_ns"):
        return ms(float(v))
    if col.endswith("bytes"):
        return f"{float(v) / 2**20:,.2f} MiB"
    if col.endswith(("_frac", "share")) and isinstance(v, (int, float, np.floating)):
        return pct(float(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):,.3g}"
    return md_text(str(v)) if col != "name" else md_name(str(v))


def _per_step(a: Analysis) -> str:
    s = a.steps
    if s["step"].nunique() < 2 if len(s) else True:
        return ""
    lines = ["## Per step"]
    groups = cast("list[tuple[tuple[int, int, int], pd.DataFrame]]", list(s.groupby(["trace", "rank", "device"], sort=True)))
    if len(groups) > MAX_STEP_SECTIONS:
        # Many ranks: show the ones that lose the most time; the JSON has every step.
        groups.sort(key=lambda kv: -float(kv[1]["idle_ns"].sum()) / max(float((kv[1]["end_ns"] - kv[1][
            "start_ns"]).sum()), 1.0))
        lines += ["", f"The {MAX_STEP_SECTIONS} of {len(groups)} rank/GPU pairs with the most idle time; "
                  "every step is in the JSON."]
        groups = sorted(groups[:MAX_STEP_SECTIONS], key=lambda kv: kv[0])
    for (ti, rank, dev), g in groups:
        g = g.sort_values("start_ns")
        rows = []
        for _, r in g.head(MAX_STEP_ROWS).iterrows():
            step_ns = int(r["end_ns"] - r["start_ns"])
            idle = {c: int(r[part_col(c)]) for c in GAP_CLASSES}
            top = max(idle, key=idle.__getitem__)
            flag = "warmup" if r["warmup"] else ("outlier" if r["outlier"] else "")
            cause = f"{top} ({pct(idle[top] / step_ns if step_ns else 0, 0)})" if idle[top] else "none"
            rows.append([str(int(r["step"])), ms(step_ns), pct(r["busy_ns"] / step_ns if step_ns else 0),
                         ms(r["idle_ns"]), cause, flag])
        if s.groupby(["trace", "rank", "device"]).ngroups > 1:
            lines += ["", f"### {md_text(a.unit_label(int(ti), int(rank), int(dev)))}"]
        lines += ["", table(["Step", "Step time", "Busy", "Idle", "Largest idle class", "Flag"], rows, "rrrrll")]
        if len(g) > MAX_STEP_ROWS:
            lines += ["", f"The first {MAX_STEP_ROWS} of {len(g)} steps; every step is in the JSON."]
    return "\n".join(lines)


def _next(a: Analysis) -> str:
    if a.steps.empty:
        return ""
    lines = ["## What to do next", "", f"**{advice.title(a.dominant_cause)}** ({pct(a.dominant_cost_share, 0)} "
             "of step time), in this order:", ""]
    lines += [f"{i}. {lever}" for i, lever in enumerate(advice.levers(a.dominant_cause, a.dominant_evidence), 1)]
    if a.second_cause and a.second_cost_share >= a.cfg.report_second_min_share:
        lines += ["", f"Then **{advice.title(a.second_cause)}** ({pct(a.second_cost_share, 0)} of step time):", ""]
        lines += [f"{i}. {lever}" for i, lever in enumerate(advice.levers(a.second_cause), 1)]
    lines += ["", "Fix one cause at a time and re-measure: the next trace shows what became dominant."]
    return "\n".join(lines)


def _method(a: Analysis) -> str:
    lines = ["## Method notes", ""]
    sources = sorted({t.step_source for t in a.traces})
    lines.append(f"- Steps from: {md_text(', '.join(sources))}. Warmup steps are excluded from medians; "
                 f"outliers (over {a.cfg.outlier_step_factor}x the median step) are kept in the attribution "
                 "and left out of medians.")
    lines.append("- Step time is split into busy time (the union of compute kernels, compute-bound: GEMM, "
                 "attention, convolution; memory-bound: elementwise, reductions, normalization, Triton and the other "
                 "named classes; unclassified: kernels no pattern names, from which no lever is drawn) and idle "
                 "gaps of compute, each gap "
                 "classified by what ran beside it; the parts sum to 100%.")
    if a.mfu is not None:
        lines.append(f"- MFU convention: {md_text(MFU_CONVENTION)}.")
    else:
        lines.append(f"- {md_text(a.mfu_hint)}.".replace("..", "."))
    lines += [f"- {md_text(t)}" for t in notes.texts(a.notes)]
    lines += [f"- Not computed: {md_text(u)}" for u in a.unavailable]
    lines += [f"- Input not read: {md_code(f.path.rsplit('/', 1)[-1])}: {md_text(f.problem)}" for f in a.failures]
    lines.append(f"- {_thresholds_line(a)}")
    return "\n".join(lines)


def _overridden(a: Analysis) -> list[str]:
    """The thresholds that differ from their defaults, in the order ``Thresholds.describe()`` lists them."""
    defaults = Thresholds()
    return [d["name"] for d in Thresholds.describe() if getattr(a.cfg, d["name"]) != getattr(defaults, d["name"])]


def _thresholds_line(a: Analysis) -> str:
    """One line naming the overridden thresholds (the full table is the ``--verbose`` appendix)."""
    changed = _overridden(a)
    text = "thresholds: the defaults (`traceread analyze --verbose` lists them)"
    if changed:
        text += ", except: " + ", ".join(md_code(f"{n}={getattr(a.cfg, n)}") for n in changed)
    return text + "."


def _thresholds_appendix(a: Analysis) -> str:
    defaults = Thresholds()
    rows = [[md_code(d["name"]), md_text(str(getattr(a.cfg, d["name"]))) +
             (" (default " + md_text(str(d["default"])) + ")" if getattr(a.cfg, d["name"]) != getattr(
                 defaults, d["name"]) else ""), md_text(d["unit"])] for d in Thresholds.describe()]
    return ("## Appendix: thresholds in force\n\nOverride with `--set name=value` or `--config`.\n\n"
            + table(["Threshold", "Value", "Unit"], rows, "lrl"))
