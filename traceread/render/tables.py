"""``traceread kernels``' tables as text and as CSV files (one per table, written atomically).

Reads a :class:`~traceread.metrics.tables.KernelTables`; every name from the trace is shortened for
the terminal (the CLI shows control characters escaped), and written in full to the CSV files.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from traceread.atomic import atomic_open
from traceread.errors import UsageError
from traceread.metrics.tables import TABLES, KernelTables
from traceread.printable import printable
from traceread.render.fmt import dur
from traceread.render.kernels import fixed_table
from traceread.render.names import ShortNames, shorten
from traceread.render.notes import text_or_empty

TITLES = {
    "ops": "GPU time by launching op (innermost op around the launch call)",
    "modules": "GPU time by nn.Module (gpu: kernels launched inside it; self: not inside a child)",
    "ranges": "annotation ranges (NVTX / record_function; share of wall time)",
    "copies": "GPU copies and memsets by GPU and kind (GB/s: bytes over the copies' total time)",
    "host_api": "CUDA/HIP API calls (percentiles: numpy linear)",
    "collectives": "collectives (bus bandwidth: nccl-tests convention)",
    "mem_bandwidth": "achieved bandwidth of memory-bound kernels (input bytes recorded: a lower bound)",
}
NAME = 48  # characters of a name shown in a table


def _num(x: float, fmt: str = "{:,.1f}") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "n/a"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{int(n)} B"


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


Row = Callable[[Any], list[str]]
_LAYOUT: dict[str, tuple[Sequence[str], str, Row]] = {
    "ops": (["share", "total", "kernels", "calls", "mean", "op"], "rrrrrl",
            lambda r: [_pct(r.share), dur(r.total_ns), str(r.kernels), str(r.calls), dur(r.mean_ns),
                       shorten(r.op, NAME)]),
    "modules": (["share", "gpu", "self", "kernels", "calls", "depth", "module"], "rrrrrrl",
                lambda r: [_pct(r.share), dur(r.gpu_ns), dur(r.self_ns), str(r.kernels), str(r.calls), str(r.depth),
                           "  " * min(int(r.depth), 8) + shorten(r.module, NAME)]),
    "ranges": (["share", "total", "count", "mean", "median", "min", "max", "range"], "rrrrrrrl",
               lambda r: [_pct(r.share), dur(r.total_ns), str(r.count), dur(r.mean_ns), dur(r.median_ns),
                          dur(r.min_ns), dur(r.max_ns), shorten(r.range, NAME)]),
    "copies": (["rank", "gpu", "kind", "host memory", "count", "bytes", "total", "GB/s", "share"], "rrllrrrrr",
               lambda r: [str(r.rank), str(r.device), r.kind, r.host_memory or "-", str(r.count), _bytes(r.bytes),
                          dur(r.total_ns), _num(r.gbps, "{:,.2f}"), _pct(r.share)]),
    "host_api": (["share", "total", "calls", "mean", "median", "p90", "p99", "max", "role", "api"], "rrrrrrrrll",
                 lambda r: [_pct(r.share), dur(r.total_ns), str(r.count), dur(r.mean_ns), dur(r.median_ns),
                            dur(r.p90_ns), dur(r.p99_ns), dur(r.max_ns), r.role or "-", shorten(r.api, NAME)]),
    "collectives": (["collective", "group", "ranks", "count", "total", "exposed", "msg", "busbw GB/s"], "llrrrrrr",
                    lambda r: [r.collective, shorten(str(r.group_desc or r.group or "-"), 24), _num(r.group_size, "{:.0f}"),
                               str(r.count), dur(r.total_ns), _pct(r.exposed_frac), _bytes(r.msg_bytes),
                               _num(r.busbw_gbps, "{:,.1f}")]),
    "mem_bandwidth": (["total", "kernels", "input bytes", "TB/s", "% peak", "class", "name"], "rrrrrll",
                      lambda r: [dur(r.total_ns), str(r.kernels), _bytes(r.input_bytes), _num(r.tbs, "{:,.2f}"),
                                 _pct(r.pct_of_peak), r._2, r.name]),
}


def render_tables(t: KernelTables, top: int = 20) -> str:
    """Every table, ``top`` rows each, with its note."""
    out: list[str] = []
    for name in TABLES:
        frame = t.frames[name]
        head, align, row = _LAYOUT[name]
        more = f" (top {top} of {len(frame)})" if len(frame) > top else ""
        out += ["", f"{TITLES[name]}{more}:"]
        if not frame.empty:
            shown = frame.head(top)
            if name == "mem_bandwidth":  # kernel names: shortened so that the shown ones stay apart
                short = ShortNames(frame["name"], shown=shown["name"])
                shown = shown.assign(name=[short(n) for n in shown["name"]])
            out.append(fixed_table(head, [row(r) for r in shown.itertuples()], align))
        note = text_or_empty(t.notes[name])
        if note:
            out.append(f"  {note}")
    return "\n".join(out).lstrip("\n")


def tables_dict(t: KernelTables) -> dict[str, Any]:
    """``{name: {"rows": [...], "note": str}}`` in :data:`TABLES` order (NaN stays NaN: the JSON writer makes it
    null)."""
    return {name: {"rows": t.frames[name].to_dict(orient="records"), "note": text_or_empty(t.notes[name])}
            for name in TABLES}


def write_csv(t: KernelTables, directory: str) -> list[str]:
    """One ``<table>.csv`` per table in ``directory`` (made if missing), each written atomically; returns
    the paths. An empty table is written with its header only (its note is in the JSON and the text)."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{directory}: --csv needs a directory, and this is a file")
    os.makedirs(directory, exist_ok=True)
    paths = []
    for name in TABLES:
        path = os.path.join(directory, f"{name}.csv")
        frame: pd.DataFrame = t.frames[name]
        with atomic_open(path, "wb") as fh:
            # control characters of trace names shown as \xNN, as every text output shows them
            fh.write(printable(frame.to_csv(index=False), layout=True).encode("utf-8"))
        paths.append(path)
    return paths
