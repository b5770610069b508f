"""The report's compact section of ``traceread kernels``' tables: "Where the GPU time went".

Per input (the first :data:`MAX_BLOCKS` that have any row; the others counted): the top launching ops by
GPU time, the top ``nn.Module`` frames when the trace records them, copies and memsets by kind with bytes
and GB/s, the top annotation/NVTX ranges, the top host API calls, then a pointer to the collectives table
above (with its bus bandwidth) and to ``traceread kernels`` for every row. The rows are made in the
analysis (``Analysis.tables``: :func:`traceread.metrics.compact.compact_tables`); this module only formats
them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceread.analysis import Analysis
from traceread.render.fmt import dur, pct, plural, table
from traceread.render.names import md_code, md_name, md_text

if TYPE_CHECKING:
    from traceread.metrics.compact import CompactTables

TITLE = "## Where the GPU time went"
MAX_BLOCKS = 4  # inputs given a block; ``traceread kernels`` on each of the others gives its tables


def _head(what: str, shown: int, rows: int, *says: str) -> str:
    """``what (top 5 of 23; says...):``, the parentheses left out when there is nothing to say."""
    bits = ([f"top {shown} of {rows}"] if rows > shown else []) + list(says)
    return f"{what} ({'; '.join(bits)}):" if bits else f"{what}:"


def _bytes(n: Any) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "n/a"
    n = float(n)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{int(n)} B"


def _number(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):,.2f}"


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as dicts (a handful: built from the columns, not by pandas' per-row records)."""
    cols = {c: df[c].tolist() for c in df.columns}
    return [{c: v[i] for c, v in cols.items()} for i in range(len(df))]


def _ops(t: CompactTables) -> str:
    df = t.frames["ops"]
    if df.empty:
        return ""
    rows = [[md_name(str(r["op"])), f"{int(r['kernels']):,}", f"{int(r['calls']):,}", dur(r["total_ns"]),
             pct(r["share"])] for r in _records(df)]
    return (_head("GPU time by launching op", len(df), t.rows["ops"], "share: of all kernel time") + "\n\n"
            + table(["Op", "Kernels", "Op calls", "GPU time", "Share"], rows, "lrrrr"))


def _modules(t: CompactTables) -> str:
    df = t.frames["modules"]
    if df.empty:
        return ""
    rows = [[md_text(str(r["module"])), str(int(r["depth"])), f"{int(r['calls']):,}", dur(r["gpu_ns"]),
             dur(r["self_ns"]), pct(r["share"])] for r in _records(df)]
    return (_head("GPU time by nn.Module", len(df), t.rows["modules"], "GPU time: launched inside it, its "
                  "children's too; self: where it is the innermost module") + "\n\n"
            + table(["Module", "Depth", "Calls", "GPU time", "Self", "Share"], rows, "lrrrrr"))


def _copies(t: CompactTables) -> str:
    df = t.frames["copies"]
    if df.empty:
        return ""
    several = len(df[["rank", "device"]].drop_duplicates()) > 1
    rows = [([f"{int(r['rank'])} / {int(r['device'])}"] if several else [])
            + [md_text(str(r["kind"])), md_text(str(r["host_memory"]) or "-"), f"{int(r['count']):,}",
               _bytes(r["bytes"]) if int(r["bytes_unknown"]) < int(r["count"]) else "n/a", dur(r["total_ns"]),
               _number(r["gbps"])] for r in _records(df)]
    head = (["Rank / GPU"] if several else []) + ["Kind", "Host memory", "Count", "Bytes", "Time", "GB/s"]
    return (_head("Copies and memsets by kind", len(df), t.rows["copies"], "GB/s: the recorded bytes over those "
                  "copies' time") + "\n\n" + table(head, rows, ("l" if several else "") + "llrrrr"))


def _ranges(t: CompactTables) -> str:
    df = t.frames["ranges"]
    if df.empty:
        return ""
    rows = [[md_name(str(r["range"])), f"{int(r['count']):,}", dur(r["total_ns"]), dur(r["mean_ns"]),
             pct(r["share"])] for r in _records(df)]
    return (_head("Annotation ranges", len(df), t.rows["ranges"], "share: of the trace's wall time; nested ranges, "
                  "and those of several threads or ranks, can add up past 100%") + "\n\n" + table(["Range", "Count", "Total", "Mean", "Share"], rows, "lrrrr"))


def _host_api(t: CompactTables) -> str:
    df = t.frames["host_api"]
    if df.empty:
        return ""
    rows = [[md_name(str(r["api"])), f"{int(r['count']):,}", dur(r["total_ns"]), dur(r["median_ns"]),
             dur(r["p90_ns"])] for r in _records(df)]
    return (_head("Host API calls", len(df), t.rows["host_api"]) + "\n\n"
            + table(["API", "Calls", "Total", "Median", "p90"], rows, "lrrrr"))


def section(a: Analysis) -> str:
    """The section, or '' when no input has a row in any of the tables."""
    blocks = []
    for i, t in enumerate(a.tables):
        if t is None:
            continue
        parts = [p for p in (_ops(t), _modules(t), _copies(t), _ranges(t), _host_api(t)) if p]
        if parts:
            blocks.append((i, parts))
    if not blocks:
        return ""
    several = len(a.traces) > 1
    has_coll = "trace" in a.collectives.columns and len(a.collectives)
    lines = [TITLE]
    for i, parts in blocks[:MAX_BLOCKS]:
        name = a.traces[i].name
        if several:
            lines += ["", f"### {md_code(name)}"]
        lines += ["", "\n\n".join(parts)]
        if has_coll and (a.collectives["trace"] == i).any():
            lines += ["", "Collectives, with their bus bandwidth: the Collectives table above."]
        lines += ["", f"Every row: {md_code(f'traceread kernels {name}')} (`--csv DIR` writes each table)."]
    left = len(blocks) - MAX_BLOCKS
    if left > 0:
        lines += ["", f"{plural(left, 'other input')} not shown here: `traceread kernels` on each gives its tables."]
    return "\n".join(lines)
