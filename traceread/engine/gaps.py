"""Idle gaps of each GPU's compute streams, and what overlaps each gap.

Compute busy time of a device is the union of its ``gpu_compute`` kernels (and whole CUDA graphs)
over all its streams. A gap is a maximal stretch of a (device-extended) step in which no compute
runs, however short: between busy intervals, from step start to the first kernel, and from the
last kernel to step end. Each gap is measured against everything else that was busy meanwhile:

::

    compute  ████████░░░░░░░░░░░░██████     ░ = the gap [start_ns, end_ns)
    comm          ███████████               -> comm_ns = overlap of the comm union with the gap
    host     ..cudaLaunchKernel.. ▌         -> cpu_runtime_ns, launch_count, next_launch_*_ns

All ``X_ns`` overlaps are lengths (ns) of the union of X's intervals inside the gap, so they never
exceed ``dur_ns``; ``X_frac = X_ns / dur_ns``. The frame holds only the ``X_ns`` (a trace can have
millions of gaps, and 16 float64 fractions beside 16 int64 lengths would double those columns); outputs
that show fractions add them with :func:`with_fractions` for the rows they write, rules compute
them with ``rules._columns.frac``.

Communication is split by collective identity (:mod:`traceread.engine.collective_identity`, from the host
op that launched each kernel): ``comm_p2p`` is point-to-point (send, recv, send-recv), and
``comm_collective`` everything else, so an all-to-all made of SendRecv kernels counts as a
collective. ``comm_type`` is the type covering most of the gap; ``step_p2p_count`` the number of
point-to-point kernels in the gap's step (the evidence of pipeline parallelism).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.engine.capture_edges import capture_edges, split_points
from traceread.engine.collective_identity import identify, step_p2p_counts
from traceread.engine.lanes import (
    OP_LANES,
    EventView,
    compute_rows,
    compute_union,
    event_view,
    row_indices,
    subset,
)
from traceread.kernel_classes import P2P_TYPES
from traceread.trace import Trace

OVERLAP_KINDS: tuple[str, ...] = (
    "comm", "comm_collective", "comm_p2p",
    "memcpy_htod", "memcpy_dtoh", "memcpy_dtod", "memcpy_ptop", "memcpy_pageable", "memcpy_pinned",
    "memcpy_htod_pageable", "memset", "cpu_runtime", "dataloader", "sync", "alloc", "optimizer",
)
GAP_COLUMNS: tuple[str, ...] = (
    "rank", "device", "step", "start_ns", "end_ns", "dur_ns", "offset_ns", "phase",
    *[c for k in OVERLAP_KINDS for c in (f"{k}_ns", f"{k}_frac")],
    "launch_count", "longest_cpu_ns", "longest_cpu_name", "python_frame", "next_kernel_name",
    "next_launch_start_ns", "next_launch_end_ns", "launch_after_gap_start", "queue_depth",
    "comm_type", "step_p2p_count",
)
FRACTION_COLUMNS: tuple[str, ...] = tuple(f"{k}_frac" for k in OVERLAP_KINDS)  # derived: not in the frame
FRAME_COLUMNS: tuple[str, ...] = tuple(c for c in GAP_COLUMNS if c not in FRACTION_COLUMNS)
_SPARSE_NS = pd.SparseDtype(np.int64, 0)  # X_ns overlaps: see _sparse
_INT32_COLUMNS = ("launch_count", "queue_depth", "step_p2p_count")  # counts: int32 halves them
# Step numbers and offsets into the step: int32 when every value fits (half of int64's bytes, held from the
# rules to the end), else int64
_NARROW = ("step", "offset_ns")
_STR_COLUMNS = ("longest_cpu_name", "python_frame", "next_kernel_name")  # event-name codes
_TYPE_COLUMNS = ("comm_type",)  # plain strings
_LONGEST_CATS = (schema.CAT_RUNTIME, schema.CAT_DRIVER, schema.CAT_CPU_OP, schema.CAT_OS_RUNTIME)
_API_CATS = (schema.CAT_RUNTIME, schema.CAT_DRIVER)
_COPY_KIND_RE = re.compile(r"\b(HtoD|DtoH|DtoD|PtoP|HtoH)\b")
_COPY_DIRS = {"HtoD": "memcpy_htod", "DtoH": "memcpy_dtoh", "DtoD": "memcpy_dtod", "PtoP": "memcpy_ptop"}


def _sparse(a: np.ndarray) -> pd.arrays.SparseArray:
    """An overlap column stored sparse (zeros not held): of a launch-bound trace's millions of
    gaps, few overlap a comm kernel or a runtime call and fewer still a copy, sync or allocation."""
    return pd.arrays.SparseArray(a, fill_value=0, dtype=_SPARSE_NS)


def _gap_dtypes() -> dict[str, Any]:
    out: dict[str, Any] = {"rank": "int32", "device": "int32", "phase": "float64",
                           "launch_after_gap_start": "bool", **{c: "int32" for c in _INT32_COLUMNS},
                           **{f"{k}_ns": _SPARSE_NS for k in OVERLAP_KINDS}}
    for c in FRAME_COLUMNS:
        if c in _STR_COLUMNS or c in _TYPE_COLUMNS:
            out[c] = "category"
        else:
            out.setdefault(c, "int64")
    return out


def empty_gaps() -> pd.DataFrame:
    """A gaps frame with no rows and the full column set of :func:`find_gaps`."""
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in _gap_dtypes().items()})[list(FRAME_COLUMNS)]


def with_fractions(gaps: pd.DataFrame) -> pd.DataFrame:
    """``gaps`` (or a selection of its rows) with every ``X_frac = X_ns / dur_ns`` column added,
    in ``GAP_COLUMNS`` order; other columns (a class, evidence) follow. For outputs: call it on the
    rows being written, not on a whole multi-million-row frame kept in memory."""
    if "dur_ns" not in gaps.columns:  # nothing to divide by: no fractions to add
        return gaps.copy()
    dur = gaps["dur_ns"].to_numpy(dtype=np.float64)
    fractions = {fc: gaps[f"{kind}_ns"].to_numpy(dtype=np.float64) / dur
                 for kind, fc in zip(OVERLAP_KINDS, FRACTION_COLUMNS, strict=True)
                 if f"{kind}_ns" in gaps.columns and fc not in gaps.columns}
    order = [c for c in GAP_COLUMNS if c in gaps.columns or c in fractions]
    order += [c for c in gaps.columns if c not in order]
    # The fractions joined as one frame, then one selection in order: not 16 insertions into a
    # copy then a reordering copy (each insertion into a frame copies its blocks).
    out = pd.concat([gaps, pd.DataFrame(fractions, index=gaps.index)], axis=1)[order] if fractions else gaps[order]
    out.attrs = copy.deepcopy(gaps.attrs)
    return out


def _covered(v: EventView, rows: np.ndarray, gs: np.ndarray, ge: np.ndarray) -> np.ndarray:
    return intervals.rows_covered(v.start, v.end, rows, gs, ge)


def _per_value(col: pd.Series, fn) -> np.ndarray:
    """``fn`` (array of distinct strings -> array) applied to ``col.astype(str)`` once per distinct
    value (a categorical's categories, plus 'nan' for its missing entries) and broadcast to the rows."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        names = np.append(np.asarray(col.cat.categories.astype(str), dtype=object), "nan")  # code -1: 'nan'
        return np.asarray(fn(names))[col.cat.codes.to_numpy()]
    return np.asarray(fn(col.astype(str).to_numpy(dtype=object)))


def _direction(kinds: Sequence[str] | np.ndarray) -> np.ndarray:
    """Index in ``_COPY_DIRS`` + 1 of each copy kind string (0: none of them)."""
    return np.array([list(_COPY_DIRS).index(k) + 1 if k in _COPY_DIRS else 0 for k in kinds], dtype=np.int8)


def _sorted_copy_args(trace: Trace) -> dict[str, np.ndarray]:
    """The ``copy_args`` side table sorted by row, as arrays per row: ``row``; ``direction`` (see
    :func:`_direction`) and ``has_kind`` of ``copy_kind``; ``has_kinds`` (a source or destination
    memory kind is named), ``pageable`` and ``pinned`` (either kind says so). Built once per trace,
    each string tested once per distinct value: per device or per row it would cost the table's
    length."""
    s = trace.side_table("copy_args")
    if not bool(np.all(np.diff(s["row"].to_numpy()) > 0)):  # rows in order hold no tie: as read, no sort
        s = s.sort_values("row")
    src, dst = s["src_kind"], s["dst_kind"]
    out = {"row": s["row"].to_numpy(), "direction": _per_value(s["copy_kind"], _direction),
           "has_kind": _per_value(s["copy_kind"], lambda k: k != "")}
    # ``src|dst`` holds a word when one of its sides does ('|' is in no word searched for)
    out["has_kinds"] = _per_value(src, lambda k: k != "") | _per_value(dst, lambda k: k != "")
    for key, word in (("pageable", "Pageable"), ("pinned", "Pinned")):
        def has(k: np.ndarray, word: str = word) -> np.ndarray:
            return np.array([word in x for x in k], dtype=bool)
        out[key] = _per_value(src, has) | _per_value(dst, has)
    return out


def _copy_flags(s: dict[str, np.ndarray], v: EventView, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per memcpy row: direction and memory-kind flags, from ``copy_args`` (``s``, see
    :func:`_sorted_copy_args`; else from the name)."""
    names, inverse = v.distinct_names(rows)
    direction = _direction([(m.group(1) if (m := _COPY_KIND_RE.search(str(n))) else "") for n in names])[inverse]
    src = np.array(["Pageable" in str(n) for n in names], dtype=bool)[inverse]
    pinned = np.array(["Pinned" in str(n) for n in names], dtype=bool)[inverse]
    if len(s["row"]) and len(rows):
        pos = np.minimum(np.searchsorted(s["row"], rows), len(s["row"]) - 1)
        hit = s["row"][pos] == rows
        use = hit & s["has_kind"][pos]
        direction[use] = s["direction"][pos[use]]
        has_kinds = hit & s["has_kinds"][pos]
        src[has_kinds] = s["pageable"][pos[has_kinds]]
        pinned[has_kinds] = s["pinned"][pos[has_kinds]]
    flags = {col: direction == i + 1 for i, col in enumerate(_COPY_DIRS.values())}
    flags["memcpy_pageable"] = src
    flags["memcpy_pinned"] = pinned
    # A pageable host-to-device batch copy has its own fix (pin the batch), so it gets its own overlap.
    flags["memcpy_htod_pageable"] = flags["memcpy_htod"] & flags["memcpy_pageable"]
    return flags


def _outer_launches(v: EventView, api: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """The ``launches`` (launch calls among ``api`` rows), minus driver launches nested in a runtime call on the
    same thread (cudaLaunchKernel calling cuLaunchKernel is one launch)."""
    driver = v.cat[launches] == v.cat_codes.get(schema.CAT_DRIVER, -99)
    if not driver.any():
        return launches
    runtime = api[v.cat[api] == v.cat_codes.get(schema.CAT_RUNTIME, -99)]
    nested = np.zeros(len(launches), dtype=bool)
    for tid in np.unique(v.tid[launches[driver]]):  # loop over threads, not calls
        rt = runtime[v.tid[runtime] == tid]
        us, ue = intervals.union(v.start[rt], v.end[rt])
        q = np.flatnonzero(driver & (v.tid[launches] == tid))
        k = np.searchsorted(us, v.start[launches[q]], side="right") - 1
        nested[q] = (k >= 0) & (ue[np.maximum(k, 0)] >= v.end[launches[q]]) if len(us) else False
    return launches[~nested]


def _cat_table(v: EventView, cats: tuple[str, ...]) -> np.ndarray:
    """Bool per category code (the last entry for -1): is it one of ``cats`` (:meth:`EventView.in_cats`' table)."""
    table = np.zeros(len(v.cat_codes) + 1, dtype=bool)
    table[[v.cat_codes[c] for c in cats if c in v.cat_codes]] = True
    return table


def _flagged(v: EventView, rows: np.ndarray, flags: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The ``rows`` (sorted) whose name carries each flag (in row order): the rows of the few names that carry any
    found in the name column (a pass over contiguous codes, not a gather of every row's name), then those among
    ``rows``; no pass at all when no name carries one."""
    tables = [v.name_flags[f] for f in flags]
    anyf = np.asarray(np.stack(tables).any(axis=0))
    codes = np.flatnonzero(anyf[:-1])  # the trailing entry (code -1) never carries a flag
    if len(codes) == 0 or len(rows) == 0:
        return {f: rows[:0] for f in flags}
    cand = np.flatnonzero(intervals.one_of(v.name, codes.astype(v.name.dtype)))
    pos = np.minimum(np.searchsorted(rows, cand), len(rows) - 1)
    cand = rows[pos[rows[pos] == cand]]  # those among ``rows``, in their dtype
    names = v.name[cand]
    return {f: cand[t[names]] for f, t in zip(flags, tables, strict=True)}


class _RankHost:
    """Host-side rows of one rank, selected once and shared by its devices.

    The selections the engine only measures (``calls``, ``api_by_start``, the sync and allocator
    calls) are in start order (by start, then row), sorted once per rank: the interval sweeps need that
    order, and each device would otherwise sort them again."""

    def __init__(self, v: EventView, rank: int) -> None:
        self.api = v.rows((schema.LANE_CPU_THREAD,), _API_CATS, rank=rank)
        host = v.rows((schema.LANE_CPU_THREAD, schema.LANE_CPU_ANNOTATION), rank=rank)
        # The calls and Python frames from one read of the thread rows' categories (selections only the engine
        # reads: not kept in the view's cache); in start order (as intervals.by_start orders them: by start, then
        # row), as the API calls sorted alone are (a third of the rows, not a flag per call through the sort).
        thread = v.rows((schema.LANE_CPU_THREAD,), rank=rank)
        cat = v.cat.take(thread)
        self.calls = intervals.by_start(v.start, thread[_cat_table(v, _LONGEST_CATS).take(cat)])
        self.python = thread[_cat_table(v, (schema.CAT_PYTHON,)).take(cat)] if schema.CAT_PYTHON in v.cat_codes \
            else thread[:0]
        del thread, cat
        self.api_by_start = intervals.by_start(v.start, self.api)
        names = v.name.take(self.api)  # the API calls' flags from one read of their names
        sync_alloc = intervals.by_start(v.start, self.api[(v.name_flags["sync"] | v.name_flags["alloc"]).take(names)])
        self.flagged = {**_flagged(v, host, ("dataloader", "optimizer")),
                        **{f: sync_alloc[v.flag(f, sync_alloc)] for f in ("sync", "alloc")}}
        self.flagged["launch"] = _outer_launches(v, self.api, self.api[v.name_flags["launch"].take(names)])
        del names, sync_alloc
        self.launch_order = row_indices(np.argsort(v.start[self.flagged["launch"]], kind="stable"), len(v.start))
        self.tids = _distinct(v.tid[self.api])
        # Device each launch call targets (-1: nothing linked to it).
        launches = self.flagged["launch"]
        self.launch_device = np.full(len(launches), -1, dtype=np.int32)  # device indices are small
        if len(v.link_host):
            lh, lg = v.links_by_host()
            k = intervals.sorted_positions(lh, launches)
            hit = k >= 0
            self.launch_device[hit] = v.device[lg[k[hit]]]

    @staticmethod
    def on_threads(v: EventView, rows: np.ndarray, tids: np.ndarray, have: np.ndarray | None = None) -> np.ndarray:
        """``rows`` on threads ``tids`` (no copy when all of them already are; ``have``: the rows'
        threads or a superset of them, when known)."""
        tid = v.tid[rows] if have is None else None
        threads = np.asarray(pd.unique(tid) if tid is not None else have)
        inside = np.isin(threads, tids)
        if inside.all():
            return rows
        tid = v.tid[rows] if tid is None else tid
        # An equality pass per thread (threads are few; np.isin sorts or tables over the ids' wide range), over
        # the fewer of the wanted threads and the others: every row's thread is one of ``threads``.
        others = threads[~inside]
        return rows[~intervals.one_of(tid, others)] if len(others) < len(tids) else rows[intervals.one_of(tid, tids)]


def _distinct(tid: np.ndarray) -> np.ndarray:
    """``np.sort(pd.unique(tid))`` of thread ids in row order, which come in runs (a thread's calls one after
    another): the value at each run's start hashed, not every row's."""
    change = np.flatnonzero(tid[1:] != tid[:-1]) + 1
    return np.sort(pd.unique(np.concatenate([tid[:1], tid[change]])))


def _split(w: np.ndarray, gs: np.ndarray, ge: np.ndarray, points: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaps cut at ``points`` that fall strictly inside one (capture-boundary edges)."""
    k = np.searchsorted(gs, points, side="right") - 1
    inside = (k >= 0) & (points < ge[np.maximum(k, 0)]) & (points > gs[np.maximum(k, 0)])
    if not inside.any():
        return w, gs, ge
    pts = points[inside]
    starts = np.sort(np.concatenate([gs, pts]), kind="stable")  # two sorted runs: one merge
    ends = np.sort(np.concatenate([ge, pts]), kind="stable")
    return w[np.searchsorted(gs, starts, side="right") - 1], starts, ends


def _device_gaps(trace: Trace, v: EventView, host: _RankHost, rank: int, device: int,
                 st: pd.DataFrame, copy_args: dict[str, np.ndarray],
                 cuts: np.ndarray) -> dict[str, np.ndarray | pd.arrays.SparseArray | pd.Categorical] | None:
    ws, we = st["start_ns"].to_numpy(), st["end_ns"].to_numpy()
    step_p2p = step_p2p_counts(trace, st)
    crow = compute_rows(v, rank, device)
    us, ue = compute_union(v, rank, device)
    w, gs, ge = _split(*intervals.complement_in_windows(us, ue, ws, we), cuts)
    if len(gs) == 0:
        return None
    n = len(gs)
    dur = ge - gs
    offset = gs - ws[w]
    cols: dict[str, np.ndarray | pd.arrays.SparseArray | pd.Categorical] = {
        "rank": np.full(n, rank, np.int32), "device": np.full(n, device, np.int32),
        "step": st["step"].to_numpy()[w], "start_ns": gs, "end_ns": ge, "dur_ns": dur,
        "offset_ns": offset, "phase": offset / np.maximum(we - ws, 1)[w],  # step lengths: one per step
    }
    ns: dict[str, pd.arrays.SparseArray] = {}  # sparse as soon as measured: most gaps overlap nothing of most kinds
    zeros = _sparse(np.zeros(n, dtype=np.int64))

    def measured(rows: np.ndarray) -> pd.arrays.SparseArray:
        """The rows' overlap with each gap, sparse (copies of one zero column when there are no rows)."""
        return zeros.copy() if len(rows) == 0 else _sparse(_covered(v, rows, gs, ge))
    comm = intervals.by_start(v.start, v.rows((schema.LANE_GPU_COMM,), rank=rank, device=device))
    # What each transfer is comes from the host op that launched it (an all-to-all built from
    # SendRecv kernels is a collective, not point-to-point): see traceread.engine.collective_identity.
    ctype = identify(trace).of(comm)[0]
    p2p = np.isin(ctype, list(P2P_TYPES))
    comm_ns = _covered(v, comm, gs, ge) if len(comm) else None
    ns["comm"] = zeros.copy() if comm_ns is None else _sparse(comm_ns)
    # all of one kind (the common case): that kind's overlap is the comm overlap, measured once
    ns["comm_collective"] = ns["comm"].copy() if not p2p.any() else measured(comm[~p2p])
    ns["comm_p2p"] = ns["comm"].copy() if p2p.all() else measured(comm[p2p])
    cols["comm_type"] = _dominant_type(v, comm, ctype, gs, ge, comm_ns)
    del comm_ns
    cols["step_p2p_count"] = step_p2p.astype(np.int32)[w]  # the frame's dtype already: parts wait for the others
    copies = intervals.by_start(v.start, v.rows((schema.LANE_MEMCPY,), rank=rank, device=device))
    for key, mask in _copy_flags(copy_args, v, copies).items():
        ns[key] = measured(copies[mask])
    ns["memset"] = measured(v.rows((schema.LANE_MEMSET,), rank=rank, device=device))

    # The launching threads of this device: those whose calls launched its GPU ops.
    ops = v.rows(OP_LANES, rank=rank, device=device)
    launch = v.launch_of(ops)
    linked = launch >= 0
    linked_ops, launch = subset(ops, linked), subset(launch, linked)
    launch_tid = v.tid[launch] if len(launch) else v.tid[host.flagged["launch"]]
    tids = _distinct(launch_tid) if len(launch) else host.tids
    main_tid = _busiest(launch_tid)
    del launch_tid
    cols["queue_depth"] = _queue_depth(v, linked_ops, launch, gs).astype(np.int32)
    del ops, linked_ops, launch
    api = host.on_threads(v, host.api_by_start, tids, host.tids)
    ns["cpu_runtime"] = measured(api)
    for key in ("dataloader", "sync", "alloc", "optimizer"):
        ns[key] = measured(host.flagged[key])
    for key in OVERLAP_KINDS:
        cols[f"{key}_ns"] = ns.pop(key)

    order = host.launch_order
    mine = (host.launch_device == device) | (host.launch_device < 0)
    lrows = host.flagged["launch"][order if mine.all() else order[mine[order]]]  # in start order
    lrows = host.on_threads(v, lrows, tids, host.tids)  # launches are API calls
    cols["launch_count"] = intervals.rows_count_in(v.start, lrows, gs, ge).astype(np.int32)
    del lrows, mine
    calls = host.calls  # those on the launching threads take part (tested in the sweep, not selected first)
    length, idx = intervals.rows_longest_overlap(v.start, v.end, calls, gs, ge, v.tid, tids)
    cols["longest_cpu_ns"] = length
    cols["longest_cpu_name"] = v.name_codes_at(calls, idx).astype(np.int32)  # name codes: int32 (as lanes keeps them)

    # The kernel that ends the gap: the compute kernel starting at the gap end (longest first). Its launch
    # is looked up among the compute rows in row order (one merge pass over the links, not a search per gap).
    s = v.start[crow]
    perm = None if intervals.is_sorted(s) else np.argsort(s, kind="stable")  # as intervals.by_start orders them
    order = crow if perm is None else crow[perm]
    k = intervals.rows_starting_at(v.start, v.end, order, ge)
    hit = np.flatnonzero(k >= 0)
    nl = np.full(n, -1, dtype=np.int64)
    nl[hit] = v.launch_of(crow)[k[hit] if perm is None else perm[k[hit]]]
    cols["next_kernel_name"] = v.name_codes_at(order, k).astype(np.int32)
    known = nl >= 0
    launch_start = v.start[nl]
    cols["next_launch_start_ns"] = np.where(known, launch_start, -1)
    cols["next_launch_end_ns"] = np.where(known, v.end[nl], -1)
    cols["launch_after_gap_start"] = known & (launch_start >= gs)
    cols["python_frame"] = _python_frames(v, host, gs, nl, main_tid)

    return cols


def _dominant_type(v: EventView, comm: np.ndarray, ctype: np.ndarray, gs: np.ndarray, ge: np.ndarray,
                   comm_ns: np.ndarray | None = None) -> pd.Categorical:
    """The collective type that covers most of each gap ('' when no comm overlaps it), as a
    categorical of the values present (what ``pd.Categorical`` of the strings would be, made from
    codes: no string per gap). ``comm_ns``: the overlap of all of ``comm`` when already measured."""
    types = sorted(set(ctype.tolist())) if len(comm) else []
    label = np.zeros(len(gs), dtype=np.intp)  # 0: '', k: types[k - 1]
    if len(types) == 1 and comm_ns is not None:  # one type: its cover is the comm overlap
        label[comm_ns > 0] = 1
    elif types:
        # Only the gaps some comm overlaps (when known: few) can have a type; each gap's cover is its own.
        q = np.flatnonzero(comm_ns > 0) if comm_ns is not None else np.arange(len(gs))
        cover = np.stack([_covered(v, comm[ctype == t], gs[q], ge[q]) for t in types])  # types are few
        best = np.argmax(cover, axis=0)
        has = cover.max(axis=0) > 0
        label[q[has]] = best[has] + 1
        del cover, best, has, q
    labels = np.array(["", *types], dtype=object)
    present = np.flatnonzero(np.bincount(label, minlength=len(labels)))
    values = sorted(set(labels[present].tolist()))
    to_code = np.zeros(len(labels), dtype=np.int64)
    to_code[present] = [values.index(x) for x in labels[present]]
    return pd.Categorical.from_codes(to_code[label], categories=pd.Index(values))


def _busiest(tids: np.ndarray) -> int:
    """The most frequent thread id (-1 when there is none)."""
    if len(tids) == 0:
        return -1
    return int(pd.Series(tids).value_counts().idxmax())  # hash counts: tids are few, rows many


def _queue_depth(v: EventView, ops: np.ndarray, launch: np.ndarray, t: np.ndarray) -> np.ndarray:
    """At each time ``t``: launch calls started minus those whose GPU work started (ops linked to
    ``launch`` row by row; a launch with several ops counts once, at its first op)."""
    if len(launch) == 0:
        return np.zeros(len(t), np.int64)
    if len(launch) > 1 and (launch[1:] > launch[:-1]).all():  # one op per launch, in order
        ls, fs = v.start[launch], v.start[ops]
    else:
        o = np.lexsort((v.start[ops], launch))
        lo = launch[o]
        first = np.ones(len(o), bool)
        first[1:] = lo[1:] != lo[:-1]
        ls, fs = v.start[lo[first]], v.start[ops[o[first]]]
    # Launch and op starts in row order are sorted but for a few overlapping threads' calls: timsort
    # (numpy's stable sort) takes such runs in one pass, a twentieth of quicksort's time on them.
    ls = ls if intervals.is_sorted(ls) else np.sort(ls, kind="stable")
    fs = fs if intervals.is_sorted(fs) else np.sort(fs, kind="stable")
    # gap starts are sorted: each count is one merge pass
    return np.maximum(intervals.sorted_count_at_or_before(t, ls) - intervals.sorted_count_at_or_before(t, fs), 0)


def _python_frames(v: EventView, host: _RankHost, gs: np.ndarray, next_launch: np.ndarray, main_tid: int) -> np.ndarray:
    """Innermost python_function frame at each gap start on the thread that launched the next kernel
    (``next_launch``: its launch row, -1 when unknown), else on ``main_tid`` (the device's busiest launching
    thread)."""
    out = np.full(len(gs), v.empty_code, dtype=np.int32)
    if len(host.python) == 0:
        return out
    gap_tid = np.where(next_launch >= 0, v.tid[next_launch], main_tid)
    py_tid = v.tid[host.python]
    for tid in np.unique(gap_tid[gap_tid >= 0]):  # loop over threads, not gaps
        q = np.flatnonzero(gap_tid == tid)
        pr = host.python[py_tid == tid]
        idx = intervals.innermost_covering(gs[q], v.start[pr], v.end[pr])
        out[q] = v.name_codes_at(pr, idx)
    return out


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def find_gaps(trace: Trace, steps_df: pd.DataFrame, cfg: Thresholds | None = None,
              between: Callable[[], None] = _nothing) -> pd.DataFrame:
    """Every compute-idle gap inside every step of every device, with its overlap measurements.

    A gap holding a capture edge (:mod:`traceread.engine.capture_edges`, thresholds from ``cfg``: the
    defaults when None) is cut there, so the stretch outside the capture is a gap of its own.

    In: ``steps_df`` from :func:`traceread.engine.steps.find_steps` (device-extended windows; any
    subset of its rows works, but the steps of one device must not overlap).
    Out: one row per gap, columns ``FRAME_COLUMNS`` (``GAP_COLUMNS`` without the ``X_frac``
    fractions: :func:`with_fractions` adds them), sorted by rank, device, start. Times in ns
    (int64); ``step`` and ``offset_ns`` int32 when every value fits (else int64); ``phase`` = offset_ns / step length; string columns are
    categorical ('' when unknown); ``next_launch_*_ns`` are -1 when the launch is unknown.
    ``between`` is called between devices (each device's temporaries are freed by then) and between the
    columns of the assembled frame.
    """
    v = event_view(trace)
    parts = []
    hosts: dict[int, _RankHost] = {}
    copy_args = _sorted_copy_args(trace)
    cuts = split_points(capture_edges(trace, steps_df, cfg or Thresholds()))
    no_cuts = np.zeros(0, np.int64)
    for (r, d), idx in sorted(schema.rank_device_rows(steps_df).items()):
        st = steps_df.iloc[idx].sort_values("start_ns", kind="stable")
        if int(r) not in hosts:
            hosts.clear()  # devices come rank by rank: the previous rank's host rows are done with
            hosts[int(r)] = _RankHost(v, int(r))
        part = _device_gaps(trace, v, hosts[int(r)], int(r), int(d), st, copy_args,
                            cuts.get((int(r), int(d)), no_cuts))
        if part is not None:
            parts.append(part)
        between()  # the device's temporaries are freed: their pages can go back before the next
    if not parts:
        return empty_gaps()
    return _assemble(v, parts, between)


def _assemble(v: EventView, parts: list[dict[str, Any]], between: Callable[[], None] = _nothing) -> pd.DataFrame:
    """One frame from per-device column dicts, column by column: each part's array is popped (and
    freed) once its column exists, and the frame takes the columns without copying them again."""
    dtypes = _gap_dtypes()
    data: dict[str, Any] = {}
    for c in FRAME_COLUMNS:
        pieces = [p.pop(c) for p in parts]
        if isinstance(pieces[0], pd.Categorical):  # made per device from codes: categories joined, sorted
            data[c] = pieces[0] if len(pieces) == 1 else union_categoricals(pieces, sort_categories=True)
        elif isinstance(pieces[0], pd.arrays.SparseArray):
            data[c] = pieces[0] if len(pieces) == 1 else pd.arrays.SparseArray._concat_same_type(pieces)  # type: ignore[attr-defined]  # pandas' own one-dtype concat (extension-array API), absent from the stubs
        else:
            arr = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            del pieces
            if c in _STR_COLUMNS:
                data[c] = v.categorical(arr)
            elif c in _TYPE_COLUMNS:
                data[c] = pd.Categorical(arr)
            elif c in _NARROW and len(arr) and -2**31 <= int(np.min(arr)) and int(np.max(arr)) < 2**31:
                data[c] = arr.astype(np.int32)
            else:
                data[c] = arr.astype(dtypes[c], copy=False)
            del arr
        if len(parts) > 1:
            between()  # the popped pieces came from the heap: their pages can go back
    return pd.DataFrame(data, copy=False)
