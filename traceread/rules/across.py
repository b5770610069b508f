"""One class per recurring gap across the ranks of a job whose ranks were classified apart.

::

    rank 0  ==k:fwd_last==|....batch copy 58%....|==k:fwd_first==    data-starved
    rank 1  ==k:fwd_last==|....batch copy 46%....|==k:fwd_first==    unattributed (46% < 50%)
            the same gap of the same step on two ranks: one class, on the evidence of both

Kineto writes one file per rank, and each file is classified on its own (``rules.classify``, maybe in
parallel); ranks in one file (an nsys export of several processes) are pooled there already
(``rules.recurring``). Once every file of a job is classified, :func:`pool_traces` finds the recurring
gaps that span files by the same signature (the same kernel names just before and after, by name since
each file numbers its names apart, the same slot of the step, durations within ``recurring_dur_factor``),
and where a group's classes differ, classifies it on the pooled evidence of all its members (their
contexts rebuilt for those rows only: the rare case costs, the common one does not) with the same near
band as within a file (``rules.recurring.pool``). A member that takes the group's class gets that class's
evidence, and its sentence says it was classed with the gaps of the other ranks.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.rules import _calls, evidence, recurring
from traceread.rules._base import RuleContext
from traceread.rules._columns import column_cache
from traceread.trace import Trace
from traceread.vocabulary import CAPTURE_BOUNDARY, GAP_CLASSES


@dataclass(frozen=True)
class Classified:
    """One classified file of a job: its gaps (``rules.classify(text=False)``), steps and trace."""

    gaps: pd.DataFrame
    steps: pd.DataFrame | None
    trace: Trace


def _codes(gaps: pd.DataFrame) -> np.ndarray:
    s = gaps["class"]
    if isinstance(s.dtype, pd.CategoricalDtype) and tuple(s.cat.categories) == GAP_CLASSES:
        return np.asarray(s.cat.codes, dtype=np.int64)
    return pd.Categorical(s.to_numpy(dtype=object), categories=list(GAP_CLASSES)).codes.astype(np.int64)


def _candidates(item: Classified) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows that may belong to a recurring gap (both neighbours known, not a capture boundary) and the names
    of the kernels before and after them."""
    prev, nxt = recurring.neighbours(item.gaps, item.trace)
    cls = _codes(item.gaps)
    rows = np.flatnonzero((prev >= 0) & (nxt >= 0) & (cls != GAP_CLASSES.index(CAPTURE_BOUNDARY)))
    names = event_view(item.trace).names
    return rows, names[prev[rows]], names[nxt[rows]]


def pool_traces(items: list[Classified], cfg: Thresholds) -> list[pd.DataFrame | None]:
    """Per file of one job, its gaps with the near-threshold members of every recurring gap that spans files
    in the class of the group's pooled evidence (a new frame), or None where no gap of it changed."""
    out: list[pd.DataFrame | None] = [None] * len(items)
    if len(items) < 2:
        return out
    cand = [_candidates(it) for it in items]
    which = np.concatenate([np.full(len(r), i, dtype=np.int64) for i, (r, _, _) in enumerate(cand)])
    if len(which) < 2:
        return out
    rows = np.concatenate([r for r, _, _ in cand])
    sig_names = pd.MultiIndex.from_arrays([np.concatenate([p for _, p, _ in cand]).astype(str),
                                           np.concatenate([x for _, _, x in cand]).astype(str)])
    sig = pd.factorize(sig_names)[0].astype(np.int64)

    def column(name: str) -> np.ndarray:
        return np.concatenate([it.gaps[name].to_numpy(np.int64)[r] for it, (r, _, _) in zip(items, cand, strict=True)])

    unit = recurring._row_ids(np.stack([which, column("rank"), column("device")], axis=1))
    grp, order = recurring.slots(sig, unit, column("step"), column("start_ns"))
    found = recurring._alike(np.full(len(rows), -1, dtype=np.int64), order, grp, column("dur_ns")[order], cfg)
    cls = np.concatenate([_codes(it.gaps)[r] for it, (r, _, _) in zip(items, cand, strict=True)])
    # only groups that span files and whose classes differ (a file's own are pooled already)
    ok = found >= 0
    if not ok.any():
        return out
    g = found[ok]
    m = int(g.max()) + 1
    lo_f, hi_f = np.full(m, len(items)), np.full(m, -1)
    np.minimum.at(lo_f, g, which[ok])
    np.maximum.at(hi_f, g, which[ok])
    lo_c, hi_c = np.full(m, len(GAP_CLASSES)), np.full(m, -1)
    np.minimum.at(lo_c, g, cls[ok])
    np.maximum.at(hi_c, g, cls[ok])
    keep = np.zeros(len(found), dtype=bool)
    keep[ok] = (lo_f[g] != hi_f[g]) & (lo_c[g] != hi_c[g])
    if not keep.any():
        return out
    at_file, at_row, grp_of = which[keep], rows[keep], found[keep]
    # how many ranks (units) each group spans
    pairs = np.unique(np.stack([found[keep], unit[keep]], axis=1), axis=0)
    spans = np.bincount(pairs[:, 0], minlength=m)
    parts, ctxs = [], []
    for i in np.unique(at_file):  # files are few
        sel = np.flatnonzero(at_file == i)
        part, ctx = _member_context(items[int(i)], at_row[sel], cfg)
        # (the evidence data columns stay with their files: a member that moves gets its new class's anew)
        part = part.drop(columns=[c for c in part.columns if evidence.is_data(c)])
        parts.append(part.assign(_file=int(i), _row=at_row[sel], _grp=grp_of[sel]))
        ctxs.append(ctx)
    members = pd.concat(parts, ignore_index=True)
    ctx = _concat(ctxs)
    codes = _codes(members).astype(np.int8)
    kinds = members["evidence_kind"].to_numpy(dtype=object).copy()
    from traceread.rules import RULES, _rules

    with column_cache(members) as cols:
        new_cls, new_kinds, pooled = recurring.pool(cols, ctx, cfg, codes, kinds, None, RULES, _rules,
                                                    given=members["_grp"].to_numpy(np.int64))
    flip = pooled > 0
    if not flip.any():
        return out
    ranks = spans[members["_grp"].to_numpy(np.int64)]
    ctx = dataclasses.replace(ctx, recurring_n=pooled, recurring_ranks=np.where(flip, ranks, 0))
    for i in np.unique(members["_file"].to_numpy()[flip]):
        sel = np.flatnonzero(flip & (members["_file"].to_numpy() == i))
        out[int(i)] = _relabel(items[int(i)].gaps, members["_row"].to_numpy()[sel], new_cls[sel], new_kinds[sel],
                               _subset(ctx, sel, len(members)))
    return out


