"""Planted-cause scenarios: realistic training steps with idle gaps of known cause (ground truth).

Each rank is simulated as one host launching thread feeding one GPU: a compute stream, a
communication stream and copies. The simulation follows the physics of the queue (a kernel starts
when its launch has returned, its stream is free and its dependencies are done), so a gap's cause
is known by construction:

* ``launch-bound``: runs of tiny kernels whose host dispatch (op + launch) outlasts them;
* ``comm-bound``: an exposed collective the next (already queued) kernel waits for, or that the
  host waits for in a device sync;
* ``data-starved``: ``enumerate(DataLoader)#...`` on the host then the batch's H2D copy, or a big
  pageable H2D copy with no annotation;
* ``pipeline-bubble``: fill at the start and drain near the end of every step, of stable length,
  waiting on a p2p recv (kernel queued behind it, or host blocked in a sync on it) or on a
  cross-stream dependency with nothing visible;
* ``sync-stall``: ``.item()`` / stream, device or event synchronize while work is queued, then the
  next launch at once; or a blocking DtoH copy (``.cpu()`` of a large tensor) the host waits in;
* ``one-time-cost``: JIT compilation, CUDA-graph capture, a module-loading run, a first launch that
  loads its module (``tracesynth.one_time``);
* ``unattributed``: a queued kernel waiting on something invisible, at random phases; or (drawn as
  this class, truth ``launch-bound`` with evidence kind ``host-work`` since issue 42: the CPU is the
  bottleneck) a long host stretch with no CUDA calls (checkpoint, logging).

Everything else is noise: mixed compute-bound and memory-bound kernels with sub-3 us turnaround
gaps (truth: ``unattributed``), overlapped gradient all-reduces (also across launch-bound runs and
sync stalls, where nothing waits for them), an unrelated host thread, user annotations. Ground truth is the list of compute-idle intervals ``[end of a compute kernel,
start of the next)`` per rank/device with their class, in scenario ns, which is the loaded frame's
time base for both writers (Kineto 2024 generation and nsys).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from traceread.vocabulary import GAP_CLASSES as CLASSES
from tracesynth.model import Copy, HostCall, HostRange, Kernel, Rank, Scenario

MAIN, NOISE = 100, 200  # host thread ids
COMPUTE, COMM, COPY = 7, 21, 9  # stream ids

_BIG = {"gemm": ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
                 "segment_k_off_kernel__5x_cublas", "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTN",
                 "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"],
        "attention": ["void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
                      "cutlass::bfloat16_t>, false, true>(flash::Flash_fwd_params)"],
        "memory": ["void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>,"
                   " std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
                   "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
                   "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*,"
                   " c10::BFloat16*)"]}
_SMALL = ["void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
          "::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, "
          "2ul>, 4, TrivialOffsetCalculator<1, unsigned int>>(int)",
          "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float,"
          " float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
          "float>, unsigned int, float, 4>)",
          "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&,"
          " at::native::GeluType)::{lambda()#2}::operator()() const, std::array<char*, 2ul> >(int)"]
_COLL = ["ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
         "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
         "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"]
_P2P = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
_OPT = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
        "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4>>(...)")
# Mean planted gap per occurrence, ns (launch-bound: one run of tiny kernels).
_MEAN_GAP = {"comm-bound": 1_500_000, "data-starved": 3_000_000, "pipeline-bubble": 900_000,
             "sync-stall": 400_000, "one-time-cost": 2_000_000, "unattributed": 1_200_000}


@dataclass(frozen=True)
class PlantSpec:
    """What to plant. ``weights``: expected occurrences per step of each class (bubbles: 1 means a
    fill and a drain bubble every step; 0 disables a class)."""

    seed: int = 0
    ranks: int = 2
    steps: int = 8
    jitter: float = 0.05  # relative standard deviation of every duration ("normal"), or half-width ("uniform")
    jitter_dist: str = "normal"  # "uniform": every duration uniform in [1 - jitter, 1 + jitter] x its mean
    weights: dict[str, float] = field(default_factory=lambda: {c: 1.0 for c in CLASSES})
    noise: bool = True
    # Work per step: 0 records no shapes; N > 0 records the aten::mm shapes of a [N*512, 1024] x
    # [1024, 1024] matmul and scales GEMM kernel time by N/8 (batch-size changes for `diff`).
    batch: int = 0
    # The launch-bound fix: each run of tiny kernels is dispatched as 3 large fused kernels doing
    # the same GPU work (torch.compile / CUDA graph), so the planted launch-bound idle disappears.
    launch_fused: bool = False
    # The data-loader fix (more workers, prefetch): the same batches arrive in time, so each planted
    # loader wait becomes a short loader call and a queued pinned copy (the same GPU work, no wait).
    loader_fixed: bool = False
    # Capture boundaries (tracesynth.capture): at the capture's start the GPU is still busy for
    # ``capture_lead_ns`` with work issued before it ("queued": the host queues, the first op waits;
    # "blocking-copy": a synchronous DtoH copy waits; "sync": a device sync waits), and the last step
    # is padded with ``capture_tail_ns`` in which nothing is issued (the profiler shutting down).
    # The what-if after-runs (traceread.whatif), each simulated afresh with the same random draws as
    # the before-run, so only the fix differs: ``graphs_captured``, each run of tiny kernels is one
    # cudaGraphLaunch (the same kernels back to back, no per-kernel host dispatch); ``syncs_removed``,
    # the planted .item()/synchronize stalls no longer block the host (copies stay, asynchronous);
    # ``comm_overlapped``, nothing waits for the planted exposed collectives (they still run).
    # Both sides of a what-if pair set ``paired``: the unrelated host thread draws from its own random
    # stream, and an after-run queues the kernels its before-run queued to get ahead (_Sim.ahead).
    paired: bool = False
    graphs_captured: bool = False
    syncs_removed: bool = False
    comm_overlapped: bool = False
    # ``memory_factor``: the memory-bound kernels (as traceread.whatif.fixes judges them) of the compute stream
    # run this many times faster (fusion), the same draws taken: tracesynth.memory_fused
    memory_factor: float = 1.0
    # The kernel families busy compute draws from, one draw each (a workload knob: four memory-heavy entries)
    busy_mix: tuple[str, ...] = ("gemm", "gemm", "attention", "memory")
    capture_lead: str = ""
    capture_lead_ns: int = 0
    capture_tail_ns: int = 0


@dataclass
class Planted:
    scenario: Scenario
    truth: pd.DataFrame  # rank, device, start_ns, end_ns, class
    spec: PlantSpec

    def truth_dict(self) -> dict:
        t = self.truth
        return {"time_base": "scenario ns: loaded start_ns for Kineto 2024 and nsys; add origin_epoch_ns for "
                             "integer-microsecond Kineto (absolute epoch timestamps)",
                "origin_epoch_ns": self.scenario.origin_epoch_ns,
                "spec": asdict(self.spec),
                "intervals": {c: t[c].tolist() for c in ("rank", "device", "start_ns", "end_ns", "class")}}


def read_truth(path: str) -> pd.DataFrame:
    """The ground-truth intervals of a ``*.truth.json`` file written by scripts/synth.py."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    return pd.DataFrame(doc["intervals"]).astype({"rank": "int32", "device": "int32", "start_ns": "int64",
                                                  "end_ns": "int64"})


