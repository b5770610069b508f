"""A compiled training step split by a graph break, and the same step with the break removed (issue 43).

::

    host  [region 0: guards|cudaGraphLaunch][aten::item: copy, cudaStreamSynchronize ....]
          [re-entry: eager Python, TorchDynamo Cache Lookup][region 1: guards|cudaGraphLaunch]
    GPU   ==graph 0 (queued behind the last step's graph 1)==|c|.........idle.........|==graph 1==

``torch.compile`` captures each region as a CUDA graph; a ``.item()`` between them is a graph break: the
host syncs on graph 0's result, then re-enters Python, looks the next region up and replays graph 1
while the GPU sits idle. With the break removed (``fixed``), one region replays both graphs' kernels
as one graph: no sync, no copy, no re-entry, one launch. Both runs take every random draw in the
same order, so only the break differs (``tracesynth.planted``'s pairs do the same).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracesynth.model import Copy, HostCall, HostRange, Kernel, Rank, Scenario

MAIN, COMPUTE = 1001, 7
_KERNELS = ("triton_poi_fused_add_mul_0", "triton_red_fused_native_layer_norm_1", "triton_per_fused_softmax_2",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off")


@dataclass(frozen=True)
class BreakSpec:
    seed: int = 1
    steps: int = 10
    jitter: float = 0.1
    kernels: int = 40  # per compiled region
    kernel_ns: int = 40_000  # mean kernel time
    entry_ns: int = 250_000  # a compiled region's guards and set-up before its graph launch
    reentry_ns: int = 4_000_000  # eager Python and the cache lookup between the two regions
    fixed: bool = False  # the graph break removed: one region, one graph launch, no sync


@dataclass(frozen=True)
class _Draws:
    entry: tuple[int, int]
    launch: tuple[int, int]
    latency: tuple[int, int]
    kernels: tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]  # (name, duration, in-graph gap)
    copy_call: int
    sync_return: int
    python: int
    lookup: int
    next_step: int


class _Run:
    def __init__(self, spec: BreakSpec) -> None:
        self.spec, self.rng = spec, np.random.default_rng(spec.seed)
        self.rk = Rank(rank=0, pid=4000, devices=[0])
        self.h, self.free, self.corr, self.ext = 1_000_000, 0, 1, 1

    def j(self, ns: float) -> int:
        return max(int(ns * (1.0 + self.spec.jitter * self.rng.standard_normal())), 200)

    def draws(self) -> _Draws:
        s = self.spec

        def region() -> list[tuple[str, int, int]]:
            return [(_KERNELS[int(self.rng.integers(len(_KERNELS)))], self.j(s.kernel_ns * self.rng.uniform(0.5, 1.5)),
                     260 + int(self.rng.uniform(0, 160))) for _ in range(s.kernels)]

        entry = (self.j(s.entry_ns), self.j(s.entry_ns))
        launch = (self.j(10_000), self.j(10_000))
        latency = (self.j(3_000), self.j(3_000))
        kernels = (region(), region())
        return _Draws(entry, launch, latency, kernels, self.j(6_000), self.j(5_000), self.j(0.8 * s.reentry_ns),
                      self.j(0.2 * s.reentry_ns), self.j(20_000))

    def call(self, name: str, start: int, dur: int, ext: int = -1) -> tuple[int, int]:
        c = self.corr
        self.corr += 1
        self.rk.host_calls.append(HostCall(MAIN, name, start, start + dur, c, ext))
        return c, start + dur

    def op(self, name: str, start: int, end: int, is_op: bool = True) -> int:
        self.ext += 1
        self.rk.host_ranges.append(HostRange(MAIN, name, start, end, is_op, self.ext))
        return self.ext

    def region(self, n: int, entry: int, launch: int, latency: int, kernels: list[tuple[str, int, int]]) -> None:
        """One compiled region: its guards, one cudaGraphLaunch, the graph's kernels queued on the stream."""
        t0 = self.h
        corr, lend = self.call("cudaGraphLaunch", t0 + entry, launch)
        self.op(f"Torch-Compiled Region: {n}/0", t0, lend + 2_000)
        t = max(lend + latency, self.free + 1_000)
        for name, dur, gap in kernels:
            self.rk.kernels.append(Kernel(0, COMPUTE, name, t, t + dur, corr))
            t += dur + gap
        self.free = t - kernels[-1][2]
        self.h = lend + 3_000

    def step(self, n: int) -> None:
        d = self.draws()
        start = self.h
        if self.spec.fixed:
            self.region(0, d.entry[0], d.launch[0], d.latency[0], d.kernels[0] + d.kernels[1])
        else:
            self.region(0, d.entry[0], d.launch[0], d.latency[0], d.kernels[0])
            t0 = self.h  # .item(): the scalar's copy, then the sync on it
            ext = self.op("aten::item", t0, t0)  # its end is set below
            corr, cend = self.call("cudaMemcpyAsync", t0 + 2_000, d.copy_call, ext)
            cs = max(cend, self.free + 1_000)
            self.rk.copies.append(Copy(0, COMPUTE, "DtoH", cs, cs + 2_000, corr, 4, "Device", "Pinned"))
            self.free = cs + 2_000
            _, send = self.call("cudaStreamSynchronize", cend + 1_000, max(self.free + d.sync_return - cend - 1_000,
                                                                         3_000), ext)
            self.rk.host_ranges[-1].end_ns = send + 1_000
            self.h = send + 2_000  # the re-entry: eager Python, then the next region's lookup
            self.op("## loss bookkeeping ##", self.h, self.h + d.python, is_op=False)
            self.h += d.python
            self.op("TorchDynamo Cache Lookup", self.h, self.h + d.lookup)
            self.h += d.lookup
            self.region(1, d.entry[1], d.launch[1], d.latency[1], d.kernels[1])
        self.op(f"ProfilerStep#{n}", start, self.h, is_op=False)
        self.h += d.next_step


def graph_break(spec: BreakSpec) -> Scenario:
    """The run of ``spec`` (module doc)."""
    run = _Run(spec)
    for n in range(spec.steps):
        run.step(n)
    return Scenario(ranks=[run.rk], world_size=1)
