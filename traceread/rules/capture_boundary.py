"""capture-boundary: idle at the capture's edges that the capture does not explain (not a cause).

::

    host     |launch launch ....|                       ...last op|                |
    compute  |....(busy with unrecorded work)....|==k1==...==kN==|   (nothing)     |
              ^ lead: the first op waited behind work issued before the capture   ^ tail: shutdown

Signature (found by the engine, :mod:`traceread.engine.capture_edges`, which also cuts the gaps there):

* ``uncaptured-work``: before the device's first recorded GPU op, which started at least
  ``capture_lead_min_ns`` after its launch call returned, with nothing recorded ahead of it: the GPU
  was busy with work the profiler did not record;
* ``blocking-call``: before it, the host was blocked that long in a call at the capture's start (a
  synchronous copy, a sync) that waited on such work;
* ``shutdown``: the last step ends in a stretch of at least ``capture_tail_min_ns`` with no host op
  and no GPU op (the profiler shutting down), longer than twice the other steps' empty endings.

It goes first: whatever else overlaps the stretch, the GPU was not waiting for it inside the
capture. Attribution keeps this time out of the causes' shares and out of the verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traceread import grouped
from traceread.config import Thresholds
from traceread.engine.capture_edges import capture_edges
from traceread.engine.steps import outliers
from traceread.rules._base import Rule, RuleContext, cat, fmt_ns, nonempty, texts
from traceread.rules._columns import Frame, Gaps, col, frame_of
from traceread.trace import Trace
from traceread.vocabulary import CAPTURE_BOUNDARY

NAME = CAPTURE_BOUNDARY


class _Edge:
    """One row of ``capture_edges`` with typed fields."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.rank, self.device = int(row["rank"]), int(row["device"])
        self.lead_start_ns, self.lead_end_ns = int(row["lead_start_ns"]), int(row["lead_end_ns"])
        self.lead_kind, self.lead_op, self.lead_call = str(row["lead_kind"]), str(row["lead_op"]), str(row["lead_call"])
        self.lead_wait_ns = int(row["lead_wait_ns"])
        self.tail_start_ns, self.tail_end_ns = int(row["tail_start_ns"]), int(row["tail_end_ns"])
        self.tail_other_ns = int(row["tail_other_ns"])


def _records(edges: pd.DataFrame) -> list[_Edge]:
    return [_Edge({str(k): v for k, v in r.items()}) for r in edges.to_dict("records")]


def edges_of(steps: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds) -> pd.DataFrame | None:
    """The capture edges of every device (None without a trace or steps)."""
    if trace is None or steps is None or steps.empty:
        return None
    return capture_edges(trace, steps, cfg)


def captured(gaps: Frame, steps: pd.DataFrame | None, edges: pd.DataFrame | None, cfg: Thresholds
             ) -> tuple[Frame, pd.DataFrame | None]:
    """``gaps`` and ``steps`` with the first and last steps trimmed to the captured time (their
    ``offset_ns`` and ``phase`` measured from the trimmed start, outliers judged on the trimmed
    lengths), for periodicity: a bubble keeps its place in a step that the capture opened late or
    closed late, and such a step is not an outlier. Unchanged when no edge is found."""
    if steps is None or edges is None or not ((edges["lead_end_ns"] >= 0) | (edges["tail_start_ns"] >= 0)).any():
        return gaps, steps
    st = steps.copy()
    for e in _records(edges):
        here = np.flatnonzero(((st["rank"] == e.rank) & (st["device"] == e.device)).to_numpy())
        if len(here) == 0:
            continue
        s_, e_ = st["start_ns"].to_numpy(np.int64)[here], st["end_ns"].to_numpy(np.int64)[here]
        if e.lead_end_ns >= 0:
            i = here[np.argmin(s_)]
            st.iloc[i, st.columns.get_loc("start_ns")] = min(max(int(st["start_ns"].iat[i]), e.lead_end_ns),
                                                             int(st["end_ns"].iat[i]) - 1)
        if e.tail_start_ns >= 0:
            i = here[np.argmax(e_)]
            st.iloc[i, st.columns.get_loc("end_ns")] = max(min(int(st["end_ns"].iat[i]), e.tail_start_ns),
                                                           int(st["start_ns"].iat[i]) + 1)
    if "outlier" in st.columns and "warmup" in st.columns:
        st["outlier"] = outliers(st, cfg)
    at = grouped.lookup([st["rank"].to_numpy(), st["device"].to_numpy(), st["step"].to_numpy()],
                   [col(gaps, "rank", dtype=np.int64), col(gaps, "device", dtype=np.int64),
                    col(gaps, "step", -1, dtype=np.int64)])
    ok = at >= 0
    ws = np.where(ok, st["start_ns"].to_numpy(np.int64)[np.maximum(at, 0)], 0)
    we = np.where(ok, st["end_ns"].to_numpy(np.int64)[np.maximum(at, 0)], 1)
    g = frame_of(gaps).copy()
    gs = col(gaps, "start_ns", dtype=np.int64)
    offset = np.where(ok, np.maximum(gs - ws, 0), col(gaps, "offset_ns", dtype=np.int64))
    g["offset_ns"] = offset
    g["phase"] = np.where(ok, offset / np.maximum(we - ws, 1), col(gaps, "phase", 0.0, dtype=np.float64))
    return g, st


