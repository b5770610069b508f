"""The timeline picture: ``render(analysis, path, ranks)`` writes a PNG, SVG, PDF or JPEG (by extension).

One rank (a single-rank input, or ``ranks`` naming one): its first GPU's median step and worst step,
one panel each; rows are the launching CPU threads, the compute streams, the communication lane and
copies; idle gaps of compute are shaded by class across the panel. Several ranks (a job): one row
group per rank, stragglers marked (:mod:`traceread.render.plot_job`). Time axis in ms from the step
start. matplotlib is imported here only.
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
from traceread.render import plotbits, timeline
from traceread.render.plotbits import CLASS_COLORS, LANE_COLORS  # noqa: F401 - the picture's palette

# Extension -> matplotlib format, with the metadata that keeps the file reproducible (no software
# version or date); JPEG is written by Pillow (a matplotlib dependency), which takes no metadata.
PLOT_FORMATS: dict[str, tuple[str, dict | None]] = {
    "png": ("png", {"Software": None}), "svg": ("svg", {"Date": None}), "pdf": ("pdf", {"Date": None}),
    "jpg": ("jpeg", None), "jpeg": ("jpeg", None)}
PIXELS = 2000  # horizontal resolution the bars are merged to
LABEL_MIN_WIDTH = 0.08  # annotations wider than this fraction of the step get their name written on them
MAX_CPU_THREADS = 3
MAX_ANNOTATION_ROWS = 3  # nesting depths drawn; deeper annotations share the last row
LANE_LEGEND = (("runtime", "CUDA runtime call"), ("host", "CPU op"), ("compute", "compute kernel"),
               ("comm", "communication"), ("copy", "memcpy/memset"), ("annotation", "annotation"))


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
    if len(ann):  # nested annotations one row per depth, so that each keeps its own label
        depth = np.minimum(plotbits.nesting_depth(ann["start_ns"].to_numpy(), ann["end_ns"].to_numpy()),
                           MAX_ANNOTATION_ROWS - 1)
        for d in range(int(depth.max()) + 1):
            rows.append(("CPU annotations" if d == 0 else f"nested ({d})", "annotation", ann[depth == d]))
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
    e = plotbits.edges(lo, hi)
    gaps = timeline.gaps_in(a, int(w["trace"]), int(w["rank"]), int(w["device"]), lo, hi)
    idle, cls_idx = plotbits.idle_columns(gaps, e)
    labels, y = [], 0
    for label, color, ev in rows:
        if label:
            y += 1
            labels.append((y, label))
        if color == "compute":  # busy only where the column is not shaded idle
            bars = plotbits.runs(plotbits.busy_columns(ev, e, idle), e, lo)
        else:
            bars = _bars(ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(), lo, hi)
        ax.broken_barh(bars, (-y - 0.4, 0.8), facecolors=LANE_COLORS[color], linewidth=0, zorder=2)
        if color in ("annotation", "host"):
            s = (np.maximum(ev["start_ns"].to_numpy(), lo) - lo) / 1e6
            d = (np.minimum(ev["end_ns"].to_numpy(), hi) - lo) / 1e6 - s
            wide = d >= LABEL_MIN_WIDTH * (hi - lo) / 1e6
            names = ev["name"].astype(str).to_numpy()[wide].tolist()
            for x, text in plotbits.fitted_labels(s[wide], d[wide], names, (hi - lo) / 1e6):
                ax.text(x, -y, text, ha="center", va="center", fontsize=7, zorder=3,
                        color="white" if color == "annotation" else "black", clip_on=True)
    seen = plotbits.shade(ax, e, lo, idle, cls_idx, -y - 0.5, y)
    ax.set_yticks([-v for v, _ in labels], [lab for _, lab in labels], fontsize=8)
    ax.set_ylim(-y - 0.6, -0.4)
    ax.set_xlim(0, (hi - lo) / 1e6)
    step_ns = hi - lo
    idle_share = float(gaps["dur_ns"].sum()) / step_ns if step_ns else 0.0
    ax.set_title(f"{a.unit_label(int(w['trace']), int(w['rank']), int(w['device']))}, step {int(w['step'])} "
                 f"({w['label']}): {step_ns / 1e6:.2f} ms, compute idle {idle_share:.0%}", fontsize=9, loc="left")
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


def render(a: Analysis, path: str, ranks: tuple[int, ...] | None = None) -> None:
    """Draw the picture into ``path`` (format by extension). ``ranks``: the ranks to draw (None:
    all of a job); several ranks are drawn as a job (``plot_job``), one as its detailed timeline."""
    import logging
    import warnings

    from traceread.render import plot_job

    units = plot_job.select_units(a, ranks)
    fmt, metadata = PLOT_FORMATS[plot_format(path)]
    # matplotlib's own warnings (a glyph a kernel name holds that no font has, the font cache
    # being built) are not the user's business: standard error carries traceread's lines only
    logging.getLogger("matplotlib").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if len({(u.trace, u.rank) for u in plot_job.as_units(units)}) > 1:
            fig = plot_job.figure(a, units)
        else:
            fig = _rank_figure(a, units.iloc[0] if len(units) else None)
        with atomic_open(path, "wb") as fh:
            fig.savefig(fh, format=fmt, metadata=metadata)


def _rank_figure(a: Analysis, unit: pd.Series | None):  # noqa: ANN202 - matplotlib is imported lazily
    """The median and worst steps of one rank/GPU (``unit``: trace, rank, device; None: the first)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    wins = timeline.windows(a, "key")
    if len(wins):
        first = wins.iloc[0] if unit is None else unit
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
    handles = plotbits.legend_handles(seen, LANE_LEGEND)
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07 if len(handles) <= 6 else 0.11, 1, 1))
    return fig
