"""Plain-text rendering of the scoreboard for the terminal (``traceread kernels``): a renderer of the
metrics layer's kernel report and roofline.

Only renders: every number comes from :class:`~traceread.metrics.kernels.KernelReport`. Kernel
names are shortened and path-scrubbed (the JSON keeps them whole).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, cast

from traceread.config import Thresholds
from traceread.metrics.kernels import KernelReport
from traceread.metrics.roofline import Roofline
from traceread.render.fmt import dur, plural
from traceread.render.names import ShortNames, shorten
from traceread.render.notes import text as note_words
from traceread.render.notes import texts as note_texts

_EMPTY_TAIL = re.compile(r"(, \[\])+\]$")  # scalar arguments record as [] dims: not worth a column


def fixed_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> str:
    """Columns padded to width; ``align`` holds ``l``/``r`` per column."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if a == "r" else c.ljust(w)
                         for c, w, a in zip(cells, widths, align, strict=True)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_kernel_report(report: KernelReport, top: int = 20) -> str:
    """The ``traceread kernels`` terminal output."""
    t = report.table
    if t.empty:
        return "no GPU kernels in this trace"
    out = [f"{plural(int(t['count'].sum()), 'kernel')}, {plural(len(t), 'distinct name')}, {dur(t['total_ns'].sum())} of GPU time",
           "", f"top {plural(min(top, len(t)), 'kernel')} by GPU time:"]
    shown = t.head(top)
    # Long templated names can shorten alike: keep what tells the shown ones apart (work bounded
    # by the rows shown: comparing every distinct name of a trace grows with their number squared).
    short = ShortNames(t["name"], shown=shown["name"])
    rows = [[f"{r.share:.1%}", dur(r.total_ns), str(r.count), dur(r.mean_ns), r._2, short(r.name)]
            for r in shown.itertuples()]
    out.append(fixed_table(["share", "total", "count", "mean", "class", "name"], rows, "rrrrll"))
    out += ["", "time by class:"]
    rows = [[r._1, f"{r.share:.1%}", dur(r.total_ns), str(r.count)] for r in cast("Iterable[Any]", report.classes.itertuples())]
    out.append(fixed_table(["class", "share", "total", "count"], rows, "lrrr"))
    if report.unknown:
        shown = ", ".join(shorten(n, 60) for n in report.unknown[:5])
        out += ["", f"{len(report.unknown)} kernel name(s) matched no class (add a [kernel_patterns] entry): "
                f"{shown}{' ...' if len(report.unknown) > 5 else ''}"]
    out += ["", *_launch_lines(report.launch)]
    if report.hints:
        out += ["", "hints:"] + [f"- {h['message']}" + (f" [{shorten(h['name'], 60)}]" if "name" in h else "")
                                 for h in report.hints]
    return "\n".join(out)


def _launch_lines(st: dict) -> list[str]:
    if not st.get("linked"):
        return ["launches: no kernel could be linked to its launch call (no correlation ids)"]
    lat = st["launch_latency_ns"]
    share = st.get("shorter_than_launch_share")
    lines = [f"launches: {st['linked']} of {plural(int(st['kernels']), 'kernel')} linked to their launch call",
             f"  shorter than their launch call: {st['shorter_than_launch']}"
             + (f" ({share:.0%})" if share is not None else "")
             + f"; median kernel {dur(st['median_kernel_ns'])}"
             + (f" vs launch call {dur(st['median_launch_call_ns'])}" if st.get("median_launch_call_ns") is not None
                else ""),
             f"  launch-to-start latency: p50 {dur(lat['p50'])}, p90 {dur(lat['p90'])}, p99 {dur(lat['p99'])}, "
             f"max {dur(lat['max'])}"]
    return lines


def render_roofline(r: Roofline, cfg: Thresholds, top: int = 10) -> str:
    """Heavy recorded matmul/attention ops against the ridge point."""
    heavy = r.heavy(cfg).head(top)
    if heavy.empty:
        return "roofline: " + ("; ".join(note_texts(r.notes)) or "no heavy matmul/attention ops")
    ridges = ", ".join(f"{p} {v:.0f}" for p, v in r.ridges.items())
    head = f"roofline ({r.gpu or 'unknown GPU'}; ridge FLOP/byte: {ridges or 'n/a'}):"
    rows = [[f"{x.share:.1%}", x.op, shorten(_EMPTY_TAIL.sub("]", str(x.input_dims)), 44), x.dtype, f"{x.intensity:,.0f}",
             f"{x.tflops:,.1f}", "n/a" if x.pct_of_peak != x.pct_of_peak else f"{x.pct_of_peak:.0%}",
             x.bound or "?"] for x in heavy.itertuples()]
    table = fixed_table(["share", "op", "input dims", "dtype", "FLOP/B", "TFLOP/s", "% peak", "bound"], rows,
                        "rlllrrrl")
    return "\n".join([head, table, *note_texts(r.notes)])


def roofline_dict(r: Roofline) -> dict[str, Any]:
    """The roofline as JSON data: its ops, GPU, ridge points and worded notes."""
    t = r.table.assign(input_dims=r.table["input_dims"].astype(str))
    return {"ops": t.to_dict(orient="records"), "gpu": r.gpu, "ridges": r.ridges,
            "notes": [note_words(n) for n in r.notes]}