def cover(gaps: Frame, edges: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """Per gap: ``(kind, evidence)``: the boundary the gap lies in ('' when none) and its sentence."""
    at, kind_at, text_at = cover_at(gaps, edges)
    kind, text = texts(len(gaps)), texts(len(gaps))
    kind[at], text[at] = kind_at, text_at
    return kind, text


def cover_at(gaps: Frame, edges: pd.DataFrame | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`cover` of the gaps at a boundary only (a few per device: no string array over every gap):
    ``(positions, kind, evidence)``, positions ascending."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    if edges is not None and len(gaps):
        # rank and device as the frame holds them (compared with one value each): no int64 copy of every gap's
        g_rank, g_dev = col(gaps, "rank"), col(gaps, "device")
        gs, ge = col(gaps, "start_ns", dtype=np.int64), col(gaps, "end_ns", dtype=np.int64)
        for e in _records(edges):  # one row per device
            here = (g_rank == e.rank) & (g_dev == e.device)
            if e.lead_end_ns >= 0:
                lead = np.flatnonzero(here & (gs >= e.lead_start_ns) & (ge <= e.lead_end_ns))
                wait = fmt_ns(np.array([e.lead_wait_ns]))[0]
                if e.lead_kind == "queued":
                    parts.append((lead, texts(len(lead), "uncaptured-work"), texts(len(lead), (
                        f"capture boundary: the device's first recorded GPU op ({e.lead_op}) started {wait} "
                        f"after its launch call ({e.lead_call}) returned, with nothing recorded ahead of it: "
                        "the GPU was busy with work issued before the capture began"))))
                else:
                    parts.append((lead, texts(len(lead), "blocking-call"), texts(len(lead), (
                        f"capture boundary: at the capture's start the host was blocked {wait} in "
                        f"{e.lead_call} before anything recorded ran on the device: it waited on GPU work "
                        "issued before the capture began"))))
            if e.tail_start_ns >= 0:
                tail = np.flatnonzero(here & (gs >= e.tail_start_ns) & (ge <= e.tail_end_ns))
                parts.append((tail, texts(len(tail), "shutdown"), cat(
                    "capture boundary: the last step ends in ", fmt_ns(np.full(len(tail),
                    e.tail_end_ns - e.tail_start_ns)), " with no host op and no GPU op (the profiler "
                    "shutting down; the other steps end within ",
                    fmt_ns(np.full(len(tail), e.tail_other_ns)), " of their last op)")))
    if not parts:
        return np.zeros(0, dtype=np.int64), texts(0), texts(0)
    at = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
    kind, text = np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts])
    # a later edge's stretch overrides an earlier one's on the same gap (as assigned in that order)
    _, last = np.unique(at[::-1], return_index=True)
    keep = np.sort(len(at) - 1 - last)
    keep = keep[np.argsort(at[keep], kind="stable")]
    return at[keep], kind[keep], text[keep]


# The kinds of a capture's lead, where the GPU was busy with work issued before the capture.
LEADS = ("uncaptured-work", "blocking-call")


def lead(kinds: np.ndarray) -> np.ndarray:
    """Bool per gap, from ``cover``'s kinds: a lead, where the GPU was busy with work issued before the capture."""
    return np.isin(kinds, LEADS)


def mask(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    return nonempty(ctx.capture_kind)


def kind(gaps: Gaps, ctx: RuleContext) -> np.ndarray:
    return ctx.capture_kind.astype(object)


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    return ctx.capture_text.astype(object)


# The RuleContext fields this rule reads (in mask, kind, evidence and other rules' helpers it calls).
FACTS = ("capture_kind", "capture_text")

RULE = Rule(NAME, mask, evidence, kind, reads=("capture_text",), facts=FACTS)
