"""Alignment through the process-group graph, and the job's collective instances.

In a data-parallel x pipeline-parallel job a rank shares process groups only with some ranks (its
stage's data-parallel group, its pipeline neighbours), so many ranks share no collective with the
reference rank. Here every pair of ranks that share a process group is an edge: per process group the
lowest rank that recorded calls in it is matched with every other member (:func:`traceread.ranks.align.match`:
by recorded sequence number where both have one, else by step and order, else by order within the group),
giving that pair's clock difference (median end difference of matched calls) and its error. Each rank's
offset is then the sum of the differences along the path from the reference rank with the least
accumulated error (errors add in quadrature: independent estimates); its method names the ranks the path
went through. An edge's error is its statistical part (the spread of single end differences over sqrt(n))
and its systematic part together (:func:`systematic`: groups of calls, or the capture's two halves, agreeing
on different differences: one collective's ends differ across ranks by its algorithm, which no number of
calls averages out). When every rank shares a group with the reference, the paths are the direct edges and the
result is that of :func:`traceread.ranks.align.align`.

The matched pairs also say which calls are one collective: the calls linked by matched pairs form one
*instance* (a component of the pair graph), with one call per member rank (``instances``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from traceread.kernel_classes import P2P_TYPES
from traceread.ranks.align import (
    METHOD_REFERENCE,
    METHOD_SHARED,
    RankAlignment,
    _resolution,
    epoch_shift,
    match,
    matched,
    sequences,
)
from traceread.ranks.summary import RankSummary

METHOD_UNREACHED = "not aligned: shares no matched collective with any aligned rank"


@dataclass(frozen=True)
class Edge:
    """Two ranks (indices into the summaries) and their matched calls: per process group (rows of a, rows of b)."""

    a: int
    b: int
    pairs: dict[str, tuple[np.ndarray, np.ndarray]]
    method: str
    shift: int
    diff_ns: int  # b's clock minus a's
    spread_ns: float  # robust spread of single end differences
    n: int
    shared: bool  # one file, one clock
    systematic_ns: float = 0.0  # what does not average out: groups of calls or halves of the capture disagreeing

    @property
    def error_ns(self) -> float:
        """The offset's error: the statistical part (spread over sqrt(n)) and the systematic part together."""
        return float(np.hypot(self.spread_ns / np.sqrt(max(self.n, 1)), self.systematic_ns))


def _pair_edge(sa: RankSummary, sb: RankSummary, ia: int, ib: int, max_spread_ns: int,
               max_skew_ns: int) -> Edge | None:
    if sa.identity.path == sb.identity.path:  # one export, one clock: aligned whether or not calls match
        pairs, _method, _shift = match(sa, sb)
        return Edge(ia, ib, pairs, METHOD_SHARED, 0, 0, 0.0, sum(len(p[0]) for p in pairs.values()), True)
    pairs, method, shift, stats = matched(sa, sb, max_spread_ns, max_skew_ns)
    if stats is None:
        return None
    res = max(_resolution(sa), _resolution(sb))
    med, spread, n = stats
    return Edge(ia, ib, pairs, method, shift, med, max(spread, float(res)), n, False, systematic(sa, sb, pairs))


SYSTEMATIC_MIN_PAIRS = 5  # calls of one group (or one half of the capture) whose median is compared


def systematic(sa: RankSummary, sb: RankSummary, pairs: dict[str, tuple[np.ndarray, np.ndarray]]) -> float:
    """The part of two ranks' end differences that does not average out over their matched calls: half the
    range of the median difference per (process group, collective kind) (one collective's ends differ across
    ranks systematically, by its algorithm and the rank's place in it) and half the change of the median
    from the capture's first half to its second (drift). 0 where no two groups of calls can be compared."""
    ca, cb = sa.collectives, sb.collectives
    meds: list[float] = []
    halves = 0.0
    da_all: list[np.ndarray] = []
    for _pg, (pa, pb) in pairs.items():
        if not len(pa):
            continue
        d = ((cb["end_ns"][pb] + epoch_shift(sb)) - (ca["end_ns"][pa] + epoch_shift(sa))).astype(np.float64)
        kind = np.where(np.isin(ca["collective"][pa], sorted(P2P_TYPES)), "p2p", ca["collective"][pa])
        for k in np.unique(kind):
            x = d[kind == k]
            if len(x) >= SYSTEMATIC_MIN_PAIRS:
                meds.append(float(np.median(x)))
        da_all.append(np.stack([ca["end_ns"][pa].astype(np.float64), d]))
    if da_all:
        t, d = np.concatenate(da_all, axis=1)
        d = d[np.argsort(t, kind="stable")]
        if len(d) >= 2 * SYSTEMATIC_MIN_PAIRS:
            h = len(d) // 2
            halves = abs(float(np.median(d[:h]) - np.median(d[h:]))) / 2
    groups = (max(meds) - min(meds)) / 2 if len(meds) >= 2 else 0.0
    return max(groups, halves)