def _member_context(item: Classified, rows: np.ndarray, cfg: Thresholds) -> tuple[pd.DataFrame, RuleContext]:
    """The rows ``rows`` of a classified file and their rules' context, rebuilt as ``rules.classify`` builds it."""
    from traceread.rules import _context, _whole

    gaps = item.gaps
    with column_cache(gaps) as cols, _calls.shared(item.trace), contextlib.ExitStack() as stack:
        part = stack.enter_context(column_cache(gaps.take(rows)))
        ctx = _context(part, cols, rows, item.steps, item.trace, cfg, _whole(cols, item.steps, item.trace, cfg))
        return part.frame.reset_index(drop=True), ctx


def _concat(ctxs: list[RuleContext]) -> RuleContext:
    """The contexts of several files' rows, one after the other (per-gap arrays joined; the rest the first's)."""
    n = [len(c.judged) for c in ctxs]
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(RuleContext):
        vs = [getattr(c, f.name) for c in ctxs]
        if all(isinstance(v, np.ndarray) and len(v) == k for v, k in zip(vs, n, strict=True)):
            fields[f.name] = np.concatenate(vs)
        elif f.name == "notes":
            fields[f.name] = []
        else:
            fields[f.name] = vs[0]
    return RuleContext(**fields)


def _subset(ctx: RuleContext, sel: np.ndarray, n: int) -> RuleContext:
    return RuleContext(**{f.name: (v[sel] if isinstance(v, np.ndarray) and len(v) == n else v)
                          for f in dataclasses.fields(RuleContext) for v in (getattr(ctx, f.name),)})


def _relabel(gaps: pd.DataFrame, rows: np.ndarray, cls: np.ndarray, kinds: np.ndarray, ctx: RuleContext) -> pd.DataFrame:
    """``gaps`` (a new frame) with the rows ``rows`` in class ``cls``, kind ``kinds`` and the evidence of ``ctx``."""
    out = gaps.copy(deep=False)
    codes = _codes(out)
    codes[rows] = cls
    out["class"] = pd.Categorical.from_codes(codes, categories=pd.Index(list(GAP_CLASSES)))
    k = out["evidence_kind"].to_numpy(dtype=object).copy()
    k[rows] = kinds
    out["evidence_kind"] = pd.Categorical(k)
    sub = pd.DataFrame(index=pd.RangeIndex(len(rows)))
    evidence.store(sub, ctx, cls.astype(np.int64))
    for name in sub.columns:
        values = np.asarray(sub[name])
        if name in out.columns:
            old = out[name]
            full = old.to_numpy(dtype=object) if values.dtype == object else np.asarray(old, dtype=values.dtype)
            full = full.copy()
        else:
            full = np.full(len(out), "" if values.dtype == object else 0, dtype=object if values.dtype == object
                           else values.dtype)
        full[rows] = values
        out[name] = pd.Categorical(full) if values.dtype == object else \
            pd.arrays.SparseArray(full, fill_value=_fill(full))  # type: ignore[call-overload]
    return out


def _fill(dense: np.ndarray) -> object:
    if dense.dtype == bool and 2 * np.count_nonzero(dense) > len(dense):
        return np.True_
    return dense.dtype.type(0)
