"""Who the job waits for: pipeline stages, each rank's own excess against its stage, and the waits passed on.

Inputs are the job's instance matrices (ranks x collective instances, see :mod:`traceread.ranks.job`) and
the ranks' step rows; everything here is plain numpy over those.

* Stages (:func:`stages`): two-rank point-to-point instances link pipeline neighbours; when they form
  equal chains covering every rank, a rank's stage is its place on its chain, counted from the end whose
  first transfer is a send (stage 0 sends activations first). Otherwise there is one stage: every rank
  is compared with all others, as in a data-parallel job.
* Step excess (:func:`step_excess`): per rank and step, its compute busy time and its idle by class
  minus the median of the other ranks of its stage in the same step. A rank's *own* delay in a step is
  an excess of its compute or of an idle class that is its own doing (data stall, launch overhead, host
  sync, one-time work, unattributed host work) of at least ``straggler_min_own_excess`` of its step;
  comm-bound and pipeline-bubble idle is waiting for others, not its own.
* Stage imbalance (:func:`stage_imbalance`): every rank of one stage computes longer per step than the
  median rank of the other stages by ``stage_imbalance_min_excess`` or more (every stage runs the same
  micro-batches, so per step is per micro-batch times their count).
* Blame (:func:`blame`): each instance's wait is for its last arriver, unless that rank had no own delay
  in that step and arrived late because it had itself just waited: then the wait is passed on to whom it
  had waited for (the instance it waited in last before arriving), so waits caused by one slow worker
  reach it through the pipeline. Each rank's waits are measured as the union of its wait intervals per
  culprit (never counted twice where calls overlap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceread import intervals
from traceread.kernel_classes import P2P_TYPES
from traceread.vocabulary import GAP_CLASSES, part_col

STEP_PARTS = ("compute",) + GAP_CLASSES
WAITING = ("comm-bound", "pipeline-bubble")
NOT_OWN = WAITING + ("capture-boundary",)


@dataclass(frozen=True)
class Stages:
    stage: np.ndarray  # per rank (index into the instance matrices): its stage, 0 when there is one stage
    count: int  # stages found (1: no pipeline seen)
    evidence: str


def chains(n: int, links: set[tuple[int, int]], send_first: dict[int, float]) -> np.ndarray | None:
    """Per node (0..n-1) its place on its chain, None unless ``links`` form chains of one length covering every node
    (no node with more than two neighbours, no cycle). A chain is counted from the end more of whose steps begin
    with a send (``send_first``: that share per node)."""
    nb: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in links:
        nb[a].add(b)
        nb[b].add(a)
    if n < 2 or any(len(v) > 2 or not v for v in nb.values()):
        return None
    seen: set[int] = set()
    stage = np.full(n, -1, dtype=np.int64)
    lengths = set()
    for end in sorted(i for i in range(n) if len(nb[i]) == 1):
        if end in seen:
            continue
        chain = [end]
        while True:
            nxt = [x for x in nb[chain[-1]] if x not in chain]
            if not nxt:
                break
            chain.append(nxt[0])
        seen.update(chain)
        if send_first.get(chain[-1], 0.0) > send_first.get(chain[0], 0.0):
            chain.reverse()
        stage[chain] = np.arange(len(chain))
        lengths.add(len(chain))
    if (stage < 0).any() or len(lengths) != 1:  # a cycle, or chains of different lengths
        return None
    return stage


def stages(types: np.ndarray, present: np.ndarray, arr: np.ndarray, ranks: list[int]) -> Stages:
    """Pipeline stages from the two-rank point-to-point instances (see the module doc)."""
    n = len(ranks)
    one = Stages(np.zeros(n, dtype=np.int64), 1, "")
    p2p = np.isin(types, sorted(P2P_TYPES)) & present
    pair = (present.sum(axis=0) == 2) & (p2p.sum(axis=0) == 2)
    if n < 2 or not pair.any():
        return one
    cols = np.flatnonzero(pair)
    who = np.argsort(~present[:, cols], axis=0, kind="stable")[:2]  # the two members of each pair instance
    links = {(int(min(a, b)), int(max(a, b))) for a, b in zip(who[0], who[1], strict=True)}
    # the first transfer of each rank: a send on the chain's first stage
    first_send = {}
    for i in range(n):
        mine = cols[present[i, cols]]
        if len(mine):
            first_send[i] = float(types[i, mine[np.argmin(arr[i, mine])]] == "send")
    stage = chains(n, links, first_send)
    if stage is None:  # a cycle, or chains of different lengths: no pipeline read
        return one
    count = int(stage.max()) + 1
    return Stages(stage, count, f"{n // count} pipeline(s) of {count} stages, read from the two-rank "
                                "point-to-point transfers between neighbours (stage 0 sends first)")


def step_parts(steps: dict[str, np.ndarray], device: int) -> dict[int, np.ndarray]:
    """Steady steps of one rank's device: step number -> (compute busy, idle per class) ns."""
    st = steps
    if len(st["step"]) == 0:
        return {}
    sel = st["device"] == device if (st["device"] == device).any() else np.ones(len(st["step"]), dtype=bool)
    steady = sel & ~(st["warmup"].astype(bool) | st["outlier"].astype(bool))
    sel = steady if steady.any() else sel
    vals = np.stack([st["busy_ns"][sel]] + [st[part_col(c)][sel] for c in GAP_CLASSES], axis=1).astype(np.float64)
    return {int(s): v for s, v in zip(st["step"][sel], vals, strict=True)}


