"""The built-in causes: one :class:`~traceread.causes.Cause` per gap class, busy part and verdict.

In report order: the steady causes, the one-time cost, the capture boundary and the residual class
(``unattributed``, last), then the busy parts and ``healthy``. The words follow the decision tree of
the profiling lesson (every signature has one first response; fix the dominant gap, re-measure, repeat);
the order the rules are tried in (``precedence``) and why is in docs/rules.md.
"""

from __future__ import annotations

from types import MappingProxyType

from traceread.causes import BOUNDARY, BUSY, ONE_TIME, RESIDUAL, STEADY, VERDICT, Cause

LAUNCH_BOUND = "launch-bound"
COMM_BOUND = "comm-bound"
DATA_STARVED = "data-starved"
PIPELINE_BUBBLE = "pipeline-bubble"
SYNC_STALL = "sync-stall"
ONE_TIME_COST = "one-time-cost"
CAPTURE_BOUNDARY = "capture-boundary"
UNATTRIBUTED = "unattributed"
COMPUTE_BOUND = "compute-bound"
MEMORY_BOUND = "memory-bound"
UNCLASSIFIED = "unclassified"
HEALTHY = "healthy"

_FIXES = "traceread.whatif.fixes"
# The frame's lane names (traceread.schema.LANE_*: tests/unit/causes/test_causes.py checks them), spelt out so that
# reading the vocabulary does not import the frame's schema (and numpy) into ``traceread --help``.
_COMM_LANE, _COPY_LANE, _MEMSET_LANE = "gpu_comm", "memcpy", "memset"

# What a named piece of evidence (``evidence_kind``) is, completing "mostly ..." in a verdict.
EVIDENCE_TEXT = MappingProxyType({
    "stage-imbalance": "waiting for one pipeline stage that computes longer than the others (stage imbalance)",
    "straggler": "waiting for one slow rank (a straggler)",
    "allocator": "in recurring allocator calls that synchronize the device (cudaFree, hipFree, cudaMalloc)",
    "sync": "explicit synchronization (.item(), .cpu(), synchronize, blocking copies)",
    "compile": "JIT compilation", "autotune": "autotuning", "graph-capture": "CUDA-graph capture",
    "module-load": "module loading", "first-launch": "first kernel launches (lazy module loading)",
    "context": "context and stream setup", "allocator-growth": "allocator growth",
    "uncaptured-work": "GPU work issued before the capture began", "blocking-call": "a blocking call at the "
    "capture's start waiting on earlier GPU work", "shutdown": "the profiler shutting down after the last step",
    "lazy-init": "CUDA / cuDNN / cuBLAS lazy start-up (context initialization, first library handles)",
    "pageable-copy": "in host-to-device batch copies from pageable (unpinned) memory",
    "setup-teardown": "set-up and teardown (pinned memory, stream teardown, init / clean-up ranges)",
    "host-input": "host-side input work on the training thread (decoding, preprocessing, no DataLoader)",
    "bus-bound": "in host-to-device copies at the link's full rate (the bus is the limit, not the loader)",
    "host-work": "the host's own work on the training thread (logging, metrics, host math), not kernel dispatch: "
                 "the CPU is the bottleneck",
    "host-stall": "long host stretches inside an op's first calls with no child op or CUDA call (compilation, "
                  "autotuning, graph recording, lazy initialization)",
})

# A straggler's fix, the same whichever class the others' waiting on it shows as.
_STRAGGLER_LEVERS = (
    "Fix the straggler rank named in the job section (its cause: compute, data stall, launch overhead, host sync).",
    "A slower GPU or host: check clocks, thermals and placement of that rank; replace or exclude the node.",
)

