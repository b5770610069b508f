"""The kernel table: where GPU time goes by kernel and by class, launch statistics, and hints.

All functions read a loaded :class:`~traceread.trace.Trace` and return plain data; work is
vectorized over kernels (per-name work loops over distinct names only).

* :func:`kernel_table`: one row per kernel name — ``name, class, count, total_ns, mean_ns,
  median_ns, max_ns, share`` (share of all kernel time, compute and communication), by total desc.
* :func:`class_shares`: one row per kernel class — ``class, count, total_ns, share``.
* :func:`launch_stats`: kernels linked to their launch call (rank, pid, correlation; see
  :mod:`traceread.engine.lanes`), how many ran shorter than their launch call, and the launch-to-GPU-start
  latency distribution.
* :func:`kernel_hints`: partial-wave grids, fp32 SIMT GEMMs in a bf16/fp16 run, pageable copies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import kernel_classes as kc
from traceread import schema
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.kernel_classes import name_mask
from traceread.metrics.precision import matmul_precisions
from traceread.trace import Trace

TABLE_COLUMNS = ["name", "class", "count", "total_ns", "mean_ns", "median_ns", "max_ns", "share"]
# SIMT (non-tensor-core) fp32 GEMMs: cuBLAS sgemm, gemv/gemmSN/gemmk1 over float data (their
# template names the data tensors), xmma f32 without tf32.
FP32_GEMM = r"sgemm|TensorStridedBatched<float const>|xmma_gemm_f32f32_f32f32_f32(?!.*tf32)"
_HALF_GEMM = r"bf16|f16|fp16|half|hgemm|h1688|h16816|h884|s16816gemm_bf16|bf16gemm"
_GRAPH = re.compile("graph", re.IGNORECASE)  # a graph launch: one call, many kernels
_ROCM = re.compile(r"AMD|Instinct|Radeon|\bMI\d{3}", re.IGNORECASE)


_KERNEL_LANES = (schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM)


def _kernel_rows(trace: Trace) -> np.ndarray:
    """Sorted rows of the GPU kernels (compute and communication lanes), from the engine's cached
    lane rows and category codes (not a Categorical ``isin`` and a string comparison per event,
    twice: for the kernel table and the launch statistics). Not cached in the view: the selection
    (a row index per kernel) would stay for the rest of the analysis."""
    v = event_view(trace)
    parts = [r for r in (v.lane_rows(lane) for lane in _KERNEL_LANES) if len(r)] or [np.zeros(0, np.int64)]
    # each lane's rows are sorted: a stable sort merges the runs (in linear time)
    rows = parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts), kind="stable")
    kernel = v.cat[rows] == v.cat_codes.get(schema.CAT_KERNEL, -99)
    return rows if kernel.all() else rows[kernel]


def kernels_frame(trace: Trace) -> pd.DataFrame:
    """Every GPU kernel (compute and communication lanes) with ``row, dur_ns, class``."""
    ev = trace.events
    rows = _kernel_rows(trace)
    k = ev[["rank", "device", "stream", "pid", "name", "start_ns", "end_ns", "correlation", "external_id"]].take(rows)
    k = k.assign(row=rows.astype(np.int64), dur_ns=(k["end_ns"] - k["start_ns"]).astype(np.int64))
    return k.assign(**{"class": kc.classify(k["name"])})


def kernel_table(trace: Trace, kernels: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per kernel name (columns ``TABLE_COLUMNS``), sorted by total GPU time."""
    t = _groups_by_code(trace) if kernels is None else None
    if t is None:
        k = _names_and_durations(trace) if kernels is None else kernels
        if k.empty:
            return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(
                TABLE_COLUMNS, ["object", "object", "int64", "int64", "float64", "float64", "int64", "float64"],
                strict=True)})
        g = k.groupby("name", sort=False, observed=True)["dur_ns"]
        t = pd.DataFrame({"count": g.size(), "total_ns": g.sum(), "mean_ns": g.mean(), "median_ns": g.median(),
                          "max_ns": g.max()}).rename_axis("name").reset_index()
    t["name"] = t["name"].astype(str)
    t.insert(1, "class", kc.classify(t["name"]))
    total = t["total_ns"].sum()
    t["share"] = t["total_ns"] / total if total > 0 else 0.0
    t = t.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return t[TABLE_COLUMNS].astype({"count": "int64", "total_ns": "int64", "max_ns": "int64"})


