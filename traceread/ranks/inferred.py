"""Process groups of ranks whose traces record none (Nsight Systems exports), inferred from their transfers.

An nsys export names no process group: every collective of a rank is in one unnamed group, so in a data-parallel
x pipeline-parallel job the gradient all-reduces of different stages look alike (same kernel name, same count per
step, no size) and would be paired across stages: clock offsets milliseconds off. What the export does carry is
who transfers with whom: point-to-point transfers end at once on both sides, so they pair only between pipeline
neighbours (:mod:`traceread.ranks.p2p`, direction and per-pair order). Those links form chains, one per pipeline;
a rank's stage is its place on its chain, counted from the end whose steps begin with a send (stage 0 sends the
first activations). A pipeline's ranks then share one inferred group for their transfers, and the ranks at one
stage of every pipeline one inferred group for their collectives (the stage's data-parallel group), so each
all-reduce is matched only within its stage.

The inference is made only when no rank records a process group, the links form equal chains covering every rank
with transfers, and the ranks of each stage ran the same collectives the same number of times (an unequal count
is not one group); otherwise the summaries are returned unchanged (one unnamed group, as recorded).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from traceread.kernel_classes import P2P_TYPES
from traceread.ranks.blame import chains
from traceread.ranks.summary import RankSummary

PIPELINE = "inferred pipeline {}"  # the group of one pipeline's transfers
STAGE = "inferred stage {}"  # the group of one stage's collectives (its data-parallel group)
DESC = "inferred"  # the group's description: not recorded, inferred (module doc)
_P2P = sorted(P2P_TYPES)
LINK_SHARE = 0.5


def _send_first(c: dict[str, np.ndarray]) -> float:
    """The share of the rank's steps whose first transfer is a send (its first transfer when no step is known)."""
    q = np.flatnonzero(np.isin(c["collective"], _P2P))
    if len(q) == 0:
        return 0.0
    q = q[np.argsort(c["start_ns"][q], kind="stable")]
    steps = c["step"][q]
    if (steps >= 0).any():
        _, first = np.unique(steps[steps >= 0], return_index=True)
        firsts = q[steps >= 0][first]
    else:
        firsts = q[:1]
    return float(np.mean(c["collective"][firsts] == "send"))


def _only_p2p(s: RankSummary) -> RankSummary:
    c = s.collectives
    keep = np.isin(c["collective"], _P2P)
    return dataclasses.replace(s, collectives={k: v[keep] for k, v in c.items()})


def _counts(c: dict[str, np.ndarray], primary: int) -> tuple[tuple[str, int], ...]:
    on = (c["device"] == primary) & ~np.isin(c["collective"], _P2P)
    kinds, n = np.unique(c["collective"][on], return_counts=True)
    return tuple(zip(kinds.tolist(), n.tolist(), strict=True))


def _links(es: list) -> set[tuple[int, int]]:
    """Pipeline neighbours: the pairs of ranks whose transfers matched, each with at least ``LINK_SHARE`` of the
    most transfers either rank matched with any partner (two ranks two stages apart can agree on a clock
    difference now and then, by chains of transfer, compute and transfer; neighbours match every transfer)."""
    n: dict[tuple[int, int], int] = {}
    for e in es:
        if e.n > 0 and not e.shared:
            key = (min(e.a, e.b), max(e.a, e.b))
            n[key] = max(n.get(key, 0), int(e.n))
    most: dict[int, int] = {}
    for (a, b), k in n.items():
        most[a], most[b] = max(most.get(a, 0), k), max(most.get(b, 0), k)
    return {(a, b) for (a, b), k in n.items() if k >= LINK_SHARE * max(most[a], most[b])}


def infer_groups(summaries: list[RankSummary], max_spread_ns: int = 1_000_000,
                 max_skew_ns: int = 100_000_000) -> tuple[list[RankSummary], str]:
    """``summaries`` with inferred process groups (module doc) and a sentence saying how; unchanged with ''."""
    from traceread.ranks.align import primary_device
    from traceread.ranks.graph import edges

    if len(summaries) < 3 or any((s.collectives["pg"] != "").any() for s in summaries):
        return summaries, ""
    with_p2p = [i for i, s in enumerate(summaries) if np.isin(s.collectives["collective"], _P2P).any()]
    if len(with_p2p) < 2:
        return summaries, ""
    sub = [_only_p2p(summaries[i]) for i in with_p2p]
    links = _links(edges(sub, max_spread_ns, max_skew_ns))
    stage = chains(len(sub), links, {k: _send_first(s.collectives) for k, s in enumerate(sub)})
    if stage is None or len(with_p2p) != len(summaries):
        return summaries, ""
    count = int(stage.max()) + 1
    # each chain: a pipeline, numbered by its lowest rank's place
    pipe = np.full(len(sub), -1, dtype=np.int64)
    nb: dict[int, set[int]] = {i: set() for i in range(len(sub))}
    for a, b in links:
        nb[a].add(b)
        nb[b].add(a)
    k = 0
    for i in range(len(sub)):
        if pipe[i] >= 0:
            continue
        todo = [i]
        while todo:
            x = todo.pop()
            if pipe[x] < 0:
                pipe[x] = k
                todo += list(nb[x])
        k += 1
    for st in range(count):  # one stage's ranks: the same collectives, as often (else no group is inferred)
        shapes = {_counts(summaries[i].collectives, primary_device(summaries[i])) for i in np.flatnonzero(stage == st)}
        if len(shapes) > 1:
            return summaries, ""
    out = []
    for s, st, p in zip(summaries, stage.tolist(), pipe.tolist(), strict=True):
        c = dict(s.collectives)
        q = np.isin(c["collective"], _P2P)
        c["pg"] = np.where(q, PIPELINE.format(p), STAGE.format(st)).astype(str)
        c["pg_desc"] = np.full(len(q), DESC, dtype=str)
        out.append(dataclasses.replace(s, collectives=c))
    return out, (f"process groups inferred ({k} pipeline(s) of {count} stages, from the point-to-point partners; "
                 "each stage's collectives matched within the stage): the traces record none")