@dataclass(frozen=True)
class StepExcess:
    steps: np.ndarray  # step numbers (columns)
    values: np.ndarray  # ranks x steps x parts (NaN: no such step)
    excess: np.ndarray  # ranks x steps x parts: minus the median of the rank's stage peers that step
    step_ns: np.ndarray  # per rank: median step time

    def median_excess(self, i: int) -> dict[str, float]:
        with np.errstate(all="ignore"):
            v = self.excess[i]
            return {p: float(np.nanmedian(v[:, k])) if np.isfinite(v[:, k]).any() else 0.0
                    for k, p in enumerate(STEP_PARTS)}

    def own(self, min_share: float) -> np.ndarray:
        """ranks x steps: the rank's own delay that step (its largest own excess is significant)."""
        own_cols = [k for k, p in enumerate(STEP_PARTS) if p not in NOT_OWN]
        top = np.nanmax(np.nan_to_num(self.excess[:, :, own_cols], nan=0.0), axis=2) if len(self.steps) else \
            np.zeros((len(self.step_ns), 0))
        return top >= min_share * self.step_ns[:, None]


def step_excess(parts: list[dict[int, np.ndarray]], stage: np.ndarray) -> StepExcess:
    n = len(parts)
    nums = np.array(sorted({s for p in parts for s in p}), dtype=np.int64)
    vals = np.full((n, len(nums), len(STEP_PARTS)), np.nan)
    pos = {int(s): k for k, s in enumerate(nums)}
    for i, p in enumerate(parts):
        for s, v in p.items():
            vals[i, pos[s]] = v
    exc = np.full_like(vals, np.nan)
    with np.errstate(all="ignore"):
        for i in range(n):  # ranks are few; each step is vectorized
            peers = (stage == stage[i]) & (np.arange(n) != i)
            if not peers.any():
                peers = np.arange(n) != i
            if peers.any() and len(nums):
                med = np.nanmedian(vals[peers], axis=0)
                exc[i] = vals[i] - med
        total = np.nansum(vals, axis=2)
        step_ns = np.array([float(np.nanmedian(np.where(total[i] > 0, total[i], np.nan)))
                            if (total[i] > 0).any() else 0.0 for i in range(n)])
    return StepExcess(nums, vals, exc, step_ns)


@dataclass(frozen=True)
class StageImbalance:
    stage: int
    ranks: tuple[int, ...]
    compute_ns: int  # the stage's median rank's compute per step
    others_ns: int  # the other stages' median rank's compute per step
    excess: float  # compute_ns / others_ns - 1


