"""Planted one-time costs, allocator thrash, syncs and host-side work (ground truth by construction).

Built on ``planted._Sim`` (same queue physics, same writers, so every scenario exists in both
formats). Two uses:

* ``plant_one_time_cost(sim, gap)``: one ``one-time-cost`` gap of about ``gap`` ns at the current
  point, picked at random among JIT compilation (nvFuser/NVRTC or Inductor/Triton ranges), a
  CUDA-graph capture window, a module-loading run (``cuLibraryLoadData`` calls with host time
  between them) and a first launch that loads its module; ``planted.plant`` calls it for the
  ``one-time-cost`` class, so ``scripts/eval_rules.py`` scores it with every other class.
* ``SCENARIOS``: whole traces of one kind each (``capture``, ``compile``, ``lazy-load``,
  ``allocator-thrash``, ``sync-host-work``, ``sync-then-evidence``, ``sync-at-once``, ``inline-input``,
  ``setup-teardown``, and ``host-side``: all the host-side ones in one trace), for
  ``scripts/eval_one_time.py``, ``scripts/eval_rules.py`` (family ``host-side``) and the tests:

  - ``capture``: step 0 captures the step as a graph (Begin/EndCapture, hundreds of
    GetCaptureInfo, launches recorded without running, instantiate); later steps are ordinary.
  - ``compile``: the first steps compile (NVTX/annotation compile ranges around the first use of
    each fused kernel), and the allocator grows in step 0 (``cudaMalloc`` only then: one-time).
  - ``lazy-load``: each new kernel's first launch takes 1.3-13 ms (module loaded inside it),
    preceded by a ``cuLibraryLoadData`` run in step 0; some of them right after a ``.item()`` sync; and
    in the first steps a new kernel's module loads inside its first attribute / occupancy query or
    look-up (``cudaFuncGetAttributes``, ``cuFuncSetAttribute``, ``cuModuleGetFunction``...).
  - ``allocator-thrash``: every step the host frees and re-allocates (``cudaFree``/``cudaMalloc``,
    which synchronize) while the GPU drains: ``sync-stall`` with ``allocator`` evidence.
  - ``sync-host-work``: ``.item()`` called with more work queued than the host work that follows
    (it waits while the GPU drains), then a quiet Python stretch (logging, metrics) or operator
    dispatch. The sync took away the host's lead: ``sync-stall`` (issue 24; issue 12 had labelled
    the host work on its own).
  - ``sync-then-evidence``: the same drain-sync followed by host work with stronger evidence of its
    own, which keeps its class: the DataLoader (``data-starved``), recurring allocator frees and
    mallocs (``sync-stall``, allocator), inline batch preparation (``data-starved``), compilation in
    the first steps (``one-time-cost``).
  - ``sync-at-once``: the host is behind (dense dispatch of tiny kernels) and calls ``.item()`` with
    nothing left to wait for: it returns at once and the gaps stay ``launch-bound``.
  - ``inline-input``: no DataLoader: the training thread decodes and normalizes the next batch in
    Python (``read_video_pyav``, ``preprocess``, or generically named frames followed by the batch's
    H2D copy) while the GPU drains: ``data-starved``. Kineto records the frames as ``python_function``
    (``with_stack``), nsys as NVTX ranges (``--python-functions-trace``).
  - ``setup-teardown``: pinned and device memory allocated and freed, streams and events created and
    destroyed inside ``init_data`` / ``clean_up`` ranges between test phases: ``one-time-cost``.
  - ``host-side`` also plants long child-free host stretches inside an op (issue 42): a scripted
    function's first call compiling on the host in step 1 (``one-time-cost``, kind ``host-stall``), and
    an op's own host work every step (``launch-bound`` with evidence kind ``host-work``: the CPU is the
    bottleneck, not dispatch), and in every other step the batch crossing the bus: large pinned
    host-to-device copies back to back at the link's rate (``data-starved``, kind ``bus-bound``), and in
    every third step an MPI exchange through host memory (``MPI_Send`` / ``MPI_Recv`` ranges over the
    gap: ``comm-bound`` with nothing on the communication lane).
  - ``recurring-copy``: the same gap in every step (the same kernels before and after it), its batch's
    H2D copy holding 43-66% of it: one recurring gap, ``data-starved`` in every step whichever side of the
    50% cover threshold each step's copy falls (issue 42: one class per recurring gap).
  - ``ranks-copy``: the same per-step batch copy on every rank, 56-62% of the gap on rank 0 and 42-47% on
    the others: one recurring gap of the job, ``data-starved`` on every rank (issue 42: the same across
    the ranks of a job, whose Kineto files are classified apart).
  - ``untraced-host``: every step the training thread computes between two kernels with nothing recorded
    (C++ host math): ``launch-bound`` (kind ``host-work``) where nsys CPU samples show it, which the tests add
    to the export (the writers have no sampling).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from tracesynth.model import Scenario
from tracesynth.planted import _BIG, _SMALL, CLASSES, COMPUTE, Planted, PlantSpec, _Sim

_COMPILE_RANGES = (("KernelExecutor::compileFusion", "executor_utils::Nvrtc::CompileProgram"),
                   ("compile_fx_inner", "triton.compile"),
                   ("torch/_inductor compile", "nvrtcCompileProgram"))


# Function queries that load the function's module under CUDA lazy loading (Triton and nvFuser query or
# set a new kernel's attributes before its first launch).
_LAZY_QUERIES = ("cudaFuncGetAttributes", "cudaFuncSetAttribute", "cuFuncSetAttribute",
                 "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cuModuleGetFunction")


def _new_kernel(sim: _Sim) -> str:
    """A kernel name this rank has not run yet (its first launch loads its module)."""
    return f"triton_poi_fused_add_mul_{sim.rk.rank}_{sim.corr}"


def _compile(sim: _Sim, until: int) -> None:
    outer, inner = _COMPILE_RANGES[int(sim.rng.integers(len(_COMPILE_RANGES)))]
    t = sim.h
    sim.op(outer, t, until, is_op=False)
    sim.op(inner, t + (until - t) // 10, until - (until - t) // 10, is_op=False)
    sim.h = until


def _capture(sim: _Sim, until: int) -> None:
    """Begin capture, record launches (no kernel runs), many GetCaptureInfo, end, instantiate."""
    _, sim.h = sim.api("cudaStreamBeginCapture", sim.h, sim.j(5_000))
    inst = max(int((until - sim.h) * 0.15), 50_000)
    while sim.h < until - inst:
        ext = sim.op("aten::mm", sim.h, sim.h + 12_000)
        sim.api("cudaLaunchKernel", sim.h + 4_000, sim.j(5_000), ext=ext)  # captured: nothing runs
        sim.api("cudaStreamGetCaptureInfo_v2", sim.h + 10_000, sim.j(1_000))
        sim.h += sim.j(sim.rng.uniform(20_000, 60_000))
    _, sim.h = sim.api("cudaStreamEndCapture", sim.h, sim.j(3_000))
    _, sim.h = sim.api("cudaGraphInstantiate", sim.h, max(until - sim.h, 10_000))


def _module_run(sim: _Sim, until: int) -> None:
    """cuLibraryLoadData calls with untraced host time between them (library initialization)."""
    while True:
        _, end = sim.api("cuLibraryLoadData", sim.h, sim.j(sim.rng.uniform(200_000, 900_000)))
        sim.api("cuLibraryGetKernel", end + 10_000, sim.j(3_000))
        after = end + sim.j(sim.rng.uniform(300_000, 1_500_000))
        if after > until:
            sim.h = end + 20_000
            return
        sim.h = after


def plant_one_time_cost(sim: _Sim, gap: int, variant: str | None = None) -> None:
    """One one-time-cost gap of about ``gap`` ns from the current drain (see module doc)."""
    sim.ahead()
    g = sim.free[COMPUTE]
    sim.pending = "one-time-cost"
    kinds = ("compile", "capture", "module-load", "first-launch")
    kind = variant or kinds[int(sim.rng.integers(len(kinds)))]
    until = g + max(gap, 1_500_000) - 20_000
    if kind == "compile":
        _compile(sim, until)
        sim.kernel(_new_kernel(sim), sim.j(80_000))
    elif kind == "capture":
        _capture(sim, until)
        sim.kernel(_BIG["gemm"][0], sim.j(80_000))
    elif kind == "module-load":
        _module_run(sim, until)
        sim.kernel(_new_kernel(sim), sim.j(80_000))
    elif kind == "lazy-query":  # lazy loading inside a function's first attribute query, then its launch
        call = _LAZY_QUERIES[int(sim.rng.integers(len(_LAZY_QUERIES)))]
        _, sim.h = sim.api(call, sim.h, max(until - sim.h, 1_300_000))
        sim.kernel(_new_kernel(sim), sim.j(80_000))
    else:  # first launch: the module is loaded inside the launch call
        sim.kernel(_new_kernel(sim), sim.j(80_000), launch_ns=max(until - sim.h, 1_300_000))


def _item_sync(sim: _Sim) -> None:
    """``.item()``: a tiny DtoH copy and a stream sync that returns at the drain."""
    g = sim.free[COMPUTE]
    ext = sim.op("aten::item", sim.h, g + 5_000)
    sim.copy("DtoH", 2_000, COMPUTE, "Device", "cudaMemcpyAsync")
    _, se = sim.api("cudaStreamSynchronize", sim.h, max(g + 4_000 - sim.h, 2_000), ext=ext)
    sim.h = se + 1_000


def _allocator_thrash(sim: _Sim, gap: int, growth: bool) -> None:
    """Free and re-allocate while the GPU drains (cudaFree synchronizes); growth: cudaMalloc only."""
    sim.ahead()
    g = sim.free[COMPUTE]
    sim.pending = "one-time-cost" if growth else "sync-stall"
    ext = sim.op("aten::empty", sim.h, g + gap)
    if not growth:  # the first free blocks until the device drains
        _, sim.h = sim.api("cudaFree", sim.h, g + sim.j(30_000) - sim.h, ext=ext)
    while sim.h < g + gap - 60_000:
        name = "cudaMalloc" if growth or sim.rng.random() < 0.5 else "cudaFree"
        _, sim.h = sim.api(name, sim.h, sim.j(sim.rng.uniform(40_000, 120_000)), ext=ext)
        sim.h += sim.j(3_000)
    sim.busy(1)


def _sync_host_work(sim: _Sim, gap: int) -> None:
    """``.item()`` waits while the GPU drains, then host work (quiet Python or op dispatch): the sync
    took away the host's lead (queued work longer than the host work), so the gap is a sync stall."""
    sim.ahead(int(max(gap, 900_000) * 1.3))
    g = sim.free[COMPUTE]
    _item_sync(sim)
    sim.pending = "sync-stall"
    if sim.rng.random() < 0.5:
        sim.quiet("## log_metrics ##", g + max(gap, 900_000) - 14_000)
        sim.busy(1)
    else:  # the next op's dispatch (cuDNN planning, autograd bookkeeping) holds the host
        sim.kernel(_SMALL[0], sim.j(4_000), pre=max(gap, 300_000) * 0.9, op="aten::conv2d")


_LOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
# (outer frame, inner frames): named input work, and generically named frames (then the H2D copy tells)
_INPUT_FRAMES = (("transformers/pipelines/video_classification.py(129): preprocess",
                  ("transformers/pipelines/video_classification.py(174): read_video_pyav",
                   "transformers/models/videomae/image_processing_videomae.py(235): preprocess")),
                 ("train.py(88): prepare_batch", ("train.py(41): load_sample", "train.py(60): normalize")),
                 ("my_project/data.py(12): make_batch", ("PIL/Image.py(3234): open", "numpy/core/shape_base.py(372): stack")))


def _inline_input(sim: _Sim, gap: int) -> None:
    """The training thread builds the next batch in Python frames (no launch inside) while the GPU
    drains, then copies it to the device and launches: data-starved."""
    g = sim.free[COMPUTE]
    outer, inner = _INPUT_FRAMES[int(sim.rng.integers(len(_INPUT_FRAMES)))]
    until = g + max(gap, 900_000) - 40_000
    t = sim.h
    sim.op(outer, t, until, is_op=False)
    sim.rk.host_ranges[-1].python = True
    cut = t + int((until - t) * sim.rng.uniform(0.2, 0.4))
    for name, (a, b) in zip(inner, ((t + 2_000, cut), (cut + 3_000, until - 5_000)), strict=True):
        sim.op(name, a, b, is_op=False)
        sim.rk.host_ranges[-1].python = True
    sim.h = until
    sim.pending = "data-starved"
    sim.copy("HtoD", sim.j(15_000), COMPUTE, "Pageable", "cudaMemcpyAsync")
    sim.busy(1)