def _has_p2p(summaries: list[RankSummary], who: list[int], pg: str) -> bool:
    """Whether the group's calls on its members are point-to-point transfers (one member's are enough)."""
    for i in who:
        c = summaries[i].collectives
        if np.isin(c["collective"][c["pg"] == pg], sorted(P2P_TYPES)).any():
            return True
    return False


def edges(summaries: list[RankSummary], max_spread_ns: int = 1_000_000,
          max_skew_ns: int = 100_000_000) -> list[Edge]:
    """Per process group, its lowest member matched with each other member, every pair of members in a
    group with point-to-point transfers (each pair once)."""
    members: dict[str, list[int]] = {}
    for i, s in enumerate(summaries):
        for pg in sequences(s):
            members.setdefault(pg, []).append(i)
    wanted: list[tuple[int, int]] = []
    by_path: dict[str, int] = {}
    for i, s in enumerate(summaries):  # ranks of one nsys export share its clock
        hub = by_path.setdefault(s.identity.path, i)
        if hub != i:
            wanted.append((hub, i))
    for pg in sorted(members):
        hub, *rest = members[pg]
        wanted += [(hub, m) for m in rest]
        if len(rest) > 1 and _has_p2p(summaries, members[pg], pg):
            # a pipeline's group: each rank transfers with its neighbours only, so every pair is tried
            # (non-neighbours match nothing and make no edge)
            wanted += [(x, y) for k, x in enumerate(members[pg]) for y in members[pg][k + 1:]]
    out = []
    for a, b in dict.fromkeys(wanted):
        e = _pair_edge(summaries[a], summaries[b], a, b, max_spread_ns, max_skew_ns)
        if e is not None:
            out.append(e)
    return _one_partner(summaries, out)


def _one_partner(summaries: list[RankSummary], es: list[Edge]) -> list[Edge]:
    """Each point-to-point call keeps one partner: the one whose end agrees best with its edge's clock
    difference. In a pipeline a transfer is followed by the next stage's compute and its transfer onward, so
    ranks two stages apart can agree on a clock difference too (loosely: the compute between varies); the
    neighbour's transfer ends with it exactly. An edge left with under half of its pairs is dropped."""
    sizes = np.array([len(s.collectives["end_ns"]) for s in summaries], dtype=np.int64)
    base = np.concatenate(([0], np.cumsum(sizes)))
    p2p_types = sorted(P2P_TYPES)
    items = []  # (edge, pg, mask of its p2p pairs, node a, node b, residual)
    for k, e in enumerate(es):
        if e.shared:
            continue
        ca, cb = summaries[e.a].collectives, summaries[e.b].collectives
        xa, xb = epoch_shift(summaries[e.a]), epoch_shift(summaries[e.b])
        for pg, (pa, pb) in e.pairs.items():
            q = np.isin(ca["collective"][pa], p2p_types) & np.isin(cb["collective"][pb], p2p_types)
            if q.any():
                resid = np.abs((cb["end_ns"][pb[q]] + xb) - (ca["end_ns"][pa[q]] + xa) - e.diff_ns).astype(np.float64)
                items.append((k, pg, q, pa[q] + base[e.a], pb[q] + base[e.b], resid))
    if not items:
        return es
    best = np.full(int(base[-1]), np.inf)
    for _k, _pg, _q, na, nb, r in items:
        np.minimum.at(best, na, r)
        np.minimum.at(best, nb, r)
    drop: dict[int, dict[str, np.ndarray]] = {}
    for k, pg, q, na, nb, r in items:
        lose = (r > best[na]) | (r > best[nb])
        if lose.any():
            m = np.zeros(len(q), dtype=bool)
            m[np.flatnonzero(q)[lose]] = True
            drop.setdefault(k, {})[pg] = m
    out = []
    for k, e in enumerate(es):
        if k not in drop:
            out.append(e)
            continue
        pairs = {pg: (pa[~drop[k][pg]], pb[~drop[k][pg]]) if pg in drop[k] else (pa, pb)
                 for pg, (pa, pb) in e.pairs.items()}
        pairs = {pg: p for pg, p in pairs.items() if len(p[0])}
        n = sum(len(p[0]) for p in pairs.values())
        if n < 0.5 * e.n or n == 0:
            continue
        sa, sb = summaries[e.a], summaries[e.b]
        pa = np.concatenate([p[0] for p in pairs.values()])
        pb = np.concatenate([p[1] for p in pairs.values()])
        d = (sb.collectives["end_ns"][pb] + epoch_shift(sb)) - (sa.collectives["end_ns"][pa] + epoch_shift(sa))
        med = int(np.median(d))
        spread = max(float(np.median(np.abs(d - med))) * 1.4826, float(max(_resolution(sa), _resolution(sb))))
        out.append(Edge(e.a, e.b, pairs, e.method, e.shift, med, spread, n, False, systematic(sa, sb, pairs)))
    return out


