"""Multi-rank jobs with a planted straggler and clock offsets between ranks (ground truth included).

Every rank runs the same steps: per step ``collectives`` segments of compute kernels, each ending in
an all-reduce on the communication stream that starts when the rank's compute before it is done
(its *arrival*) and ends, on every rank, a fixed time after the last arrival (the last arriver
releases everyone). The next segment's compute waits for the all-reduce (a data dependency), so
the ranks that arrived early idle while they wait: that is what a straggler costs.

The straggler rank is delayed by ``delay_ns`` before each collective, by one of two mechanisms:

* ``compute``: its last kernel before the collective runs ``delay_ns`` longer (a slower GPU or more
  work);
* ``data``: a data stall: its host sits in ``enumerate(DataLoader)`` and then copies the batch to
  the GPU (H2D) while the GPU idles ``delay_ns`` before its last kernel;
* ``launch``: launch overhead: before its last kernel it runs a string of tiny kernels whose host
  dispatch (op + launch call, 12 us each) outlasts them (3 us each), ``delay_ns`` in all;
* ``sync``: a host sync: ``.item()`` of a large pageable tensor blocks the host in a synchronous DtoH
  ``cudaMemcpy`` while the GPU's compute idles, ``delay_ns`` after the drain (a sync stall by the
  blocked time; a drain-sync whose lost lead would have hidden host work after it is one too, see
  docs/rules.md, while a sync that waited on nothing queued is not).

Each rank's recorded times are its true times plus its clock offset (``offsets_ns``), as hosts
with NTP-disciplined clocks record them. ``StragglerJob.truth`` has the true arrivals, offsets and
the time the others waited for each rank (the analysis must recover these).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

import numpy as np

from tracesynth.model import Copy, HostCall, HostRange, Kernel, Rank, Scenario

MAIN = 100
COMPUTE, COMM, COPY = 7, 21, 9
_GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
_LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
_TINY = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
         "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")
MECHANISMS = ("compute", "data", "launch", "sync")


@dataclass(frozen=True)
class StragglerSpec:
    ranks: int = 4
    steps: int = 8
    collectives: int = 4  # per step
    kernels: int = 6  # compute kernels per segment
    kernel_ns: int = 150_000
    collective_ns: int = 300_000  # all-reduce duration after the last arrival
    jitter: float = 0.03  # relative s.d. of each kernel's duration
    straggler: int | None = 2  # None: a balanced job
    delay_ns: int = 400_000
    mechanism: str = "compute"
    offsets_ns: tuple[int, ...] = (0, 3_200_000, -4_700_000, 6_100_000)  # per rank; cycled when more ranks
    seed: int = 0
    origin_epoch_ns: int = 1_735_632_360_000_000_000  # when the capture was taken (Unix epoch ns)


@dataclass
class StragglerJob:
    scenarios: list[Scenario]  # one single-rank scenario per rank (one file per rank)
    spec: StragglerSpec
    truth: dict = field(default_factory=dict)


def _offset(spec: StragglerSpec, r: int) -> int:
    return int(spec.offsets_ns[r % len(spec.offsets_ns)]) if spec.offsets_ns else 0


def make_job(spec: StragglerSpec) -> StragglerJob:
    """Simulate ``spec`` (true time) and record each rank on its own clock."""
    if spec.mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}")
    rng = np.random.default_rng(spec.seed)
    n = spec.ranks
    ranks = [Rank(rank=r, pid=5000 + r, devices=[0]) for r in range(n)]
    corr = [1 + r * 1_000_000 for r in range(n)]
    ext = [1 + r * 1_000_000 for r in range(n)]
    base = 20_000_000 + max((abs(o) for o in spec.offsets_ns), default=0)  # room for negative offsets
    ready = np.full(n, base, dtype=np.int64)  # when each rank's GPU may start its next segment
    arrivals, ends = [], []
    waited = np.zeros(n, dtype=np.int64)
    last_counts = np.zeros(n, dtype=np.int64)

    def emit(r: int, name: str, stream: int, start: int, end: int, op: str, launch: int | None = None) -> None:
        o = _offset(spec, r)
        ext[r] += 1
        corr[r] += 1
        launch = start - 40_000 if launch is None else launch
        ranks[r].host_ranges.append(HostRange(MAIN, op, launch - 6_000 + o, launch + 6_000 + o, True, ext[r]))
        ranks[r].host_calls.append(HostCall(MAIN, "cudaLaunchKernel", launch + o, launch + 4_000 + o, corr[r], ext[r]))
        ranks[r].kernels.append(Kernel(0, stream, name, start + o, end + o, corr[r], external_id=ext[r]))

    queued = np.full(n, -1, dtype=np.int64)  # host launch time of the first kernel after a collective
    for step in range(spec.steps):
        step_start = ready.copy()
        for _c in range(spec.collectives):
            arrive = np.zeros(n, dtype=np.int64)
            for r in range(n):
                t = int(ready[r])
                durs = np.maximum(spec.kernel_ns * (1 + spec.jitter * rng.standard_normal(spec.kernels)), 1_000)
                durs = durs.astype(np.int64)
                late = spec.straggler == r and spec.delay_ns > 0
                for k, d in enumerate(durs):
                    if late and k == len(durs) - 1:
                        if spec.mechanism == "compute":
                            d = d + spec.delay_ns
                        elif spec.mechanism == "data":
                            t = _data_stall(ranks[r], _offset(spec, r), t, spec.delay_ns, corr, ext, r)
                        elif spec.mechanism == "launch":
                            t = _tiny_kernels(ranks[r], _offset(spec, r), t, spec.delay_ns, corr, ext, r)
                        else:
                            t = _host_sync(ranks[r], _offset(spec, r), t, spec.delay_ns, corr, ext, r)
                    # the first kernel after a collective was queued long before (the host runs ahead,
                    # the stream waits for the all-reduce): the wait for a late rank is comm-bound
                    first = k == 0 and queued[r] >= 0
                    emit(r, _GEMM, COMPUTE, t, t + int(d), "aten::mm", int(queued[r]) if first else None)
                    t += int(d) + 1_000
                arrive[r] = t + 1_000
            end = int(arrive.max()) + spec.collective_ns
            last = int(arrive.argmax())
            last_counts[last] += 1
            waited[last] += int((arrive[last] - arrive).sum())
            for r in range(n):
                emit(r, _ALLREDUCE, COMM, int(arrive[r]), end + int(rng.integers(0, 2_000)), "record_param_comms")
                queued[r] = int(arrive[r]) - 25_000
                ready[r] = end + 3_000
            arrivals.append(arrive.tolist())
            ends.append(end)
        for r in range(n):
            o = _offset(spec, r)
            ranks[r].host_ranges.append(HostRange(MAIN, f"ProfilerStep#{step}", int(step_start[r]) - 60_000 + o,
                                                  int(ready[r]) - 1_000 + o, False))
    world = n
    scenarios = [Scenario(ranks=[rk], world_size=world, origin_epoch_ns=spec.origin_epoch_ns) for rk in ranks]
    truth = {"offsets_ns": [_offset(spec, r) - _offset(spec, 0) for r in range(n)],
             "arrivals_ns": arrivals, "ends_ns": ends, "waited_on_ns": waited.tolist(),
             "last_arrivals": last_counts.tolist(), "straggler": spec.straggler if spec.delay_ns > 0 else None,
             "mechanism": spec.mechanism}
    return StragglerJob(scenarios, spec, truth)


def _data_stall(rk: Rank, o: int, t: int, delay: int, corr: list[int], ext: list[int], r: int) -> int:
    """Host in the data loader, then a pinned H2D batch copy; returns when the next kernel may start."""
    ext[r] += 1
    rk.host_ranges.append(HostRange(MAIN, _LOADER, t - 30_000 + o, t + delay - 45_000 + o, True, ext[r]))
    corr[r] += 1
    cs = t + delay - 30_000
    rk.copies.append(Copy(0, COPY, "HtoD", cs + o, cs + 20_000 + o, corr[r], 8 << 20, "Pinned", "Device"))
    rk.host_calls.append(HostCall(MAIN, "cudaMemcpyAsync", t + delay - 44_000 + o, t + delay - 40_000 + o, corr[r],
                                  ext[r]))
    return t + delay


def _tiny_kernels(rk: Rank, o: int, t: int, delay: int, corr: list[int], ext: list[int], r: int) -> int:
    """Eager dispatch of tiny ops: the GPU idles between 3 us kernels while the host launches the next."""
    n = max(delay // 12_000, 1)
    h = t - 14_000  # the host reaches the run just before the GPU drains
    for _ in range(n):
        ext[r] += 1
        corr[r] += 1
        rk.host_ranges.append(HostRange(MAIN, "aten::add", h + o, h + 11_500 + o, True, ext[r]))
        rk.host_calls.append(HostCall(MAIN, "cudaLaunchKernel", h + 4_000 + o, h + 11_000 + o, corr[r], ext[r]))
        ks = h + 13_000
        rk.kernels.append(Kernel(0, COMPUTE, _TINY, ks + o, ks + 3_000 + o, corr[r], external_id=ext[r]))
        h += 12_000
    return t + n * 12_000 + 2_000


def _host_sync(rk: Rank, o: int, t: int, delay: int, corr: list[int], ext: list[int], r: int) -> int:
    """``.item()``/``.cpu()`` of a large pageable tensor: the host is blocked in a synchronous DtoH
    ``cudaMemcpy`` from before the GPU drains at ``t`` until the copy lands, then launches on."""
    ext[r] += 1
    corr[r] += 1
    rk.host_ranges.append(HostRange(MAIN, "aten::item", t - 30_000 + o, t + delay - 36_000 + o, True, ext[r]))
    rk.host_calls.append(HostCall(MAIN, "cudaMemcpy", t - 28_000 + o, t + delay - 38_000 + o, corr[r], ext[r]))
    rk.copies.append(Copy(0, COPY, "DtoH", t + 1_000 + o, t + delay - 40_000 + o, corr[r], 256 << 20,
                          "Device", "Pageable"))
    return t + delay


def one_export(job: StragglerJob) -> Scenario:
    """All ranks in one scenario, rank r on GPU r (one host: give the spec zero offsets)."""
    ranks = []
    for sc in job.scenarios:
        rk = sc.ranks[0]
        d = rk.rank
        ranks.append(dataclasses.replace(
            rk, devices=[d], kernels=[dataclasses.replace(k, device=d) for k in rk.kernels],
            copies=[dataclasses.replace(c, device=d) for c in rk.copies]))
    return Scenario(ranks=ranks, world_size=len(ranks), origin_epoch_ns=job.spec.origin_epoch_ns)


def write_job(job: StragglerJob, directory: str, fmt: str = "kineto", stem: str = "job") -> list[str]:
    """Write one file per rank (``<stem>.rank<N>.json`` or ``.sqlite``), or with ``fmt="nsys-one"``
    one nsys export holding every rank (``<stem>.sqlite``); return the paths."""
    from tracesynth.kineto_writer import write_kineto
    from tracesynth.nsys_writer import write_nsys

    if fmt == "nsys-one":
        return [write_nsys(one_export(job), os.path.join(directory, f"{stem}.sqlite"))]
    out = []
    for sc in job.scenarios:
        r = sc.ranks[0].rank
        if fmt == "kineto":
            out += write_kineto(sc, os.path.join(directory, f"{stem}.rank{r}.json"))
        else:
            out.append(write_nsys(sc, os.path.join(directory, f"{stem}.rank{r}.sqlite")))
    return out
