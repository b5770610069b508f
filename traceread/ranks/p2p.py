"""Matching calls of two ranks by their end times, in near-linear time: point-to-point transfers by
direction and per-pair order, and collectives of one type when the records are incomplete.

A point-to-point transfer ends at once on both sides (the send and its recv), and one collective ends
within the alignment's error on every member. So the clock difference of two ranks is the offset that
the most calls agree on: each of the second rank's calls has a partner on the first at its end minus
that offset. It is found without comparing every pair of calls:

* candidates: a few of the second rank's calls (``SAMPLE``, evenly spaced) each against the first
  rank's calls within the clock skew bound (all of them when the clocks cannot be bounded, at most
  ``WINDOW`` around the same place in the capture); the differences' densest windows of width ``tol``
  are the candidates (``TOP`` of them);
* each candidate is judged on every call: per call a binary search for the nearest partner; the offset
  with the most calls within ``tol`` wins (ties: the smaller spread, then the smaller offset); for
  transfers, the offset with the smallest spread of those at least half as many calls agree on (a
  transfer's two ends agree exactly; a pipeline's chains of transfer, compute and transfer only loosely);
* pairs: each call with its nearest partner within ``tol`` of the winning offset, one partner per call,
  kept only in the same order on both sides (a pair's transfers are in order: NCCL requires it on one
  communicator) and, where both record it, the same size.

Point-to-point transfers are paired by direction: the first rank's sends with the second's recvs and
its recvs with the second's sends; a batched ``send-recv`` kernel (``batch_isend_irecv``) on either side
stands for both. So in a Megatron-style job (one process group per pipeline; each rank numbers its sends
and recvs together, so the n-th transfer of one rank is not its neighbour's n-th) a rank's transfers
with each neighbour are told apart by time, and two ranks of one pipeline that are not neighbours
share none (``MIN_SHARE``: a match must cover a quarter of the smaller side's transfers).
Cost: O((S * W + T * n) log n) for n calls: no cut-off on the number of candidate pairs.
"""

from __future__ import annotations

import numpy as np

SAMPLE = 48  # calls of the second rank whose differences to the first rank's calls are the candidates
WINDOW = 4096  # at most this many partners per sampled call (clocks without a skew bound)
TOP = 24  # candidate offsets judged on every call
MIN_SHARE = 0.25  # of the smaller side's calls: fewer matched is no shared traffic (pipeline non-neighbours)
TIGHT = 8.0  # transfers: pairs within this many robust spreads of the offset
TIGHT_FLOOR_NS = 5_000  # ... and within this at least (microsecond timestamps, a transfer's two ends)
SEND = ("send", "send-recv")
RECV = ("recv", "send-recv")

Groups = list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # (rows a, ends a, rows b, ends b), by end


