"""GPU time per host operator and per ``nn.Module``: which framework code the kernels came from.

* :func:`op_table`: each GPU kernel (the kernel table's: compute and communication lanes) belongs to
  the **innermost** framework op (``cpu_op``: an ATen op of a Kineto trace, an ``emit_nvtx`` op range of
  an Nsight Systems export) enclosing its launch call on the launching thread, as HTA's kernels with
  user annotations and TraceLens' op table attribute them. Kernels launched outside any op form the row
  ``(no op)``, kernels whose launch call the trace does not hold (no correlation, a capture window
  that cut it) the row ``(launch not recorded)``, so the rows sum to the kernel table's total.
  Columns ``op, kernels, calls, total_ns, mean_ns, share`` (``calls``: op calls that launched kernels,
  ``mean_ns``: GPU time per kernel, ``share``: of all kernel time).
* :func:`module_table`: the same kernels under the ``nn.Module`` frames a Kineto trace records with
  ``with_stack``/``with_modules`` (``python_function`` events named ``nn.Module: Linear_0``; the number
  is the instance of that class). ``gpu_ns`` counts every kernel launched inside the module (its
  children's too), ``self_ns`` those whose innermost module it is; the ``(no module)`` row holds the
  kernels launched outside every module (backward, optimizer), so ``self_ns`` sums to the kernel total.
  A trace without module frames gives an empty table (its note says why).

Threads are matched by (rank, pid, tid); the search is one ``innermost_covering`` per thread (a loop
over threads, not events).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.engine.lanes import EventView, event_view
from traceread.metrics.kernels import _kernel_rows
from traceread.trace import Trace

OP_COLUMNS = ["op", "kernels", "calls", "total_ns", "mean_ns", "share"]
MODULE_COLUMNS = ["module", "depth", "calls", "kernels", "gpu_ns", "self_ns", "share"]
_EXACT_FLOAT = 1 << 53  # integers up to here add exactly as float64 (bincount's weights)
NO_OP = "(no op)"
NO_LAUNCH = "(launch not recorded)"
NO_MODULE = "(no module)"
MODULE_PREFIX = "nn.Module: "


def _sums(inv: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Exact int64 sums of ``values`` per group ``inv`` (``counts`` per group, none empty): a sort and
    ``add.reduceat`` (``np.add.at`` is many times slower, bincount's weights are floats)."""
    order = np.argsort(inv, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    return np.add.reduceat(values[order].astype(np.int64), starts).astype(np.int64)


def _thread_key(v: EventView, rows: np.ndarray) -> np.ndarray:
    """One int per (rank, pid, tid) of ``rows``: ``pd.factorize``'s numbers (:func:`_factorized`), not sorted; a
    sort of every op row was most of this table's time."""
    cols, lows, bits = [], [], []
    for col in (v.rank, v.pid, v.tid):
        c = col.take(rows)
        lo, hi = (int(c.min()), int(c.max())) if len(c) else (0, 0)
        if hi > lo:  # a column with one value tells no thread apart: left out of the key
            cols.append(c)
            lows.append(lo)
            bits.append((hi - lo).bit_length())
    if not cols:  # one thread
        return np.zeros(len(rows), dtype=np.int64)
    if len(cols) == 1:  # one column tells the threads apart (its codes are the key's)
        return _factorized(cols[0])
    if sum(bits) <= 62:  # the columns fit one int64: packed, then hashed once (not three times)
        packed = np.zeros(len(rows), dtype=np.int64)
        for c, lo, b in zip(cols, lows, bits, strict=True):
            packed <<= b
            packed += c
            packed -= lo
        return _factorized(packed)
    code = np.zeros(len(rows), dtype=np.int64)
    for col in (v.rank, v.pid, v.tid):
        c, uniq = pd.factorize(col[rows])
        code = code * (len(uniq) + 1) + c
        code = pd.factorize(code)[0].astype(np.int64)  # dense again: the product never overflows
    return code


def _factorized(values: np.ndarray) -> np.ndarray:
    """``pd.factorize(values)[0]`` (int64) of integers that come in runs (a thread's rows one after another):
    the distinct values, in order of first appearance, are those of the runs' first rows (a value first
    appears where a run starts), and while they are few each one's rows are found by an equality pass
    instead of hashing every row."""
    change = np.flatnonzero(values[1:] != values[:-1])
    change += 1
    uniq = pd.unique(np.concatenate([values[:1], values[change]]))
    del change
    if len(uniq) > _FEW_THREADS:
        return pd.factorize(values)[0].astype(np.int64, copy=False)
    code = np.zeros(len(values), dtype=np.int64)
    for i, u in enumerate(uniq[1:].tolist(), start=1):
        code[values == u] = i
    return code


# The most distinct threads :func:`_factorized` numbers by equality passes (beyond it, a hash table).
_FEW_THREADS = 8


def _innermost_on_thread(v: EventView, at_rows: np.ndarray, times: np.ndarray, cand: np.ndarray,
                         cand_start: np.ndarray | None = None, cand_end: np.ndarray | None = None) -> np.ndarray:
    """Per query (a host row ``at_rows`` giving the thread, and a time), the innermost ``cand`` row on the
    same (rank, pid, tid) covering the time, -1 for none (``cand_start``/``cand_end``: their times, when
    the caller holds them).

    :func:`traceread.intervals.innermost_covering`'s answer on each thread's candidates, for every thread
    at once: the threads' candidates laid end to end on one int64 key (thread code x span + time), so
    one sort of their ends, one sort of their depths and four ``searchsorted`` answer every query, with
    no loop over threads or depths (that function's loop over depths, run per thread, was most of the
    op table's time). A candidate's depth counts the candidates covering its start; the innermost
    covering a time sits at (candidates covering it - 1) and is the last of that depth starting by it."""
    out = np.full(len(at_rows), -1, dtype=np.int64)
    s = v.start[cand].astype(np.int64) if cand_start is None else cand_start
    e = v.end[cand].astype(np.int64) if cand_end is None else cand_end
    real = e > s  # a zero-length frame covers no time
    if not real.all():
        cand, s, e = cand[real], s[real], e[real]
    if len(at_rows) == 0 or len(cand) == 0:
        return out
    t = np.asarray(times, dtype=np.int64)
    key = _thread_key(v, np.concatenate([cand, at_rows]))
    n_th = int(key.max()) + 1
    tc, tq = key[:len(cand)], key[len(cand):]
    base = min(int(s.min()), int(t.min()))
    span = max(int(e.max()), int(t.max())) - base + 1
    if span > (1 << 62) // n_th:  # the key would overflow: thread by thread instead
        return _innermost_per_thread(at_rows, t, tc, tq, cand, s, e, out)
    sk, ek, qk = tc * span + (s - base), tc * span + (e - base), tq * span + (t - base)
    # Thread-major, start order, outer first on equal starts: a stable sort by thread code keeps each
    # thread's candidates in row order, which a Kineto or Nsight Systems thread already has by start.
    order = np.argsort(tc.astype(np.int16) if n_th < (1 << 15) else tc, kind="stable")
    sk, ek = sk[order], ek[order]
    step = np.diff(sk)
    if not bool(((step > 0) | ((step == 0) & (np.diff(ek) <= 0))).all()):
        again = np.lexsort((-ek, sk))
        order, sk, ek = order[again], sk[again], ek[again]
    ends = np.sort(ek, kind="stable")  # nearly sorted already (a call stack's ends): runs merge fast
    n = len(order)
    # Counts of sorted keys at or before sorted times: merge passes (intervals.sorted_count_at_or_before),
    # not a binary search per time. The queries are sorted for theirs (launches come nearly in time order).
    depth = np.arange(n, dtype=np.int64) - intervals.sorted_count_at_or_before(sk, ends)
    q_order = None if intervals.is_sorted(qk) else np.argsort(qk, kind="stable")
    q_sorted = qk if q_order is None else qk[q_order]
    last = _unsorted(intervals.sorted_count_at_or_before(q_sorted, sk), q_order)
    last -= 1  # the last candidate starting by each query
    want = last - _unsorted(intervals.sorted_count_at_or_before(q_sorted, ends), q_order)  # covering count - 1
    del q_sorted, q_order
    # The innermost is the last candidate at depth ``want`` starting by the query: mostly the last one starting
    # by it (its own depth is ``want``); the others are searched among the candidates by depth.
    j = np.maximum(last, 0)
    found = depth[j] == want
    rest = np.flatnonzero(~found & (want >= 0))
    if len(rest):
        by_depth = np.argsort(depth.astype(np.int16) if int(depth.max()) < (1 << 15) else depth, kind="stable")
        pos = np.searchsorted(depth[by_depth] * n + by_depth, want[rest] * n + last[rest], side="right") - 1
        j[rest] = by_depth[np.maximum(pos, 0)]
        found[rest] = pos >= 0
    ok = (want >= 0) & found & (depth[j] == want) & (ek[j] > qk) & (sk[j] // span == tq)
    out[ok] = cand[order[j[ok]]]
    return out


def _unsorted(values: np.ndarray, order: np.ndarray | None) -> np.ndarray:
    """``values`` given in ``order`` (None: in their own order) put back in the original one."""
    if order is None:
        return values
    out = np.empty_like(values)
    out[order] = values
    return out


def _innermost_per_thread(at_rows: np.ndarray, t: np.ndarray, tc: np.ndarray, tq: np.ndarray, cand: np.ndarray,
                          s: np.ndarray, e: np.ndarray, out: np.ndarray) -> np.ndarray:
    """:func:`_innermost_on_thread` for times too far apart for one key: a loop over threads, not events."""
    for k in np.unique(tq):
        mine = np.flatnonzero(tc == k)
        q = np.flatnonzero(tq == k)
        j = intervals.innermost_covering(t[q], s[mine], e[mine])
        out[q[j >= 0]] = cand[mine[j[j >= 0]]]
    return out


def kernel_owners(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernels (rows), their launch rows (-1: unlinked) and their owning op rows (-1: none)."""
    v = event_view(trace)
    rows = _kernel_rows(trace).astype(np.int64)
    launch = np.asarray(v.launch_of(rows), dtype=np.int64)
    ops = v.rows((schema.LANE_CPU_THREAD,), cats=(schema.CAT_CPU_OP,)).astype(np.int64, copy=False)
    ok = np.flatnonzero(launch >= 0)
    owner = np.full(len(rows), -1, dtype=np.int64)
    if len(ok) == 0 or len(ops) == 0:
        return rows, launch, owner
    # Only an op covering some launch call (of any thread) can own a kernel: the others (most ops launch
    # nothing) leave the search, which a subset of a laminar set answers the same. An op covers one when
    # the first launch at or after its start is before its end.
    t = v.start[launch[ok]].astype(np.int64)
    at = np.sort(t, kind="stable")  # launches in kernel order: nearly in time order, runs merge fast
    s, e = v.start[ops].astype(np.int64, copy=False), v.end[ops].astype(np.int64, copy=False)
    covers = np.flatnonzero(_covers_a_launch(s, e, at))
    owner[ok] = _innermost_on_thread(v, launch[ok], t, ops[covers], s[covers], e[covers])
    return rows, launch, owner


def _covers_a_launch(s: np.ndarray, e: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Bool per op ``[s, e)``: the first launch time of the sorted ``at`` at or after its start is before its end.
    The ops' starts in sorted order (an op's thread records them nearly so: a merge of its runs) meet the launch
    times in one merge pass (the count of those before a start is the count at or before start - 1), not a
    binary search per op."""
    if len(s) == 0 or int(s.min()) == intervals.INT64_MIN:  # (no start - 1 to ask for)
        first = np.searchsorted(at, s, side="left")
    else:
        order = None if intervals.is_sorted(s) else np.argsort(s, kind="stable")
        first = _unsorted(intervals.sorted_count_at_or_before((s if order is None else s[order]) - 1, at), order)
    np.minimum(first, len(at) - 1, out=first)
    nearest = at[first]
    return (nearest < e) & (nearest >= s)


def op_table(trace: Trace, owners: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """GPU time per launching op (``OP_COLUMNS``), by total time; the rows sum to the kernel total."""
    v = event_view(trace)
    rows, launch, owner = kernel_owners(trace) if owners is None else owners
    if len(rows) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(
            OP_COLUMNS, ["object", "int64", "int64", "int64", "float64", "float64"], strict=True)})
    dur = (v.end[rows] - v.start[rows]).astype(np.int64, copy=False)
    no_name = len(v.names)  # codes past every name: the (no op) and (launch not recorded) rows
    code = np.where(owner >= 0, v.name[np.maximum(owner, 0)].astype(np.int64), no_name)
    code = np.where(code < 0, no_name, code)
    code = np.where(launch < 0, no_name + 1, code)
    # Per name code, by bincount over the codes (a few thousand names): no sort of the kernels
    n_codes = no_name + 2
    kernels = np.bincount(code, minlength=n_codes).astype(np.int64)
    used = np.flatnonzero(kernels)
    if int(np.abs(dur).sum()) < _EXACT_FLOAT:  # every partial sum is an exact float: the int64 sums
        total = np.bincount(code, weights=dur, minlength=n_codes).astype(np.int64)[used]
    else:
        inv = np.searchsorted(used, code)
        total = _sums(inv, dur, kernels[used])
    kernels = kernels[used]
    # op calls: the distinct owner rows, counted by their name (an op row has one name)
    seen = np.zeros(len(v.name), dtype=bool)
    seen[owner[owner >= 0]] = True
    called = v.name[np.flatnonzero(seen)].astype(np.int64)
    calls = np.bincount(np.where(called < 0, no_name, called), minlength=n_codes).astype(np.int64)[used]
    special = {no_name: NO_OP, no_name + 1: NO_LAUNCH}
    label = np.array([special.get(int(c)) or str(v.names[c]) for c in used], dtype=object)  # per distinct op
    all_ns = int(total.sum())
    out = pd.DataFrame({"op": label, "kernels": kernels, "calls": calls, "total_ns": total,
                        "mean_ns": total / kernels, "share": total / all_ns if all_ns > 0 else 0.0})
    return out.sort_values(["total_ns", "op"], ascending=[False, True], kind="stable").reset_index(drop=True)


def module_frames(trace: Trace) -> np.ndarray:
    """Rows of the ``nn.Module`` frames (python_function events named ``nn.Module: ...``)."""
    v = event_view(trace)
    if not any(str(x).startswith(MODULE_PREFIX) for x in v.names):  # no such name at all: no row to look for
        return np.zeros(0, dtype=np.int64)
    py = v.rows((schema.LANE_CPU_THREAD,), cats=(schema.CAT_PYTHON,)).astype(np.int64)
    if len(py) == 0:
        return py
    names, at = v.distinct_names(py)
    is_module = np.array([str(x).startswith(MODULE_PREFIX) for x in names], dtype=bool)  # per distinct name
    return py[is_module[at]]


def module_table(trace: Trace, owners: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """GPU time per ``nn.Module`` (``MODULE_COLUMNS``, by ``gpu_ns``); empty when none is recorded."""
    v = event_view(trace)
    mods = module_frames(trace)
    if len(mods) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(
            MODULE_COLUMNS, ["object", "int64", "int64", "int64", "int64", "int64", "float64"], strict=True)})
    rows, launch, _owner = kernel_owners(trace) if owners is None else owners
    dur = (v.end[rows] - v.start[rows]).astype(np.int64)
    all_ns = int(dur.sum())
    linked = np.flatnonzero(launch >= 0)
    # self: the innermost module frame around each launch
    inner = np.full(len(rows), -1, dtype=np.int64)
    inner[linked] = _innermost_on_thread(v, launch[linked], v.start[launch[linked]], mods)
    # inclusive: per frame, the kernels launched on its thread inside it (prefix sums over launch times)
    gpu = np.zeros(len(mods), dtype=np.int64)
    count = np.zeros(len(mods), dtype=np.int64)
    if len(linked):
        key = _thread_key(v, np.concatenate([launch[linked], mods]))
        kl, km = key[:len(linked)], key[len(linked):]
        for k in np.unique(km):  # a loop over threads, not events
            q = np.flatnonzero(kl == k)
            m = np.flatnonzero(km == k)
            if len(q) == 0:
                continue
            t = v.start[launch[linked[q]]]
            o = np.argsort(t, kind="stable")
            t, d = t[o], dur[linked[q]][o]
            csum = np.concatenate(([0], np.cumsum(d)))
            lo = np.searchsorted(t, v.start[mods[m]], side="left")
            hi = np.searchsorted(t, v.end[mods[m]], side="left")
            gpu[m] = csum[hi] - csum[lo]
            count[m] = hi - lo
    # depth: how many module frames enclose a frame's start on its thread (laminar: the frames nest)
    depth = np.zeros(len(mods), dtype=np.int64)
    key = _thread_key(v, mods)
    for k in np.unique(key):
        m = np.flatnonzero(key == k)
        s, e = v.start[mods[m]], v.end[mods[m]]
        ends = np.sort(e, kind="stable")  # a thread's frames in row order: ends nearly in order
        order = np.lexsort((-e, s))
        # frames started before (outer first on ties) minus those ended by then
        started = np.empty(len(m), dtype=np.int64)
        started[order] = np.arange(len(m))
        depth[m] = started - np.searchsorted(ends, s, side="right")
    self_ns = np.zeros(len(mods), dtype=np.int64)
    pos = np.searchsorted(mods, inner[inner >= 0])
    np.add.at(self_ns, pos, dur[inner >= 0])
    names = v.map_names(mods, lambda ns: np.array([str(x)[len(MODULE_PREFIX):] for x in ns], dtype=object))
    f = pd.DataFrame({"module": names, "depth": depth, "gpu_ns": gpu, "kernels": count, "self_ns": self_ns})
    g = f.groupby(["module", "depth"], sort=False)
    out = pd.DataFrame({"calls": g.size(), "kernels": g["kernels"].sum(), "gpu_ns": g["gpu_ns"].sum(),
                        "self_ns": g["self_ns"].sum()}).reset_index()
    outside = int(dur[inner < 0].sum())
    out = pd.concat([out, pd.DataFrame({"module": [NO_MODULE], "depth": [0], "calls": [0],
                                        "kernels": [int((inner < 0).sum())], "gpu_ns": [outside],
                                        "self_ns": [outside]})], ignore_index=True)
    out["share"] = out["gpu_ns"] / all_ns if all_ns > 0 else 0.0
    out = out.sort_values(["gpu_ns", "depth", "module"], ascending=[False, True, True], kind="stable")
    return out.reset_index(drop=True)[MODULE_COLUMNS].astype({c: "int64" for c in MODULE_COLUMNS[1:6]})
