"""The collective table: communication time per collective type and process group, how much of it
compute did not hide, and the bandwidth it reached.

Bandwidths follow the nccl-tests conventions: the message size S is the larger of input and output
(the whole gathered/scattered buffer), algorithm bandwidth = S / time, bus bandwidth = algbw x the
ring factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; others 1.
Message sizes, dtypes and groups come from the ``collective_args`` side table, recorded either on the
kernel itself or on its ``record_param_comms`` op (joined through (rank, External id)). The collective
type is the kernel's identity (:mod:`traceread.engine.collective_identity`: the host op that launched it, the
kernel name only when there is none); ``identified_by`` says which source decided it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import grouped, intervals, schema
from traceread import kernel_classes as kc
from traceread.engine.collective_identity import identify
from traceread.engine.lanes import compute_rows, compute_union, event_view
from traceread.metrics.precision import TORCH_DTYPES
from traceread.trace import Trace

COLUMNS = ["collective", "group", "group_desc", "group_size", "count", "total_ns", "mean_ns", "exposed_ns",
           "exposed_frac", "msg_bytes", "dtype", "algbw_gbps", "busbw_gbps", "bus_factor", "identified_by"]


def bus_factor(collective: str, n: int | float) -> float:
    """nccl-tests bus-bandwidth factor of ``collective`` over ``n`` ranks (NaN when n is unknown)."""
    if not n or n <= 0 or np.isnan(n):
        return float("nan")
    if collective == kc.COLL_ALL_REDUCE:
        return 2 * (n - 1) / n
    if collective in (kc.COLL_ALL_GATHER, kc.COLL_REDUCE_SCATTER, kc.COLL_ALL_TO_ALL):
        return (n - 1) / n
    return 1.0


def collective_args(trace: Trace, comm: pd.DataFrame) -> pd.DataFrame:
    """Per comm kernel (``comm``: its ``row``, ``rank`` and ``external_id``): its collective_args (own row
    first, else its record_param_comms op's; every value missing when neither has one). Text columns hold
    str or NaN, number columns numbers (NaN where missing)."""
    args = trace.side_table("collective_args")
    cols = ["collective", "in_nelems", "out_nelems", "dtype", "group_size", "group_name", "group_desc"]
    if args.empty:
        return pd.DataFrame({c: pd.Series([None] * len(comm), dtype=object) for c in cols}, index=comm.index)
    if "seq" in args.columns:  # recorded sequence numbers travel with the rest (ranks.summary aligns by them)
        cols = [*cols, "seq"]
    a_row = args["row"].to_numpy(np.int64)
    if len(np.unique(a_row)) != len(a_row):
        return _merged_args(trace, comm, args, cols)  # rows with two records: as the merges give them
    # Found by numpy lookups, not two merges (two frames per trace and per rank of a job: the most of a
    # small trace's collective table)
    ev = trace.events
    v = event_view(trace)
    c_row = comm["row"].to_numpy(np.int64)
    order = np.argsort(a_row, kind="stable")
    at = np.minimum(np.searchsorted(a_row[order], c_row), len(a_row) - 1)
    own = np.where(a_row[order][at] == c_row, order[at], -1)
    # The record_param_comms op's: an args row off the comm lane with an External id, the first per
    # (rank, External id), joined on the kernel's (rank, External id).
    h_rank, h_ext = ev["rank"].to_numpy()[a_row], ev["external_id"].to_numpy()[a_row]
    host = np.flatnonzero((v.lane[a_row] != v.lane_codes.get(schema.LANE_GPU_COMM, -99)) & (h_ext != schema.NO_ID))
    if len(host):
        code, n = grouped.codes(h_rank[host], h_ext[host])
        host = host[np.sort(grouped.first_rows(code, n))]
    pos = grouped.lookup([h_rank[host], h_ext[host]], [comm["rank"].to_numpy(), comm["external_id"].to_numpy()])
    via = host[np.maximum(pos, 0)] if len(host) else pos
    src = np.where(own >= 0, own, np.where(pos >= 0, via, -1))
    return pd.DataFrame({c: _values(args[c], src) for c in cols}, index=comm.index)


def _values(column: pd.Series, src: np.ndarray) -> np.ndarray:
    """``column``'s value at each row ``src`` (-1: missing, NaN)."""
    ok = src >= 0
    if isinstance(column.dtype, pd.CategoricalDtype):
        cats = np.append(np.asarray(column.cat.categories, dtype=object), np.nan)  # code -1: missing
        out = np.full(len(src), np.nan, dtype=object)
        out[ok] = cats[column.cat.codes.to_numpy()[src[ok]]]
        return out
    values = column.to_numpy()
    if values.dtype.kind in "iub":  # numbers: float with NaN where missing, as a join gives them
        taken = values[np.maximum(src, 0)]
        return taken if ok.all() else np.where(ok, taken, np.nan)
    out = np.full(len(src), np.nan, dtype=object if values.dtype.kind not in "f" else np.float64)
    out[ok] = values[src[ok]]
    return out


def _merged_args(trace: Trace, comm: pd.DataFrame, args: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """:func:`collective_args` by joins, for a side table with two records of one row (a join repeats the
    kernel, and the table fails as it always did)."""
    ev = trace.events
    own = comm[["row"]].merge(args, on="row", how="left")
    own.index = comm.index
    rows = args["row"].to_numpy()
    host = args.assign(rank=ev["rank"].to_numpy()[rows], external_id=ev["external_id"].to_numpy()[rows],
                       lane=ev["lane"].take(rows).astype(str).to_numpy())  # the args' rows only: not a string per event
    host = host[(host["lane"] != schema.LANE_GPU_COMM) & (host["external_id"] != schema.NO_ID)]
    host = host.drop_duplicates(["rank", "external_id"])
    via = comm[["rank", "external_id"]].merge(host.drop(columns=["row", "lane"]), how="left",
                                             on=["rank", "external_id"])
    via.index = comm.index
    out = own[cols].astype(object)
    missing = own["collective"].isna().to_numpy()
    out.loc[missing, cols] = via.loc[missing, cols].astype(object).to_numpy()
    return out


def _group_sizes(trace: Trace, name: pd.Series, desc: pd.Series, recorded: pd.Series) -> np.ndarray:
    """Group size per call: recorded, else the pg_config entry of that group, else world size for default_pg."""
    size = pd.to_numeric(recorded, errors="coerce").to_numpy(dtype=np.float64, copy=True)
    size[size <= 0] = np.nan
    pg = {str(p.get("pg_name")): p.get("pg_size") for p in trace.meta.distributed.get("pg_config", []) or []
          if isinstance(p, dict)}
    world = trace.meta.world_size
    # Few distinct groups, many calls: resolve each distinct (name, desc) once.
    # (numbered in order of first appearance by factorizing, not a frame's group-by: the same numbers)
    names, descs = np.asarray(name, dtype=object), np.asarray(desc, dtype=object)
    c_name, u_name = pd.factorize(names)
    c_desc, _ = pd.factorize(descs)
    codes, uniq = pd.factorize(np.asarray(c_name, np.int64) * (len(u_name) + 1) + np.asarray(c_desc, np.int64))
    first = grouped.first_rows(np.asarray(codes, np.int64), len(uniq))
    per = np.array([pg.get(str(n)) or (world if d == "default_pg" else None) or np.nan
                    for n, d in zip(names[first], descs[first], strict=True)], dtype=np.float64)
    fill = per[codes] if len(codes) else np.zeros(0)
    return np.where(np.isnan(size), fill, size)


def collective_table(trace: Trace, steps_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (collective type, process group), columns ``COLUMNS``, by total time.

    ``steps_df`` (``schema.STEP_COLUMNS``) restricts to kernels starting inside a non-warmup step of
    their (rank, device); None counts the whole trace. ``exposed_ns`` is time not overlapped by any
    compute kernel on the same (rank, device). Bandwidths in GB/s (NaN when size or group unknown).
    """
    ev = trace.events
    v = event_view(trace)
    # the comm lane's rows from the engine's view (cached, on category codes): not a string comparison per
    # event; its columns as arrays, grouped with numpy (pandas' cost per operation was most of this table's
    # time on a small trace)
    sel = v.lane_rows(schema.LANE_GPU_COMM).astype(np.int64)
    if steps_df is not None and len(steps_df) and len(sel):
        sel = sel[_in_steps(v.rank[sel], v.device[sel], v.start[sel], steps_df[~steps_df["warmup"].to_numpy(bool)])]
    if len(sel) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    rank, dev, start, end = v.rank[sel], v.device[sel], v.start[sel], v.end[sel]
    dur = (end - start).astype(np.int64)
    # Each unit's compute rows from the engine's view (its cached row selections), not a copy of every
    # compute kernel's columns grouped by unit.
    exposed = np.zeros(len(sel), dtype=np.int64)
    unit, n_units = grouped.codes(rank, dev)
    for u, first in enumerate(grouped.first_rows(unit, n_units)):
        idx = np.flatnonzero(unit == u)
        r, d = int(rank[first]), int(dev[first])
        c = v.rows((schema.LANE_GPU_COMPUTE,), rank=r, device=d)
        # The gap engine's cached busy union when the lane holds only its compute rows (kernels and
        # graphs: the usual case), else the lane's own union.
        same = len(compute_rows(v, r, d)) == len(c)
        us, ue = compute_union(v, r, d) if same else intervals.union(v.start[c], v.end[c])
        exposed[idx] = dur[idx] - intervals.overlap_with_union(start[idx], end[idx], us, ue)
    comm = pd.DataFrame({"row": sel, "rank": rank, "external_id": ev["external_id"].to_numpy()[sel]})
    a = collective_args(trace, comm)
    typ, source = identify(trace).of(sel)
    gname = a["group_name"].fillna("").astype(str)
    gdesc = a["group_desc"].fillna("").astype(str)
    dtype = a["dtype"].fillna("").astype(str)
    elsize = dtype.str.lower().map({k: v[1] for k, v in TORCH_DTYPES.items()}).fillna(0).to_numpy(np.float64)
    nel = np.fmax(pd.to_numeric(a["in_nelems"], errors="coerce").to_numpy(dtype=np.float64),
                  pd.to_numeric(a["out_nelems"], errors="coerce").to_numpy(dtype=np.float64))
    nbytes = np.where((nel > 0) & (elsize > 0), nel * elsize, np.nan)
    return _by_group(typ, gname.to_numpy(), gdesc.to_numpy(), _group_sizes(trace, gname, gdesc, a["group_size"]),
                     dur, exposed, nbytes, dtype.to_numpy(), source)


def _by_group(typ: np.ndarray, gname: np.ndarray, gdesc: np.ndarray, gsize: np.ndarray, dur: np.ndarray,
              exposed: np.ndarray, nbytes: np.ndarray, dtype: np.ndarray, source: np.ndarray) -> pd.DataFrame:
    """The table: per (collective, group) in order of first appearance (a group-by with ``sort=False``),
    then by total time (ties in that order)."""
    c_typ, u_typ = pd.factorize(typ)
    c_name, u_name = pd.factorize(gname)
    code, uniq = pd.factorize(np.asarray(c_typ, np.int64) * (len(u_name) + 1) + np.asarray(c_name, np.int64))
    code, n = np.asarray(code, dtype=np.int64), len(uniq)
    first = grouped.first_rows(code, n)
    count = grouped.sizes(code, n)
    total, exp_ns, bw_ns = (np.zeros(n, dtype=np.int64) for _ in range(3))
    np.add.at(total, code, dur)
    np.add.at(exp_ns, code, exposed)
    bw_ns_row = np.where(np.isnan(nbytes) | (dur <= 0), 0, dur)
    np.add.at(bw_ns, code, bw_ns_row)
    size = np.full(n, np.nan)
    np.fmax.at(size, code, gsize)  # the largest known size (NaN when none is)
    bw_bytes = grouped.total(np.where(bw_ns_row > 0, nbytes, 0.0), code, n)
    collective = typ[first]
    algbw = np.where(bw_ns > 0, bw_bytes / np.maximum(bw_ns, 1), np.nan)
    factor = np.array([bus_factor(c, k) for c, k in zip(collective, size, strict=True)], dtype=np.float64)
    # Every column made as an array, in table order (ties keep their order), then the frame once: not a frame
    # grown a column at a time, reordered, then selected.
    order = np.argsort(-total, kind="stable")
    cols = {"collective": collective, "group": gname[first], "group_desc": gdesc[first], "group_size": size,
            "count": count, "total_ns": total, "mean_ns": total / count,
            "exposed_ns": exp_ns, "exposed_frac": np.where(total > 0, exp_ns / np.maximum(total, 1), 0.0),
            "msg_bytes": grouped.median(nbytes, code, n), "dtype": _joined(code, n, dtype, skip_empty=True),
            "algbw_gbps": algbw, "busbw_gbps": algbw * factor, "bus_factor": factor,
            "identified_by": _joined(code, n, source)}
    return pd.DataFrame({c: cols[c][order] for c in COLUMNS})


def _joined(code: np.ndarray, n: int, values: np.ndarray, skip_empty: bool = False) -> np.ndarray:
    """Per group: the distinct ``values`` of its rows, sorted and comma-joined ('' for none; empty strings
    left out with ``skip_empty``). Made from the distinct (group, value) pairs, not a pass over every call."""
    words, at = pd.factorize(values)
    words = np.where(np.asarray(words) < 0, len(at), words).astype(np.int64)  # a missing value: none
    pairs = np.unique(code * (len(at) + 1) + words)
    found: list[list[str]] = [[] for _ in range(n)]
    for g, w in zip((pairs // (len(at) + 1)).tolist(), (pairs % (len(at) + 1)).tolist(), strict=True):
        if w < len(at) and not (skip_empty and at[w] == ""):
            found[g].append(at[w])
    return np.array([",".join(sorted(f)) for f in found], dtype=object)


def _in_steps(rank: np.ndarray, dev: np.ndarray, start: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Mask: kernel starts inside one of the steps of its (rank, device)."""
    keep = np.zeros(len(start), dtype=bool)
    s_rank, s_dev = steps["rank"].to_numpy(), steps["device"].to_numpy()
    s_start, s_end = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    unit, n_units = grouped.codes(rank, dev)
    for u, first in enumerate(grouped.first_rows(unit, n_units)):
        idx = np.flatnonzero(unit == u)
        mine = np.flatnonzero((s_rank == rank[first]) & (s_dev == dev[first]))
        if len(mine) == 0:
            continue
        mine = mine[np.argsort(s_start[mine], kind="quicksort")]  # as the frame's sort_values (ties alike)
        t = start[idx]
        j = np.searchsorted(s_start[mine], t, side="right") - 1
        ok = j >= 0
        keep[idx[ok]] = t[ok] < s_end[mine][j[ok]]
    return keep