def _sorted(rows: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.argsort(ends, kind="stable")
    return rows[o], ends[o].astype(np.int64)


def _candidates(groups: Groups, tol: int, skew: int | None) -> np.ndarray:
    diffs: list[np.ndarray] = []
    for _ra, ea, _rb, eb in groups:
        if len(ea) == 0 or len(eb) == 0:
            continue
        pick = np.unique(np.linspace(0, len(eb) - 1, min(SAMPLE, len(eb))).astype(np.int64))
        for k in pick.tolist():  # a few dozen samples; each one vectorized
            e = int(eb[k])
            if skew is not None:
                lo, hi = np.searchsorted(ea, [e - skew, e + skew + 1])
            else:
                mid = int(k * len(ea) / max(len(eb), 1))
                lo, hi = max(0, mid - WINDOW // 2), min(len(ea), mid + WINDOW // 2)
            if hi > lo:
                diffs.append(e - ea[lo:hi])
    if not diffs:
        return np.zeros(0, dtype=np.int64)
    d = np.sort(np.concatenate(diffs))
    count = np.searchsorted(d, d + tol, side="right") - np.arange(len(d))
    out: list[int] = []
    for i in np.argsort(-count, kind="stable").tolist():  # densest windows first, each once
        c = int(d[i] + tol // 2)
        if all(abs(c - x) > tol for x in out):
            out.append(c)
            if len(out) >= TOP:
                break
    return np.asarray(out, dtype=np.int64)


def _nearest(ea: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Per target time: index into sorted ``ea`` of the nearest value."""
    j = np.clip(np.searchsorted(ea, target), 1, max(len(ea) - 1, 1))
    left = np.maximum(j - 1, 0)
    return np.where(np.abs(ea[left] - target) <= np.abs(ea[np.minimum(j, len(ea) - 1)] - target), left,
                    np.minimum(j, len(ea) - 1))


def _score(groups: Groups, delta: int, tol: int) -> tuple[int, float]:
    n, dev = 0, []
    for _ra, ea, _rb, eb in groups:
        if len(ea) == 0 or len(eb) == 0:
            continue
        t = eb - delta
        r = ea[_nearest(ea, t)] - t
        ok = np.abs(r) <= tol
        n += int(ok.sum())
        dev.append(r[ok])
    d = np.concatenate(dev) if dev else np.zeros(0)
    return n, float(np.median(np.abs(d - np.median(d)))) if len(d) else np.inf


def best_offset(groups: Groups, tol: int, skew: int | None, tight: bool = False) -> tuple[int, int, float] | None:
    """(offset b - a, how many calls agree on it within ``tol``, their robust spread), None without any
    candidate. The offset the most calls agree on; ``tight`` (transfers, which end together exactly): among
    the offsets at least half as many agree on, the one they agree on most closely (a pipeline's chains
    of transfer, compute and transfer agree loosely on offsets of their own)."""
    cand = _candidates(groups, tol, skew)
    if len(cand) == 0:
        return None
    scored = [(*_score(groups, int(c), tol), int(c)) for c in cand]
    top = max(n for n, _s, _c in scored)
    if top == 0:
        return None
    if tight:
        n, spread, c = min((x for x in scored if x[0] >= 0.5 * top), key=lambda x: (x[1], -x[0], abs(x[2])))
    else:
        n, spread, c = min(scored, key=lambda x: (-x[0], x[1], abs(x[2])))
    # re-centred on the median difference of its matched calls (the candidate is a window's middle)
    dev = []
    for _ra, ea, _rb, eb in groups:
        if len(ea) and len(eb):
            t = eb - c
            r = ea[_nearest(ea, t)] - t
            dev.append(r[np.abs(r) <= tol])
    d = np.concatenate(dev)
    return (c - int(np.median(d)) if len(d) else c), n, spread


def pairs_at(groups: Groups, delta: int, tol: int, a: dict, b: dict) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a and b paired at offset ``delta`` (module doc: nearest, one partner each, in order, sizes)."""
    pa_all, pb_all = [], []
    for ra, ea, rb, eb in groups:
        if len(ea) == 0 or len(eb) == 0:
            continue
        t = eb - delta
        j = _nearest(ea, t)
        err = np.abs(ea[j] - t)
        ok = np.flatnonzero(err <= tol)
        if len(ok) == 0:
            continue
        # one partner per call of a: the closest
        order = np.lexsort((err[ok], j[ok]))
        ok = ok[order]
        _, first = np.unique(j[ok], return_index=True)
        ok = np.sort(ok[first])
        ja = j[ok]
        # the same order on both sides: keep the pairs whose partner index rises (a running maximum)
        mono = ja >= np.maximum.accumulate(ja)
        ok, ja = ok[mono], ja[mono]
        pa, pb = ra[ja], rb[ok]
        ba, bb = a["bytes"][pa], b["bytes"][pb]
        same = (ba < 0) | (bb < 0) | (ba == bb)
        pa_all.append(pa[same])
        pb_all.append(pb[same])
    if not pa_all:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pa, pb = np.concatenate(pa_all), np.concatenate(pb_all)
    key = np.unique(np.stack([pa, pb], axis=1), axis=0)  # a send-recv kernel can pair in both directions
    return key[:, 0], key[:, 1]


def p2p_groups(a: dict, b: dict, ia: np.ndarray, ib: np.ndarray, ea: int, eb: int) -> Groups:
    """The two directions of point-to-point rows ``ia`` of a and ``ib`` of b (module doc)."""
    ta, tb = a["collective"][ia], b["collective"][ib]
    out: Groups = []
    for xa, xb in ((SEND, RECV), (RECV, SEND)):
        sa, sb = ia[np.isin(ta, xa)], ib[np.isin(tb, xb)]
        ra, ena = _sorted(sa, a["end_ns"][sa].astype(np.int64) + ea)
        rb, enb = _sorted(sb, b["end_ns"][sb].astype(np.int64) + eb)
        out.append((ra, ena, rb, enb))
    return out


def typed_groups(a: dict, b: dict, ia: np.ndarray, ib: np.ndarray, ea: int, eb: int) -> Groups:
    """Rows of a and b per collective type (calls of one type pair only with their own type)."""
    ta, tb = a["collective"][ia], b["collective"][ib]
    out: Groups = []
    for t in sorted(set(ta.tolist()) & set(tb.tolist())):
        sa, sb = ia[ta == t], ib[tb == t]
        ra, ena = _sorted(sa, a["end_ns"][sa].astype(np.int64) + ea)
        rb, enb = _sorted(sb, b["end_ns"][sb].astype(np.int64) + eb)
        out.append((ra, ena, rb, enb))
    return out


def match_by_time(groups: Groups, a: dict, b: dict, tol: int, skew: int | None, min_share: float = MIN_SHARE,
                  tight: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """Pairs at the offset :func:`best_offset` picks, None when fewer than ``min_share`` of the smaller
    side's calls (and at least one) have a partner. ``tight``: the pairs within ``TIGHT`` x the calls'
    spread of it (at least ``TIGHT_FLOOR_NS``, at most ``tol``), not within ``tol``."""
    found = best_offset(groups, tol, skew, tight)
    if found is None:
        return None
    delta, _n, spread = found
    if tight:
        tol = int(min(tol, max(TIGHT * spread, TIGHT_FLOOR_NS)))
    pa, pb = pairs_at(groups, delta, tol, a, b)
    na = len(np.unique(np.concatenate([g[0] for g in groups]))) if groups else 0
    nb = len(np.unique(np.concatenate([g[2] for g in groups]))) if groups else 0
    if len(pa) == 0 or len(pa) < min_share * min(na, nb):
        return None
    return pa, pb
