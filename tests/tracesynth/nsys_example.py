"""A small multi-rank training-step scenario that exercises every lane both writers produce.

Used by the writer/loader tests, the cross-format test and scripts/gen_nsys.py. Each rank is one
process on its own GPU: ProfilerStep#N ranges, a DataLoader range, an HtoD copy, CPU-op ranges that
launch compute kernels on stream 7, an NCCL all-reduce on stream 13, a memset, a stream sync, an
optional whole-graph replay and an OS runtime wait. Correlation ids restart at the same value in
every process (as CUPTI's do), so linking must use (process, correlation). Times carry odd ns so
any float rounding shows.
"""

from __future__ import annotations

from tracesynth.model import (
    Copy,
    GraphLaunch,
    HostCall,
    HostRange,
    Kernel,
    OsCall,
    Rank,
    Scenario,
    Sync,
)

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
               "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_STREAM = 7
COMM_STREAM = 13


def example_scenario(n_ranks: int = 2, steps: int = 3, ops_per_step: int = 4, graphs: bool = True,
                     os_calls: bool = True, first_step: int = 4) -> Scenario:
    """The scenario; every GPU interval ends before the next one on its stream starts."""
    ranks = [_rank(r, steps, ops_per_step, graphs, os_calls, first_step) for r in range(n_ranks)]
    return Scenario(ranks=ranks, world_size=n_ranks)


def _rank(r: int, steps: int, ops: int, graphs: bool, os_calls: bool, first_step: int) -> Rank:
    pid = 41_000 + r
    main, loader = pid, pid + 17
    rk = Rank(rank=r, pid=pid, devices=[r])
    corr = 100
    t = 1_000_000_123 + r * 3_001  # ranks slightly skewed, odd ns
    for s in range(steps):
        step_start = t
        rk.host_ranges.append(HostRange(main, "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
                                        t + 1_001, t + 90_007))
        if os_calls:
            rk.os_calls.append(OsCall(loader, "pthread_cond_wait", t + 2_003, t + 80_009))
        t += 100_011
        # host-to-device copy of the batch
        corr += 1
        rk.host_calls.append(HostCall(main, "cudaMemcpyAsync", t, t + 5_003, corr))
        rk.copies.append(Copy(r, COMPUTE_STREAM, "HtoD", t + 6_001, t + 26_003, corr, 8 << 20, "Pinned", "Device"))
        t += 30_007
        for i in range(ops):
            name, kname = ("aten::mm", GEMM) if i % 2 == 0 else ("aten::add", ELEMENTWISE)
            corr += 1
            rk.host_ranges.append(HostRange(main, name, t, t + 9_001, is_op=True))
            rk.host_calls.append(HostCall(main, "cudaLaunchKernel", t + 1_003, t + 7_001, corr))
            dur = 41_003 if i % 2 == 0 else 12_001
            rk.kernels.append(Kernel(r, COMPUTE_STREAM, kname, t + 10_007, t + 10_007 + dur, corr,
                                     grid=(132, 1, 1), block=(256, 1, 1), registers=128, shared_mem=4096))
            t += 10_007 + dur + 3_001
        # gradient all-reduce on the communication stream
        corr += 1
        rk.host_ranges.append(HostRange(main, "nccl:all_reduce", t, t + 8_003))
        rk.host_calls.append(HostCall(main, "cudaLaunchKernel", t + 1_001, t + 6_007, corr))
        rk.kernels.append(Kernel(r, COMM_STREAM, NCCL, t + 9_001, t + 159_007, corr, grid=(4, 1, 1),
                                 block=(512, 1, 1), registers=96))
        corr += 1
        rk.host_calls.append(HostCall(main, "cudaMemsetAsync", t + 10_003, t + 13_001, corr))
        rk.copies.append(Copy(r, COMPUTE_STREAM, "memset", t + 14_009, t + 15_003, corr, 4096, "Device", "Device"))
        t += 20_011
        if graphs:
            corr += 1
            rk.host_calls.append(HostCall(main, "cudaGraphLaunch", t, t + 11_003, corr))
            rk.graphs.append(GraphLaunch(r, COMPUTE_STREAM, t + 12_007, t + 112_001, corr, graph_id=3))
            t += 115_003
        corr += 1
        rk.host_calls.append(HostCall(main, "cudaStreamSynchronize", t, t + 170_009, corr))
        rk.syncs.append(Sync(r, COMM_STREAM, "stream", t + 1_001, t + 169_003, corr))
        t += 171_007
        rk.host_ranges.append(HostRange(main, f"ProfilerStep#{first_step + s}", step_start, t))
        t += 5_003
    return rk
