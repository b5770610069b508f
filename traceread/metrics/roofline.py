"""The roofline: arithmetic intensity of each recorded matmul/attention op against the GPU's ridge.

Where the profiler recorded shapes (``op_shapes`` side table: Kineto ``Input Dims``/``Input type``
with ``record_shapes=True``), each matmul/attention op's FLOPs and minimum HBM bytes (inputs +
output, read/written once) follow from its shapes. The FLOPs are counted at the **innermost** such
op that owns kernels, so ``aten::linear`` and its ``aten::addmm`` are not counted twice: a kernel
belongs to the op that launched it (same rank and External id), and then to the innermost
recorded matmul/attention op enclosing that op on its thread; an enclosing op is dropped when an op
nested inside it got kernels.

    intensity = FLOPs / bytes        ridge = dense peak FLOP/s / bandwidth (FLOP/byte)

An op above the ridge is compute-bound (it can reach peak), below it memory-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
from traceread.errors import UsageError
from traceread.metrics.peaks import GpuPeak, match_gpu, table_keys
from traceread.metrics.precision import TORCH_DTYPES
from traceread.note import ROOFLINE_GPU_UNKNOWN, ROOFLINE_NO_SHAPES, Note
from traceread.trace import Trace

COLUMNS = ["op", "input_dims", "dtype", "calls", "flops", "bytes", "intensity", "kernel_ns", "tflops",
           "peak_tflops", "pct_of_peak", "ridge", "bound", "share"]
_SDPA_BHLE = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
              "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
              "aten::_scaled_dot_product_flash_attention_for_cpu")
_SDPA_BHLE_BWD = ("aten::_scaled_dot_product_flash_attention_backward",
                  "aten::_scaled_dot_product_efficient_attention_backward",
                  "aten::_scaled_dot_product_cudnn_attention_backward")
_FA_BLHE = ("aten::_flash_attention_forward", "aten::_efficient_attention_forward")
_FA_BLHE_BWD = ("aten::_flash_attention_backward", "aten::_efficient_attention_backward")
HANDLED_OPS: frozenset[str] = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::linear",
    "aten::matmul", "aten::mv", "aten::addmv", *_SDPA_BHLE, *_SDPA_BHLE_BWD, *_FA_BLHE, *_FA_BLHE_BWD})
_SCALED_MM_OUT_BYTES = 2  # _scaled_mm writes bf16/fp16 unless out_dtype says otherwise (not recorded)


def matmul_cost(m: int, k: int, n: int, elsize: int, batch: int = 1) -> tuple[float, float]:
    """FLOPs and bytes of ``batch`` x [m, k] @ [k, n]: 2mkn FLOPs; inputs + output read/written once."""
    return 2.0 * batch * m * k * n, float(batch * (m * k + k * n + m * n) * elsize)


def intensity(flops: float, nbytes: float) -> float:
    return flops / nbytes if nbytes > 0 else math.nan


def _prod(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _es(t: str) -> tuple[str | None, int]:
    return TORCH_DTYPES.get((t or "").lower(), (None, 0))


def op_cost(name: str, dims: list[Any], types: list[Any]) -> tuple[float, float, str | None] | None:
    """(FLOPs, bytes, precision) of one recorded op call, or None when the shapes do not fit."""
    try:
        return _op_cost(name, [list(d) if isinstance(d, (list, tuple)) else [] for d in dims],
                        [t if isinstance(t, str) else "" for t in (types or [])])
    except (ValueError, IndexError, TypeError):
        return None


def _op_cost(name: str, d: list[list[int]], t: list[str]) -> tuple[float, float, str | None] | None:
    t = t + [""] * (len(d) - len(t))
    if name in ("aten::mm", "aten::_scaled_mm"):
        (m, k), (_k2, n) = d[0], d[1]
        prec, es = _es(t[0])
        fl, by = matmul_cost(m, k, n, es)
        if name == "aten::_scaled_mm":
            by = float((m * k + k * n) * es + m * n * _SCALED_MM_OUT_BYTES)
        return fl, by, prec
    if name == "aten::addmm":
        (m, k), (_, n) = d[1], d[2]
        prec, es = _es(t[1])
        fl, by = matmul_cost(m, k, n, es)
        return fl, by + _prod(d[0]) * es, prec
    if name in ("aten::bmm", "aten::baddbmm"):
        a, b = (d[0], d[1]) if name == "aten::bmm" else (d[1], d[2])
        prec, es = _es(t[0 if name == "aten::bmm" else 1])
        fl, by = matmul_cost(a[1], a[2], b[2], es, batch=a[0])
        return fl, by, prec
    if name in ("aten::mv", "aten::addmv"):
        a = d[0] if name == "aten::mv" else d[1]
        prec, es = _es(t[0 if name == "aten::mv" else 1])
        fl, by = matmul_cost(a[0], a[1], 1, es)
        return fl, by, prec
    if name == "aten::linear":
        x, w = d[0], d[1]
        prec, es = _es(t[0])
        fl, by = matmul_cost(_prod(x[:-1]), x[-1], w[0], es)
        return fl, by + (_prod(d[2]) * es if len(d) > 2 and d[2] else 0), prec
    if name == "aten::matmul":
        a, b = d[0], d[1]
        prec, es = _es(t[0])
        if len(b) <= 2:
            n = b[1] if len(b) == 2 else 1
            fl, by = matmul_cost(_prod(a[:-1]) if len(a) > 1 else 1, a[-1], n, es)
            return fl, by, prec
        batch = _prod(list(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))))
        m = a[-2] if len(a) > 1 else 1
        fl, by = matmul_cost(m, a[-1], b[-1], es, batch=batch)
        return fl, by, prec
    if name in _SDPA_BHLE or name in _FA_BLHE or name in _SDPA_BHLE_BWD or name in _FA_BLHE_BWD:
        bwd = name in _SDPA_BHLE_BWD or name in _FA_BLHE_BWD
        q, k_, v = d[1:4] if bwd else d[0:3]
        prec, es = _es(t[1] if bwd else t[0])
        if name in _FA_BLHE or name in _FA_BLHE_BWD:  # [B, L, H, E] layout
            (bsz, lq, h, e), (_, s, _, _), ev_ = q, k_, v[3]
        else:  # [B, H, L, E]
            (bsz, h, lq, e), s, ev_ = q, k_[-2], v[-1]
        fwd = 2.0 * bsz * h * lq * s * (e + ev_)
        io = float((_prod(q) + _prod(k_) + _prod(v) + bsz * h * lq * ev_) * es)
        # Backward: 5 matmul-sized products (S recomputed, dV, dP, dQ, dK) vs 2 forward; reads and writes twice.
        return (2.5 * fwd, 2 * io, prec) if bwd else (fwd, io, prec)
    return None


@dataclass(frozen=True, eq=False)
class Roofline:
    """Roofline table (``COLUMNS``, one row per op x shapes x dtype, by kernel time) and context."""

    table: pd.DataFrame
    gpu: str | None  # peak-table key used ('' unknown)
    ridges: dict[str, float]  # FLOP/byte per precision
    notes: tuple[Note, ...] = field(default=())  # as data: worded by traceread.render.notes

    def heavy(self, cfg: Thresholds) -> pd.DataFrame:
        return self.table[self.table["share"] >= cfg.roofline_heavy_share]



def _owned_ops(trace: Trace) -> pd.DataFrame:
    """Handled ops (with shapes) and their kernel time, innermost owner only: ``row, kernel_ns``."""
    ev = trace.events
    shapes = trace.side_table("op_shapes")
    rows = shapes["row"].to_numpy(dtype=np.int64)
    names = ev["name"].to_numpy()[rows].astype(str)
    hrows = np.sort(rows[np.isin(names, list(HANDLED_OPS))])
    if not len(hrows):
        return pd.DataFrame({"row": pd.Series(dtype=np.int64), "kernel_ns": pd.Series(dtype=np.int64)})
    h = ev.iloc[hrows][["rank", "tid", "start_ns", "end_ns"]].assign(hrow=hrows)
    ksel = (ev["lane"] == schema.LANE_GPU_COMPUTE).to_numpy() & (ev["external_id"].to_numpy() != schema.NO_ID)
    k = ev.loc[ksel, ["rank", "external_id", "start_ns", "end_ns"]]
    k = k.assign(dur=(k["end_ns"] - k["start_ns"]).astype(np.int64)).groupby(
        ["rank", "external_id"], observed=True)["dur"].sum().reset_index()
    osel = (ev["category"] == schema.CAT_CPU_OP).to_numpy() & (ev["external_id"].to_numpy() != schema.NO_ID)
    ops = ev.loc[osel, ["rank", "tid", "start_ns", "end_ns", "external_id"]].drop_duplicates(["rank", "external_id"])
    own = k.merge(ops, on=["rank", "external_id"], how="inner")
    hrow = np.full(len(own), -1, dtype=np.int64)
    for (rank, tid), idx in own.groupby(["rank", "tid"], observed=True).indices.items():
        hh = h[(h["rank"].to_numpy() == rank) & (h["tid"].to_numpy() == tid)]
        if hh.empty:
            continue
        j = intervals.innermost_covering(own["start_ns"].to_numpy()[idx], hh["start_ns"].to_numpy(),
                                         hh["end_ns"].to_numpy())
        hrow[idx[j >= 0]] = hh["hrow"].to_numpy()[j[j >= 0]]
    own = own.assign(hrow=hrow)[hrow >= 0]
    if own.empty:  # shaped matmul ops exist, but no kernel is owned by one (e.g. ids that match no op)
        return pd.DataFrame({"row": pd.Series(dtype=np.int64), "kernel_ns": pd.Series(dtype=np.int64)})
    per = own.groupby("hrow")["dur"].sum()
    got = h[h["hrow"].isin(per.index)].sort_values(["rank", "tid", "start_ns", "end_ns"],
                                                     ascending=[True, True, True, False], kind="stable")
    # Drop an op when the next attributed op on its thread starts inside it (it is nested).
    same = (got["rank"].to_numpy()[1:] == got["rank"].to_numpy()[:-1]) & \
        (got["tid"].to_numpy()[1:] == got["tid"].to_numpy()[:-1])
    outer = np.r_[same & (got["start_ns"].to_numpy()[1:] < got["end_ns"].to_numpy()[:-1]), False]
    keep = got["hrow"].to_numpy()[~outer]
    return pd.DataFrame({"row": keep, "kernel_ns": per.loc[keep].to_numpy().astype(np.int64)})


def roofline(trace: Trace, cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen
             gpu: str | None = None, fp32_as: str = "fp32") -> Roofline:
    """Roofline of the recorded matmul/attention ops of ``trace`` on its GPU (``gpu`` overrides the name).

    ``fp32_as`` ("fp32" or "tf32") picks the peak fp32-input matmuls ran at. Ops whose GPU is
    unknown get intensity and achieved TFLOP/s but no ridge/bound.
    """
    notes: list[Note] = []
    names = {d.name for d in trace.meta.devices if d.name}
    row_gpu: GpuPeak | None = match_gpu(gpu) if gpu else (match_gpu(next(iter(names))) if len(names) == 1 else None)
    if gpu and row_gpu is None:
        raise UsageError(f"--gpu {gpu!r} is not in the peak table; known: {', '.join(table_keys())}")
    if row_gpu is None:
        notes.append(Note.of(ROOFLINE_GPU_UNKNOWN))
    owned = _owned_ops(trace)
    shapes = trace.side_table("op_shapes")
    empty = Roofline(pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS}), row_gpu.key if row_gpu else None,
                     {}, tuple([*notes, Note.of(ROOFLINE_NO_SHAPES)]))
    if owned.empty:
        return empty
    sh = shapes.set_index("row").loc[owned["row"].to_numpy()]
    opname = trace.events["name"].to_numpy()[owned["row"].to_numpy()].astype(str)
    # One key per owned op (ops, not kernels; a step repeats few distinct shapes).
    f = pd.DataFrame({"op": opname, "input_dims": [repr(x) for x in sh["input_dims"]],
                      "tk": [repr(x) for x in sh["input_types"]], "kernel_ns": owned["kernel_ns"].to_numpy()})
    g = f.groupby(["op", "input_dims", "tk"], sort=False)
    agg = g.agg(calls=("kernel_ns", "size"), kernel_ns=("kernel_ns", "sum")).reset_index()
    first = g.head(1).index.to_numpy()  # one representative op per signature, in agg's order
    dims = sh["input_dims"].to_numpy()[first]
    types = sh["input_types"].to_numpy()[first]
    cost = [op_cost(o, d, t) for o, d, t in zip(agg["op"], dims, types, strict=True)]
    ok = np.array([c is not None for c in cost], dtype=bool)
    agg = agg[ok].reset_index(drop=True)
    known = [c for c in cost if c is not None]
    if agg.empty:
        return empty
    agg["flops"] = [c[0] for c in known]
    agg["bytes"] = [c[1] for c in known]
    prec = [(fp32_as if c[2] == "fp32" else c[2]) or "" for c in known]
    agg["dtype"] = prec
    agg["intensity"] = agg["flops"] / agg["bytes"]
    agg["tflops"] = np.where(agg["kernel_ns"] > 0, agg["flops"] * agg["calls"] / agg["kernel_ns"].clip(lower=1) / 1e3,
                             np.nan)
    peak = np.array([(row_gpu.tflops.get(p) or np.nan) if row_gpu else np.nan for p in prec], dtype=np.float64)
    bw = row_gpu.bandwidth_tbs if row_gpu else np.nan
    agg["peak_tflops"] = peak
    agg["ridge"] = peak / bw
    agg["pct_of_peak"] = agg["tflops"] / peak
    agg["bound"] = np.where(np.isnan(agg["ridge"]), "", np.where(agg["intensity"] >= agg["ridge"], "compute",
                                                                     "memory"))
    total = agg["kernel_ns"].sum()
    agg["share"] = agg["kernel_ns"] / total if total > 0 else 0.0
    agg = agg.sort_values("kernel_ns", ascending=False, kind="stable").reset_index(drop=True)
    ridges = {p: r for p in sorted(set(prec)) if row_gpu and (r := row_gpu.ridge(p))}
    return Roofline(agg[COLUMNS], row_gpu.key if row_gpu else None, ridges, tuple(notes))