def _drain_then(sim: _Sim, gap: int, then: str) -> None:
    """A drain-sync (``.item()``, with a lead that would hide the host work) followed by host work with
    evidence of its own (see module doc)."""
    sim.ahead(int(max(gap, 1_500_000) * 1.3))
    g = sim.free[COMPUTE]
    _item_sync(sim)
    if then == "loader":
        sim.pending = "data-starved"
        sim.quiet(_LOADER, g + max(gap, 900_000) - 60_000, True)
        sim.copy("HtoD", sim.j(20_000), COMPUTE, "Pinned", "cudaMemcpyAsync")
        sim.busy(1)
    elif then == "thrash":  # the caching allocator frees and re-allocates every step
        sim.pending = "sync-stall"
        ext = sim.op("aten::empty", sim.h, g + gap)
        while sim.h < g + gap - 60_000:
            name = "cudaMalloc" if sim.rng.random() < 0.5 else "cudaFree"
            _, sim.h = sim.api(name, sim.h, sim.j(sim.rng.uniform(40_000, 120_000)), ext=ext)
            sim.h += sim.j(3_000)
        sim.busy(1)
    elif then == "input":
        _inline_input(sim, gap)
    else:  # compile
        sim.pending = "one-time-cost"
        _compile(sim, g + max(gap, 1_500_000) - 20_000)
        sim.kernel(_new_kernel(sim), sim.j(80_000))


