"""One rank's small, picklable digest for job analysis: :func:`summarize` -> :class:`RankSummary`.

Computed where the trace is loaded (a scan worker, or ``analyze``), so only this travels: the rank's
communication kernels (process group, sequence number where recorded, collective type, bytes, start,
end) with what happened on that rank just before each one (its *lead*: from the end of its previous
collective to this one's start: compute busy time and compute-idle time by gap class), its steps
with busy/idle by class, and its classified gaps. No frames.

Lead figures are on the rank's own clock (differences of its own times), so they need no alignment:
they say why a rank reached a collective later than the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread import kernel_classes as kc
from traceread.engine.collective_identity import recorded_type
from traceread.engine.lanes import event_view
from traceread.ranks.identity import RankIdentity
from traceread.trace import Trace
from traceread.vocabulary import GAP_CLASSES, part_col


def lead_col(cls: str) -> str:
    """Column of a collective's compute-idle ns of gap class ``cls`` in its lead."""
    return "lead_" + part_col(cls)


COLLECTIVE_COLUMNS = ("device", "pg", "pg_desc", "seq", "step", "collective", "bytes", "start_ns", "end_ns",
                      "lead_start_ns", "lead_busy_ns") + tuple(lead_col(c) for c in GAP_CLASSES) + ("ready_ns",)
STEP_COLUMNS = ("device", "step", "start_ns", "end_ns", "busy_ns", "idle_ns", "warmup", "outlier") + \
    tuple(part_col(c) for c in GAP_CLASSES)
GAP_COLUMNS = ("device", "step", "start_ns", "end_ns", "class")
# a communication kernel starting this much later than anything on its rank explains waited for a peer
PEER_WAIT_MIN_NS = 50_000


@dataclass(frozen=True, eq=False)
class RankSummary:
    """Plain columns (dict of numpy arrays) per table; :meth:`table` gives a DataFrame view.

    * ``collectives``: ``COLLECTIVE_COLUMNS``; ``ready_ns`` is when the call could have started on its rank
      (:func:`ready_times`: its start, unless it started later than anything local explains: a wait on a
      peer); ``seq`` is -1 where the trace records none, ``step``
      the number of the step (on its device) it starts in, -1 outside every step, ``bytes`` -1 where
      unknown, ``pg`` '' where the process group is not recorded.
    * ``steps``: ``STEP_COLUMNS`` (the analysis' per-step rows of this rank), and ``own_ns`` where the
      what-if replay ran (:func:`summarize`).
    * ``gaps``: ``GAP_COLUMNS`` (every classified compute-idle gap of this rank).
    """

    identity: RankIdentity
    collectives: dict[str, np.ndarray]
    steps: dict[str, np.ndarray]
    gaps: dict[str, np.ndarray]
    step_source: str = "unknown"
    notes: tuple[str, ...] = field(default=())

    def table(self, name: str) -> pd.DataFrame:
        return pd.DataFrame(getattr(self, name))


def _columns(df: pd.DataFrame, cols: tuple[str, ...]) -> dict[str, np.ndarray]:
    out = {}
    for c in cols:
        s = df[c] if c in df.columns else pd.Series(np.zeros(len(df), dtype=np.int64))
        if isinstance(s.dtype, pd.CategoricalDtype) and len(s) and not s.isna().any():
            out[c] = _category_text(s)
        else:
            out[c] = s.astype(str).to_numpy(dtype=str) if s.dtype == object or isinstance(
                s.dtype, pd.CategoricalDtype) else s.to_numpy().copy()
    return out


def _category_text(s: pd.Series) -> np.ndarray:
    """``s.astype(str).to_numpy(dtype=str)`` of a categorical without missing values, by its
    codes: each category's text once, not a string per row (a gap's class, a million rows). Same
    width: the longest text used."""
    codes = s.cat.codes.to_numpy()
    names = [str(x) for x in s.cat.categories]
    width = max(len(names[k]) for k in np.flatnonzero(np.bincount(codes, minlength=len(names))))
    return np.array(names, dtype=f"<U{max(width, 1)}")[codes]


