"""Clock alignment by collectives: match the same collective across ranks, estimate clock offsets.

Hosts' clocks differ by up to tens of ms (NTP), so raw timestamps of different ranks cannot be
compared. A collective completes almost together on all its participants (the last arriver
releases everyone), so each rank's offset is the median, over matched collectives, of its end time
minus the reference rank's end time; the uncertainty is the robust spread of those differences
(1.4826 x MAD) over sqrt(n), floored at the timestamp resolution; ``end_spread_ns`` is that spread
itself, the error of any single collective's aligned times (what a lateness must exceed).

Matching, per process group: by the recorded sequence number where both ranks have one; else by
step number (``ProfilerStep#N`` is the same N on every rank) and order within the step, checked by
collective type and size; else by order within the group: the index shift (windows may start a few collectives apart) whose pairs
agree on collective type and size and whose end differences are most consistent; among equally
consistent shifts (periodic steps repeat every collective) the one giving the smallest offset when
both ranks have epoch time (NTP keeps clocks within a step), else the smallest shift.
Point-to-point transfers apart from the collectives: by sequence number only where that pairs each
send with a recv ending with it, else by direction and per-pair order at the clock difference most
transfers agree on (:mod:`traceread.ranks.p2p`).

When that leaves the aligned ends scattered (records sampled or dropped: the n-th call on one
rank is not the n-th on another) and both ranks have epoch time, calls are paired by nearest end
time instead: the offset most same-type pairs agree on (within the NTP skew bound), then each call
with its nearest partner.

Ranks of one nsys export share one clock: offset 0 exactly, method ``shared clock``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceread.kernel_classes import P2P_TYPES
from traceread.ranks import p2p
from traceread.ranks.summary import RankSummary

METHOD_SEQ = "collective end times, matched by recorded sequence number"
METHOD_STEP = "collective end times, matched by step number and order within the step (type and size checked)"
METHOD_ORDER = "collective end times, matched by order within the process group (type and size checked)"
METHOD_P2P = ("point-to-point transfer end times, matched by direction (sender to receiver) and order per pair "
              "at the clock difference most transfers agree on (sizes checked)")
METHOD_NEAREST = ("collective end times, matched by nearest end time (records incomplete: the offset most "
                  "same-type calls agree on)")
METHOD_SHARED = "shared clock (one nsys export)"
METHOD_REFERENCE = "reference rank"
METHOD_NONE = "not aligned: no collective matched with the reference rank"
_MAX_SHIFT = 64
_SHIFT_SAMPLE = 64  # pairs judged per candidate order shift
_MIN_AGREE = 0.9
# a transfer ends at once on both sides: its partner's end within this of the clock difference
P2P_TOL_NS = 50_000
P2P_SKEW_NS = 100_000_000  # the most two NTP-disciplined epoch clocks differ (the candidates searched)
_P2P = sorted(P2P_TYPES)  # share of paired collectives whose type (and size, where both know it) agree


@dataclass(frozen=True)
class RankAlignment:
    rank: int
    offset_ns: int | None  # this rank's clock minus the reference's (aligned = epoch time - offset)
    uncertainty_ns: int | None
    method: str
    matched: int  # collectives matched with the reference rank
    shift: int = 0  # index shift used for order matching (reference index + shift = this rank's index)
    end_spread_ns: int | None = None  # robust spread of single end-time differences (per-collective error)

    def to_dict(self) -> dict:
        return {"rank": self.rank, "offset_ns": self.offset_ns, "uncertainty_ns": self.uncertainty_ns,
                "end_spread_ns": self.end_spread_ns, "method": self.method, "matched": self.matched,
                "shift": self.shift}


def primary_device(s: RankSummary) -> int:
    dev = s.collectives["device"]
    if len(dev) == 0:
        return -1
    values, counts = np.unique(dev, return_counts=True)
    return int(values[np.argmax(counts)])


def epoch_shift(s: RankSummary) -> int:
    """What to add to the rank's own ns to reach its (unaligned) epoch ns; 0 when not epoch, or when the
    offset (from the file) would carry the rank's times past int64 (an offset near 2^63: no place on
    the epoch can be computed, so the rank stays on its own clock)."""
    off = int(s.identity.epoch_offset_ns or 0)
    if not (-(1 << 63) <= int(s.identity.start_ns) + off and int(s.identity.end_ns) + off < (1 << 63)):
        return 0
    return off


def sequences(s: RankSummary) -> dict[str, np.ndarray]:
    """Per process group: indices into ``s.collectives`` of its primary device's calls, in start order."""
    c = s.collectives
    if len(c["start_ns"]) == 0:
        return {}
    on = np.flatnonzero(c["device"] == primary_device(s))
    order = on[np.argsort(c["start_ns"][on], kind="stable")]
    pgs = c["pg"][order]
    return {str(p): order[pgs == p] for p in dict.fromkeys(pgs.tolist())}