def align_graph(summaries: list[RankSummary], max_spread_ns: int = 1_000_000,
                max_skew_ns: int = 100_000_000) -> tuple[list[RankAlignment], list[Edge]]:
    """Offsets of every summary's rank against the first (the reference), through the group graph."""
    es = edges(summaries, max_spread_ns, max_skew_ns)
    adj: dict[int, list[tuple[Edge, int, int]]] = {}
    for e in es:  # (edge, neighbour, sign of its diff seen from this side)
        adj.setdefault(e.a, []).append((e, e.b, 1))
        adj.setdefault(e.b, []).append((e, e.a, -1))
    # least accumulated variance first (Dijkstra); ties to fewer hops, then lower index
    best: dict[int, tuple[float, int]] = {0: (0.0, 0)}
    how: dict[int, tuple[int, Edge, int]] = {}
    heap: list[tuple[float, int, int]] = [(0.0, 0, 0)]
    while heap:
        var, hops, i = heapq.heappop(heap)
        if best.get(i, (np.inf, 0)) < (var, hops):
            continue
        for e, j, _sign in adj.get(i, []):
            cand = (var + (0.0 if e.shared else float(e.error_ns) ** 2), hops + 1)
            if cand < best.get(j, (np.inf, 1 << 30)):
                best[j] = cand
                how[j] = (i, e, _sign)
                heapq.heappush(heap, (cand[0], cand[1], j))
    ref = summaries[0]
    out = [RankAlignment(ref.identity.claimed_rank, 0, 0, METHOD_REFERENCE, len(ref.collectives["end_ns"]), 0, 0)]
    for j in range(1, len(summaries)):
        rank = summaries[j].identity.claimed_rank
        if j not in how:
            out.append(RankAlignment(rank, None, None, METHOD_UNREACHED, 0))
            continue
        path: list[tuple[int, Edge, int]] = []
        k = j
        while k != 0:
            path.append(how[k])
            k = how[k][0]
        path.reverse()
        offset = sum(sign * e.diff_ns for _i, e, sign in path)
        unc2 = sum(float(e.error_ns) ** 2 for _i, e, _s in path if not e.shared)
        spread2 = sum(e.spread_ns ** 2 for _i, e, _s in path if not e.shared)
        last = path[-1][1]
        res = max(_resolution(summaries[j]), _resolution(ref))
        if all(e.shared for _i, e, _s in path):
            out.append(RankAlignment(rank, 0, 0, METHOD_SHARED, last.n, 0, 0))
            continue
        method = last.method
        if len(path) > 1:
            via = " -> ".join(str(summaries[i].identity.claimed_rank) for i, _e, _s in path[1:])
            method += f"; through the process-group graph via rank {via} (errors added along the path)"
        out.append(RankAlignment(rank, int(offset), int(max(np.sqrt(unc2), res)), method, last.n,
                                 last.shift if len(path) == 1 else 0, int(max(np.sqrt(spread2), res))))
    return out, es


def instances(summaries: list[RankSummary], es: list[Edge]) -> np.ndarray:
    """Rows (ranks x instances) of the calls that are one collective instance, -1 where a rank has none.

    Calls linked by matched pairs are one instance (connected components of the pair graph, by label
    propagation with pointer jumping: a few vectorized passes, not a loop per call). An instance keeps at
    most one call per rank (its earliest) and needs two ranks or more."""
    sizes = np.array([len(s.collectives["end_ns"]) for s in summaries], dtype=np.int64)
    base = np.concatenate(([0], np.cumsum(sizes)))
    us, vs = [], []
    for e in es:
        for pa, pb in e.pairs.values():
            us.append(pa.astype(np.int64) + base[e.a])
            vs.append(pb.astype(np.int64) + base[e.b])
    total = int(base[-1])
    if not us or total == 0:
        return np.full((len(summaries), 0), -1, dtype=np.int64)
    u, v = np.concatenate(us), np.concatenate(vs)
    label = np.arange(total, dtype=np.int64)
    while True:
        m = np.minimum(label[u], label[v])
        new = label.copy()
        np.minimum.at(new, u, m)
        np.minimum.at(new, v, m)
        new = new[new]
        if np.array_equal(new, label):
            break
        label = new
    linked = np.zeros(total, dtype=bool)
    linked[u] = linked[v] = True
    node = np.flatnonzero(linked)
    owner = np.searchsorted(base, node, side="right") - 1
    comp, col = np.unique(label[node], return_inverse=True)
    table = np.full((len(summaries), len(comp)), -1, dtype=np.int64)
    # earliest call per (rank, instance): write in reverse start order so the earliest wins
    starts = np.concatenate([s.collectives["start_ns"].astype(np.int64) + epoch_shift(s) for s in summaries])
    order = np.argsort(-starts[node], kind="stable")
    table[owner[order], col[order]] = node[order] - base[owner[order]]
    keep = (table >= 0).sum(axis=0) >= 2
    return table[:, keep]
