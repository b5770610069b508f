"""Data-parallel x pipeline-parallel jobs (DP x PP) with planted imbalance, one Kineto file per rank.

World ``dp * pp`` ranks, stage-major like Megatron's grid: rank ``stage * dp + d`` is stage ``stage`` of
pipeline ``d``. Each pipeline runs a 1F1B schedule (``pipeline_schedules.stage_order``) over
``microbatches`` micro-batches per step; after its last backward every rank joins its stage's data-parallel
gradient all-reduce (a process group of the stage's ``dp`` ranks), then runs its optimizer. So each rank
shares process groups only with some ranks: its stage's DP group, and one two-rank group per neighbouring
stage of its pipeline (DeepSpeed's pipeline engine makes such pair groups for its p2p), over which the
activations go forward (send on the earlier stage, recv on the later) and the gradients back.

Timing (true time, then each rank's clock offset added, as hosts with NTP-disciplined clocks record):

* a forward of one micro-batch takes ``fwd_ns`` (a backward twice that) on every stage, times the rank's
  factor: ``slow_factor`` for ``slow_rank`` (a slow worker: all its compute is slower), ``stage_factor`` for
  every rank of ``slow_stage`` (stage imbalance: too many layers there), and, per step, ``1 +
  random_imbalance`` for one rank drawn at random without replacement (sequence-length imbalance that moves);
* a receiver posts its recv when it reaches the op that needs it (the recv kernel runs until the data
  arrives); the transfer ends ``p2p_ns`` after both the sender's data is ready and the recv is posted, on
  both sides (send and recv end together); the compute waits for the recv (a pipeline bubble);
* the DP all-reduce starts on each rank when its last backward is done and ends ``allreduce_ns`` after the
  last rank of the stage arrived (the last arriver releases everyone); the optimizer waits for it.

Host side (``host_lead=False``, the default): every kernel is launched 40 us before it starts (a launch call inside its op's range); a
communication kernel's op is ``record_param_comms`` with PyTorch's args (``Collective name``, ``Process
Group Name``/``Description``/``Ranks``, ``Group size``, ``In``/``Out msg nelems``, ``dtype``) and, when
``record_seq``, ``Seq``: the op's number in its process group, the same on every member (both sides of a
pair group count its operations in the one order NCCL requires of blocking p2p on one communicator). Each
stream's launches go on a host thread of their own, so that host ranges nest.

With ``host_lead=True`` the host runs ahead of the GPU as PyTorch's does: it launches its kernels in program
order at its own pace (``HOST_LAUNCH_NS`` apart, a kernel starting no sooner than ``LAUNCH_LATENCY_NS`` after
its launch), a communication kernel starts once the compute stream reached it (NCCL's stream waits on the
current stream), and each step ends with the host blocked in ``cudaDeviceSynchronize`` until its GPU is done
(``loss.item()``); the next step's launches follow. The GPU timing is otherwise the same simulation.

``DpPpJob.truth``: stages of each rank, the true job step per step (last end minus first start, true time),
who was slowed, and the offsets.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from tracesynth.model import HostCall, HostRange, Kernel, Rank, Scenario
from tracesynth.pipeline_schedules import stage_order

_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_P2P = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
_OPT = "void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<4>, AdamFunctor>(int)"
COMPUTE, RECV_PREV, RECV_NEXT, SEND_NEXT, SEND_PREV, DP = 7, 21, 22, 23, 24, 30
MAIN = 100  # host thread of compute launches; each communication stream's launches on MAIN + stream
_TURN = 2_000  # GPU turnaround between dependent kernels, ns
_ACT_NELEMS = 4 << 20  # activation / gradient message, bf16 elements
_GRAD_NELEMS = 64 << 20  # DP gradient bucket
HOST_LAUNCH_NS = 15_000  # host_lead: host time per launch (the op's Python/dispatcher overhead and the call)
LAUNCH_LATENCY_NS = 5_000  # host_lead: launch call to kernel start, at the soonest


@dataclass(frozen=True)
class DpPpSpec:
    dp: int = 4
    pp: int = 4
    microbatches: int = 8
    steps: int = 6
    fwd_ns: int = 400_000  # one micro-batch's forward on one stage (backward: twice)
    kernels: int = 4  # compute kernels per forward/backward
    jitter: float = 0.02  # relative s.d. of each op's duration
    slow_rank: int | None = None
    slow_factor: float = 1.0
    slow_stage: int | None = None
    stage_factor: float = 1.0
    random_imbalance: float = 0.0  # per step one random rank's compute x (1 + this)
    allreduce_ns: int = 300_000
    p2p_ns: int = 30_000
    offsets_ns: tuple[int, ...] = (0, 2_300_000, -1_700_000, 4_100_000, -3_300_000, 900_000)  # cycled
    record_seq: bool = True
    seed: int = 0
    host_lead: bool = False  # the host runs ahead of the GPU and syncs at each step's end (module doc)
    # "pair": one two-rank group per neighbouring stages of a pipeline, ``Seq`` counted per group (DeepSpeed);
    # "pipeline": one group per pipeline holding all its stages, ``Seq`` counted per rank over its sends and
    # recvs together (Megatron-style): the n-th transfer of a rank is not its neighbour's n-th
    pp_groups: str = "pair"
    late_start: tuple[int, int] | None = None  # (rank, ns): that rank's process starts later (start skew)
    # a communication kernel starts only once every peer is there (a transport that launches nothing before its
    # peer is ready): it starts late with nothing local to wait for; its launch stays where the rank reached it
    peer_start: bool = False
    # (rank, steps, ns): in those steps that rank computes ``ns`` longer just before its all-reduce (a delay
    # confined to a few collectives: the rank is late there only)
    late_calls: tuple[int, tuple[int, ...], int] | None = None
    origin_epoch_ns: int = 1_735_632_360_000_000_000


@dataclass
class DpPpJob:
    scenarios: list[Scenario]
    spec: DpPpSpec
    truth: dict = field(default_factory=dict)


def rank_of(spec: DpPpSpec, stage: int, d: int) -> int:
    return stage * spec.dp + d


def _groups(spec: DpPpSpec) -> tuple[dict[int, str], dict[tuple[int, int], str], list[dict]]:
    """Process groups: DP group name per stage, p2p group name per (pipeline, stage to stage + 1) (with
    ``pp_groups="pipeline"`` the pipeline's one group for every such pair), pg_config."""
    P, D = spec.pp, spec.dp
    config = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": P * D,
               "ranks": list(range(P * D))}]
    dp_name, pair_name = {}, {}
    n = 1
    for s in range(P):
        dp_name[s] = str(n)
        config.append({"pg_name": str(n), "pg_desc": "dp", "backend_config": "cuda:nccl", "pg_size": D,
                       "ranks": [rank_of(spec, s, d) for d in range(D)]})
        n += 1
    for d in range(D):
        if spec.pp_groups == "pipeline":
            if P > 1:
                config.append({"pg_name": str(n), "pg_desc": "pp", "backend_config": "cuda:nccl", "pg_size": P,
                               "ranks": [rank_of(spec, s, d) for s in range(P)]})
                pair_name.update({(d, s): str(n) for s in range(P - 1)})
                n += 1
            continue
        for s in range(P - 1):
            pair_name[(d, s)] = str(n)
            config.append({"pg_name": str(n), "pg_desc": "pp", "backend_config": "cuda:nccl", "pg_size": 2,
                           "ranks": [rank_of(spec, s, d), rank_of(spec, s + 1, d)]})
            n += 1
    return dp_name, pair_name, config


