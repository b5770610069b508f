"""Capture boundaries: idle at the edges of a capture that the capture itself does not explain.

A profiler records a window of a running process. At its start the GPU may still be busy with work
issued before the window opened, and at its end the last step may run on while the profiler shuts
down. Neither is a cause of idle time in the steps, so the gap engine cuts these stretches out as
gaps of their own and the ``capture-boundary`` rule names them (``traceread.rules.capture_boundary``);
attribution keeps them out of the causes' shares and the verdict.

::

    host     |launch launch .......(nothing)......|           |... last op|           |
    GPU      |   (busy with unrecorded work)  ==k1==k2==...   ==kN==|      (nothing)  |
             ^ capture start ...lead... ^ first op              tail start ^..tail..^ last step end

* lead (per rank/device): the device's first recorded GPU op (kernel, copy, memset) started at
  least ``capture_lead_min_ns`` after its launch call returned (queued, nothing recorded ahead of
  it: the GPU was busy with work the profiler did not record), or its copy/memset call was still
  blocking when the op started and had been for that long (a synchronous copy waiting for earlier
  work); or a sync call that began before the first GPU op held the host that long (it waited on
  unrecorded work). The lead runs from the first step's start to the first op's start (or to the
  sync's return when the first op was not launched within ``sync_refill_max_ns`` of it).
* tail (per rank/device): the last step ends in a stretch of at least ``capture_tail_min_ns`` with
  no host op (Python frames, step markers and ranges enclosing the whole step aside) and no GPU op
  of the device, at least twice the longest such ending of the other steps (a loop whose every step
  ends in untraced Python is not shutting down).

Kernel launches are never read as blocking (a first launch that loads its module holds its call,
then the kernel starts: a one-time cost, not a boundary).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import HOST_LANES, OP_LANES, EventView, engine_cache, event_view
from traceread.host_calls import KERNEL_LAUNCH
from traceread.trace import Trace

EDGE_COLUMNS: tuple[str, ...] = (
    "rank", "device",
    "lead_start_ns", "lead_end_ns",  # -1: no lead boundary
    "lead_kind",  # "queued" (first op waited behind unrecorded work), "blocking" (a call waited), "" none
    "lead_wait_ns", "lead_op", "lead_call",
    "tail_start_ns", "tail_end_ns",  # -1: no tail boundary
    "tail_other_ns",  # longest empty ending of the other steps
)


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("lead_kind", "lead_op", "lead_call") else "int64")
                         for c in EDGE_COLUMNS})


def capture_edges(trace: Trace, steps: pd.DataFrame, cfg: Thresholds) -> pd.DataFrame:
    """One row per rank/device of ``steps`` with its lead and tail boundaries (module doc)."""
    if steps is None or steps.empty:
        return _empty()
    # The last result, for the same steps frame and thresholds, is kept in the engine's cache beside the
    # frame's view: the gap engine (where to cut gaps) and the rules (what a boundary gap is) both ask.
    event_view(trace)  # the view the result is kept beside
    derived = engine_cache(trace).derived_of(trace.events)
    last = derived.get("capture_edges") if derived is not None else None
    if last is not None and last[0] is steps and last[1] == cfg:
        return last[2].copy()
    edges = _capture_edges(trace, steps, cfg)
    if derived is not None:
        derived["capture_edges"] = (steps, cfg, edges)
    return edges.copy()


def _capture_edges(trace: Trace, steps: pd.DataFrame, cfg: Thresholds) -> pd.DataFrame:
    v = event_view(trace)
    rows = []
    for key, st in steps.groupby(["rank", "device"], sort=True):
        rank, device = cast("tuple[int, int]", key)
        st = st.sort_values("start_ns", kind="stable")
        row: dict[str, Any] = {"rank": int(rank), "device": int(device)}
        row.update(_lead(v, int(rank), int(device), int(st["start_ns"].iloc[0]), cfg))
        row.update(_tail(v, int(rank), int(device), st, cfg))
        rows.append(row)
    return pd.DataFrame(rows, columns=list(EDGE_COLUMNS))


def _lead(v: EventView, rank: int, device: int, w0: int, cfg: Thresholds) -> dict[str, Any]:
    none: dict[str, Any] = {"lead_start_ns": -1, "lead_end_ns": -1, "lead_kind": "", "lead_wait_ns": 0, "lead_op": "",
            "lead_call": ""}
    ops = v.rows(OP_LANES, rank=rank, device=device)
    if len(ops) == 0:
        return none
    first = ops[np.argmin(v.start[ops])]
    f_start = int(v.start[first])
    found: dict[str, Any] = dict(none)
    launch = int(v.launch_of(np.array([first]))[0])
    if launch >= 0:
        ls, le = int(v.start[launch]), int(v.end[launch])
        call = str(v.names_of(np.array([launch]))[0])
        if le <= f_start and f_start - le >= cfg.capture_lead_min_ns:
            found = {"lead_kind": "queued", "lead_wait_ns": f_start - le, "lead_end_ns": f_start, "lead_call": call}
        elif le > f_start and f_start - ls >= cfg.capture_lead_min_ns and not KERNEL_LAUNCH.match(call):
            found = {"lead_kind": "blocking", "lead_wait_ns": f_start - ls, "lead_end_ns": f_start, "lead_call": call}
    if not found["lead_kind"]:
        # A sync that began before anything recorded ran on the device waited on unrecorded work.
        syncs = v.rows((schema.LANE_CPU_THREAD,), (schema.CAT_RUNTIME, schema.CAT_DRIVER), rank=rank)
        syncs = syncs[v.name_flags["sync"].take(v.name.take(syncs))]  # (v.flag's lookups, by take: no index copies)
        syncs = syncs[(v.start[syncs] < f_start) & (v.end[syncs] - v.start[syncs] >= cfg.capture_lead_min_ns)]
        if len(syncs):
            s = syncs[np.argmax(v.end[syncs])]
            # The first op launched as the sync returned is its refill: the wait runs up to that op.
            refill = launch >= 0 and 0 <= int(v.start[launch]) - int(v.end[s]) <= cfg.sync_refill_max_ns
            found = {"lead_kind": "blocking", "lead_wait_ns": int(v.end[s] - v.start[s]),
                     "lead_end_ns": f_start if refill else min(int(v.end[s]), f_start),
                     "lead_call": str(v.names_of(np.array([s]))[0])}
    if not found["lead_kind"] or found["lead_end_ns"] <= w0:
        return none
    found.update(lead_start_ns=w0, lead_op=str(v.names_of(np.array([first]))[0]))
    return {**none, **found}


def _tail(v: EventView, rank: int, device: int, st: pd.DataFrame, cfg: Thresholds) -> dict[str, Any]:
    none = {"tail_start_ns": -1, "tail_end_ns": -1, "tail_other_ns": 0}
    ws, we = st["start_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64)
    longest = int(np.median(we - ws))
    # The latest end of any activity starting before each step's end: each activity lands in the
    # bucket of step ends after its start (steps are few: no sort of the activities).
    order = np.argsort(we, kind="stable")
    bucket = np.full(len(we) + 1, np.iinfo(np.int64).min, dtype=np.int64)
    # Host activity (no python frames, no step markers) and the device's ops.
    cat_ok = np.ones(len(v.cat_codes) + 1, dtype=bool)  # by category code; the last entry answers for -1
    if schema.CAT_PYTHON in v.cat_codes:
        cat_ok[v.cat_codes[schema.CAT_PYTHON]] = False
    not_step = v.step_number < 0  # by name code
    _latest_end(v, v.rows(HOST_LANES, rank=rank), we[order], longest, bucket, (cat_ok, not_step))
    _latest_end(v, v.rows(OP_LANES, rank=rank, device=device), we[order], longest, bucket, None)
    last_end = np.empty(len(we), dtype=np.int64)
    last_end[order] = np.maximum.accumulate(bucket[:len(we)])
    empty = np.maximum(we - np.maximum(last_end, ws), 0)
    last = int(np.argmax(we))
    other = int(np.delete(empty, last).max()) if len(ws) > 1 else 0
    tail = int(empty[last])
    if tail < cfg.capture_tail_min_ns or tail < 2 * other:
        return {**none, "tail_other_ns": other}
    return {"tail_start_ns": int(we[last]) - tail, "tail_end_ns": int(we[last]), "tail_other_ns": other}


def _latest_end(v: EventView, rows: np.ndarray, bounds: np.ndarray, longest: int, bucket: np.ndarray,
                tables: tuple[np.ndarray, np.ndarray] | None) -> None:
    """``bucket[b]``: the latest end of the ``rows`` shorter than ``longest`` starting with ``b`` of
    the sorted ``bounds`` at or before them (ranges as long as a step enclose steps: a run-level
    annotation says nothing of activity); with ``tables`` (bools by category code, by name code) only
    rows both admit. One compiled pass when built (``intervals.sweeper``), else numpy (its twin)."""
    c = intervals.sweeper()
    if c is not None:
        cat, name = (v.cat, v.name) if tables is not None else (None, None)
        c.bucket_max(np.ascontiguousarray(v.start, np.int64), np.ascontiguousarray(v.end, np.int64),
                     np.ascontiguousarray(rows), np.ascontiguousarray(bounds, np.int64), longest,
                     bucket, *((np.ascontiguousarray(cat), tables[0], np.ascontiguousarray(name), tables[1])
                               if tables is not None else (None, None, None, None)))
        return
    start, end = v.start[rows], v.end[rows]
    short = end - start < longest
    if tables is not None:
        short &= tables[0][v.cat[rows]] & tables[1][v.name[rows]]
    np.maximum.at(bucket, np.searchsorted(bounds, start[short], side="right"), end[short])


def split_points(edges: pd.DataFrame) -> dict[tuple[int, int], np.ndarray]:
    """Where the engine cuts each (rank, device)'s gaps so that boundary stretches are gaps of their
    own; found for every device at once (one selection per device made the job's cost grow with the
    square of its GPUs)."""
    out: dict[tuple[int, int], np.ndarray] = {}
    if edges.empty:
        return out
    for (r, d), idx in schema.rank_device_rows(edges).items():
        e = edges.iloc[idx]
        pts = np.concatenate([e["lead_end_ns"].to_numpy(np.int64), e["tail_start_ns"].to_numpy(np.int64)])
        out[(int(r), int(d))] = np.unique(pts[pts >= 0])
    return out


__all__ = ["EDGE_COLUMNS", "capture_edges", "split_points"]