def _sync_at_once(sim: _Sim) -> None:
    """Dense dispatch of tiny kernels (the host is behind the GPU) with a ``.item()`` in the middle that
    finds nothing queued and returns at once: every gap is launch-bound."""
    sim.pending = None
    n, i, synced = int(sim.j(40)), 0, False
    while i < n or not synced:
        sim.kernel(_SMALL[int(sim.rng.integers(len(_SMALL)))], sim.j(sim.rng.uniform(2_000, 6_000)),
                   pre=sim.rng.uniform(6_000, 22_000), op="aten::add")
        i += 1
        # Once the host has fallen behind (no more than the kernel just launched is queued), .item()
        # finds nothing to wait for: it returns within a few us.
        if not synced and i >= n // 2 and sim.free[COMPUTE] <= sim.h + 8_000:
            ext = sim.op("aten::item", sim.h, sim.h + 9_000)
            end = sim.copy("DtoH", 1_000, COMPUTE, "Device", "cudaMemcpyAsync")
            _, se = sim.api("cudaStreamSynchronize", sim.h, max(end + 1_000 - sim.h, 2_000), ext=ext)
            sim.h = se + 1_000
            synced = True


def _setup(sim: _Sim, gap: int, teardown: bool) -> None:
    """``clean_up`` (streams and events destroyed, device and pinned memory freed) then ``init_data``
    (pinned memory, device memory, streams and events created) between two phases: one-time-cost."""
    sim.ahead()
    g = sim.free[COMPUTE]
    sim.pending = "one-time-cost"
    if teardown:
        t0 = sim.h
        _, sim.h = sim.api("cudaFree", sim.h, max(g + 5_000 - sim.h, 2_000))  # waits for the queue to drain
        for _ in range(3):
            _, sim.h = sim.api("cudaStreamDestroy", sim.h + 2_000, sim.j(25_000))
            _, sim.h = sim.api("cudaFree", sim.h + 2_000, sim.j(300_000))
        for _ in range(2):
            _, sim.h = sim.api("cudaFreeHost", sim.h + 2_000, sim.j(gap * 0.08))
        sim.op("clean_up", t0, sim.h + 1_000, is_op=False)
        sim.h += 2_000
    t0 = sim.h
    until = max(g, sim.h) + max(gap, 1_500_000) - 40_000
    while sim.h < until - 100_000:
        _, sim.h = sim.api("cudaStreamCreate", sim.h, sim.j(10_000))
        _, sim.h = sim.api("cudaEventCreate", sim.h, sim.j(4_000))
        _, sim.h = sim.api("cudaHostAlloc", sim.h, sim.j(gap * 0.12))
        _, sim.h = sim.api("cudaMalloc", sim.h + 3_000, sim.j(gap * 0.03))
        sim.h += sim.j(5_000)
    sim.op("init_data", t0, sim.h + 1_000, is_op=False)
    sim.h += 2_000
    sim.busy(1)