def _groups_by_code(trace: Trace) -> pd.DataFrame | None:
    """:func:`kernel_table`'s groups (``name, count, total_ns, mean_ns, median_ns, max_ns``, in no particular
    order: the table's sort orders them, by total then by the unique names) from the view's name codes, as
    pandas' group-by gives them: counts by bincount, the durations grouped by a radix sort of their codes and
    each group's median and maximum read per distinct name. None where the group-by must answer: no kernel, a
    kernel without a name (the group-by leaves it out), durations whose sums a float would not hold exactly
    (pandas' mean and median add as floats; below 2**53 they are exact, as these are), or names too many for
    a loop over them (:data:`_LOOP_NAMES_MAX`)."""
    v = event_view(trace)
    rows = _kernel_rows(trace)
    names = trace.events["name"]
    if len(rows) == 0 or not isinstance(names.dtype, pd.CategoricalDtype):
        return None
    code = v.name[rows]  # the categorical's own codes (the view keeps them)
    dur = (v.end[rows] - v.start[rows]).astype(np.int64, copy=False)
    if int(code.min()) < 0 or float(np.abs(dur.astype(np.float64)).sum()) >= 2.0**53:  # (float: no int64 wrap)
        return None
    count = np.bincount(code, minlength=len(v.names))
    used = np.flatnonzero(count)
    if len(used) > _LOOP_NAMES_MAX:
        return None
    count = count[used].astype(np.int64)
    total = np.bincount(code, weights=dur, minlength=len(v.names))[used].astype(np.int64)  # exact (see above)
    grouped = dur[np.argsort(code, kind="stable")]  # by code, in used's order
    start = np.concatenate(([0], np.cumsum(count)[:-1]))
    median = np.empty(len(used), dtype=np.float64)
    top = np.empty(len(used), dtype=np.int64)
    for i, (at, n) in enumerate(zip(start.tolist(), count.tolist(), strict=True)):  # per distinct name
        lo, hi = (n - 1) // 2, n // 2  # the middle one, or the two middle ones
        part = np.partition(grouped[at:at + n], sorted({lo, hi, n - 1}))
        median[i] = part[lo] if lo == hi else (float(part[lo]) + float(part[hi])) / 2
        top[i] = part[n - 1]
    return pd.DataFrame({"name": names.cat.categories[used], "count": count, "total_ns": total,
                         "mean_ns": total / count, "median_ns": median, "max_ns": top})


# The most distinct kernel names :func:`_groups_by_code` reads one at a time (beyond it, pandas' group-by).
_LOOP_NAMES_MAX = 1024


def _names_and_durations(trace: Trace) -> pd.DataFrame:
    """The two columns :func:`kernel_table` reads of :func:`kernels_frame`'s rows: ``name, dur_ns`` (not a copy
    of nine columns and a class string per kernel)."""
    v = event_view(trace)
    rows = _kernel_rows(trace)
    return pd.DataFrame({"name": trace.events["name"].array.take(rows),
                         "dur_ns": (v.end[rows] - v.start[rows]).astype(np.int64)})


def class_shares(table: pd.DataFrame) -> pd.DataFrame:
    """Kernel time by class from a :func:`kernel_table`: ``class, count, total_ns, share``."""
    g = table.groupby("class", sort=False)
    out = pd.DataFrame({"count": g["count"].sum(), "total_ns": g["total_ns"].sum()}).reset_index()
    total = out["total_ns"].sum()
    out["share"] = out["total_ns"] / total if total > 0 else 0.0
    return out.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)


def _pct(a: np.ndarray, q: float) -> int | None:
    return int(np.percentile(a, q)) if len(a) else None


def launch_stats(trace: Trace, kernels: pd.DataFrame | None = None) -> dict[str, Any]:
    """Launch overhead figures: kernels shorter than their launch call; launch-to-start latency (ns).

    Latency is kernel start minus launch-call start. Graph launches (one call, many kernels) count in
    the latency but not in the "shorter than its launch" comparison. Made on the engine's view (rows,
    name codes, times), once per distinct name for the classes and the graph test: the kernels'
    frame would hold a launch name per kernel. Linking is the project's one rule
    (:mod:`traceread.engine.lanes`): (rank, pid, correlation), Kineto's device-index pids mapped to the rank's
    launching process.
    """
    v = event_view(trace)
    if kernels is None:
        rows = _kernel_rows(trace)
        comm = v.map_names(rows, lambda names: kc.classify(names) == kc.CLS_COMMUNICATION)  # a bool per row
    else:
        rows, comm = kernels["row"].to_numpy(), kernels["class"].to_numpy() == kc.CLS_COMMUNICATION
    k = rows[~comm]
    launch = v.launch_of(k)
    ok = launch >= 0
    k, launch = k[ok], launch[ok]
    lat = v.start[k] - v.start[launch]
    graph = v.matching(launch, _GRAPH)
    call_ns = v.end[launch] - v.start[launch]
    dur = (v.end[k] - v.start[k]).astype(np.int64)
    shorter = (~graph) & (dur < call_ns)
    comparable = int((~graph).sum())
    return {
        "kernels": int(len(ok)), "linked": int(ok.sum()),
        "shorter_than_launch": int(shorter.sum()),
        "shorter_than_launch_share": (float(shorter.sum()) / comparable) if comparable else None,
        "median_kernel_ns": _pct(dur, 50), "median_launch_call_ns": _pct(call_ns[~graph], 50),
        "launch_latency_ns": {"p50": _pct(lat, 50), "p90": _pct(lat, 90), "p99": _pct(lat, 99),
                              "max": int(lat.max()) if len(lat) else None,
                              "negative": int((lat < 0).sum())},
    }