def _resolution(s: RankSummary) -> int:
    """1 us for integer-microsecond timestamps (every time a multiple of 1000 ns), else 1 ns."""
    t = s.collectives["end_ns"]
    return 1000 if len(t) and not (t % 1000).any() else 1


def _pairs_by_seq(ra: np.ndarray, rb: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    if len(ra) == 0 or len(rb) == 0 or (ra < 0).any() or (rb < 0).any():
        return None
    common, ia, ib = np.intersect1d(ra, rb, return_indices=True)
    return (ia, ib) if len(common) else None


def match(ref: RankSummary, other: RankSummary) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], str, int]:
    """Per shared process group: (reference row indices, other row indices) of matched collectives;
    the method and the order shift used (0 for sequence matching).

    A group's point-to-point transfers are matched apart from its collectives: by recorded sequence
    number where that pairs each send with a recv ending with it (a two-rank group, whose members count
    its transfers alike), else by direction and order per pair at the clock difference the transfers'
    ends agree on (:mod:`traceread.ranks.p2p`: a Megatron-style pipeline group, whose ranks each count
    their own sends and recvs together)."""
    a, b = ref.collectives, other.collectives
    sa, sb = sequences(ref), sequences(other)
    both_epoch = ref.identity.epoch_offset_ns is not None and other.identity.epoch_offset_ns is not None
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    method, used_shift = METHOD_SEQ, 0
    for pg, ia_all in sa.items():
        ib_all = sb.get(pg)
        if ib_all is None or len(ia_all) == 0 or len(ib_all) == 0:
            continue
        got: list[tuple[np.ndarray, np.ndarray]] = []
        qa, qb = np.isin(a["collective"][ia_all], _P2P), np.isin(b["collective"][ib_all], _P2P)
        if qa.any() and qb.any():
            pairs, how = _p2p(ref, other, ia_all[qa], ib_all[qb], both_epoch)
            if pairs is not None:
                got.append(pairs)
                method = METHOD_P2P if how == METHOD_P2P and method == METHOD_SEQ else method
        ia, ib = ia_all[~qa], ib_all[~qb]
        if len(ia) and len(ib):
            by_seq = _pairs_by_seq(a["seq"][ia], b["seq"][ib])
            if by_seq is not None:
                got.append((ia[by_seq[0]], ib[by_seq[1]]))
            else:
                # step numbers pair calls when they come from markers; else the order shift whose ends agree best
                by_step = _pairs_by_step(a, b, ia, ib) if _numbered(ref) and _numbered(other) else None
                if by_step is not None:
                    method = METHOD_STEP if method in (METHOD_SEQ, METHOD_P2P) else method
                    got.append(by_step)
                else:
                    method = METHOD_ORDER
                    best = _best_shift(a, b, ia, ib, epoch_shift(ref), epoch_shift(other), both_epoch)
                    if best is not None:
                        used_shift, pa, pb = best
                        got.append((pa, pb))
        if got:
            out[pg] = (np.concatenate([g[0] for g in got]), np.concatenate([g[1] for g in got]))
    return out, method, used_shift


def _p2p(ref: RankSummary, other: RankSummary, ia: np.ndarray, ib: np.ndarray,
         both_epoch: bool) -> tuple[tuple[np.ndarray, np.ndarray] | None, str]:
    """Point-to-point rows of one group paired (see :func:`match`) and how."""
    a, b = ref.collectives, other.collectives
    ea, eb = epoch_shift(ref), epoch_shift(other)
    by_seq = _pairs_by_seq(a["seq"][ia], b["seq"][ib])
    if by_seq is not None:
        pa, pb = ia[by_seq[0]], ib[by_seq[1]]
        ta, tb = a["collective"][pa], b["collective"][pb]
        opposite = (ta != tb) | (ta == "send-recv")
        d = (b["end_ns"][pb] + eb) - (a["end_ns"][pa] + ea)
        spread = float(np.median(np.abs(d - np.median(d)))) if len(d) else np.inf
        if opposite.mean() >= _MIN_AGREE and spread <= P2P_TOL_NS and _agree(a, b, pa, pb).mean() >= _MIN_AGREE:
            return (pa, pb), METHOD_SEQ
    groups = p2p.p2p_groups(a, b, ia, ib, ea, eb)
    got = p2p.match_by_time(groups, a, b, P2P_TOL_NS, P2P_SKEW_NS if both_epoch else None, tight=True)
    return got, METHOD_P2P


