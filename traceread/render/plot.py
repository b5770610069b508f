"""The timeline picture: ``render(analysis, path)`` writes a PNG, SVG, PDF or JPEG (by extension).

For the first rank/GPU, the median step and the worst step, one panel each; rows are the launching
CPU threads, the compute streams, the communication lane and copies; idle gaps of compute are shaded
by class across the panel. Time axis in ms from the step start. matplotlib is imported here only.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from traceread import schema
from traceread.analysis import Analysis
from traceread.atomic import atomic_open
from traceread.errors import UsageError
from traceread.host_calls import PROFILER_STEP_PREFIX
from traceread.render import timeline
from traceread.render.names import shorten
from traceread.vocabulary import GAP_CLASSES

CLASS_COLORS = {
    "launch-bound": "#e15759", "comm-bound": "#f28e2b", "data-starved": "#4e79a7",
    "pipeline-bubble": "#b07aa1", "sync-stall": "#edc948", "one-time-cost": "#9c9ede", "unattributed": "#bab0ac",
}
LANE_COLORS = {"runtime": "#59a14f", "host": "#c7d9c2", "compute": "#1f4e79", "comm": "#ff7f0e",
               "copy": "#76b7b2", "annotation": "#9c755f"}
# Extension -> matplotlib format, with the metadata that keeps the file reproducible (no software
# version or date); JPEG is written by Pillow (a matplotlib dependency), which takes no metadata.
PLOT_FORMATS: dict[str, tuple[str, dict | None]] = {
    "png": ("png", {"Software": None}), "svg": ("svg", {"Date": None}), "pdf": ("pdf", {"Date": None}),
    "jpg": ("jpeg", None), "jpeg": ("jpeg", None)}
PIXELS = 2000  # horizontal resolution the bars are merged to
LABEL_MIN_WIDTH = 0.08  # annotations wider than this fraction of the step get their name written on them
MAX_CPU_THREADS = 3


def _bars(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> list[tuple[float, float]]:
    """(x, width) in ms from ``lo``, clipped to the window, with bars closer than a pixel merged.

    A step holds tens of thousands of events; at ~1000 px per panel most are narrower than a pixel,
    and drawing them one by one costs seconds for no visible difference.
    """
    s = np.clip(np.asarray(start, dtype=np.int64), lo, hi)
    e = np.clip(np.asarray(end, dtype=np.int64), lo, hi)
    if not len(s):
        return []
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    px = max((hi - lo) // PIXELS, 1)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > e[:-1] + px
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    xs = (s[first] - lo) / 1e6
    ws = np.maximum((e[last] - s[first]) / 1e6, px / 1e6)
    return list(zip(xs.tolist(), ws.tolist(), strict=True))


def _rows(a: Analysis, w: pd.Series) -> list[tuple[str, str, pd.DataFrame]]:
    """(label, color key, events) per row, top to bottom."""
    t, rank, dev = int(w["trace"]), int(w["rank"]), int(w["device"])
    lo, hi = int(w["start_ns"]), int(w["end_ns"])
    host = timeline.events_in(a, t, rank, None, lo, hi, (schema.LANE_CPU_THREAD,))
    gpu = timeline.events_in(a, t, rank, dev, lo, hi, timeline.DEVICE_LANES)
    ann = timeline.events_in(a, t, rank, None, lo, hi, (schema.LANE_CPU_ANNOTATION,))
    ann = ann[~ann["name"].astype(str).str.startswith(PROFILER_STEP_PREFIX)
              & (ann["category"] != schema.CAT_TRACE_SPAN).to_numpy()]
    rows: list[tuple[str, str, pd.DataFrame]] = []
    if len(ann):
        rows.append(("CPU annotations", "annotation", ann))
    for i, tid in enumerate(timeline.launch_threads(host, MAX_CPU_THREADS)):
        th = host[host["tid"] == tid]
        rt = th["category"].isin([schema.CAT_RUNTIME, schema.CAT_DRIVER])
        rows.append((f"CPU thread {i}", "host", th[~rt]))
        rows.append(("", "runtime", th[rt]))  # launch calls drawn over the thread's ops
    comp = gpu[gpu["lane"] == schema.LANE_GPU_COMPUTE]
    for stream in sorted(int(s) for s in comp["stream"].unique()):
        rows.append((f"GPU {dev} stream {stream}", "compute", comp[comp["stream"] == stream]))
    if not len(comp):
        rows.append((f"GPU {dev} compute", "compute", comp))
    rows.append(("communication", "comm", gpu[gpu["lane"] == schema.LANE_GPU_COMM]))
    rows.append(("memcpy / memset", "copy", gpu[gpu["lane"].isin([schema.LANE_MEMCPY, schema.LANE_MEMSET])]))
    return rows


def _panel(ax, a: Analysis, w: pd.Series) -> set[str]:
    lo, hi = int(w["start_ns"]), int(w["end_ns"])
    rows = _rows(a, w)
    labels, y = [], 0
    for label, color, ev in rows:
        if label:
            y += 1
            labels.append((y, label))
        ax.broken_barh(_bars(ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(), lo, hi), (-y - 0.4, 0.8),
                       facecolors=LANE_COLORS[color], linewidth=0)
        if color in ("annotation", "host"):
            s = (np.maximum(ev["start_ns"].to_numpy(), lo) - lo) / 1e6
            d = (np.minimum(ev["end_ns"].to_numpy(), hi) - lo) / 1e6 - s
            wide = d >= LABEL_MIN_WIDTH * (hi - lo) / 1e6
            for x, w_, name in zip(s[wide], d[wide], ev["name"].astype(str).to_numpy()[wide], strict=True):
                ax.text(x + w_ / 2, -y, shorten(name, 40), ha="center", va="center", fontsize=7,
                        color="white" if color == "annotation" else "black", clip_on=True)
    gaps = timeline.gaps_in(a, int(w["trace"]), int(w["rank"]), int(w["device"]), lo, hi)
    seen = set()
    for cls in GAP_CLASSES:
        g = gaps[gaps["class"] == cls]
        if len(g):
            seen.add(cls)
            ax.broken_barh(_bars(g["start_ns"].to_numpy(), g["end_ns"].to_numpy(), lo, hi), (-y - 0.5, y),
                           facecolors=CLASS_COLORS[cls],
                           alpha=0.35, linewidth=0, zorder=0)
    ax.set_yticks([-v for v, _ in labels], [lab for _, lab in labels], fontsize=8)
    ax.set_ylim(-y - 0.6, -0.4)
    ax.set_xlim(0, (hi - lo) / 1e6)
    step_ns = hi - lo
    idle = float(gaps["dur_ns"].sum()) / step_ns if step_ns else 0.0
    ax.set_title(f"{a.unit_label(int(w['trace']), int(w['rank']), int(w['device']))}, step {int(w['step'])} "
                 f"({w['label']}): {step_ns / 1e6:.2f} ms, compute idle {idle:.0%}", fontsize=9, loc="left")
    ax.tick_params(axis="x", labelsize=8)
    return seen


def plot_format(path: str) -> str:
    """The picture format of ``path`` by its extension (none: PNG); a one-line UsageError for one
    this command does not write (checked before the analysis, so a typo costs no time)."""
    ext = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    if ext not in PLOT_FORMATS:
        raise UsageError(f"--plot {path}: unsupported picture format {ext!r}; use one of "
                         f"{', '.join('.' + e for e in PLOT_FORMATS)}")
    return ext


def render(a: Analysis, path: str) -> None:
    """Draw the median and worst steps of the first rank/GPU into ``path`` (.png or .svg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    wins = timeline.windows(a, "key")
    if len(wins):
        first = wins.iloc[0]
        wins = wins[(wins["trace"] == first["trace"]) & (wins["rank"] == first["rank"])
                    & (wins["device"] == first["device"])]
    fig = Figure(figsize=(10, 1.2 + 2.3 * max(len(wins), 1)), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(max(len(wins), 1), 1, squeeze=False)[:, 0]
    seen: set[str] = set()
    for ax, (_, w) in zip(axes, wins.iterrows(), strict=False):
        seen |= _panel(ax, a, w)
    if not len(wins):
        axes[0].text(0.5, 0.5, "no steps to draw", ha="center", va="center")
    axes[-1].set_xlabel("ms from step start", fontsize=8)
    handles = [Patch(color=LANE_COLORS[k], label=lab) for k, lab in (
        ("runtime", "CUDA runtime call"), ("host", "CPU op"), ("compute", "compute kernel"),
        ("comm", "communication"), ("copy", "memcpy/memset"), ("annotation", "annotation"))]
    handles += [Patch(color=CLASS_COLORS[c], alpha=0.35, label=f"idle: {c}") for c in GAP_CLASSES if c in seen]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07 if len(handles) <= 6 else 0.11, 1, 1))
    fmt, metadata = PLOT_FORMATS[plot_format(path)]
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format=fmt, metadata=metadata)