def _rows_of(df: pd.DataFrame, ranks: pd.Series, rank: int, columns: list[str] | None = None) -> pd.DataFrame:
    """The rows of ``df`` whose ``ranks`` is ``rank`` (``df`` itself when all are), of ``columns`` only when
    given: selected with the rows in one copy (the columns first, then the rows, copied the gaps' twice)."""
    hit = (ranks == rank).to_numpy()
    if columns is None:
        return df if hit.all() else df[hit]
    return df[columns] if hit.all() else df.loc[hit, columns]


def summarize(trace: Trace, identity: RankIdentity, steps: pd.DataFrame, gaps: pd.DataFrame,
              step_source: str = "unknown", own_ns: np.ndarray | None = None) -> RankSummary:
    """The summary of ``identity``'s rank of ``trace``.

    ``steps`` and ``gaps`` are the analysis' step and classified-gap rows of this trace (any rank: this
    rank's rows are taken here); the caller that ran the analysis passes them, so nothing is computed
    twice and this layer never runs the analysis itself. ``own_ns``: per row of this rank's steps, its
    own step in the what-if replay (communication taking no time), kept as ``steps["own_ns"]`` for the
    job's straggler-free prediction (:mod:`traceread.ranks.predict`).
    """
    rank = identity.frame_rank
    steps = steps[steps["rank"] == rank] if len(steps) else steps
    # Only the columns kept, then this rank's rows (not every column of the gaps, evidence included).
    gaps = _rows_of(gaps, gaps["rank"], rank, [c for c in GAP_COLUMNS if c in gaps.columns]) if len(gaps) else gaps
    step_cols = _columns(steps.reset_index(drop=True), STEP_COLUMNS) if len(steps) else \
        {c: np.zeros(0, dtype=np.int64) for c in STEP_COLUMNS}
    if own_ns is not None and len(own_ns) == len(step_cols["step"]):
        step_cols["own_ns"] = np.asarray(own_ns, dtype=np.int64)
    gap_cols = _columns(gaps.reset_index(drop=True), GAP_COLUMNS) if len(gaps) else \
        {c: np.zeros(0, dtype=str if c == "class" else np.int64) for c in GAP_COLUMNS}
    codes = _class_codes(gaps)
    del gaps  # the rank's rows were copied into gap_cols: this copy goes before the collectives' leads are made
    return RankSummary(identity=identity, collectives=_collectives(trace, rank, gap_cols, step_cols, codes),
                       steps=step_cols, gaps=gap_cols, step_source=step_source)


def _args(trace: Trace, comm: pd.DataFrame) -> pd.DataFrame:
    """collective_args per comm kernel (own row, else its record_param_comms op), plus ``seq``."""
    cols = ["collective", "in_nelems", "out_nelems", "dtype", "group_size", "group_name", "group_desc"]
    try:
        from traceread.metrics.collectives import collective_args

        a = collective_args(trace, comm)
    except Exception:  # noqa: BLE001 - the table is optional; alignment falls back to order and name
        a = pd.DataFrame({c: [None] * len(comm) for c in cols}, index=comm.index)
    seq = np.full(len(comm), -1, dtype=np.int64)
    if "seq" in a.columns:  # Kineto ``Seq`` (own row, else its record_param_comms op's)
        seq = pd.to_numeric(a["seq"], errors="coerce").fillna(-1).to_numpy(np.int64)
    return a.assign(seq=seq)


def _class_codes(gaps: pd.DataFrame) -> np.ndarray | None:
    """Per gap, the index in ``GAP_CLASSES`` of its class (-1 for another), when the class is a categorical
    without missing values (as the analysis makes it); else None (the text is compared)."""
    s = gaps["class"] if len(gaps) and "class" in gaps.columns else None
    if s is None or not isinstance(s.dtype, pd.CategoricalDtype) or s.isna().any():
        return None
    to_class = np.array([GAP_CLASSES.index(str(c)) if str(c) in GAP_CLASSES else -1 for c in s.cat.categories] + [-1])
    return to_class[s.cat.codes.to_numpy()]