def stage_imbalance(ex: StepExcess, st: Stages, ranks: list[int], min_excess: float) -> StageImbalance | None:
    if st.count < 2 or not len(ex.steps):
        return None
    with np.errstate(all="ignore"):
        busy = np.nanmedian(ex.values[:, :, 0], axis=1)
    if not np.isfinite(busy).all():
        return None
    lows = np.array([np.min(busy[st.stage == s]) for s in range(st.count)])
    s = int(np.argmax(lows))
    others = float(np.median(busy[st.stage != s]))
    if others <= 0 or lows[s] < (1.0 + min_excess) * others:
        return None
    med = float(np.median(busy[st.stage == s]))
    return StageImbalance(s, tuple(int(ranks[i]) for i in np.flatnonzero(st.stage == s)), int(med), int(others),
                          med / others - 1.0)


@dataclass(frozen=True)
class Blame:
    culprit: np.ndarray  # per instance: the rank index its waits are attributed to
    waits: np.ndarray  # ranks x instances: each rank's wait for the last arriver (at most its own time there)
    attributed: np.ndarray  # ranks (waiter) x ranks (culprit): union ns of the waiter's waits blamed on the culprit
    direct: np.ndarray  # ranks (waiter) x ranks (last arriver): union ns of its waits for the last arriver
    waiting: np.ndarray  # per rank: union ns of all its waits
    window: np.ndarray  # per rank: its matched window (first arrival to last end)


def _union_len(s: np.ndarray, e: np.ndarray) -> int:
    if len(s) == 0:
        return 0
    us, ue = intervals.union(s.astype(np.int64), e.astype(np.int64))
    return int((ue - us).sum())


def blame(arr: np.ndarray, end: np.ndarray, present: np.ndarray, last: np.ndarray, own: np.ndarray,
          tol: float) -> Blame:
    """Waits per rank and instance, and whom they are attributed to (see the module doc).

    ``own``: ranks x instances, the last arriver had its own delay in that instance's step; ``tol``: the
    alignment's per-collective error (waits and lateness within it are not passed on)."""
    n, k = arr.shape
    cols = np.arange(k)
    last_arr = arr[last, cols] if k else np.zeros(0)
    with np.errstate(invalid="ignore"):
        waits = np.where(present, np.clip(np.minimum(last_arr[None, :] - arr, end - arr), 0, None), 0.0)
    culprit = last.copy()
    waited = [np.flatnonzero(waits[r] > tol) for r in range(n)]
    ends = [end[r, w] for r, w in enumerate(waited)]
    order_by_end = [np.argsort(e, kind="stable") for e in ends]
    for x in np.argsort(last_arr, kind="stable"):  # earlier instances are decided first
        lr = int(last[x])
        others = present[:, x].copy()
        others[lr] = False
        if own[lr, x] or not others.any():
            continue
        if last_arr[x] - np.max(arr[others, x]) <= tol:
            continue
        e = ends[lr][order_by_end[lr]]
        j = int(np.searchsorted(e, arr[lr, x] + tol, side="right")) - 1
        if j < 0:
            continue
        y = int(waited[lr][order_by_end[lr][j]])
        if y != x:
            culprit[x] = culprit[y]
    attributed = np.zeros((n, n))
    direct = np.zeros((n, n))
    waiting = np.zeros(n)
    window = np.zeros(n)
    for j in range(n):  # per waiting rank, per culprit: unions (ranks are few)
        w = waits[j] > 0
        s, e = arr[j, w], arr[j, w] + waits[j, w]
        waiting[j] = _union_len(s, e)
        if present[j].any():
            window[j] = float(np.nanmax(end[j]) - np.nanmin(arr[j]))
        for c in np.unique(culprit[w]):
            m = culprit[w] == c
            attributed[j, c] = _union_len(s[m], e[m])
        for c in np.unique(last[w]):
            m = last[w] == c
            direct[j, c] = _union_len(s[m], e[m])
    return Blame(culprit, waits, attributed, direct, waiting, window)