def _scenario(seed: int, jitter: float, steps: int, ranks: int, body: Callable[[_Sim, int, int], None],
              spec: PlantSpec, uniform: bool = False) -> Planted:
    rng = np.random.default_rng(seed)
    out, truth = [], []
    for r in range(ranks):
        sim = _Sim(r, np.random.default_rng(rng.integers(1 << 62)), jitter, True, uniform=uniform)
        for n in range(steps):
            start = sim.h
            sim.busy(int(sim.rng.integers(6, 12)))
            body(sim, n, int(sim.j(sim.rng.uniform(1_500_000, 3_000_000))))
            sim.busy(int(sim.rng.integers(6, 12)))
            sim.h += 2_000
            sim.op(f"ProfilerStep#{n}", start, sim.h, is_op=False)
        out.append(sim.rk)
        t = np.array([(s, e) for s, e, _ in sim.truth], dtype=np.int64).reshape(-1, 2)
        truth.append(pd.DataFrame({"rank": np.int32(r), "device": np.int32(sim.dev), "start_ns": t[:, 0],
                                   "end_ns": t[:, 1], "class": [c for _, _, c in sim.truth]}))
    return Planted(Scenario(ranks=out, world_size=ranks), pd.concat(truth, ignore_index=True), spec)


def _capture_body(sim: _Sim, n: int, gap: int) -> None:
    if n == 0:
        plant_one_time_cost(sim, 3 * gap, "capture")
    if n == 1:
        plant_one_time_cost(sim, gap, "capture")


