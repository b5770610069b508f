"""Training loops whose every step runs the same kernels: ground truth for step inference.

A real training step repeats one model's kernel sequence (forward layers, backward layers, the
optimizer) with jittered durations; between steps the host loads the next batch while the GPU
drains. :func:`loop` simulates that for one or more ranks (one host thread and one compute stream
each, launches linked by correlation) with a uniform ``±jitter`` on every duration, and returns the
scenario with the planted step starts. Markers are optional, so tests can strip them: ``profiler``
writes ``ProfilerStep#N`` ranges, ``nvtx_name`` a user range around each step's work (NVTX in an
nsys export, ``user_annotation`` in Kineto). :func:`forward_passes` simulates inference forwards whose
transformer layer repeats many times inside each pass: the pass, not the layer, is the step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tracesynth.model import HostCall, HostRange, Kernel, Rank, Scenario

_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"
_ATTN = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, "
         "false, true>(flash::Flash_fwd_params)")
_ATTN_BWD = "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>(flash::Flash_bwd_params)"
_NORM = "void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*)"
_ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>(int)"
_GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)"
_OPT = "void at::native::multi_tensor_apply_kernel<at::native::FusedAdamMathFunctor<float, 4>>(...)"
_LOSS = "void at::native::cross_entropy_loss_kernel<float>(...)"
# (kernel, mean ns): a transformer layer forward, its backward; the step is embed + L layers + loss + bwd + opt.
_FWD = [(_NORM, 30_000), (_GEMM, 180_000), (_ATTN, 150_000), (_GEMM, 90_000), (_ADD, 20_000), (_NORM, 30_000),
        (_GEMM, 240_000), (_GELU, 40_000), (_GEMM, 240_000), (_ADD, 20_000)]
_BWD = [(_ADD, 20_000), (_GEMM, 480_000), (_GELU, 60_000), (_GEMM, 480_000), (_NORM, 50_000), (_GEMM, 180_000),
        (_ATTN_BWD, 380_000), (_GEMM, 180_000), (_NORM, 50_000)]


@dataclass
class Loop:
    scenario: Scenario
    step_starts: dict[int, np.ndarray]  # rank -> host start of each step, ns
    step_ends: dict[int, np.ndarray]  # rank -> end of each step's last kernel, ns


def _launch_all(rk: Rank, device: int, seq: list[tuple[str, int]], h: int, free: int, corr: int,
                j: Callable[[float], int]) -> tuple[int, int, int]:
    """Launch every kernel of ``seq`` in order from the host time ``h`` (the stream free at ``free``);
    returns the new host time, stream-free time and next correlation id."""
    for name, mean in seq:
        launch = j(5_000)
        rk.host_calls.append(HostCall(100, "cudaLaunchKernel", h, h + launch, corr))
        k0 = max(h + launch + j(3_000), free + j(1_500))
        free = k0 + j(mean)
        rk.kernels.append(Kernel(device, 7, name, k0, free, corr))
        corr += 1
        h += launch + j(8_000)
    return h, free, corr


def loop(steps: int = 8, layers: int = 4, ranks: int = 1, jitter: float = 0.2, seed: int = 0,
         profiler: bool = True, nvtx_name: str | None = None, loader_ns: int = 3_000_000) -> Loop:
    """Simulate ``steps`` identical training steps per rank (see module docstring)."""
    rng = np.random.default_rng(seed)
    seq = [(_GEMM, 60_000)] + _FWD * layers + [(_LOSS, 40_000)] + _BWD * layers + [(_OPT, 150_000)] * 3
    out_ranks, starts, ends = [], {}, {}
    for r in range(ranks):
        rk = Rank(rank=r, pid=5000 + r, devices=[r])

        def j(ns: float) -> int:
            return max(int(ns * rng.uniform(1.0 - jitter, 1.0 + jitter)), 100)

        h, free, corr = 1_000_000, 0, r * 10_000_000 + 1
        st, en = [], []
        for n in range(steps):
            h += j(loader_ns)  # the data loader: the GPU drains meanwhile
            start = h
            h, free, corr = _launch_all(rk, r, seq, h, free, corr, j)
            h = max(h, free) + j(20_000)  # the optimizer's .item() / sync before the next batch
            if profiler:
                rk.host_ranges.append(HostRange(100, f"ProfilerStep#{n}", start - j(50_000), h))
            if nvtx_name:
                rk.host_ranges.append(HostRange(100, nvtx_name, start, h))
            st.append(start)
            en.append(free)
        out_ranks.append(rk)
        starts[r], ends[r] = np.array(st, dtype=np.int64), np.array(en, dtype=np.int64)
    return Loop(Scenario(ranks=out_ranks, world_size=ranks), starts, ends)


_EMBED = "void at::native::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(...)"
_HEAD = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize256x128x64_warpgroupsize2x1x1_execute_kernel__5x_cublas")
_SAMPLE = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>>>(...)",
           "void at::native::elementwise_kernel<128, 4, at::native::softmax_warp_forward<float>>(...)")


def forward_passes(passes: int = 1, layers: int = 24, jitter: float = 0.2, seed: int = 0,
                   annotation: str | None = None, host_gap_ns: int = 2_000_000) -> Loop:
    """``passes`` inference forwards of ``layers`` identical layers each (embedding before, head and
    sampling after), one rank: the layer repeats far more often than the pass, which is the step.

    ``annotation``: a user range around each pass; ``{n}`` in it is replaced by the pass number
    (``"step[{n}]"``: uniquely numbered ranges), else every pass carries the same name."""
    rng = np.random.default_rng(seed)
    seq = [(_EMBED, 40_000)] + _FWD * layers + [(_NORM, 30_000), (_HEAD, 400_000)] + [(k, 20_000) for k in _SAMPLE]
    rk = Rank(rank=0, pid=6000, devices=[0])

    def j(ns: float) -> int:
        return max(int(ns * rng.uniform(1.0 - jitter, 1.0 + jitter)), 100)

    h, free, corr = 1_000_000, 0, 1
    st, en = [], []
    for n in range(passes):
        h += j(host_gap_ns)  # the scheduler between requests: the GPU drains meanwhile
        start = h
        h, free, corr = _launch_all(rk, 0, seq, h, free, corr, j)
        h = max(h, free) + j(20_000)  # the sampled tokens copied back: the host waits for the pass
        if annotation:
            rk.host_ranges.append(HostRange(100, annotation.format(n=n), start, h))
        st.append(start)
        en.append(free)
    return Loop(Scenario(ranks=[rk], world_size=1), {0: np.array(st, dtype=np.int64)},
                {0: np.array(en, dtype=np.int64)})
