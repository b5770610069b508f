"""Planted scenarios for communication identity: real pipeline schedules and a TorchRec-like job.

Written from what the runtimes do, not from the rules (each rank's GPU timeline is computed from
the dependencies first, then the host is laid out ahead of it):

* ``plant_pipeline``: P stages (one rank each) run a GPipe (fill/drain), 1F1B or interleaved-1F1B
  schedule over M micro-batches. A stage's forward of micro-batch i needs the activation of the
  stage before it (a ``recv`` posted early on the receiving stream, which runs until the peer's
  ``send`` delivers), its backward the gradient of the stage after it. Compute is queued behind
  the recv (``cudaStreamWaitEvent``), so every wait of a stage for its neighbour is a compute-idle
  gap covered by the recv kernel: truth ``pipeline-bubble`` (the fill at the start of a step, the
  drain near its end, and whatever imbalance the jitter adds between). The host issues p2p as
  ``c10d::send``/``c10d::recv_`` (with ``record_param_comms`` and ``nccl:send``/``nccl:recv``),
  or coalesced (``batch_isend_irecv``: the kernel is launched under ``nccl:coalesced``, which names
  no collective, so only its SendRecv name says point-to-point). After the last backward a
  data-parallel gradient all-reduce is sometimes exposed (truth ``comm-bound``), then the optimizer.
* ``plant_all_to_all``: TorchRec-like embedding exchange with no pipeline: every step runs input
  and output all-to-alls (``c10d::alltoall_base_`` > ``record_param_comms`` > ``nccl:all_to_all`` >
  NCCL's ``ncclGroupStart/ncclSend/ncclRecv/ncclGroupEnd`` ranges, SendRecv kernels) that the next
  compute waits on, at the same place every step: truth ``comm-bound``. Some steps also wait on an
  invisible cross-stream event at a fixed place (truth ``unattributed``: a periodic queued wait
  with no pipeline is not a bubble). In some traces the kernels' External id is their correlation id
  (it matches no host op, as in real TorchRec traces), so only containment can name them.

Jitter is uniform: every duration is drawn in ``[1 - jitter, 1 + jitter]`` times its mean. Truth is
the list of compute-idle intervals per rank/device as in :mod:`tracesynth.planted`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracesynth.model import HostCall, HostRange, Kernel, Rank, Scenario
from tracesynth.planted import _BIG, _COLL, _OPT, _P2P, Planted, PlantSpec

SCHEDULES = ("gpipe", "1f1b", "interleaved")
MAIN = 100
COMPUTE, RECV_PREV, RECV_NEXT, SEND_NEXT, SEND_PREV, DP = 7, 21, 22, 23, 24, 30
_TURN = (300, 2_500)  # GPU kernel-to-kernel turnaround, ns
_LAG = 60_000_000  # how far the host may run ahead of its GPU, ns (a long drain must not make it late)


class _Rank:
    """One rank: GPU kernels placed at given times, host launches laid out ahead of them."""

    def __init__(self, rank: int, rng: np.random.Generator, jitter: float, broken_ext: bool) -> None:
        self.rk = Rank(rank=rank, pid=4000 + rank, devices=[rank])
        self.rng, self.jit, self.broken_ext = rng, jitter, broken_ext
        self.h = 1_000_000  # host cursor
        self.corr, self.ext = rank * 10_000_000 + 1, rank * 10_000_000 + 1
        self.truth: list[tuple[int, int, str]] = []
        self.compute_free = 1_050_000  # the first kernel follows the first launch

    def j(self, ns: float) -> int:
        return max(int(ns * (1.0 + self.rng.uniform(-self.jit, self.jit))), 200)

    def turn(self) -> int:
        return int(self.rng.uniform(*_TURN))

    def _range(self, name: str, start: int, end: int, is_op: bool) -> int:
        self.ext += 1
        self.rk.host_ranges.append(HostRange(MAIN, name, start, end, is_op, self.ext))
        return self.ext

    def launch(self, kstart: int, wrappers: tuple[tuple[str, bool], ...] = (("aten::mm", True),)) -> tuple[int, int]:
        """Host side of one GPU op starting at ``kstart``: nested ranges, then the launch call.
        Returns (correlation, External id the kernel carries)."""
        t0 = max(self.h, kstart - _LAG)
        depth = len(wrappers)
        pre = [self.j(3_000) for _ in range(depth)]
        call = self.j(5_000)
        t_launch = t0 + sum(pre)
        end_launch = t_launch + call
        if end_launch + 1_000 > kstart:  # never submit after the GPU needs it (the host stays ahead)
            raise AssertionError("host fell behind its GPU; lower the host cost")
        ext = -1
        for i, (name, is_op) in enumerate(wrappers):
            s = t0 + sum(pre[:i])
            ext = self._range(name, s, end_launch + 500 * (depth - i), is_op)
        c = self.corr
        self.corr += 1
        self.rk.host_calls.append(HostCall(MAIN, "cudaLaunchKernel", t_launch, end_launch, c, ext))
        self.h = end_launch + 500 * depth + self.j(1_000)
        return c, (c if self.broken_ext else ext)

    def kernel(self, name: str, stream: int, start: int, end: int, wrappers=(("aten::mm", True),)) -> int:
        corr, ext = self.launch(start, wrappers)
        self.rk.kernels.append(Kernel(self.rk.devices[0], stream, name, start, end, corr, external_id=ext))
        return end

    def wait_event(self, before: int) -> None:
        """cudaStreamWaitEvent on the host ahead of a kernel starting at ``before``."""
        t0 = max(self.h, before - _LAG)
        d = self.j(2_000)
        self.rk.host_calls.append(HostCall(MAIN, "cudaStreamWaitEvent", t0, t0 + d, self.corr))
        self.corr += 1
        self.h = t0 + d + 500

    def compute(self, not_before: int, cause: str, kernels: int, mean_ns: float,
                names: list[str] | None = None) -> int:
        """``kernels`` compute kernels back to back; the first waits for ``not_before``. The gap
        before it is ``cause`` when the dependency (not the turnaround) decided its start."""
        ready = self.compute_free + self.turn()
        start = max(ready, not_before)
        if start > self.compute_free:
            self.truth.append((self.compute_free, start, cause if start > ready else "unattributed"))
        for k in range(kernels):
            if k:
                t = self.compute_free + self.turn()
                self.truth.append((self.compute_free, t, "unattributed"))
                start = t
            pool = names or _BIG["gemm"] + _BIG["attention"] + _BIG["memory"]
            end = start + self.j(mean_ns)
            self.kernel(pool[int(self.rng.integers(len(pool)))], COMPUTE, start, end)
            self.compute_free = end
        return self.compute_free


# --- pipeline schedules --------------------------------------------------------------------------

@dataclass(frozen=True)
class PipelineSpec:
    seed: int = 0
    schedule: str = "1f1b"
    stages: int = 4
    microbatches: int = 8
    steps: int = 8
    jitter: float = 0.2
    chunks: int = 2  # model chunks per stage (interleaved only)
    coalesced: bool = False  # p2p as batch_isend_irecv (kernel named only by itself)
    broken_ext: bool = False
    exposed_allreduce: float = 0.5  # probability per step of an exposed DP all-reduce


def stage_order(schedule: str, stage: int, stages: int, microbatches: int, chunks: int = 2
                ) -> list[tuple[str, int, int]]:
    """The (kind 'F'/'B', chunk, micro-batch) sequence one stage runs in a step."""
    v = chunks if schedule == "interleaved" else 1
    groups = max(microbatches // stages, 1) if v > 1 else 1
    if v > 1:
        size = stages
        fwd = [(c, i) for g in range(groups) for c in range(v) for i in range(g * size, (g + 1) * size)]
        bwd = [(c, i) for g in range(groups) for c in reversed(range(v)) for i in range(g * size, (g + 1) * size)]
        warm = min((stages - stage - 1) * 2 + (v - 1) * stages, len(fwd))
    else:
        fwd = [(0, i) for i in range(microbatches)]
        bwd = list(fwd)
        warm = len(fwd) if schedule == "gpipe" else min(stages - stage - 1, len(fwd))
    out = [("F", c, i) for c, i in fwd[:warm]]
    fi, bi = warm, 0
    while fi < len(fwd):
        out.append(("F", *fwd[fi]))
        fi += 1
        out.append(("B", *bwd[bi]))
        bi += 1
    out += [("B", c, i) for c, i in bwd[bi:]]
    return out


def plant_pipeline(spec: PipelineSpec) -> Planted:
    """Simulate one pipeline-parallel job (``spec.stages`` ranks) with its ground truth."""
    if spec.schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {spec.schedule!r}; choose one of {SCHEDULES}")
    rng = np.random.default_rng(spec.seed)
    P, v = spec.stages, (spec.chunks if spec.schedule == "interleaved" else 1)
    M = spec.microbatches if v == 1 else max(spec.microbatches // P, 1) * P
    V = P * v
    ranks = [_Rank(s, np.random.default_rng(rng.integers(1 << 62)), spec.jitter, spec.broken_ext) for s in range(P)]
    t_f = [rng.uniform(500_000, 900_000) / v for _ in range(P)]  # per stage (imbalance), per chunk
    per_op = 4
    p2p_wrap = ((("batch_isend_irecv", False), ("nccl:coalesced", False)) if spec.coalesced else None)

    def wrappers(kind: str) -> tuple[tuple[str, bool], ...]:
        if p2p_wrap:
            return p2p_wrap
        op = "c10d::send" if kind == "send" else "c10d::recv_"
        return ((op, True), ("record_param_comms", True), (f"nccl:{kind}", False))

    for n in range(spec.steps):
        orders = [stage_order(spec.schedule, s, P, M, v) for s in range(P)]
        pos = [0] * P
        sent: dict[tuple[str, int, int], int] = {}  # (kind, virtual stage, mb) -> delivery time
        free = {(s, st): 0 for s in range(P) for st in (RECV_PREV, RECV_NEXT, SEND_NEXT, SEND_PREV)}
        step_host = [r.h for r in ranks]
        first = [True] * P
        while any(pos[s] < len(orders[s]) for s in range(P)):
            progressed = False
            for s in range(P):
                r = ranks[s]
                while pos[s] < len(orders[s]):
                    kind, c, i = orders[s][pos[s]]
                    vs = c * P + s
                    need = None
                    if kind == "F" and vs > 0:
                        need = ("F", vs - 1, i)
                    elif kind == "B" and vs < V - 1:
                        need = ("B", vs + 1, i)
                    if need is not None and need not in sent:
                        break
                    if first[s]:
                        r.h = max(r.h, r.compute_free - _LAG)
                        step_host[s] = r.h
                        first[s] = False
                    not_before = 0
                    if need is not None:  # the recv: posted at the stage's previous op, runs until delivered
                        stream = RECV_PREV if kind == "F" else RECV_NEXT
                        rs = max(free[(s, stream)], r.compute_free - int(r.rng.uniform(20_000, 200_000)),
                                 r.h + 20_000)
                        re_ = max(rs + r.j(15_000), sent[need])
                        r.kernel(_P2P, stream, rs, re_, wrappers("recv"))
                        free[(s, stream)] = re_
                        r.wait_event(r.compute_free + 1_000)
                        not_before = re_ + r.j(2_000)
                    mean = t_f[s] / per_op * (1.0 if kind == "F" else 2.0)
                    end = r.compute(not_before, "pipeline-bubble", per_op, mean)
                    # The send to the neighbour that needs this op's output.
                    to = vs + 1 if kind == "F" else vs - 1
                    if 0 <= to < V:
                        stream = SEND_NEXT if kind == "F" else SEND_PREV
                        ss = max(free[(s, stream)], end + r.j(2_000))
                        se = ss + r.j(40_000)
                        r.kernel(_P2P, stream, ss, se, wrappers("send"))
                        free[(s, stream)] = se
                        sent[(kind, vs, i)] = se
                    pos[s] += 1
                    progressed = True
            if not progressed:
                raise AssertionError(f"schedule {spec.schedule} deadlocked at {pos}")
        for s, r in enumerate(ranks):
            if r.rng.random() < spec.exposed_allreduce:  # data-parallel gradient all-reduce, exposed
                a0 = r.compute_free + r.j(5_000)
                a1 = a0 + r.j(r.rng.uniform(300_000, 1_200_000))
                r.kernel(_COLL[0], DP, a0, a1, (("c10d::allreduce_", True), ("record_param_comms", True),
                                                ("nccl:all_reduce", False)))
                r.wait_event(r.compute_free + 1_000)
                r.compute(a1 + r.j(2_000), "comm-bound", 4, 60_000, [_OPT])
            else:
                r.compute(0, "unattributed", 4, 60_000, [_OPT])
            r.h += 2_000
            r.rk.host_ranges.append(HostRange(MAIN, f"ProfilerStep#{n}", step_host[s], r.h, False, -1))
    return _planted(ranks, spec)


# --- TorchRec-like all-to-all -------------------------------------------------------------------

@dataclass(frozen=True)
class AllToAllSpec:
    seed: int = 0
    ranks: int = 2
    steps: int = 8
    jitter: float = 0.2
    broken_ext: bool = True  # External id = correlation id, as in real TorchRec traces
    invisible_wait: float = 0.7  # probability per step of a periodic wait on an invisible event


_A2A = (("c10d::alltoall_base_", True), ("record_param_comms", True), ("nccl:all_to_all", False),
        ("ncclGroupEnd", False))
_AR = (("c10d::allreduce_", True), ("record_param_comms", True), ("nccl:all_reduce", False))
_SENDRECV_OLD = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


def plant_all_to_all(spec: AllToAllSpec) -> Planted:
    """Simulate a TorchRec-like data-parallel job: embedding all-to-alls the compute waits on."""
    rng = np.random.default_rng(spec.seed)
    ranks = [_Rank(k, np.random.default_rng(rng.integers(1 << 62)), spec.jitter, spec.broken_ext)
             for k in range(spec.ranks)]
    kname = _P2P if rng.random() < 0.5 else _SENDRECV_OLD
    a2a_mean = [rng.uniform(300_000, 1_500_000, size=3) for _ in ranks]  # input dist, output dist, bwd
    for n in range(spec.steps):
        for k, r in enumerate(ranks):
            r.h = max(r.h, r.compute_free - _LAG)
            h0 = r.h
            r.compute(0, "unattributed", 3, 40_000)  # features to device, kjt permute
            for which in range(3):
                if which == 1:
                    if r.rng.random() < spec.invisible_wait:  # waits on an event of an untraced stream
                        r.wait_event(r.compute_free + 1_000)
                        r.compute(r.compute_free + r.j(250_000), "unattributed", 6, 80_000)
                    else:
                        r.compute(0, "unattributed", 6, 80_000)  # embedding lookup
                elif which == 2:
                    # dense forward and backward, with overlapped DDP buckets on the side
                    t = r.compute_free
                    r.compute(0, "unattributed", 14, 120_000)
                    a1 = t
                    for lo, hi in ((0.2, 0.4), (0.5, 0.7)):
                        a0 = max(a1 + 2_000, t + int(r.rng.uniform(lo, hi) * (r.compute_free - t)))
                        a1 = a0 + r.j(150_000)
                        r.kernel(_COLL[0], RECV_NEXT, a0, a1, _AR)
                # the all-to-all: starts when its input is produced, the next compute waits for it
                a0 = r.compute_free + r.j(3_000)
                pieces = 3 if which == 0 else 1  # input dist: splits, lengths, values
                end = a0
                for _ in range(pieces):
                    s0 = end + (r.j(2_000) if end > a0 else 0)
                    end = s0 + r.j(a2a_mean[k][which] / pieces)
                    r.kernel(kname, RECV_PREV, s0, end, _A2A)
                r.wait_event(r.compute_free + 1_000)
                r.compute(end + r.j(2_000), "comm-bound", 3, 60_000)
            r.compute(0, "unattributed", 4, 60_000, [_OPT])
            r.h += 2_000
            r.rk.host_ranges.append(HostRange(MAIN, f"ProfilerStep#{n}", h0, r.h, False, -1))
    return _planted(ranks, spec)


def _planted(ranks: list[_Rank], spec) -> Planted:
    truth = []
    for r in ranks:
        t = np.array([(s, e) for s, e, _ in r.truth], dtype=np.int64).reshape(-1, 2)
        truth.append(pd.DataFrame({"rank": np.int32(r.rk.rank), "device": np.int32(r.rk.devices[0]),
                                   "start_ns": t[:, 0], "end_ns": t[:, 1], "class": [c for _, _, c in r.truth]}))
        r.rk.kernels.sort(key=lambda k: k.start_ns)
    sc = Scenario(ranks=[r.rk for r in ranks], world_size=len(ranks))
    return Planted(sc, pd.concat(truth, ignore_index=True),
                   PlantSpec(seed=getattr(spec, "seed", 0), ranks=len(ranks), steps=spec.steps, jitter=spec.jitter))
