"""A training step bound by the bus: each batch crosses PCIe at the link's rate while the GPU waits (issue 42's
``bus-bound`` data-starved kind), and the same run with the batch ``factor`` x smaller (issue 43's bus lever).

::

    host  [launch copies | launch kernels ........................]  (the host runs ahead)
    GPU   ==HtoD==HtoD==HtoD==|==compute kernels==|==HtoD==HtoD==HtoD==|==...

The copies are pinned and asynchronous on the compute stream, each ``copy_bytes`` at 20 bytes/ns (the
writers' link rate), so no loader worker would help: only fewer bytes (a smaller dtype, cropping on the
host) or hiding the copy behind compute does. Both runs take every random draw in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracesynth.model import Copy, HostCall, HostRange, Kernel, Rank, Scenario

MAIN, COMPUTE = 1001, 7
_RATE = 20  # bytes per ns: the writers' link rate
_KERNELS = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off",
            "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)")


@dataclass(frozen=True)
class BusSpec:
    seed: int = 1
    steps: int = 10
    jitter: float = 0.1
    copies: int = 3  # per batch
    copy_bytes: int = 24 << 20
    kernels: int = 30
    kernel_ns: int = 60_000
    factor: float = 1.0  # the after run: the batch this many times smaller


def bus_copies(spec: BusSpec) -> Scenario:
    """The run of ``spec`` (module doc)."""
    rng = np.random.default_rng(spec.seed)
    rk = Rank(rank=0, pid=4000, devices=[0])

    def j(ns: float) -> int:
        return max(int(ns * (1.0 + spec.jitter * rng.standard_normal())), 200)

    h, free, corr = 1_000_000, 0, 1
    for n in range(spec.steps):
        start = h
        for _ in range(spec.copies):
            nbytes = int(j(spec.copy_bytes) / spec.factor)
            call, lat = j(8_000), j(3_000)
            rk.host_ranges.append(HostRange(MAIN, "aten::copy_", h, h + call + 2_000, True))
            rk.host_calls.append(HostCall(MAIN, "cudaMemcpyAsync", h + 1_000, h + 1_000 + call, corr))
            cs = max(h + 1_000 + lat, free + 1_000)
            rk.copies.append(Copy(0, COMPUTE, "HtoD", cs, cs + nbytes // _RATE, corr, nbytes, "Pinned", "Device"))
            free, corr, h = cs + nbytes // _RATE, corr + 1, h + call + 3_000
        for _ in range(spec.kernels):
            name, dur, call, lat, turn = (_KERNELS[int(rng.integers(len(_KERNELS)))], j(spec.kernel_ns), j(5_000),
                                          j(3_000), int(rng.uniform(800, 2_000)))
            rk.host_ranges.append(HostRange(MAIN, "aten::mm", h, h + call + 2_000, True))
            rk.host_calls.append(HostCall(MAIN, "cudaLaunchKernel", h + 1_000, h + 1_000 + call, corr))
            ks = max(h + 1_000 + lat, free + turn)
            rk.kernels.append(Kernel(0, COMPUTE, name, ks, ks + dur, corr))
            free, corr, h = ks + dur, corr + 1, h + call + 4_000
        # the host waits for the step's loss (.item() at the end of the step), as a training loop does
        rk.host_calls.append(HostCall(MAIN, "cudaStreamSynchronize", h, max(free + 5_000, h + 3_000), corr))
        corr, h = corr + 1, max(free + 5_000, h + 3_000) + 2_000
        rk.host_ranges.append(HostRange(MAIN, f"ProfilerStep#{n}", start, h))
        h += j(20_000)
    return Scenario(ranks=[rk], world_size=1)