class _Sim:
    """One rank's host thread and GPU queue (see module docstring)."""

    def __init__(self, rank: int, rng: np.random.Generator, jitter: float, noise: bool, batch: int = 0,
                 launch_fused: bool = False, loader_fixed: bool = False, uniform: bool = False) -> None:
        self.rk = Rank(rank=rank, pid=4000 + rank, devices=[rank])
        self.uniform = uniform
        self.dev, self.rng, self.jit, self.noise = rank, rng, jitter, noise
        self.batch, self.launch_fused, self.loader_fixed = batch, launch_fused, loader_fixed
        self.h = 1_000_000  # host cursor
        self.free = {COMPUTE: 0, COMM: 0, COPY: 0}  # stream free times
        self.last_end: int | None = None  # end of the last compute kernel
        self.pending: str | None = None  # class of the next gap (None: decided by the queue)
        self.corr, self.ext = rank * 10_000_000 + 1, rank * 10_000_000 + 1
        self.truth: list[tuple[int, int, str]] = []
        self.graphs_captured = self.syncs_removed = self.comm_overlapped = False
        self.memory_factor = 1.0
        self.busy_mix = ["gemm", "gemm", "attention", "memory"]
        self.graph: tuple[int, int] | None = None  # (correlation, launch end) of the graph being replayed
        self.ahead_log: list[int] = []  # kernels each ahead() queued
        self.ahead_script: list[int] | None = None  # an after-run: the before-run's ahead_log
        # Host stretches planted up to a point after the GPU drains (a loader wait, host work), as host time: the
        # before-run logs each one's length, a memory-bound after-run (whose GPU drains sooner) takes it as it is
        self.host_log: list[int] = []
        self.host_script: list[int] | None = None
        # The unrelated host thread's draws (how many ops depends on host time): their own stream in
        # a before/after pair (``PlantSpec.paired``), so the two runs share every other draw.
        self.noise_rng = self.rng

    def j(self, ns: float, rng: np.random.Generator | None = None) -> int:
        rng = self.rng if rng is None else rng
        if self.uniform:
            return max(int(ns * (1.0 + rng.uniform(-self.jit, self.jit))), 200)
        return max(int(ns * (1.0 + self.jit * rng.standard_normal())), 200)

    def api(self, name: str, start: int, dur: int, tid: int = MAIN, ext: int = -1) -> tuple[int, int]:
        c = self.corr
        self.corr += 1
        self.rk.host_calls.append(HostCall(tid, name, start, start + dur, c, ext))
        return c, start + dur

    def op(self, name: str, start: int, end: int, tid: int = MAIN, is_op: bool = True,
           dims: list | None = None) -> int:
        self.ext += 1
        types = ["c10::BFloat16"] * len(dims) if dims is not None else None
        self.rk.host_ranges.append(HostRange(tid, name, start, end, is_op, self.ext, dims, types))
        return self.ext

    def kernel(self, name: str, dur: int, stream: int = COMPUTE, not_before: int = 0, pre: float = 6_000,
               op: str = "aten::mm", launch: str = "cudaLaunchKernel", dims: list | None = None,
               launch_ns: int | None = None) -> int:
        """Dispatch one kernel from the host (op + launch call); return its end."""
        t0, pre_ns, lat = self.h, self.j(pre), self.j(2_500)
        # (random draws in the same order as before launch_ns existed: the planted goldens depend on it)
        op_end = t0 + pre_ns + self.j(5_000) + 1_000 + (launch_ns or 0)
        call_ns = self.j(4_500) if launch_ns is None else launch_ns
        host_after = self.j(1_000)
        if self.graph is not None:  # a node of a replayed CUDA graph: no host dispatch of its own
            corr, lend = self.graph
            host_after = 0
        else:
            ext = self.op(op, t0, op_end, dims=dims)
            corr, lend = self.api(launch, t0 + pre_ns, call_ns, ext=ext)
            self.h = t0 + pre_ns + (lend - t0 - pre_ns) + 1_000 + host_after
        ready = lend + lat
        turn = int(self.rng.uniform(300, 2_500))
        if self.graph is not None:  # a graph runs its kernels 0.26-0.42 us apart (eager: the draw above), mapped
            turn = 260 + (turn - 300) * 160 // 2_200  # from the same draw: the random stream stays the before-run's
        start = max(ready, self.free[stream] + (turn if stream == COMPUTE else 500), not_before)
        if self.memory_factor != 1.0 and stream == COMPUTE:
            from tracesynth.memory_fused import fused_ns

            dur = fused_ns(name, dur, self.memory_factor)
        end = start + dur
        self.rk.kernels.append(Kernel(self.dev, stream, name, start, end, corr,
                                      external_id=ext if self.graph is None else -1))
        self.free[stream] = end
        if stream == COMPUTE:
            if self.last_end is not None and start > self.last_end:
                # Submitted after the drain: the GPU waited for the host. Submitted before: whatever
                # delay remains is the GPU's own turnaround.
                cls = self.pending or ("launch-bound" if lend > self.last_end else "unattributed")
                self.truth.append((self.last_end, start, cls))
            self.pending = None
            self.last_end = end
        return end

    def copy(self, kind: str, dur: int, stream: int, src: str, call: str, not_before: int = 0,
             blocking: bool = False, host_ns: int | None = None) -> int:
        t0 = self.h
        ext = self.op("aten::copy_", t0, t0 + 3_000)
        c = self.corr
        self.corr += 1
        start = max(t0 + 4_000, self.free[stream], not_before)
        end = start + dur
        dst = "Device" if kind == "HtoD" else "Pageable"
        self.rk.copies.append(Copy(self.dev, stream, kind, start, end, c, max(dur, 1) * 20, src, dst))
        self.free[stream] = end
        hend = (end + 1_500) if blocking else t0 + 3_000 + (self.j(3_000) if host_ns is None else host_ns)
        self.rk.host_calls.append(HostCall(MAIN, call, t0 + 1_000, hend, c, ext))
        self.h = hend + 1_000
        return end

    def host_until(self, until: int) -> int:
        """``until`` for a planted host stretch, or in a memory-bound after-run its before-run's length from here."""
        if self.host_script is not None and self.memory_factor != 1.0:
            return self.h + self.host_script.pop(0)
        self.host_log.append(until - self.h)
        return until

    def quiet(self, name: str, until: int, is_op: bool = False) -> None:
        """Host work with no CUDA calls until ``until``."""
        if until > self.h:
            self.op(name, self.h, until, is_op=is_op)
            self.h = until

    def _comm(self, name: str, not_before: int, end: int) -> int:
        """Launch a communication kernel that starts when it can and runs until ``end``."""
        self.kernel(name, 0, COMM, not_before=not_before, op="record_param_comms")
        k = self.rk.kernels[-1]
        k.end_ns = max(end, k.start_ns + 5_000)
        self.free[COMM] = k.end_ns
        return k.end_ns

    # --- segments ---------------------------------------------------------------------------
    def busy(self, n: int) -> None:
        for _ in range(n):
            fam = self.rng.choice(self.busy_mix)
            names = _BIG[str(fam)]
            name = names[int(self.rng.integers(len(names)))]  # draw order kept: seeds give the same runs
            dur = self.j(self.rng.uniform(40_000, 250_000))
            dims = None
            if self.batch and fam == "gemm":
                dur = int(dur * self.batch / 8)
                dims = [[self.batch * 512, 1024], [1024, 1024]]
            self.kernel(name, dur, dims=dims)
            if self.noise and self.rng.random() < 0.04:  # overlapped gradient bucket
                self.kernel(_COLL[0], self.j(self.rng.uniform(50_000, 300_000)), COMM, op="record_param_comms")

    def ahead(self, margin: int = 60_000) -> None:
        """Queue busy kernels until the host leads the GPU by ``margin`` (a planted gap needs it).

        An after-run (``ahead_script``) queues the kernels its before-run queued here instead: the
        same work, whatever lead the fix gave the host."""
        if self.ahead_script is not None:
            for _ in range(self.ahead_script.pop(0) if self.ahead_script else 0):
                self.busy(1)
            return
        count = 0
        while self.free[COMPUTE] - self.h < margin:
            self.busy(1)
            count += 1
        self.ahead_log.append(count)

    def plant(self, cls: str, gap: int) -> None:
        self.ahead()
        g = self.free[COMPUTE]
        variant = self.rng.random()
        self.pending = cls
        if cls == "data-starved":
            if self.loader_fixed:  # enough workers: the batch is ready, its pinned copy queues ahead
                self.quiet("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", self.h + 15_000, True)
                if self.ahead_script is not None and variant >= 0.6:  # a pair: the draws of the pageable variant
                    self.copy("HtoD", 20_000, COMPUTE, "Pinned", "cudaMemcpyAsync", host_ns=3_000)
                else:
                    self.copy("HtoD", self.j(20_000), COMPUTE, "Pinned", "cudaMemcpyAsync")
            elif variant < 0.6:
                self.quiet("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                           self.host_until(g + gap - 60_000), True)
                self.copy("HtoD", self.j(20_000), COMPUTE, "Pinned", "cudaMemcpyAsync")
            else:
                self.copy("HtoD", gap - 15_000, COMPUTE, "Pageable",
                          "cudaMemcpy" if variant < 0.8 else "cudaMemcpyAsync", blocking=True)
            self.busy(1)
        elif cls == "comm-bound":
            cend = self._comm(_COLL[int(self.rng.integers(len(_COLL)))], g - int(self.rng.uniform(0, 0.3) * gap),
                              g + gap - 1_000)
            if variant < 0.35 and not self.comm_overlapped:  # host blocked on the result
                _, self.h = self.api("cudaStreamSynchronize", self.h, cend + 2_000 - self.h)
            elif variant >= 0.35:
                self.api("cudaStreamWaitEvent", self.h, self.j(2_000))
                self.h += 3_000
            self.kernel(_BIG["gemm"][0], self.j(80_000), not_before=0 if self.comm_overlapped else cend + 1_000)
        elif cls == "sync-stall":
            # The host is blocked in the sync for the gap, or (.item()) the sync waits on queued work and
            # the refill follows at once (a drain-sync followed by host work: tracesynth.one_time).
            if self.noise and self.rng.random() < 0.3:  # a collective happens to run across part of it
                self._comm(_COLL[0], g - 20_000, g + int(gap * self.rng.uniform(0.1, 0.4)))
            if self.syncs_removed:
                self._sync_removed(variant, gap)
                return
            ext = self.op("aten::item" if variant < 0.5 else "aten::_local_scalar_dense", self.h, g + 5_000)
            if variant < 0.25:  # .item(): the sync returns at the drain, the next launch follows at once
                self.copy("DtoH", 2_000, COMPUTE, "Device", "cudaMemcpyAsync")
                _, se = self.api("cudaStreamSynchronize", self.h, g + 4_500 - self.h, ext=ext)
            elif variant < 0.4:
                _, se = self.api(str(self.rng.choice(["cudaDeviceSynchronize", "cudaEventSynchronize"])),
                                 self.h, g + 3_000 - self.h, ext=ext)
            elif variant < 0.7:  # .cpu() of a large tensor: blocking DtoH copy
                se = self.copy("DtoH", gap, COMPUTE, "Device", "cudaMemcpy", blocking=True)
            else:  # async DtoH copy, then a stream sync on it
                end = self.copy("DtoH", gap, COMPUTE, "Device", "cudaMemcpyAsync")
                _, se = self.api("cudaStreamSynchronize", self.h, end + 2_000 - self.h, ext=ext)
            self.h = max(self.h, se) + 1_000
            self.busy(1)
        elif cls == "unattributed":
            if variant < 0.7:  # the CPU is the bottleneck (issue 42): launch-bound, evidence kind host-work
                self.quiet(str(self.rng.choice(["## save_checkpoint ##", "## log_metrics ##"])),
                           self.host_until(g + gap - 14_000))
                self.pending = "launch-bound"
                self.busy(1)
            else:
                self.api("cudaStreamWaitEvent", self.h, self.j(2_000))
                self.kernel(_BIG["gemm"][1], self.j(60_000), not_before=g + gap)
        elif cls == "pipeline-bubble":
            if variant < 0.2:  # host blocked on the recv, then launches (late)
                end = self._comm(_P2P, g, g + gap - 16_000)
                _, self.h = self.api("cudaStreamSynchronize", self.h, end + 1_500 - self.h)
                self.kernel(_BIG["gemm"][2], self.j(80_000))
                return
            if variant < 0.6:
                self._comm(_P2P, g, g + gap - 2_000)
            self.api("cudaStreamWaitEvent", self.h, self.j(2_000))
            self.kernel(_BIG["gemm"][2], self.j(80_000), not_before=g + gap)
        elif cls == "one-time-cost":
            from tracesynth.one_time import plant_one_time_cost

            plant_one_time_cost(self, gap)
        elif cls == "launch-bound":
            self.pending = None  # each tiny kernel's gap is decided by the queue
            if self.noise and variant < 0.5:  # DDP-like: a bucket all-reduce runs beside the dispatch
                self._comm(_COLL[0], g, g + int(self.rng.uniform(300_000, 900_000)))
            n = int(self.j(60))
            if self.launch_fused:  # the same GPU work in 3 fused kernels, queued ahead of the GPU
                for _ in range(3):
                    self.kernel(_SMALL[int(self.rng.integers(len(_SMALL)))], self.j(n * 4_000 / 3), op="aten::add")
                return
            if self.graphs_captured:  # one cudaGraphLaunch replays the run
                ext = self.op("CUDAGraph.replay", self.h, self.h + 14_000)
                self.graph = self.api("cudaGraphLaunch", self.h + 2_000, 10_000, ext=ext)
                self.h += 15_000
            for _ in range(n):
                self.kernel(_SMALL[int(self.rng.integers(len(_SMALL)))], self.j(self.rng.uniform(2_000, 6_000)),
                            pre=self.rng.uniform(6_000, 22_000), op="aten::add")
            self.graph = None

    def _sync_removed(self, variant: float, gap: int) -> None:
        """The planted sync stall with the sync taken out: the same copies, asynchronous, and the
        same random draws as the blocking variants."""
        if variant < 0.25:
            self.copy("DtoH", 2_000, COMPUTE, "Device", "cudaMemcpyAsync")
        elif variant < 0.4:
            self.rng.choice(["cudaDeviceSynchronize", "cudaEventSynchronize"])
        else:  # the blocking copy drew no host time: neither does its asynchronous twin
            self.copy("DtoH", gap, COMPUTE, "Device", "cudaMemcpyAsync", host_ns=None if variant >= 0.7 else 3_000)
        self.h += 1_000
        self.busy(1)

    def step(self, n: int, counts: dict[str, int], bubble_gap: tuple[int, int], lead: tuple[str, int] = ("", 0),
             tail: int = 0) -> None:
        start = self.h
        if lead[0]:
            from tracesynth.capture import lead_boundary

            lead_boundary(self, lead[0], lead[1])
        if self.noise:
            self.op("## forward ##", start + 500, start + 1_500, is_op=False)
        if bubble_gap[0]:
            self.plant("pipeline-bubble", self.j(bubble_gap[0]))
        order = [c for c, k in counts.items() for _ in range(k)]
        self.rng.shuffle(order)
        if bubble_gap[0]:
            # A pipeline stage sends its activations on every step: a p2p transfer overlapped
            # with compute (the host is ahead, so it runs beside queued kernels).
            self.busy(int(self.rng.integers(3, 6)))
            self.ahead()
            self.kernel(_P2P, self.j(40_000), COMM, op="record_param_comms")
        for cls in order:
            self.busy(int(self.rng.integers(6, 14)))
            gap = 0 if cls == "launch-bound" else self.j(_MEAN_GAP[cls] * self.rng.uniform(0.6, 1.4))
            self.plant(cls, gap)
        self.busy(int(self.rng.integers(6, 14)))
        if bubble_gap[1]:
            self.plant("pipeline-bubble", self.j(bubble_gap[1]))
        for _ in range(4):  # optimizer
            self.kernel(_OPT, self.j(60_000), op="Optimizer.step#AdamW.step")
        self.h += 2_000
        quiet_from = self.h
        if tail:  # nothing issued until the profiler stops: the step ends in an empty stretch
            self.h = max(self.h, self.free[COMPUTE]) + tail
            self.truth.append((int(self.last_end or quiet_from), self.h, "capture-boundary"))
        self.op(f"ProfilerStep#{n}", start, self.h, is_op=False)
        if self.noise:  # an unrelated host thread doing its own thing
            t = start
            g = self.noise_rng
            while t < quiet_from:
                d = self.j(g.uniform(20_000, 400_000), g)
                self.op(str(g.choice(["aten::empty", "aten::to", "aten::pin_memory"])), t,
                        min(t + d, quiet_from) if tail else t + d, NOISE)
                t += d + self.j(g.uniform(50_000, 800_000), g)


def plant(spec: PlantSpec) -> Planted:
    """Simulate ``spec`` into a Scenario (one device per rank) and its ground truth."""
    rng = np.random.default_rng(spec.seed)
    ranks, truth = [], []
    w = {c: float(spec.weights.get(c, 0.0)) for c in CLASSES}
    after = spec.paired and (spec.graphs_captured or spec.syncs_removed or spec.comm_overlapped or spec.loader_fixed
                             or spec.memory_factor != 1.0)
    for r in range(spec.ranks):
        seed = rng.integers(1 << 62)
        # One pipeline schedule per rank: its fill and drain bubbles keep their length every step.
        bubbles = (int(rng.uniform(600_000, 1_400_000)), int(rng.uniform(400_000, 1_000_000))) \
            if w["pipeline-bubble"] > 0 else (0, 0)
        script = host = None
        if after:  # the before-run first: the after-run queues the same work (see _Sim.ahead)
            first = _simulate(spec, r, seed, bubbles, w, fixed=False, script=None)
            script, host = first.ahead_log, first.host_log
        sim = _simulate(spec, r, seed, bubbles, w, fixed=True, script=script, host=host)
        ranks.append(sim.rk)
        t = np.array([(s, e) for s, e, _ in sim.truth], dtype=np.int64).reshape(-1, 2)
        truth.append(pd.DataFrame({"rank": np.int32(r), "device": np.int32(sim.dev), "start_ns": t[:, 0],
                                   "end_ns": t[:, 1], "class": [c for _, _, c in sim.truth]}))
    return Planted(Scenario(ranks=ranks, world_size=spec.ranks), pd.concat(truth, ignore_index=True), spec)


def _simulate(spec: PlantSpec, r: int, seed: int, bubbles: tuple[int, int], w: dict[str, float], fixed: bool,
              script: list[int] | None, host: list[int] | None = None) -> _Sim:
    """One rank's run; ``fixed=False`` leaves out the what-if after-run flags (its before-run)."""
    sim = _Sim(r, np.random.default_rng(seed), spec.jitter, spec.noise, spec.batch,
               spec.launch_fused, spec.loader_fixed, spec.jitter_dist == "uniform")
    if fixed:
        sim.graphs_captured, sim.syncs_removed, sim.comm_overlapped = (spec.graphs_captured, spec.syncs_removed,
                                                                       spec.comm_overlapped)
        sim.memory_factor = spec.memory_factor
    else:
        sim.loader_fixed = False
    sim.ahead_script = list(script) if script is not None else None
    sim.host_script = list(host) if host is not None else None
    sim.busy_mix = list(spec.busy_mix)
    if spec.paired:
        sim.noise_rng = np.random.default_rng(seed + 1)
    for n in range(spec.steps):
        counts = {c: int(np.floor(w[c]) + (sim.rng.random() < w[c] % 1.0))
                  for c in CLASSES if c not in ("pipeline-bubble", "capture-boundary")}
        lead = (spec.capture_lead, spec.capture_lead_ns) if n == 0 else ("", 0)
        sim.step(n, counts, bubbles, lead, spec.capture_tail_ns if n == spec.steps - 1 else 0)
    return sim


def confusion(classified: pd.DataFrame, truth: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Idle ns by (true class, predicted class), and the classified idle ns no truth interval covers.

    In: classified gaps (``rank, device, start_ns, end_ns, class``) and truth intervals (same
    columns). Out: a CLASSES x CLASSES int64 frame (rows: truth, columns: predicted).
    """
    from traceread import intervals

    mat = pd.DataFrame(0, index=list(CLASSES), columns=list(CLASSES), dtype=np.int64)
    uncovered = 0
    for (r, d), g in classified.groupby(["rank", "device"], observed=True):
        t = truth[(truth["rank"] == r) & (truth["device"] == d)].sort_values("start_ns")
        g = g.sort_values("start_ns")
        a, b, s, e = intervals.intersect(g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64),
                                         t["start_ns"].to_numpy(np.int64), t["end_ns"].to_numpy(np.int64))
        part = pd.DataFrame({"truth": t["class"].to_numpy()[b], "pred": g["class"].astype(str).to_numpy()[a],
                             "ns": e - s}).groupby(["truth", "pred"])["ns"].sum()
        for (tc, pc), ns in part.items():
            mat.loc[tc, pc] += int(ns)
        uncovered += int(g["dur_ns"].sum()) - int((e - s).sum())
    return mat, uncovered


def scores(mat: pd.DataFrame) -> pd.DataFrame:
    """Per class precision and recall by idle time (NaN where a class has no time)."""
    diag = np.diag(mat.to_numpy()).astype(np.float64)
    pred = mat.sum(axis=0).to_numpy(np.float64)
    true = mat.sum(axis=1).to_numpy(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame({"precision": diag / pred, "recall": diag / true, "truth_ns": true.astype(np.int64)},
                            index=mat.index)


def classify_file(path: str, cfg) -> pd.DataFrame:
    """The real pipeline on one trace file: load -> steps -> gaps -> rules (classified gaps).

    ``attrs["scenario_offset_ns"]`` is what to add to scenario ns (the truth) to reach the loaded
    frame's time base: 0 for the Kineto 2024 generation and nsys (relative to the origin), the
    origin's epoch ns for integer-microsecond Kineto (absolute epoch timestamps).
    """
    from traceread import load
    from traceread.engine.gaps import find_gaps
    from traceread.engine.steps import find_steps
    from traceread.rules import classify

    trace = load(path)
    steps = find_steps(trace, cfg).steps
    out = classify(find_gaps(trace, steps, cfg), steps, trace, cfg)
    out.attrs["epoch_offset_ns"] = trace.meta.epoch_offset_ns or 0
    return out


def truth_for(truth: pd.DataFrame, classified: pd.DataFrame, origin_epoch_ns: int) -> pd.DataFrame:
    """The truth shifted into the time base of a frame returned by :func:`classify_file`."""
    shift = origin_epoch_ns - int(classified.attrs.get("epoch_offset_ns", origin_epoch_ns))
    return truth.assign(start_ns=truth["start_ns"] + shift, end_ns=truth["end_ns"] + shift)