def _blocks(trace: Trace, kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernels with ``blocks`` (grid size in thread blocks) and ``sm_count`` of their device."""
    args = trace.side_table("kernel_args")
    cols = ["row", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
    k = kernels.merge(args[cols], on="row", how="inner")
    g = k[["grid_x", "grid_y", "grid_z"]].to_numpy(dtype=np.int64)
    b = k[["block_x", "block_y", "block_z"]].to_numpy(dtype=np.int64)
    valid = (g > 0).all(axis=1)
    if any(_ROCM.search(d.name or "") for d in trace.meta.devices):
        # ROCm records the grid in work-items, not blocks.
        valid &= (b > 0).all(axis=1)
        g = -(-g // np.maximum(b, 1))
    devs = pd.DataFrame([(d.rank, d.id, d.sm_count or 0) for d in trace.meta.devices],
                        columns=["rank", "device", "sm_count"]).drop_duplicates(["rank", "device"])
    sm = k[["rank", "device"]].merge(devs.astype({"rank": "int32", "device": "int32"}), how="left",
                                     on=["rank", "device"])["sm_count"].fillna(0).to_numpy().astype(np.int64)
    return k.assign(blocks=np.where(valid, g.prod(axis=1), -1), sm_count=sm)


def run_precision(trace: Trace, dtype: str | None) -> str | None:
    """The run's GEMM precision: the job's, else the recorded matmul inputs, else half-precision GEMM names."""
    if dtype:
        return dtype
    ev = matmul_precisions([trace])
    counts = {k: v for k, v in ev.items() if k in ("bf16", "fp16", "fp32", "fp8")}
    if counts:
        return max(counts, key=lambda c: counts[c])
    return None


def kernel_hints(trace: Trace, cfg: Thresholds, dtype: str | None = None,
                 kernels: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Cheap wins already visible in the trace. Each hint: ``kind, message`` and its figures."""
    k = kernels_frame(trace) if kernels is None else kernels
    hints: list[dict[str, Any]] = []
    total = int(k["dur_ns"].sum())
    if total > 0:
        hints += _partial_wave_hints(trace, k, total, cfg)
        hints += _fp32_gemm_hints(trace, k, total, cfg, dtype)
    hints += _pageable_copy_hints(trace)
    return hints


def _partial_wave_hints(trace: Trace, k: pd.DataFrame, total: int, cfg: Thresholds) -> list[dict[str, Any]]:
    kb = _blocks(trace, k[k["class"] != kc.CLS_COMMUNICATION])
    kb = kb[(kb["blocks"] > 0) & (kb["sm_count"] > 0)]
    part = kb[kb["blocks"] <= (1 - cfg.partial_wave_min_idle) * kb["sm_count"]]
    if part.empty:
        return []
    g = part.groupby("name", observed=True)
    agg = pd.DataFrame({"count": g.size(), "total_ns": g["dur_ns"].sum(), "blocks": g["blocks"].median(),
                        "sm_count": g["sm_count"].max()})
    agg = agg[agg["total_ns"] >= cfg.kernel_hint_min_share * total].sort_values("total_ns", ascending=False)
    return [{"kind": "partial-wave", "name": str(name), "count": int(r["count"]), "total_ns": int(r["total_ns"]),
             "share": float(r["total_ns"] / total), "blocks": int(r["blocks"]), "sm_count": int(r["sm_count"]),
             "message": f"grid of ~{int(r['blocks'])} block(s) on {int(r['sm_count'])} SMs leaves "
                        f"{1 - r['blocks'] / r['sm_count']:.0%} of the GPU idle ({r['total_ns'] / total:.1%} "
                        "of GPU time): batch more work per launch or split differently"}
            for name, r in agg.iterrows()]


def _fp32_gemm_hints(trace: Trace, k: pd.DataFrame, total: int, cfg: Thresholds,
                     dtype: str | None) -> list[dict[str, Any]]:
    gemm = k[k["class"] == kc.CLS_GEMM]
    if gemm.empty:
        return []
    prec = run_precision(trace, dtype)
    if prec is None and name_mask(gemm["name"], _HALF_GEMM).any():
        prec = "bf16/fp16"
    if prec not in ("bf16", "fp16", "bf16/fp16"):
        return []
    simt = gemm[name_mask(gemm["name"], FP32_GEMM)]
    if simt.empty:
        return []
    g = simt.groupby("name", observed=True)["dur_ns"].agg(["size", "sum"])
    ns = int(g["sum"].sum())
    if ns < cfg.kernel_hint_min_share * total:
        return []
    top = [str(n) for n in g.sort_values("sum", ascending=False).index[:5]]
    return [{"kind": "fp32-gemm", "names": top, "count": int(g["size"].sum()), "total_ns": ns,
             "share": ns / total,
             "message": f"{int(g['size'].sum())} fp32 SIMT GEMM launches ({ns / total:.1%} of GPU time) in a "
                        f"{prec} run, running without tensor cores: a matmul left in fp32 (autocast scope, "
                        "a .float() cast, or allow_tf32 off)"}]


def _pageable_copy_hints(trace: Trace) -> list[dict[str, Any]]:
    copies = trace.side_table("copy_args")
    if copies.empty:
        return []
    ev = trace.events
    rows = copies["row"].to_numpy()
    dur = (ev["end_ns"].to_numpy()[rows] - ev["start_ns"].to_numpy()[rows]).astype(np.int64)
    c = copies.assign(dur_ns=dur, lane=ev["lane"].take(rows).to_numpy())
    c = c[c["lane"] == schema.LANE_MEMCPY]
    src, dst = c["src_kind"].astype(str), c["dst_kind"].astype(str)
    page = c[(src == "Pageable").to_numpy() | (dst == "Pageable").to_numpy()]
    pinned = c[(src == "Pinned").to_numpy() | (dst == "Pinned").to_numpy()]
    if page.empty:
        return []

    def gbps(frame: pd.DataFrame) -> float | None:
        ok = frame[(frame["bytes"] > 0) & (frame["dur_ns"] > 0)]
        return float(ok["bytes"].sum() / ok["dur_ns"].sum()) if len(ok) else None

    out = []
    for kind, grp in page.groupby(page["copy_kind"].astype(str), observed=True):
        bw = gbps(grp)
        ref = gbps(pinned[pinned["copy_kind"].astype(str) == kind])
        msg = (f"{len(grp)} pageable {kind} copies ({_mb(int(grp['bytes'].clip(lower=0).sum()))}, "
               f"{int(grp['dur_ns'].sum()) / 1e6:.3f} ms)" + (f" at {bw:.3g} GB/s" if bw else "") +
               (f" vs {ref:.3g} GB/s pinned" if ref else "") +
               ": pin the host buffer (pin_memory=True) so the copy is asynchronous and faster")
        out.append({"kind": "pageable-copy", "copy_kind": kind, "count": len(grp),
                    "bytes": int(grp["bytes"].clip(lower=0).sum()), "total_ns": int(grp["dur_ns"].sum()),
                    "gbps": bw, "pinned_gbps": ref, "message": msg})
    return out


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.1f} MB" if nbytes >= 1e5 else f"{nbytes / 1e3:,.1f} kB"


@dataclass(frozen=True, eq=False)
class KernelReport:
    """What ``traceread kernels`` shows."""

    table: pd.DataFrame  # kernel_table
    classes: pd.DataFrame  # class_shares
    unknown: tuple[str, ...]  # names classed "other", by time: add a [kernel_patterns] entry
    launch: dict[str, Any]
    hints: tuple[dict[str, Any], ...] = field(default=())

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        t = self.table if top is None else self.table.head(top)
        return {"kernels": t.to_dict(orient="records"), "classes": self.classes.to_dict(orient="records"),
                "unknown": list(self.unknown), "launch": self.launch, "hints": list(self.hints),
                "total_kernels": int(self.table["count"].sum()), "distinct_kernels": len(self.table)}


def kernel_report(trace: Trace, cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen
                  dtype: str | None = None) -> KernelReport:
    """Kernel table, class shares, launch statistics and hints of one trace."""
    k = kernels_frame(trace)
    table = kernel_table(trace, k)
    unknown = tuple(table.loc[table["class"] == kc.CLS_OTHER, "name"].astype(str))
    return KernelReport(table=table, classes=class_shares(table), unknown=unknown,
                        launch=launch_stats(trace, k), hints=tuple(kernel_hints(trace, cfg, dtype, k)))
