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
  A trace without module frames gives an empty table and :data:`NO_MODULES` says why.

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
NO_OP = "(no op)"
NO_LAUNCH = "(launch not recorded)"
NO_MODULE = "(no module)"
MODULE_PREFIX = "nn.Module: "
NO_MODULES = ("the trace records no nn.Module hierarchy (Kineto python_function frames 'nn.Module: ...', "
              "recorded with with_stack=True; Nsight Systems exports have none)")


def _sums(inv: np.ndarray, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Exact int64 sums of ``values`` per group ``inv`` (``counts`` per group, none empty): a sort and
    ``add.reduceat`` (``np.add.at`` is many times slower, bincount's weights are floats)."""
    order = np.argsort(inv, kind="stable")
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    return np.add.reduceat(values[order].astype(np.int64), starts).astype(np.int64)


def _thread_key(v: EventView, rows: np.ndarray) -> np.ndarray:
    """One int per (rank, pid, tid) of ``rows``: hashed (``pd.factorize``), not sorted; a sort of every
    op row was most of this table's time."""
    cols = [np.asarray(col[rows], dtype=np.int64) for col in (v.rank, v.pid, v.tid)]
    lows = [int(c.min()) if len(c) else 0 for c in cols]
    bits = [(int(c.max()) - lo).bit_length() if len(c) else 0 for c, lo in zip(cols, lows, strict=True)]
    if sum(bits) <= 62:  # the three fit one int64: packed, then hashed once (not three times)
        packed = np.zeros(len(rows), dtype=np.int64)
        for c, lo, b in zip(cols, lows, bits, strict=True):
            packed = (packed << b) | (c - lo)
        return pd.factorize(packed)[0].astype(np.int64)
    code = np.zeros(len(rows), dtype=np.int64)
    for col in (v.rank, v.pid, v.tid):
        c, uniq = pd.factorize(col[rows])
        code = code * (len(uniq) + 1) + c
        code = pd.factorize(code)[0].astype(np.int64)  # dense again: the product never overflows
    return code


def _innermost_on_thread(v: EventView, at_rows: np.ndarray, times: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Per query (a host row ``at_rows`` giving the thread, and a time), the innermost ``cand`` row on the
    same (rank, pid, tid) covering the time, -1 for none."""
    out = np.full(len(at_rows), -1, dtype=np.int64)
    if len(at_rows) == 0 or len(cand) == 0:
        return out
    key = _thread_key(v, np.concatenate([at_rows, cand]))
    kq, kc = key[:len(at_rows)], key[len(at_rows):]
    c_order = np.argsort(kc, kind="stable")
    kc_sorted = kc[c_order]
    for k in np.unique(kq):  # a loop over threads, not events
        lo, hi = np.searchsorted(kc_sorted, [k, k + 1])
        if lo == hi:
            continue
        mine = cand[c_order[lo:hi]]
        q = np.flatnonzero(kq == k)
        j = intervals.innermost_covering(times[q], v.start[mine], v.end[mine])
        out[q[j >= 0]] = mine[j[j >= 0]]
    return out


def kernel_owners(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernels (rows), their launch rows (-1: unlinked) and their owning op rows (-1: none)."""
    v = event_view(trace)
    rows = _kernel_rows(trace).astype(np.int64)
    launch = np.asarray(v.launch_of(rows), dtype=np.int64)
    ops = v.rows((schema.LANE_CPU_THREAD,), cats=(schema.CAT_CPU_OP,)).astype(np.int64)
    ok = np.flatnonzero(launch >= 0)
    # Only an op covering some launch call (of any thread) can own a kernel: the others (most ops launch
    # nothing) leave the search, which a subset of a laminar set answers the same.
    at = np.sort(v.start[launch[ok]])
    ops = ops[np.searchsorted(at, v.end[ops]) > np.searchsorted(at, v.start[ops])]
    owner = np.full(len(rows), -1, dtype=np.int64)
    owner[ok] = _innermost_on_thread(v, launch[ok], v.start[launch[ok]], ops)
    return rows, launch, owner


def op_table(trace: Trace, owners: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """GPU time per launching op (``OP_COLUMNS``), by total time; the rows sum to the kernel total."""
    v = event_view(trace)
    rows, launch, owner = kernel_owners(trace) if owners is None else owners
    if len(rows) == 0:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(
            OP_COLUMNS, ["object", "int64", "int64", "int64", "float64", "float64"], strict=True)})
    dur = (v.end[rows] - v.start[rows]).astype(np.int64)
    no_name = len(v.names)  # codes past every name: the (no op) and (launch not recorded) rows
    code = np.where(owner >= 0, v.name[np.maximum(owner, 0)].astype(np.int64), no_name)
    code = np.where(code < 0, no_name, code)
    code = np.where(launch < 0, no_name + 1, code)
    used, inv = np.unique(code, return_inverse=True)
    inv = inv.reshape(-1)
    n = len(used)
    kernels = np.bincount(inv, minlength=n).astype(np.int64)
    total = _sums(inv, dur, kernels)
    # op calls: distinct owner rows per name
    has = owner >= 0
    # (an op row has one name: its distinct rows, counted by the name's group)
    first = np.unique(owner[has], return_index=True)[1]
    calls = np.bincount(inv[has][first], minlength=n).astype(np.int64)
    special = {no_name: NO_OP, no_name + 1: NO_LAUNCH}
    label = np.array([special.get(int(c)) or str(v.names[c]) for c in used], dtype=object)  # per distinct op
    all_ns = int(total.sum())
    out = pd.DataFrame({"op": label, "kernels": kernels, "calls": calls, "total_ns": total,
                        "mean_ns": total / kernels, "share": total / all_ns if all_ns > 0 else 0.0})
    return out.sort_values(["total_ns", "op"], ascending=[False, True], kind="stable").reset_index(drop=True)


def module_frames(trace: Trace) -> np.ndarray:
    """Rows of the ``nn.Module`` frames (python_function events named ``nn.Module: ...``)."""
    v = event_view(trace)
    py = v.rows((schema.LANE_CPU_THREAD,), cats=(schema.CAT_PYTHON,)).astype(np.int64)
    if len(py) == 0:
        return py
    is_module = np.array([str(x).startswith(MODULE_PREFIX) for x in v.names], dtype=bool)  # per distinct name
    return py[is_module[v.name[py]]]


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
        ends = np.sort(e)
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
