"""Achieved memory bandwidth of memory-bound kernels, where the trace records the bytes they move.

A memory-bound kernel (elementwise, reduction, normalization, softmax, copy kernels) has a known byte
count only when the op that launched it (:func:`traceread.metrics.op_time.kernel_owners`: the innermost
op around its launch) recorded its input shapes **and** dtypes (Kineto ``record_shapes=True``) and
launched that kernel alone: then its inputs' bytes (elements x dtype size, every tensor input) are
bytes the kernel moved, for ops that read every input in full (pointwise, reductions, normalization,
softmax, copies; an in-place or ``copy_`` destination counts once, as it is written). Ops that read part
of an input (:data:`PARTIAL_READ`: indexing, gathers, embeddings, sorting) are left out. Outputs are not
recorded, so ``input_bytes`` is a lower bound of the traffic and ``tbs`` (TB/s = 1e12 bytes/s) a lower
bound of the bandwidth reached; ``pct_of_peak`` compares it to
the GPU's HBM bandwidth (the peak table's) when the GPU is known. Nothing is estimated from kernel
names: kernels whose bytes are not recorded are counted in :attr:`MemBandwidth.note`, never guessed.

One row per kernel name: ``name, class, kernels, input_bytes, total_ns, tbs, pct_of_peak``.
GPU copies and memsets record their bytes themselves: the copy summary has them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import kernel_classes as kc
from traceread.engine.lanes import event_view
from traceread.metrics.op_time import kernel_owners
from traceread.metrics.peaks import match_gpu
from traceread.metrics.precision import TORCH_DTYPES
from traceread.note import BYTES_UNRECORDED, TABLE_EMPTY, Note
from traceread.trace import Trace

COLUMNS = ["name", "class", "kernels", "input_bytes", "total_ns", "tbs", "pct_of_peak"]
MEMORY_BOUND_CLASSES = frozenset({kc.CLS_ELEMENTWISE, kc.CLS_REDUCTION, kc.CLS_NORMALIZATION, kc.CLS_SOFTMAX,
                                  kc.CLS_MEMCPY})

# Ops reading only part of an input (an embedding table, the indexed tensor): their inputs' size is no
# bound of what the kernel moved.
PARTIAL_READ = re.compile(r"(?i)index|gather|embedding|select|slice|narrow|take|scatter|masked|nonzero|unique|sort|"
                          r"topk|kthvalue|as_strided|unfold|diagonal")

# Element sizes of dtypes as Kineto spells them beyond precision.TORCH_DTYPES ("long int" is int64).
_MORE_SIZES = {"long int": 8, "long long": 8, "short int": 2, "signed char": 1, "c10::complex<float>": 8,
               "c10::complex<double>": 16}


def _size(dtype: object) -> int:
    t = str(dtype).lower()
    return TORCH_DTYPES.get(t, (None, 0))[1] or _MORE_SIZES.get(t, 0)


@dataclass(frozen=True)
class MemBandwidth:
    table: pd.DataFrame
    note: Note | None  # how many memory-bound kernels have no recorded bytes, and why (worded by render.notes)
    gpu: str | None  # the peak-table key of the GPU ('' / None: unknown)


def input_bytes(dims: object, types: object) -> int:
    """Bytes of the tensor inputs of one recorded call; -1 when no input has both shape and a known dtype."""
    if not isinstance(dims, (list, tuple)) or not isinstance(types, (list, tuple)):
        return -1
    total, known = 0, False
    for d, t in zip(dims, types, strict=False):
        size = _size(t)
        if not size or not isinstance(d, (list, tuple)) or not all(isinstance(x, int) for x in d):
            continue
        n = 1
        for x in d:
            n *= x
        total += n * size
        known = True
    return total if known else -1


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=d) for c, d in zip(
        COLUMNS, ["object", "object", "int64", "int64", "int64", "float64", "float64"], strict=True)})


def mem_bandwidth(trace: Trace, owners: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> MemBandwidth:
    """Achieved TB/s per memory-bound kernel name whose bytes are recorded (see the module)."""
    v = event_view(trace)
    rows, _launch, owner = kernel_owners(trace) if owners is None else owners
    names = {d.name for d in trace.meta.devices if d.name}
    peak = match_gpu(next(iter(names))) if len(names) == 1 else None
    cls = v.map_names(rows, lambda ns: np.asarray(kc.classify(pd.Series(ns, dtype=object)), dtype=object))
    mem = np.isin(cls.astype(str), list(MEMORY_BOUND_CLASSES)) if len(rows) else np.zeros(0, bool)
    if not mem.any():
        return MemBandwidth(_empty(), Note.of(TABLE_EMPTY, table="mem_bandwidth"), peak.key if peak else None)
    dur = (v.end[rows] - v.start[rows]).astype(np.int64)
    # the op call launched this kernel alone
    per_owner = np.bincount(owner[owner >= 0]) if (owner >= 0).any() else np.zeros(0, np.int64)
    alone = (owner >= 0) & (per_owner[np.maximum(owner, 0)] == 1 if len(per_owner) else False)
    partial = np.zeros(len(rows), dtype=bool)
    if alone.any():
        partial[alone] = v.matching(owner[alone], PARTIAL_READ)
    cand = np.flatnonzero(mem & alone & ~partial)
    nbytes = np.full(len(rows), -1, dtype=np.int64)
    shapes = trace.side_table("op_shapes").drop_duplicates("row")
    if len(cand) and len(shapes):
        s_row = shapes["row"].to_numpy(np.int64)
        order = np.argsort(s_row, kind="stable")
        pos = np.minimum(np.searchsorted(s_row[order], owner[cand]), len(s_row) - 1)
        hit = s_row[order][pos] == owner[cand]
        dims, types = shapes["input_dims"].to_numpy(), shapes["input_types"].to_numpy()
        at = order[pos[hit]]
        # once per recorded op call that launched a memory-bound kernel alone (not per kernel of the trace)
        nbytes[cand[hit]] = [input_bytes(dims[i], types[i]) for i in at]
    known = mem & (nbytes >= 0)
    mem_ns, unknown_ns = int(dur[mem].sum()), int(dur[mem & ~known].sum())
    missing = int((mem & ~known).sum())
    n_part = int((mem & partial).sum())
    typed = any(bool(t) for t in shapes["input_types"])  # stops at the first op with dtypes
    # no share of no time: kernels whose recorded end is not after their start last 0 ns
    share = unknown_ns / mem_ns if mem_ns > 0 else None
    note = Note.of(BYTES_UNRECORDED, missing=missing, total=int(mem.sum()), share=share, typed=typed,
                   partial=n_part) if missing else None
    if not known.any():
        return MemBandwidth(_empty(), note, peak.key if peak else None)
    k = np.flatnonzero(known)
    f = pd.DataFrame({"name": v.names_of(rows[k]).astype(str), "class": cls[k].astype(str), "b": nbytes[k],
                      "d": dur[k]})
    g = f.groupby(["name", "class"], sort=False)
    out = pd.DataFrame({"kernels": g.size(), "input_bytes": g["b"].sum(), "total_ns": g["d"].sum()}).reset_index()
    out["tbs"] = np.where(out["total_ns"] > 0, out["input_bytes"] / out["total_ns"].clip(lower=1) / 1e3, np.nan)
    out["pct_of_peak"] = out["tbs"] / peak.bandwidth_tbs if peak and peak.bandwidth_tbs else np.nan
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return MemBandwidth(out[COLUMNS].astype({"kernels": "int64", "input_bytes": "int64", "total_ns": "int64"}),
                        note, peak.key if peak else None)