BUILTIN: tuple[Cause, ...] = (
    Cause(
        LAUNCH_BOUND, STEADY, title="Launch-bound",
        meaning="the GPUs wait for the CPU to launch the next kernel",
        first_response="capture the step as a CUDA graph or let torch.compile cut the launch count, then re-measure",
        levers=(
            "Capture the steady-state step as a CUDA graph (`torch.cuda.graphs`, or "
            "`torch.compile(mode=\"reduce-overhead\")`).",
            "Let `torch.compile` fuse small ops so fewer kernels are launched.",
            "Remove Python work between ops in the hot loop (logging, shape checks, list building).",
            "Raise the work per kernel: larger micro-batch or sequence length where memory allows.",
        ),
        colour="#e15759",
        job_reason="launch overhead: its GPU waited for the host to dispatch kernels",
        rule="traceread.rules.launch_bound", precedence=6,
        fix="traceread.whatif.graphs:plan_launch_bound",
        assumption="kernels replayed from CUDA graphs: the dispatch between launches costs whatif_graph_node_ns a "
                   "kernel, kernels run the in-graph gap apart after one graph launch a stretch; data loading and "
                   "driver work stay",
        # the host's own work, not dispatch, held the GPU (rules.launch_bound: the CPU is the bottleneck)
        by_evidence={"host-work": (
            "move the host work the evidence names off the training step (do it every N steps, asynchronously in "
            "another thread or process, or on the GPU), then re-measure", (
                "Move logging, metrics and checkpointing off the step: every N steps, or in a background thread "
                "or process.",
                "Keep metrics on the device and reduce them every N steps instead of computing them on the host.",
                "Move host math (NumPy, Python loops over tensors) to the GPU or into the DataLoader workers.",
                "CUDA graphs do not help here: the host is busy with its own work, not with launching.",
            ))},
    ),
    Cause(
        COMM_BOUND, STEADY, title="Comm-bound",
        meaning="compute waits for communication to finish",
        first_response="overlap the collective with compute (prefetch earlier, resize buckets), then re-measure",
        levers=(
            "Overlap the collective with compute: prefetch FSDP all-gathers earlier, let DDP buckets start during "
            "backward.",
            "Size buckets so each collective is bandwidth-bound rather than latency-bound.",
            "Keep heavy collectives intra-node (NVLink) and the parallelism that crosses nodes light.",
            "Check the collective table for exposed time by type and process group.",
        ),
        colour="#f28e2b",
        job_reason="waiting on other communication before the collective",
        rule="traceread.rules.comm_bound", precedence=3,
        fix="traceread.whatif.waits:plan_comm_bound", assumption="communication fully overlapped (nothing waits for it)",
        evidence_lanes=(_COMM_LANE,),
        by_evidence={"straggler": (
            "fix the straggler rank first (the job section names it and why it is slow): the collectives wait for "
            "it, not for the interconnect; then re-measure", _STRAGGLER_LEVERS)},
    ),
    Cause(
        DATA_STARVED, STEADY, title="Data-starved",
        meaning="the GPUs wait on the data loader",
        first_response="add loader workers and prefetch, then re-measure",
        levers=(
            "Add data-loader workers (`num_workers`) and prefetch (`prefetch_factor`).",
            "Pin host memory (`pin_memory=True`) and copy with `non_blocking=True`.",
            "Move CPU-bound decode/augmentation off the hot path (preprocess offline, or decode on the GPU).",
            "Keep workers alive between epochs (`persistent_workers=True`).",
        ),
        colour="#4e79a7",
        job_reason="a data stall: it waited for the data loader / host-to-device batch copy before the collective",
        rule="traceread.rules.data_starved", precedence=2,
        fix="traceread.whatif.loading:plan_data_starved", fix_reads_gaps=True,
        assumption="data loading and batch building on the training thread take no time; batch copies pinned and "
                   "prefetched (still one after another on the bus)",
        evidence_lanes=(_COPY_LANE, _MEMSET_LANE),
        by_evidence={
            "pageable-copy": (
                "pin the batch's host memory (pin_memory=True in the DataLoader) and copy it with non_blocking=True, "
                "then re-measure", (
                    "Pin the batch: `DataLoader(..., pin_memory=True)` (or `tensor.pin_memory()` on a buffer reused "
                    "every step): pageable copies are staged through a driver bounce buffer at a fraction of the "
                    "link's rate and block the host.",
                    "Copy with `tensor.to(device, non_blocking=True)` so the transfer overlaps compute; prefetch the "
                    "next batch on a side stream.",
                    "Then, if the copy still shows, shrink it: send compact dtypes (uint8 images, int32 ids) and "
                    "convert on the GPU.",
                    "Add data-loader workers (`num_workers`) only if the loader itself shows up next.",
                )),
            "bus-bound": (
                "move fewer bytes or hide the transfer: copy on a side stream overlapped with compute (prefetch the "
                "next batch with non_blocking=True), send compact dtypes and decode on the GPU; more loader workers "
                "will not help, then re-measure", (
                    "Overlap the host-to-device copy with compute: issue the next batch's copy on a side stream "
                    "(`non_blocking=True` from pinned memory, a CUDA-stream prefetcher) while this step runs.",
                    "Move fewer bytes: send compact dtypes (uint8 images, int32 ids, fp16/bf16 features) and convert "
                    "on the GPU; crop or subsample on the host first.",
                    "Decode on the GPU (DALI, nvJPEG, torchvision.io GPU decode) so compressed bytes cross the bus.",
                    "Keep data resident on the GPU when it fits (a dataset reused every epoch).",
                    "Check the link: GPUs sharing a PCIe switch, or a slot at fewer lanes or an older generation.",
                )),
            "host-input": (
                "move the batch preparation (decoding, transforms, collation) off the training thread into "
                "DataLoader workers (num_workers > 0), then re-measure", (
                    "Move decoding, transforms and collation into a `Dataset`/`DataLoader` with `num_workers > 0`, "
                    "so the next batch is prepared while the GPU runs this one.",
                    "Or prepare the next batch in a background thread/process and prefetch it (`prefetch_factor`).",
                    "Preprocess offline, or decode on the GPU (DALI, torchvision.io GPU decode).",
                    "Pin host memory (`pin_memory=True`) and copy with `non_blocking=True`.",
                )),
        },
    ),
    Cause(
        PIPELINE_BUBBLE, STEADY, title="Pipeline bubbles",
        meaning="the GPUs sit in the same pipeline fill/drain gap every step",
        first_response="switch to an interleaved 1F1B or zero-bubble schedule, then re-measure",
        levers=(
            "Use an interleaved 1F1B schedule (virtual pipeline stages).",
            "Try a zero-bubble schedule where the framework offers one.",
            "Raise the number of micro-batches per step relative to pipeline stages.",
        ),
        colour="#b07aa1",
        job_reason="a pipeline bubble before the collective",
        rule="traceread.rules.pipeline_bubble", precedence=5,
        fix=f"{_FIXES}:plan_pipeline_bubble", fix_reads_gaps=True,
        assumption="the pipeline bubble shrinks whatif_bubble_factor-fold (interleaved 1F1B)",
        # set from the job section (traceread.ranks): whom the other ranks' waiting is for
        by_evidence={
            "stage-imbalance": (
                "rebalance layers across pipeline stages (fewer on the slow stage the job section names; a different "
                "schedule does not remove this wait), then re-measure", (
                    "Move layers off the slow stage (the job section names it and its compute per step against the "
                    "others').",
                    "Balance by measured time, not layer count: embedding and output layers make the first and last "
                    "stages heavier.",
                    "Only once the stages are balanced: an interleaved 1F1B or zero-bubble schedule for the "
                    "remaining fill/drain.",
                )),
            "straggler": ("fix the straggler rank first (the job section names it and why it is slow), then re-measure",
                          _STRAGGLER_LEVERS),
        },
    ),
    Cause(
        SYNC_STALL, STEADY, title="Sync stalls",
        meaning="the host blocks in a synchronization call while the GPUs drain",
        first_response="remove the synchronization from the hot loop (keep values on the device), then re-measure",
        levers=(
            "Remove `.item()`, `.cpu()`, `print(tensor)` and `torch.cuda.synchronize()` from the hot loop.",
            "Keep metrics on the device and log them every N steps.",
            "Avoid allocator synchronization: reuse buffers, set `expandable_segments`, avoid `empty_cache()`.",
        ),
        colour="#edc948",
        job_reason="a host sync: the host blocked on the GPU, then launched late",
        rule="traceread.rules.sync_stall", precedence=4,
        fix="traceread.whatif.waits:plan_sync_stall", fix_reads_gaps=True,
        assumption="the syncs inside sync-stall gaps return without waiting",
        by_evidence={"allocator": (
            "stop the caching allocator from synchronizing every step (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
            "True, no empty_cache() in the loop, fewer shape changes), then re-measure", (
                "Configure the caching allocator: `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` "
                "(`PYTORCH_HIP_ALLOC_CONF` on ROCm) so it grows segments instead of freeing and re-allocating.",
                "Remove `torch.cuda.empty_cache()` (and `gc.collect()` that frees tensors) from the training loop.",
                "Cut shape changes: pad or bucket sequence lengths so the same blocks are reused every step.",
                "Then remove remaining `.item()` / `.cpu()` / `torch.cuda.synchronize()` calls from the hot loop.",
            ))},
    ),
    Cause(
        ONE_TIME_COST, ONE_TIME, title="One-time costs (not steady state)",
        meaning="the GPUs wait for one-time work (compilation, graph capture, module loading, first launches, "
                "context setup, set-up and teardown, allocator growth)",
        first_response="re-profile after warmup (a torch.profiler schedule with warmup steps, or nsys --capture-range) "
                       "and read that report: there is nothing to fix in this window",
        levers=(
            "Re-profile steady-state steps: `torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=3, "
            "active=5))`, stepping the profiler every iteration.",
            "With Nsight Systems, start the capture after warmup: `nsys profile --capture-range=cudaProfilerApi` with "
            "`torch.cuda.profiler.start()`/`stop()` (or `--capture-range=nvtx` and an NVTX range) around steady-state "
            "steps.",
            "If the one-time cost itself matters (start-up time, serving cold start): cache compiled kernels "
            "(Inductor/Triton caches, `CUDA_MODULE_LOADING=LAZY`), capture fewer graph sizes, warm the allocator once.",
        ),
        colour="#9c9ede",
        job_reason="one-time work (compilation, graph capture, module loading, first launches, context setup, "
                   "allocator growth) before the collective",
        rule="traceread.rules.one_time_cost", precedence=1,
        fix=f"{_FIXES}:plan_one_time", fix_reads_gaps=True,
        assumption="the one-time work (compilation, capture, set-up, lazy loading in first launches) is absent",
    ),
    Cause(
        CAPTURE_BOUNDARY, BOUNDARY, title="Capture boundary (not a cause)", verdict=False,
        meaning="the GPUs idle at the capture's edges (work issued before the capture began, the profiler shutting "
                "down): not a cause, outside the verdict",
        first_response="nothing to fix: start the capture after the previous step's work has drained and end it after "
                       "the last step (a torch.profiler schedule stepped every iteration), or ignore this time",
        levers=(
            "Profile with a `torch.profiler.schedule(wait=..., warmup=..., active=...)` stepped every iteration, so "
            "that the capture opens and closes on step boundaries.",
            "With Nsight Systems, bracket steady-state steps with `--capture-range=cudaProfilerApi` and "
            "`torch.cuda.synchronize()` before `torch.cuda.profiler.start()`.",
        ),
        colour="#d7d7d7",
        job_reason="the capture's edge: its GPU was busy with work issued before the capture began, or the profiler "
                   "was shutting down (not a cause)",
        rule="traceread.rules.capture_boundary", precedence=0,
    ),
    Cause(
        UNATTRIBUTED, RESIDUAL, title="Unattributed idle",
        meaning="the GPUs are idle with no recognizable signature",
        first_response="open the largest gaps below in a trace viewer; their evidence says what was seen",
        levers=(
            "Open the largest gaps in ui.perfetto.dev (`--perfetto out.pftrace`) and read the evidence track.",
            "Record more context: `with_stack=True`, NVTX or `record_function` ranges around the suspect code.",
        ),
        colour="#bab0ac",
        job_reason="host work with no GPU activity (unattributed idle) before the collective",
        rule="traceread.rules.unattributed",
    ),
    Cause(
        COMPUTE_BOUND, BUSY, title="Compute-bound", verdict=False,
        meaning="the GPUs are busy in compute-bound kernels (GEMM, attention, convolution)",
        first_response="", levers=(), part_label="busy: compute-bound kernels",
    ),
    Cause(
        MEMORY_BOUND, BUSY, title="Memory-bound",
        meaning="the GPUs are busy in memory-bound kernels (elementwise, reductions, normalization)",
        first_response="fuse the memory-bound kernels (torch.compile, fused optimizers and norms), then re-measure",
        levers=(
            "Fuse elementwise, normalization and activation kernels (`torch.compile`, fused kernels).",
            "Use fused optimizers (`fused=True` / `foreach=True`).",
            "Check for fp32 kernels in a low-precision run and for skinny matmuls (small batch).",
        ),
        part_label="busy: memory-bound kernels",
        fix=f"{_FIXES}:plan_memory_bound", assumption="memory-bound kernels whatif_memory_factor-fold faster (fusion)",
    ),
    # busy in kernels no pattern names: neither bound is claimed for them, so no lever is drawn
    Cause(
        UNCLASSIFIED, BUSY, title="Unclassified kernels", verdict=False,
        meaning="the GPUs are busy in kernels of unknown class",
        first_response="", levers=(), part_label="busy: unclassified kernels",
    ),
    Cause(
        HEALTHY, VERDICT, title="Healthy",
        meaning="the GPUs are idle",
        first_response="further gains are inside the kernels: compare MFU with the 50% mark and look at the top GEMMs",
        levers=(
            "Compare MFU with the 50% mark; the remaining headroom is inside the kernels.",
            "Look at the top GEMM/attention kernels: tile shapes, precision, and partial waves.",
        ),
    ),
)

__all__ = ["BUILTIN", "EVIDENCE_TEXT", "LAUNCH_BOUND", "COMM_BOUND", "DATA_STARVED", "PIPELINE_BUBBLE", "SYNC_STALL",
           "ONE_TIME_COST", "CAPTURE_BOUNDARY", "UNATTRIBUTED", "COMPUTE_BOUND", "MEMORY_BOUND", "UNCLASSIFIED",
           "HEALTHY"]
