"""The collective table: communication time per collective type and process group, how much of it
compute did not hide, and the bandwidth it reached.

Bandwidths follow the nccl-tests conventions: the message size S is the larger of input and output
(the whole gathered/scattered buffer), algorithm bandwidth = S / time, bus bandwidth = algbw x the
ring factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; others 1.
Message sizes, dtypes and groups come from the ``collective_args`` side table, recorded either on the
kernel itself or on its ``record_param_comms`` op (joined through (rank, External id)). The collective
type is the kernel's identity (:mod:`traceread.collective_identity`: the host op that launched it, the
kernel name only when there is none); ``identified_by`` says which source decided it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread import kernel_classes as kc
from traceread.collective_identity import identify
from traceread.lanes import compute_rows, compute_union, event_view
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
    """Per comm kernel: its collective_args (own row first, else its record_param_comms op's)."""
    args = trace.side_table("collective_args")
    cols = ["collective", "in_nelems", "out_nelems", "dtype", "group_size", "group_name", "group_desc"]
    empty = pd.DataFrame({c: pd.Series([None] * len(comm), dtype=object) for c in cols}, index=comm.index)
    if args.empty:
        return empty
    if "seq" in args.columns:  # recorded sequence numbers travel with the rest (ranks.summary aligns by them)
        cols = [*cols, "seq"]
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


def _joined(f: pd.DataFrame, col: str, keys: pd.Index, skip_empty: bool = False) -> pd.Series:
    """Per (collective, group) of ``keys``: the distinct values of ``col``, sorted and comma-joined ('' for none;
    empty strings left out with ``skip_empty``). Made from the distinct rows, not by a Python pass over every call."""
    u = f[["collective", "group", col]].drop_duplicates()
    if skip_empty:
        u = u[(u[col] != "").to_numpy()]
    j = u.groupby(["collective", "group"], sort=False)[col].agg(lambda s: ",".join(sorted(s)))
    return j.reindex(keys, fill_value="")


def _group_sizes(trace: Trace, name: pd.Series, desc: pd.Series, recorded: pd.Series) -> np.ndarray:
    """Group size per call: recorded, else the pg_config entry of that group, else world size for default_pg."""
    size = pd.to_numeric(recorded, errors="coerce").to_numpy(dtype=np.float64, copy=True)
    size[size <= 0] = np.nan
    pg = {str(p.get("pg_name")): p.get("pg_size") for p in trace.meta.distributed.get("pg_config", []) or []
          if isinstance(p, dict)}
    world = trace.meta.world_size
    # Few distinct groups, many calls: resolve each distinct (name, desc) once.
    key = pd.DataFrame({"n": np.asarray(name, dtype=object), "d": np.asarray(desc, dtype=object)})
    codes = key.groupby(["n", "d"], sort=False).ngroup().to_numpy()
    uniq = key.drop_duplicates()  # same first-appearance order as ngroup(sort=False)
    per = np.array([pg.get(str(n)) or (world if d == "default_pg" else None) or np.nan
                    for n, d in zip(uniq["n"], uniq["d"], strict=True)], dtype=np.float64)
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
    # the comm lane's rows from the engine's view (cached, on category codes): not a string comparison per event
    sel = v.lane_rows(schema.LANE_GPU_COMM)
    comm = ev[["rank", "device", "name", "start_ns", "end_ns", "external_id"]].take(sel).assign(
        row=sel.astype(np.int64))
    if steps_df is not None and len(steps_df) and len(comm):
        comm = comm[_in_steps(comm, steps_df[~steps_df["warmup"]])]
    if comm.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    comm = comm.assign(dur_ns=(comm["end_ns"] - comm["start_ns"]).astype(np.int64))
    # Each unit's compute rows from the engine's view (its cached row selections), not a copy of every
    # compute kernel's columns grouped by unit (0.4 s at 5M kernels).
    exposed = np.zeros(len(comm), dtype=np.int64)
    for (rank, dev), idx in schema.rank_device_rows(comm, observed=True).items():
        c = v.rows((schema.LANE_GPU_COMPUTE,), rank=int(rank), device=int(dev))
        q = comm.iloc[idx]
        # The gap engine's cached busy union when the lane holds only its compute rows (kernels and
        # graphs: the usual case), else the lane's own union.
        same = len(compute_rows(v, int(rank), int(dev))) == len(c)
        us, ue = compute_union(v, int(rank), int(dev)) if same else intervals.union(v.start[c], v.end[c])
        hidden = intervals.overlap_with_union(q["start_ns"].to_numpy(), q["end_ns"].to_numpy(), us, ue)
        exposed[idx] = q["dur_ns"].to_numpy() - hidden
    a = collective_args(trace, comm)
    typ, source = identify(trace).of(comm["row"].to_numpy())
    gname = a["group_name"].fillna("").astype(str)
    gdesc = a["group_desc"].fillna("").astype(str)
    dtype = a["dtype"].fillna("").astype(str)
    elsize = dtype.str.lower().map({k: v[1] for k, v in TORCH_DTYPES.items()}).fillna(0).to_numpy(np.float64)
    nel = np.fmax(pd.to_numeric(a["in_nelems"], errors="coerce").to_numpy(dtype=np.float64),
                  pd.to_numeric(a["out_nelems"], errors="coerce").to_numpy(dtype=np.float64))
    nbytes = np.where((nel > 0) & (elsize > 0), nel * elsize, np.nan)
    f = pd.DataFrame({"collective": typ, "group": gname.to_numpy(), "group_desc": gdesc.to_numpy(),
                      "group_size": _group_sizes(trace, gname, gdesc, a["group_size"]),
                      "dur_ns": comm["dur_ns"].to_numpy(), "exposed_ns": exposed, "bytes": nbytes,
                      "dtype": dtype.to_numpy(), "source": source})
    f["bw_ns"] = np.where(np.isnan(nbytes) | (f["dur_ns"] <= 0), 0, f["dur_ns"])
    f["bw_bytes"] = np.where(f["bw_ns"] > 0, nbytes, 0.0)
    g = f.groupby(["collective", "group"], sort=False)
    out = pd.DataFrame({
        "group_desc": g["group_desc"].first(), "group_size": g["group_size"].max(), "count": g.size(),
        "total_ns": g["dur_ns"].sum(), "exposed_ns": g["exposed_ns"].sum(), "msg_bytes": g["bytes"].median(),
        "dtype": _joined(f, "dtype", g.size().index, skip_empty=True),
        "bw_bytes": g["bw_bytes"].sum(), "bw_ns": g["bw_ns"].sum(),
        "identified_by": _joined(f, "source", g.size().index)}).reset_index()
    out["mean_ns"] = out["total_ns"] / out["count"]
    out["exposed_frac"] = np.where(out["total_ns"] > 0, out["exposed_ns"] / out["total_ns"].clip(lower=1), 0.0)
    out["algbw_gbps"] = np.where(out["bw_ns"] > 0, out["bw_bytes"] / out["bw_ns"].clip(lower=1), np.nan)
    out["bus_factor"] = [bus_factor(c, n) for c, n in zip(out["collective"], out["group_size"], strict=True)]
    out["busbw_gbps"] = out["algbw_gbps"] * out["bus_factor"]
    out = out.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)
    return out[COLUMNS]


def _in_steps(comm: pd.DataFrame, steps: pd.DataFrame) -> np.ndarray:
    """Mask: kernel starts inside one of the steps of its (rank, device)."""
    keep = np.zeros(len(comm), dtype=bool)
    step_rows = schema.rank_device_rows(steps)
    for (rank, dev), idx in schema.rank_device_rows(comm, observed=True).items():
        st = steps.iloc[step_rows.get((rank, dev), np.zeros(0, np.intp))].sort_values("start_ns")
        if st.empty:
            continue
        t = comm["start_ns"].to_numpy()[idx]
        j = np.searchsorted(st["start_ns"].to_numpy(), t, side="right") - 1
        ok = j >= 0
        keep[idx[ok]] = t[ok] < st["end_ns"].to_numpy()[j[ok]]
    return keep