def _numbered(s: RankSummary) -> bool:
    """Step numbers mean the same step on every rank only when they come from markers
    (``ProfilerStep#N``, NVTX), not when steps were inferred or are the whole GPU span."""
    src = s.step_source or ""
    return not (src.startswith("inferred") or src in ("gpu-span", "unknown", ""))


def _within(steps: np.ndarray) -> np.ndarray:
    """Order of each call within its step (calls already in start order)."""
    out = np.zeros(len(steps), dtype=np.int64)
    for st in np.unique(steps):
        m = np.flatnonzero(steps == st)
        out[m] = np.arange(len(m))
    return out


def _agree(a: dict, b: dict, pa: np.ndarray, pb: np.ndarray) -> np.ndarray:
    ta, tb = a["collective"][pa], b["collective"][pb]
    # one point-to-point transfer is a send on one side and a recv on the other
    same = (ta == tb) | (np.isin(ta, _P2P) & np.isin(tb, _P2P))
    ba, bb = a["bytes"][pa], b["bytes"][pb]
    return same & ((ba < 0) | (bb < 0) | (ba == bb))


def _pairs_by_step(a: dict, b: dict, ia: np.ndarray, ib: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Pairs by (step number, order within the step): step numbers (ProfilerStep#N) are the same on
    every rank, so this holds even when clock offsets exceed the time between collectives."""
    sa, sb = a["step"][ia], b["step"][ib]
    ka, kb = ia[sa >= 0], ib[sb >= 0]
    if len(ka) < max(1, len(ia) // 2) or len(kb) < max(1, len(ib) // 2):
        return None
    wa, wb = _within(a["step"][ka]), _within(b["step"][kb])
    key_a = a["step"][ka] * (1 << 20) + wa
    key_b = b["step"][kb] * (1 << 20) + wb
    _, xa, xb = np.intersect1d(key_a, key_b, return_indices=True)
    if len(xa) == 0:
        return None
    pa, pb = ka[xa], kb[xb]
    same = _agree(a, b, pa, pb)
    if same.mean() < _MIN_AGREE:
        return None
    return pa[same], pb[same]


def _best_shift(a: dict, b: dict, ia: np.ndarray, ib: np.ndarray, ea: int, eb: int,
                both_epoch: bool) -> tuple[int, np.ndarray, np.ndarray] | None:
    """Every candidate shift at once, each judged on an evenly spaced sample of its pairs
    (``_SHIFT_SAMPLE``: the spread of end differences is a robust statistic); the chosen one is
    then paired in full."""
    na, nb = len(ia), len(ib)
    lim = min(_MAX_SHIFT, max(na, nb) - 1)
    shifts = np.arange(-lim, lim + 1)
    lo, hi = np.maximum(0, -shifts), np.minimum(na, nb - shifts)
    ok = (hi - lo) >= max(1, min(na, nb) // 2)
    shifts, lo, hi = shifts[ok], lo[ok], hi[ok]
    if len(shifts) == 0:
        return None
    frac = np.linspace(0.0, 1.0, _SHIFT_SAMPLE)
    k = lo[:, None] + np.floor((hi - lo - 1)[:, None] * frac[None, :]).astype(np.int64)
    pa, pb = ia[k], ib[k + shifts[:, None]]
    same = _agree(a, b, pa, pb)
    good = same.mean(axis=1) >= _MIN_AGREE
    if not good.any():
        return None
    d = np.where(same, (b["end_ns"][pb] + eb) - (a["end_ns"][pa] + ea), np.nan)[good].astype(np.float64)
    med = np.nanmedian(d, axis=1)
    spread = np.nanmedian(np.abs(d - med[:, None]), axis=1) * 1.4826
    shifts, lo, hi = shifts[good], lo[good], hi[good]
    close = spread <= max(2 * float(np.min(spread)), 50_000.0)
    order = np.lexsort((np.abs(shifts), np.abs(med)) if both_epoch else (spread, np.abs(shifts)))
    pick = order[close[order]][0]
    s, first, stop = int(shifts[pick]), int(lo[pick]), int(hi[pick])
    pa, pb = ia[first:stop], ib[first + s:stop + s]
    same = _agree(a, b, pa, pb)
    return s, pa[same], pb[same]


def _stats(ref: RankSummary, s: RankSummary, pairs: dict[str, tuple]) -> tuple[int, float, int]:
    """(median end difference, robust spread, pairs) of a matching."""
    pa = np.concatenate([p[0] for p in pairs.values()])
    pb = np.concatenate([p[1] for p in pairs.values()])
    d = (s.collectives["end_ns"][pb] + epoch_shift(s)) - (ref.collectives["end_ns"][pa] + epoch_shift(ref))
    med = int(np.median(d))
    return med, float(np.median(np.abs(d - med))) * 1.4826, len(d)


def _nearest(ref: RankSummary, s: RankSummary, max_skew_ns: int,
             tol_ns: int) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
    """Pairs by end time when the records are not complete (sampled or dropped): per process group, the
    offset that the most calls agree on within ``tol_ns`` (searched within +-``max_skew_ns``, the most NTP
    lets clocks differ), then each call paired with its nearest partner within ``tol_ns`` (collectives
    with their own type, transfers by direction: :mod:`traceread.ranks.p2p`, near-linear in the calls)."""
    a, b = ref.collectives, s.collectives
    sa, sb = sequences(ref), sequences(s)
    ea, eb = epoch_shift(ref), epoch_shift(s)
    out = {}
    for pg, ia in sa.items():
        ib = sb.get(pg)
        if ib is None or len(ia) * len(ib) == 0:
            continue
        qa, qb = np.isin(a["collective"][ia], _P2P), np.isin(b["collective"][ib], _P2P)
        groups = p2p.typed_groups(a, b, ia[~qa], ib[~qb], ea, eb) + p2p.p2p_groups(a, b, ia[qa], ib[qb], ea, eb)
        got = p2p.match_by_time(groups, a, b, tol_ns, max_skew_ns, min_share=0.0)
        if got is not None and len(got[0]) >= 3:
            out[pg] = got
    return out or None


def matched(a: RankSummary, b: RankSummary, max_spread_ns: int,
            max_skew_ns: int) -> tuple[dict[str, tuple], str, int, tuple[int, float, int] | None]:
    """The calls of ``a`` and ``b`` that are one collective (:func:`match`), their method and order
    shift, and the statistics of their end differences (:func:`_stats`; None when nothing matched).
    When the matched ends scatter by more than ``max_spread_ns`` and both ranks have epoch time,
    matching by nearest end time (:func:`_nearest`) is tried and kept when it agrees better."""
    pairs, method, shift = match(a, b)
    stats = _stats(a, b, pairs) if pairs else None
    epoch = a.identity.epoch_offset_ns is not None and b.identity.epoch_offset_ns is not None
    if epoch and (stats is None or stats[1] > max_spread_ns):
        near = _nearest(a, b, max_skew_ns, max(max_spread_ns // 10, 1_000))
        if near is not None and (stats is None or _stats(a, b, near)[1] < stats[1]):
            pairs, method, shift, stats = near, METHOD_NEAREST, 0, _stats(a, b, near)
    return pairs, method, shift, stats


def align(summaries: list[RankSummary], max_spread_ns: int = 1_000_000,
          max_skew_ns: int = 100_000_000) -> tuple[list[RankAlignment], dict[int, dict[str, tuple]]]:
    """Offsets of every summary's rank against the first (the reference) and the matches used.

    ``summaries`` have distinct ranks, sorted; returns (alignments in the same order, per rank:
    per process group (reference rows, that rank's rows)). When a matching leaves the aligned ends
    scattered by more than ``max_spread_ns`` and both ranks have epoch time, matching by nearest end
    time (:func:`_nearest`) is tried and kept when it agrees better.
    """
    ref = summaries[0]
    out = [RankAlignment(ref.identity.claimed_rank, 0, 0, METHOD_REFERENCE, len(ref.collectives["end_ns"]), 0, 0)]
    matches: dict[int, dict[str, tuple]] = {}
    for s in summaries[1:]:
        rank = s.identity.claimed_rank
        if s.identity.path == ref.identity.path:  # one export, one clock
            pairs, _method, _shift = match(ref, s)
            matches[rank] = pairs
            out.append(RankAlignment(rank, 0, 0, METHOD_SHARED, sum(len(p[0]) for p in pairs.values()), 0, 0))
            continue
        pairs, method, shift, stats = matched(ref, s, max_spread_ns, max_skew_ns)
        matches[rank] = pairs
        if stats is None:
            out.append(RankAlignment(rank, None, None, METHOD_NONE, 0))
            continue
        med, spread, n = stats
        res = max(_resolution(s), _resolution(ref))
        unc = int(max(spread / np.sqrt(n), res))
        out.append(RankAlignment(rank, med, unc, method, n, shift, int(max(spread, res))))
    return out, matches