class _Writer:
    """One rank's recorded events (its clock: true time + offset)."""

    def __init__(self, rank: int, offset: int) -> None:
        self.rk = Rank(rank=rank, pid=6000 + rank, devices=[0])
        self.o = offset
        self.corr = self.ext = 1 + rank * 1_000_000

    def kernel(self, name: str, stream: int, start: int, end: int, op: str = "aten::mm",
               args: dict | None = None, launch: int | None = None) -> None:
        """``launch``: when the host launched it (true time; default 40 us before it starts)."""
        self.corr += 1
        self.ext += 1
        tid = MAIN if stream == COMPUTE else MAIN + stream
        launch = (start - 40_000 if launch is None else launch) + self.o
        self.rk.host_ranges.append(HostRange(tid, op, launch - 6_000, launch + 6_000, True, self.ext, args=args))
        self.rk.host_calls.append(HostCall(tid, "cudaLaunchKernel", launch, launch + 4_000, self.corr, self.ext))
        self.rk.kernels.append(Kernel(0, stream, name, start + self.o, end + self.o, self.corr, external_id=self.ext))


def make_job(spec: DpPpSpec) -> DpPpJob:
    """Simulate ``spec`` in true time and record every rank on its own clock."""
    rng = np.random.default_rng(spec.seed)
    P, D, M = spec.pp, spec.dp, spec.microbatches
    world = P * D
    offsets = [int(spec.offsets_ns[r % len(spec.offsets_ns)]) if spec.offsets_ns else 0 for r in range(world)]
    w = [_Writer(r, offsets[r]) for r in range(world)]
    dp_name, pair_name, config = _groups(spec)
    seq: dict[str, int] = {}
    rank_seq: dict[tuple[str, int], int] = {}  # pp_groups="pipeline": each rank's own count of its p2p in a group
    pipeline_groups = spec.pp_groups == "pipeline"
    free = np.full(world, 20_000_000, dtype=np.int64)  # each rank's compute stream free from
    movers = rng.permutation(world)
    lead = spec.host_lead
    host = np.full(world, 20_000_000 - 500_000, dtype=np.int64)  # host_lead: each rank's next launch (true time)
    if spec.late_start is not None:
        free[spec.late_start[0]] += spec.late_start[1]
        host[spec.late_start[0]] += spec.late_start[1]
    send_launch: dict[tuple[str, int, int], int] = {}  # host_lead: when the sender launched that output's send

    def launch_at(r: int) -> int:
        t = int(host[r])
        host[r] += HOST_LAUNCH_NS
        return t
    steps_true, step_windows = [], []

    def comm_args(coll: str, pg: str, members: list[int], nelems: int, rank: int | None = None) -> dict:
        """``rank``: the recording rank of a p2p op (its own ``Seq`` with ``pp_groups="pipeline"``)."""
        p2p = coll in ("send", "recv")
        if p2p and pipeline_groups:
            members = sorted(rank_of(spec, s, members[0] % D) for s in range(P))
        a = {"Collective name": coll, "Process Group Name": pg,
             "Process Group Description": "pp" if p2p else "dp",
             "Process Group Ranks": str(members), "Group size": len(members), "In msg nelems": nelems,
             "Out msg nelems": nelems, "dtype": "BFloat16"}
        if spec.record_seq:
            if p2p and pipeline_groups:
                a["Seq"] = rank_seq.get((pg, int(rank or 0)), 0)
                rank_seq[(pg, int(rank or 0))] = a["Seq"] + 1
            else:
                a["Seq"] = seq.get(pg, 0)
        return a

    def factor(r: int, step: int) -> float:
        f = 1.0
        if spec.slow_rank == r:
            f *= spec.slow_factor
        if spec.slow_stage is not None and r // D == spec.slow_stage:
            f *= spec.stage_factor
        if spec.random_imbalance and int(movers[step % world]) == r:
            f *= 1.0 + spec.random_imbalance
        return f

    for step in range(spec.steps):
        start = free.copy()
        host_start = host - 10_000  # host_lead: the step's range opens just before its first launch
        for d in range(D):
            orders = [stage_order("1f1b", s, P, M) for s in range(P)]
            pos = [0] * P
            ready: dict[tuple[str, int, int], int] = {}  # (kind, stage, mb) -> when its output is ready to send
            stream_free: dict[tuple[int, int], int] = {}
            while any(pos[s] < len(orders[s]) for s in range(P)):
                moved = False
                for s in range(P):
                    r = rank_of(spec, s, d)
                    while pos[s] < len(orders[s]):
                        kind, _c, i = orders[s][pos[s]]
                        src = s - 1 if kind == "F" else s + 1
                        need = (kind, src, i) if 0 <= src < P else None
                        if need is not None and need not in ready:
                            break
                        not_before = 0
                        if need is not None:  # recv posted now; the sender's send ends with it
                            sender = rank_of(spec, src, d)
                            pg = pair_name[(d, min(s, src))]
                            rs_stream = RECV_PREV if kind == "F" else RECV_NEXT
                            ss_stream = SEND_NEXT if kind == "F" else SEND_PREV
                            recv_start = max(int(free[r]) - 50_000, stream_free.get((r, rs_stream), 0),
                                             int(start[r]))
                            send_start = max(ready[need], stream_free.get((sender, ss_stream), 0))
                            recv_launch = send_at = None
                            if lead:  # each side's kernel after its launch; the recv once its compute stream got here
                                recv_launch, send_at = launch_at(r), send_launch[need]
                                recv_start = max(int(free[r]) + _TURN, stream_free.get((r, rs_stream), 0),
                                                 recv_launch + LAUNCH_LATENCY_NS)
                                send_start = max(send_start, send_at + LAUNCH_LATENCY_NS)
                            done = max(recv_start, send_start) + spec.p2p_ns
                            if spec.peer_start:
                                recv_start = send_start = max(recv_start, send_start)
                                if recv_launch is None:  # the launch where the rank reached the recv, not later
                                    recv_launch = max(int(free[r]) - 50_000, stream_free.get((r, rs_stream), 0),
                                                      int(start[r])) - 40_000
                                    send_at = ready[need] - 40_000
                            members = sorted([r, sender])
                            w[r].kernel(_P2P, rs_stream, recv_start, done, "record_param_comms",
                                        comm_args("recv", pg, members, _ACT_NELEMS, r), launch=recv_launch)
                            w[sender].kernel(_P2P, ss_stream, send_start, done, "record_param_comms",
                                             comm_args("send", pg, members, _ACT_NELEMS, sender),
                                             launch=send_at)
                            seq[pg] = seq.get(pg, 0) + 1
                            stream_free[(r, rs_stream)] = done
                            stream_free[(sender, ss_stream)] = done
                            not_before = done + _TURN
                        t = max(int(free[r]) + _TURN, not_before)
                        mean = spec.fwd_ns * (1.0 if kind == "F" else 2.0) * factor(r, step)
                        dur = max(int(mean * (1 + spec.jitter * rng.standard_normal())), 10_000)
                        per = dur // spec.kernels
                        # after a wait, the next kernel was queued when the previous op ended (the host runs
                        # ahead; the stream waits for the transfer): the GPU, not the host, waited
                        queued = int(free[r]) - 20_000 if not_before > int(free[r]) + _TURN else None
                        for k in range(spec.kernels):
                            at = queued if k == 0 else None
                            if lead:
                                at = launch_at(r)
                                t = max(t, at + LAUNCH_LATENCY_NS)
                            w[r].kernel(_GEMM, COMPUTE, t, t + per - 500, launch=at)
                            t += per
                        free[r] = t
                        ready[(kind, s, i)] = t + 1_000
                        if lead and 0 <= (s + 1 if kind == "F" else s - 1) < P:  # its send, launched next
                            send_launch[(kind, s, i)] = launch_at(r)
                        pos[s] += 1
                        moved = True
                if not moved:
                    raise AssertionError(f"1F1B deadlocked at {pos}")
        if spec.late_calls is not None and step in spec.late_calls[1]:
            r, extra = spec.late_calls[0], spec.late_calls[2]
            t = int(free[r]) + _TURN
            w[r].kernel(_GEMM, COMPUTE, t, t + extra, launch=launch_at(r) if lead else None)
            free[r] = t + extra
        for s in range(P):  # each stage's DP gradient all-reduce, then its optimizer
            members = [rank_of(spec, s, d) for d in range(D)]
            arrive = {r: int(free[r]) + _TURN for r in members}
            ar_launch = {r: launch_at(r) for r in members} if lead else {}
            if lead:
                arrive = {r: max(arrive[r], ar_launch[r] + LAUNCH_LATENCY_NS) for r in members}
            end = max(arrive.values()) + spec.allreduce_ns
            if spec.peer_start:
                if not lead:  # launched where each rank reached it
                    ar_launch = {r: arrive[r] - 40_000 for r in members}
                arrive = {r: max(arrive.values()) for r in members}
            for r in members:
                w[r].kernel(_ALLREDUCE, DP, arrive[r], end + int(rng.integers(0, 1_500)), "record_param_comms",
                            comm_args("allreduce", dp_name[s], members, _GRAD_NELEMS), launch=ar_launch.get(r))
                t = end + 3_000
                for k in range(3):
                    at = arrive[r] - 20_000 if k == 0 else None
                    if lead:
                        at = launch_at(r)
                        t = max(t, at + LAUNCH_LATENCY_NS)
                    w[r].kernel(_OPT, COMPUTE, t, t + 40_000, launch=at)
                    t += 42_000
                free[r] = t
            seq[dp_name[s]] = seq.get(dp_name[s], 0) + 1
        for r in range(world):
            if lead:  # the host blocks until its GPU is done (loss.item()), then starts the next step
                sync = launch_at(r)
                back = max(sync, int(free[r])) + 5_000
                w[r].corr += 1
                w[r].rk.host_calls.append(HostCall(MAIN, "cudaDeviceSynchronize", sync + offsets[r], back + offsets[r],
                                                   w[r].corr))
                w[r].rk.host_ranges.append(HostRange(MAIN, f"ProfilerStep#{step}", int(host_start[r]) + offsets[r],
                                                     back + 1_000 + offsets[r], False))
                host[r] = back + 20_000
                continue
            w[r].rk.host_ranges.append(HostRange(MAIN, f"ProfilerStep#{step}", int(start[r]) - 60_000 + offsets[r],
                                                 int(free[r]) + 1_000 + offsets[r], False))
        steps_true.append(int(free.max() - start.min()))
        step_windows.append((int(start.min()), int(free.max())))
    if pipeline_groups and spec.record_seq:  # each rank counts its p2p in the order it issued them
        for x in w:
            mine = sorted((h for h in x.rk.host_ranges if h.args and h.args.get("Collective name") in ("send", "recv")),
                          key=lambda h: h.start_ns)
            for k, h in enumerate(mine):
                h.args["Seq"] = k
    scenarios = [Scenario(ranks=[x.rk], world_size=world, origin_epoch_ns=spec.origin_epoch_ns, pg_config=config)
                 for x in w]
    for sc in scenarios:
        for k in (sc.ranks[0].kernels, sc.ranks[0].host_ranges, sc.ranks[0].host_calls):
            k.sort(key=lambda e: e.start_ns)
    truth = {"stage": [r // D for r in range(world)], "pipeline": [r % D for r in range(world)],
             "offsets_ns": [offsets[r] - offsets[0] for r in range(world)], "job_step_ns": steps_true,
             "slow_rank": spec.slow_rank if spec.slow_factor != 1.0 else None,
             "slow_stage": spec.slow_stage if spec.stage_factor != 1.0 else None,
             "movers": [int(movers[s % world]) for s in range(spec.steps)] if spec.random_imbalance else []}
    return DpPpJob(scenarios, spec, truth)


def write_job(job: DpPpJob, directory: str, stem: str = "dppp", fmt: str = "kineto") -> list[str]:
    """One file per rank (``<stem>.rank<N>.json``, or ``.sqlite`` with ``fmt="nsys"``: an nsys export
    records no process groups, so its ranks are aligned by the order of their collectives); the paths."""
    from tracesynth.kineto_writer import write_kineto
    from tracesynth.nsys_writer import write_nsys

    out = []
    for sc in job.scenarios:
        name = os.path.join(directory, f"{stem}.rank{sc.ranks[0].rank}")
        if fmt == "nsys":
            out.append(write_nsys(sc, name + ".sqlite"))
        else:
            out += write_kineto(sc, name + ".json")
    return out
