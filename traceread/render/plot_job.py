"""The timeline picture of several ranks: one row group per rank/GPU, stragglers marked.

Per key step (the median and the worst step of the first rank drawn) one panel; in it each
rank/GPU has two rows, its compute (all streams together) and its communication, with its own idle
time shaded by class. The ranks' clocks are aligned by the job analysis (``traceread.ranks``: each
rank's offset against the reference rank, from matched collectives), so a rank that arrives late at
a collective shows late; a rank without an offset is placed by its step start. Stragglers (the
ranks the job analysis names) have their row label in red, with the cause.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from traceread import schema
from traceread.analysis import Analysis
from traceread.errors import UsageError
from traceread.ranks.results import Straggler
from traceread.render import plotbits, timeline

MAX_RANKS = 32  # row groups drawn (stragglers first kept); more would not be readable
ROW_IN = 0.22  # inches per row
_RANKS_RE = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")
UNIT_COLUMNS = ["trace", "rank", "device", "job_rank", "group"]


class Unit(NamedTuple):
    trace: int
    rank: int  # the frame's rank (what the analysis tables hold)
    device: int
    job_rank: int
    group: int


def as_units(units: pd.DataFrame) -> list[Unit]:
    return [Unit(*map(int, r)) for r in units[UNIT_COLUMNS].to_numpy(np.int64).tolist()]


def parse_ranks(text: str | None) -> tuple[int, ...] | None:
    """``--ranks``: ``all`` (None) or a list such as ``0,3,5-7``; a one-line UsageError otherwise."""
    if text is None or text.strip().lower() == "all":
        return None
    if not _RANKS_RE.match(text):
        raise UsageError(f"--ranks {text!r}: expected 'all' or a list of ranks such as 0,3,5-7")
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        a, b = int(lo), int(hi) if hi.strip() else int(lo)
        if b < a:
            raise UsageError(f"--ranks {text!r}: the range {part.strip()} runs backwards")
        if b - a > 1_000_000:
            raise UsageError(f"--ranks {text!r}: the range {part.strip()} is too long")
        out += range(a, b + 1)
    return tuple(sorted(set(out)))


def units_with_ranks(a: Analysis) -> pd.DataFrame:
    """The analysis' units (``UNIT_COLUMNS``): trace, frame rank, device, the rank the job knows it
    by (claimed by the trace, else the frame's) and its job group (-1: none)."""
    src = a.steps if len(a.steps) else a.units
    if not len(src):
        return pd.DataFrame({c: [] for c in UNIT_COLUMNS})
    u = src[["trace", "rank", "device"]].drop_duplicates().astype(np.int64).reset_index(drop=True)
    claimed: dict[tuple[int, int], tuple[int, int]] = {}
    if a.job is not None:
        index = {t.path: i for i, t in enumerate(a.traces)}
        for gi, g in enumerate(a.job.groups):
            for m in g.members:
                if m.path in index:
                    claimed[(index[m.path], m.frame_rank)] = (m.rank if m.rank is not None else m.frame_rank, gi)
    keys = list(zip(u["trace"].tolist(), u["rank"].tolist(), strict=True))
    u["job_rank"] = [claimed.get(k, (k[1], -1))[0] for k in keys]
    u["group"] = [claimed.get(k, (k[1], -1))[1] for k in keys]
    return u.sort_values(["job_rank", "trace", "device"], kind="stable").reset_index(drop=True)


def stragglers(a: Analysis) -> dict[tuple[int, int], Straggler]:
    """(group, rank) -> the job analysis' straggler record."""
    if a.job is None:
        return {}
    return {(gi, int(s.rank)): s for gi, r in enumerate(a.job.reports) if r is not None for s in r.stragglers}


def select_units(a: Analysis, ranks: tuple[int, ...] | None) -> pd.DataFrame:
    """The units to draw: of ``ranks`` (None: all), at most ``MAX_RANKS`` ranks, stragglers kept."""
    u = units_with_ranks(a)
    if ranks is not None:
        have = sorted(set(u["job_rank"].tolist()))
        u = u[u["job_rank"].isin(ranks)]
        if not len(u):
            from traceread.ranks import ranges

            raise UsageError(f"--ranks: none of {ranges(list(ranks))} is in the input "
                             f"(ranks there: {ranges(have) or 'none'})")
    drawn = list(dict.fromkeys(zip(u["group"].tolist(), u["job_rank"].tolist(), strict=True)))
    if len(drawn) > MAX_RANKS:
        late = [k for k in drawn if k in stragglers(a)]
        keep = set(late[:MAX_RANKS]) | set([k for k in drawn if k not in late][:MAX_RANKS - min(len(late), MAX_RANKS)])
        u = u[[k in keep for k in zip(u["group"].tolist(), u["job_rank"].tolist(), strict=True)]]
    return u.reset_index(drop=True)


def _offsets(a: Analysis) -> dict[tuple[int, int], int]:
    """(group, rank) -> the rank's clock offset against its job's reference rank (known ones only)."""
    if a.job is None:
        return {}
    return {(gi, int(al.rank)): int(al.offset_ns) for gi, r in enumerate(a.job.reports) if r is not None
            for al in r.alignment if al.offset_ns is not None}


def _shifts(a: Analysis, units: pd.DataFrame, wins: list[tuple[int, int] | None]) -> list[int]:
    """Per unit, what to add to its own ns for the panel's common clock (aligned when known)."""
    off = _offsets(a)
    out: list[int | None] = []
    for u, w in zip(as_units(units), wins, strict=True):
        key = (u.group, u.job_rank)
        epoch = a.traces[u.trace].epoch_offset_ns or 0
        out.append(epoch - off[key] if key in off and w is not None else None)
    # a unit with no offset starts its step where the first aligned unit starts its own
    ref = next(((s, w) for s, w in zip(out, wins, strict=True) if s is not None and w is not None), None)
    return [s if s is not None else ((ref[0] + ref[1][0] - w[0]) if ref and w else -(w[0] if w else 0))
            for s, w in zip(out, wins, strict=True)]


def _step_window(a: Analysis, u: Unit, step: int) -> tuple[int, int] | None:
    s = a.steps
    row = s[(s["trace"] == u.trace) & (s["rank"] == u.rank) & (s["device"] == u.device) & (s["step"] == step)]
    return (int(row["start_ns"].iloc[0]), int(row["end_ns"].iloc[0])) if len(row) else None


def _panel(ax: Any, a: Analysis, units: pd.DataFrame, step: int, label: str,
           late: dict[tuple[int, int], Straggler]) -> set[str]:
    wins = [_step_window(a, u, step) for u in as_units(units)]
    shifts = _shifts(a, units, wins)
    spans = [(w[0] + sh, w[1] + sh) for w, sh in zip(wins, shifts, strict=True) if w is not None]
    lo = min((s for s, _ in spans), default=0)
    hi = max((e for _, e in spans), default=1)
    e = plotbits.edges(lo, hi)
    seen: set[str] = set()
    ticks, names, colors = [], [], []
    for i, (u, w, sh) in enumerate(zip(as_units(units), wins, shifts, strict=True)):
        y = -2 * i - 1  # compute row; the comm row below it
        key = (u.group, u.job_rank)
        text = a.unit_label(u.trace, u.job_rank, u.device)
        if key in late:
            text += f"  STRAGGLER ({late[key].cause})"
        ticks += [y, y - 1]
        names += [text if w is not None else f"{text} (no step {step})", "comm"]
        colors += [plotbits.STRAGGLER_COLOR if key in late else "black", "grey"]
        if key in late:
            ax.axhspan(y - 1.5, y + 0.5, color=plotbits.STRAGGLER_COLOR, alpha=0.07, linewidth=0, zorder=0)
        ax.axhline(y + 0.5, color="#dddddd", linewidth=0.5, zorder=1)
        if w is None:
            continue
        ev = timeline.events_in(a, u.trace, u.rank, u.device, w[0], w[1],
                                (schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM))
        moved = pd.DataFrame({"start_ns": np.clip(ev["start_ns"].to_numpy(np.int64), w[0], w[1]) + sh,
                              "end_ns": np.clip(ev["end_ns"].to_numpy(np.int64), w[0], w[1]) + sh})
        comp = (ev["lane"] == schema.LANE_GPU_COMPUTE).to_numpy()
        g = timeline.gaps_in(a, u.trace, u.rank, u.device, w[0], w[1])
        g = g.assign(start_ns=np.clip(g["start_ns"].to_numpy(np.int64), w[0], w[1]) + sh,
                     end_ns=np.clip(g["end_ns"].to_numpy(np.int64), w[0], w[1]) + sh)
        idle, cls_idx = plotbits.idle_columns(g, e)
        ax.broken_barh(plotbits.runs(plotbits.busy_columns(moved[comp], e, idle), e, lo), (y - 0.4, 0.8),
                       facecolors=plotbits.LANE_COLORS["compute"], linewidth=0, zorder=2)
        comm = moved[~comp]
        comm_cov = plotbits.coverage(comm["start_ns"].to_numpy(), comm["end_ns"].to_numpy(), e) if len(comm) \
            else np.zeros(len(e) - 1, dtype=np.int64)
        ax.broken_barh(plotbits.runs(comm_cov > 0, e, lo), (y - 1.4, 0.8), facecolors=plotbits.LANE_COLORS["comm"],
                       linewidth=0, zorder=2)
        seen |= plotbits.shade(ax, e, lo, idle, cls_idx, y - 1.5, 2.0)
    ax.set_yticks(ticks, names, fontsize=7)
    for tick, color in zip(ax.get_yticklabels(), colors, strict=True):
        tick.set_color(color)
        if color == plotbits.STRAGGLER_COLOR:
            tick.set_fontweight("bold")
    ax.set_ylim(-2 * len(units) - 0.6, -0.4)
    ax.set_xlim(0, (hi - lo) / 1e6)
    ax.set_title(f"{len(units)} rank/GPU(s), step {step} ({label}), clocks aligned by collectives: "
                 f"{(hi - lo) / 1e6:.2f} ms", fontsize=9, loc="left")
    ax.tick_params(axis="x", labelsize=8)
    return seen


def figure(a: Analysis, units: pd.DataFrame):  # noqa: ANN201 - matplotlib is imported lazily
    """The job picture of ``units`` (from :func:`select_units`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    first = units.iloc[0]
    wins = timeline.windows(a, "key")
    wins = wins[(wins["trace"] == first["trace"]) & (wins["rank"] == first["rank"])
                & (wins["device"] == first["device"])]
    panel_in = 0.7 + ROW_IN * 2 * len(units)
    fig = Figure(figsize=(10, 1.0 + panel_in * max(len(wins), 1)), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(max(len(wins), 1), 1, squeeze=False)[:, 0]
    late = stragglers(a)
    seen: set[str] = set()
    for ax, (_, w) in zip(axes, wins.iterrows(), strict=False):
        seen |= _panel(ax, a, units, int(w["step"]), str(w["label"]), late)
    if not len(wins):
        axes[0].text(0.5, 0.5, "no steps to draw", ha="center", va="center")
    axes[-1].set_xlabel("ms from the earliest rank's step start (aligned clocks)", fontsize=8)
    handles = plotbits.legend_handles(seen, (("compute", "compute kernel"), ("comm", "communication")))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.4 / (1.0 + panel_in * max(len(wins), 1)), 1, 1))
    return fig