def _collectives(trace: Trace, rank: int, gaps: dict[str, np.ndarray],
                 steps: dict[str, np.ndarray], class_codes: np.ndarray | None = None) -> dict[str, np.ndarray]:
    from traceread.metrics.precision import TORCH_DTYPES

    # The rank's comm rows from the engine's view (cached selections, no comparison per event), as arrays
    # in (device, start) order: a frame selection and sort cost more than the work on a small trace.
    v = event_view(trace)
    rows = v.rows((schema.LANE_GPU_COMM,), rank=rank).astype(np.int64)
    rows = rows[np.lexsort((v.start[rows], v.device[rows]))]  # stable
    if len(rows) == 0:
        return {c: np.zeros(0, dtype=str if c in ("pg", "pg_desc", "collective") else np.int64)
                for c in COLLECTIVE_COLUMNS}
    comm = pd.DataFrame({"row": rows, "rank": v.rank[rows], "external_id": trace.events["external_id"].to_numpy()[rows]})
    a = _args(trace, comm)
    typ = kc.collective_type(v.names[v.name[rows]])
    rec = a["collective"].notna().to_numpy()
    if rec.any():
        names = a["collective"][rec].astype(str).to_numpy()
        # the recorded name first (send and recv stay apart: a pipeline's stage order reads them), else as a kernel name
        uniq, inv = np.unique(names, return_inverse=True)
        own = np.array([recorded_type(str(x)) for x in uniq], dtype=object)[inv]
        typ[rec] = np.where(own != "", own, kc.collective_type(names))
    dtype = a["dtype"].fillna("").astype(str).str.lower()
    elsize = dtype.map({k: v[1] for k, v in TORCH_DTYPES.items()}).fillna(0).to_numpy(np.float64)
    nel = np.fmax(pd.to_numeric(a["in_nelems"], errors="coerce").to_numpy(dtype=np.float64),
                  pd.to_numeric(a["out_nelems"], errors="coerce").to_numpy(dtype=np.float64))
    nbytes = np.where((nel > 0) & (elsize > 0), nel * elsize, -1).astype(np.int64)
    dev = v.device[rows].astype(np.int64)
    start = v.start[rows]
    end = v.end[rows]
    lead_start, busy, idle, last_busy = _leads(trace, rank, dev, start, end, gaps, class_codes)
    host = v.launch_of(rows)
    launched = np.where(host >= 0, v.start[np.maximum(host, 0)], np.iinfo(np.int64).min).astype(np.int64)
    out = {"device": dev, "pg": a["group_name"].fillna("").astype(str).to_numpy(dtype=str),
           "pg_desc": a["group_desc"].fillna("").astype(str).to_numpy(dtype=str),
           "seq": a["seq"].to_numpy(np.int64), "step": _step_of(dev, start, steps), "collective": np.asarray(typ, dtype=str), "bytes": nbytes,
           "start_ns": start.astype(np.int64), "end_ns": end.astype(np.int64), "lead_start_ns": lead_start,
           "lead_busy_ns": busy}
    out.update({lead_col(c): idle[c] for c in GAP_CLASSES})
    stream_prev = stream_previous_end(dev, v.tid[rows].astype(np.int64), start.astype(np.int64), end.astype(np.int64))
    out["ready_ns"] = ready_times(start.astype(np.int64), stream_prev, last_busy, launched)
    return out