def _compile_body(sim: _Sim, n: int, gap: int) -> None:
    if n == 0:  # the caching allocator grows to its working set in the first step only
        _allocator_thrash(sim, gap // 2, growth=True)
    if n < 2:
        for _ in range(2):
            plant_one_time_cost(sim, gap, "compile")
            sim.busy(3)


def _lazy_body(sim: _Sim, n: int, gap: int) -> None:
    if n == 0:
        plant_one_time_cost(sim, 4 * gap, "module-load")
    if n < 3:
        plant_one_time_cost(sim, gap, "first-launch")
        sim.busy(3)
        sim.ahead()
        _item_sync(sim)  # a first launch right after a sync is judged the same way
        sim.pending = "one-time-cost"
        sim.kernel(_new_kernel(sim), sim.j(80_000), launch_ns=max(gap, 1_300_000))
        sim.busy(3)
        plant_one_time_cost(sim, gap, "lazy-query")  # (issue 42: the module loads in an attribute query)


def _thrash_body(sim: _Sim, n: int, gap: int) -> None:
    _allocator_thrash(sim, gap // 2, growth=False)
    sim.busy(4)
    _allocator_thrash(sim, gap // 3, growth=False)


def _host_work_body(sim: _Sim, n: int, gap: int) -> None:
    _sync_host_work(sim, gap // 2)
    sim.busy(4)
    _sync_host_work(sim, gap // 3)


def _then_body(sim: _Sim, n: int, gap: int) -> None:
    for then in ("loader", "thrash") + (("input",) if n % 2 else ()) + (("compile",) if n < 2 else ()):
        _drain_then(sim, gap // 2, then)
        sim.busy(4)


def _at_once_body(sim: _Sim, n: int, gap: int) -> None:
    _sync_at_once(sim)


def _input_body(sim: _Sim, n: int, gap: int) -> None:
    sim.ahead()
    _inline_input(sim, gap)


def _setup_body(sim: _Sim, n: int, gap: int) -> None:
    if n in (0, 4):  # two test phases, each set up; the first torn down before the second
        _setup(sim, 2 * gap, teardown=n == 4)


def _host_stall(sim: _Sim, gap: int, op: str, cls: str) -> None:
    """One op holds the training thread for the whole gap with no child op or CUDA call, then launches
    its kernel (a TorchScript function compiling its fusion on its first call, or an op's own host work):
    not launch overhead. Kineto records the op as a ``cpu_op``, nsys as an NVTX range."""
    sim.ahead()
    g = sim.free[COMPUTE]
    sim.pending = cls
    sim.kernel(_new_kernel(sim), sim.j(80_000), pre=max(g - sim.h, 0) + max(gap, 8_000_000), op=op)


def _bus_copies(sim: _Sim, gap: int) -> None:
    """The next batch crosses the bus while the GPU waits: large pinned host-to-device copies back to back on
    the compute stream, each at the link's rate (the writers' 20 bytes/ns): data-starved, kind bus-bound."""
    sim.ahead()
    sim.pending = "data-starved"
    for _ in range(3):
        sim.copy("HtoD", sim.j(max(gap, 1_500_000) / 3), COMPUTE, "Pinned", "cudaMemcpyAsync")
    sim.busy(1)


def _mpi_exchange(sim: _Sim, gap: int) -> None:
    """The host exchanges data with another process through MPI (an NVTX / record_function range per call,
    as an MPI+CUDA code marks them) while the GPU waits: comm-bound, with nothing on the comm lane."""
    sim.ahead()
    g = sim.free[COMPUTE]
    sim.pending = "comm-bound"
    until = g + max(gap, 900_000) - 30_000
    cut = sim.h + int((until - sim.h) * sim.rng.uniform(0.2, 0.4))
    sim.op("MPI_Send", sim.h, cut, is_op=False)
    sim.op("MPI_Recv", cut + 2_000, until, is_op=False)
    sim.h = until + 2_000
    sim.busy(1)


def _host_side_body(sim: _Sim, n: int, gap: int) -> None:
    """Every host-side mechanism in one trace (scripts/eval_rules.py's ``host-side`` family)."""
    if n == 1:  # a scripted function's first call compiles its fusion on the host
        _host_stall(sim, 3 * gap, "delta_r2", "one-time-cost")
        sim.busy(3)
    # an op's own host work every step (no dispatch inside): launch-bound, kind host-work (not dispatch)
    _host_stall(sim, 2 * gap, "my_model.py(77): update_metrics", "launch-bound")
    sim.busy(3)
    _setup_body(sim, n, gap)
    sim.busy(3)
    if n % 2 == 0:  # every other step's batch crosses the bus at the link's rate (issue 42)
        _bus_copies(sim, gap)
        sim.busy(3)
    if n % 3 == 1:  # a halo exchange through host memory (issue 42: host-side communication)
        _mpi_exchange(sim, gap)
        sim.busy(3)
    _sync_host_work(sim, gap // 2)
    sim.busy(3)
    _sync_at_once(sim)
    sim.busy(3)
    sim.ahead()
    _inline_input(sim, gap)
    sim.busy(3)
    _drain_then(sim, gap // 2, ("loader", "thrash", "input")[n % 3] if n >= 2 else "compile")
    sim.busy(3)
    _drain_then(sim, gap // 3, "thrash")


def _recurring_copy_body(sim: _Sim, n: int, gap: int) -> None:
    """The same per-step batch copy (issue 42): after the same last kernel of every step's work, the host
    prepares the batch untraced, then its H2D copy holds 43-66% of the gap (around the 50% cover threshold)
    and the same first kernel follows. One recurring gap, data-starved in every step."""
    sim.busy(2)
    sim.kernel("recurring_loss_tail_kernel", sim.j(60_000))
    g = sim.free[COMPUTE]
    sim.pending = "data-starved"
    cover = sim.rng.uniform(0.43, 0.66)
    sim.h = max(sim.h, g + int(gap * (1 - cover)))
    sim.copy("HtoD", max(int(gap * cover) - 20_000, 50_000), COMPUTE, "Pinned", "cudaMemcpy", blocking=True)
    sim.pending = "data-starved"
    sim.kernel("recurring_embedding_head_kernel", sim.j(60_000))


def _ranks_copy_body(sim: _Sim, n: int, gap: int) -> None:
    """The same per-step batch copy on every rank of a job (issue 42): on rank 0 it holds 56-62% of the gap,
    on the other ranks 42-47% (each rank on one side of the 50% cover threshold in every step, so pooling
    one rank's steps cannot join them). One recurring gap of the job, data-starved on every rank."""
    sim.busy(2)
    sim.kernel("recurring_loss_tail_kernel", sim.j(60_000))
    g = sim.free[COMPUTE]
    sim.pending = "data-starved"
    cover = sim.rng.uniform(0.56, 0.62) if sim.rk.rank == 0 else sim.rng.uniform(0.42, 0.47)
    sim.h = max(sim.h, g + int(gap * (1 - cover)))
    sim.copy("HtoD", max(int(gap * cover) - 20_000, 50_000), COMPUTE, "Pinned", "cudaMemcpy", blocking=True)
    sim.pending = "data-starved"
    sim.kernel("recurring_embedding_head_kernel", sim.j(60_000))


def _untraced_host_body(sim: _Sim, n: int, gap: int) -> None:
    """Every step the training thread computes for itself between two kernels with nothing recorded (no
    range, no op, no call: C++ host math), then launches the next kernel: only CPU sampling shows it (an
    nsys export with ``--sample=cpu``: the tests add the samples). Launch-bound, kind host-work."""
    sim.ahead()
    g = sim.free[COMPUTE]
    sim.pending = "launch-bound"
    sim.h = max(sim.h, g) + max(gap, 1_500_000)
    sim.kernel("saxpy_kernel", sim.j(80_000))


SCENARIOS: dict[str, Callable[[_Sim, int, int], None]] = {
    "capture": _capture_body, "compile": _compile_body, "lazy-load": _lazy_body,
    "allocator-thrash": _thrash_body, "sync-host-work": _host_work_body, "sync-then-evidence": _then_body,
    "sync-at-once": _at_once_body, "inline-input": _input_body, "setup-teardown": _setup_body,
    "host-side": _host_side_body, "recurring-copy": _recurring_copy_body,
    "ranks-copy": _ranks_copy_body, "untraced-host": _untraced_host_body,
}


def plant_scenario(name: str, seed: int = 0, jitter: float = 0.05, steps: int = 8, ranks: int = 2,
                   uniform: bool = False) -> Planted:
    """One named scenario (``SCENARIOS``) as a Scenario and its ground truth (``uniform``: jitter drawn
    uniformly in [1 - j, 1 + j], as scripts/eval_rules.py does)."""
    spec = PlantSpec(seed=seed, ranks=ranks, steps=steps, jitter=jitter,
                     weights={c: 0.0 for c in CLASSES}, noise=True)
    return _scenario(seed, jitter, steps, ranks, SCENARIOS[name], spec, uniform)