def stream_previous_end(dev: np.ndarray, stream: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per communication kernel, the latest end of the kernels before it on its own stream (int64 min for a
    stream's first). Not the device's previous collective: kernels on other streams (a pipeline's sends beside
    its receives, each waiting for its peer) do not hold it back."""
    out = np.full(len(start), np.iinfo(np.int64).min, dtype=np.int64)
    for d in np.unique(dev):
        on = dev == d
        for s in np.unique(stream[on]):  # a few streams per device
            idx = np.flatnonzero(on & (stream == s))
            idx = idx[np.argsort(start[idx], kind="stable")]
            out[idx[1:]] = np.maximum.accumulate(end[idx])[:-1]
    return out


def ready_times(start: np.ndarray, lead_start: np.ndarray, last_busy: np.ndarray, launched: np.ndarray,
                min_wait_ns: int = PEER_WAIT_MIN_NS) -> np.ndarray:
    """Per communication kernel, when its rank was ready for it: the latest of its launch, the end of the kernel
    before it on its stream (``lead_start``) and the end of the compute before it (``last_busy``: its start while
    compute still ran). A kernel that started more than ``min_wait_ns`` after all of them waited for a peer
    (a transport that starts nothing before its peer is there): that wait is the peer's, not the rank's, so
    its arrival is when it was ready; otherwise its start."""
    ready = np.maximum(np.maximum(lead_start, last_busy), launched)
    return np.where(start - ready > min_wait_ns, ready, start).astype(np.int64)


def _leads(trace: Trace, rank: int, dev: np.ndarray, start: np.ndarray, end: np.ndarray,
           gaps: dict[str, np.ndarray], class_codes: np.ndarray | None = None
           ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Per collective: lead start (its device's previous collective end, else that device's first
    compute kernel), compute busy ns and compute-idle ns by gap class inside the lead. ``class_codes``:
    each gap's class as its index in ``GAP_CLASSES`` (:func:`_class_codes`), compared instead of the
    class text (ten string comparisons of every gap)."""
    v = event_view(trace)
    n = len(start)
    lead_start = np.zeros(n, dtype=np.int64)
    busy = np.zeros(n, dtype=np.int64)
    idle = {c: np.zeros(n, dtype=np.int64) for c in GAP_CLASSES}
    last_busy = start.astype(np.int64).copy()
    comp = v.rows((schema.LANE_GPU_COMPUTE,), rank=rank)  # the rank's kernels (cached, in frame order)
    cdev = v.device[comp]
    for d in np.unique(dev):
        idx = np.flatnonzero(dev == d)  # already in start order
        c = comp[cdev == d]
        us, ue = intervals.union(v.start[c], v.end[c])
        prev = np.maximum.accumulate(end[idx])
        first = int(us[0]) if len(us) else int(start[idx[0]])
        ls = np.concatenate(([min(first, int(start[idx[0]]))], prev[:-1]))
        ls = np.minimum(ls, start[idx])
        lead_start[idx] = ls
        busy[idx] = intervals.overlap_with_union(ls, start[idx], us, ue)
        # the compute before each call: the end of the union piece before its start (its start when compute runs
        # at that moment; the lead's start when no compute came before)
        if len(us):
            piece = np.searchsorted(us, start[idx], side="right") - 1
            has = piece >= 0
            before = ue[np.maximum(piece, 0)]
            last_busy[idx] = np.where(has & (before >= start[idx]), start[idx], np.where(has, before, ls))
        else:
            last_busy[idx] = ls
        gsel = gaps["device"] == d
        for k, cls in enumerate(GAP_CLASSES):
            m = gsel & ((class_codes == k) if class_codes is not None else (gaps["class"] == cls))
            if m.any():
                gs, ge = intervals.union(gaps["start_ns"][m], gaps["end_ns"][m])
                idle[cls][idx] = intervals.overlap_with_union(ls, start[idx], gs, ge)
    return lead_start, busy, idle, last_busy


def _step_of(dev: np.ndarray, start: np.ndarray, steps: dict[str, np.ndarray]) -> np.ndarray:
    """Per collective: the number of the step on its device whose window holds its start, else -1."""
    out = np.full(len(start), -1, dtype=np.int64)
    for d in np.unique(dev):
        m = steps["device"] == d
        if not m.any():
            continue
        order = np.argsort(steps["start_ns"][m], kind="stable")
        ss, se = steps["start_ns"][m][order], steps["end_ns"][m][order]
        num = steps["step"][m][order]
        idx = np.flatnonzero(dev == d)
        j = np.searchsorted(ss, start[idx], side="right") - 1
        ok = (j >= 0) & (start[idx] < se[np.maximum(j, 0)])
        out[idx[ok]] = num[j[ok]]
    return out
