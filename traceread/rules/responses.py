"""What each cause means, its first response and its levers in the order to try them (data, not logic).

Keys are the eight gap classes and the two run-level verdicts (``traceread.vocabulary.VERDICTS``).
The wording follows ../shared/reference/lesson-profiling-mfu-bottlenecks.txt (the decision tree of
the profiling lesson): every signature has one first response; fix the dominant gap, re-measure,
repeat. The one table of advice: the renderers (``traceread.render.advice``, the Markdown report,
``traceread.diff``) read it, nothing else words it again.
"""

from __future__ import annotations

# What the time of each cause is, completing "N% of step time ...".
MEANING: dict[str, str] = {
    "launch-bound": "the GPUs wait for the CPU to launch the next kernel",
    "comm-bound": "compute waits for communication to finish",
    "data-starved": "the GPUs wait on the data loader",
    "pipeline-bubble": "the GPUs sit in the same pipeline fill/drain gap every step",
    "sync-stall": "the host blocks in a synchronization call while the GPUs drain",
    "one-time-cost": "the GPUs wait for one-time work (compilation, graph capture, module loading, first launches, "
                     "context setup, set-up and teardown, allocator growth)",
    "capture-boundary": "the GPUs idle at the capture's edges (work issued before the capture began, the profiler "
                        "shutting down): not a cause, outside the verdict",
    "unattributed": "the GPUs are idle with no recognizable signature",
    "memory-bound": "the GPUs are busy in memory-bound kernels (elementwise, reductions, normalization)",
    "healthy": "the GPUs are idle",
}

TITLE: dict[str, str] = {
    "launch-bound": "Launch-bound", "comm-bound": "Comm-bound", "data-starved": "Data-starved",
    "pipeline-bubble": "Pipeline bubbles", "sync-stall": "Sync stalls", "one-time-cost": "One-time costs (not steady state)",
    "capture-boundary": "Capture boundary (not a cause)", "unattributed": "Unattributed idle",
    "memory-bound": "Memory-bound", "healthy": "Healthy",
}

FIRST_RESPONSES: dict[str, str] = {
    "launch-bound": "capture the step as a CUDA graph or let torch.compile cut the launch count, then re-measure",
    "comm-bound": "overlap the collective with compute (prefetch earlier, resize buckets), then re-measure",
    "data-starved": "add loader workers and prefetch, then re-measure",
    "pipeline-bubble": "switch to an interleaved 1F1B or zero-bubble schedule, then re-measure",
    "sync-stall": "remove the synchronization from the hot loop (keep values on the device), then re-measure",
    "one-time-cost": "re-profile after warmup (a torch.profiler schedule with warmup steps, or nsys --capture-range) "
                     "and read that report: there is nothing to fix in this window",
    "capture-boundary": "nothing to fix: start the capture after the previous step's work has drained and end it after "
                        "the last step (a torch.profiler schedule stepped every iteration), or ignore this time",
    "unattributed": "open the largest gaps below in a trace viewer; their evidence says what was seen",
    "memory-bound": "fuse the memory-bound kernels (torch.compile, fused optimizers and norms), then re-measure",
    "healthy": "further gains are inside the kernels: compare MFU with the 50% mark and look at the top GEMMs",
}

LEVERS: dict[str, tuple[str, ...]] = {
    "launch-bound": (
        "Capture the steady-state step as a CUDA graph (`torch.cuda.graphs`, or `torch.compile(mode=\"reduce-overhead\")`).",
        "Let `torch.compile` fuse small ops so fewer kernels are launched.",
        "Remove Python work between ops in the hot loop (logging, shape checks, list building).",
        "Raise the work per kernel: larger micro-batch or sequence length where memory allows.",
    ),
    "comm-bound": (
        "Overlap the collective with compute: prefetch FSDP all-gathers earlier, let DDP buckets start during backward.",
        "Size buckets so each collective is bandwidth-bound rather than latency-bound.",
        "Keep heavy collectives intra-node (NVLink) and the parallelism that crosses nodes light.",
        "Check the collective table for exposed time by type and process group.",
    ),
    "data-starved": (
        "Add data-loader workers (`num_workers`) and prefetch (`prefetch_factor`).",
        "Pin host memory (`pin_memory=True`) and copy with `non_blocking=True`.",
        "Move CPU-bound decode/augmentation off the hot path (preprocess offline, or decode on the GPU).",
        "Keep workers alive between epochs (`persistent_workers=True`).",
    ),
    "pipeline-bubble": (
        "Use an interleaved 1F1B schedule (virtual pipeline stages).",
        "Try a zero-bubble schedule where the framework offers one.",
        "Raise the number of micro-batches per step relative to pipeline stages.",
    ),
    "sync-stall": (
        "Remove `.item()`, `.cpu()`, `print(tensor)` and `torch.cuda.synchronize()` from the hot loop.",
        "Keep metrics on the device and log them every N steps.",
        "Avoid allocator synchronization: reuse buffers, set `expandable_segments`, avoid `empty_cache()`.",
    ),
    "one-time-cost": (
        "Re-profile steady-state steps: `torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=3, "
        "active=5))`, stepping the profiler every iteration.",
        "With Nsight Systems, start the capture after warmup: `nsys profile --capture-range=cudaProfilerApi` with "
        "`torch.cuda.profiler.start()`/`stop()` (or `--capture-range=nvtx` and an NVTX range) around steady-state steps.",
        "If the one-time cost itself matters (start-up time, serving cold start): cache compiled kernels "
        "(Inductor/Triton caches, `CUDA_MODULE_LOADING=LAZY`), capture fewer graph sizes, warm the allocator once.",
    ),
    "capture-boundary": (
        "Profile with a `torch.profiler.schedule(wait=..., warmup=..., active=...)` stepped every iteration, so that "
        "the capture opens and closes on step boundaries.",
        "With Nsight Systems, bracket steady-state steps with `--capture-range=cudaProfilerApi` and "
        "`torch.cuda.synchronize()` before `torch.cuda.profiler.start()`.",
    ),
    "unattributed": (
        "Open the largest gaps in ui.perfetto.dev (`--perfetto out.pftrace`) and read the evidence track.",
        "Record more context: `with_stack=True`, NVTX or `record_function` ranges around the suspect code.",
    ),
    "memory-bound": (
        "Fuse elementwise, normalization and activation kernels (`torch.compile`, fused kernels).",
        "Use fused optimizers (`fused=True` / `foreach=True`).",
        "Check for fp32 kernels in a low-precision run and for skinny matmuls (small batch).",
    ),
    "healthy": (
        "Compare MFU with the 50% mark; the remaining headroom is inside the kernels.",
        "Look at the top GEMM/attention kernels: tile shapes, precision, and partial waves.",
    ),
}


# When one named piece of evidence holds most of a class (``evidence_kind``), its own fix and levers.
EVIDENCE_FIRST_RESPONSE: dict[tuple[str, str], str] = {
    ("data-starved", "pageable-copy"): "pin the batch's host memory (pin_memory=True in the DataLoader) and copy it with "
                                       "non_blocking=True, then re-measure",
    ("data-starved", "host-input"): "move the batch preparation (decoding, transforms, collation) off the training "
                                    "thread into DataLoader workers (num_workers > 0), then re-measure",
    ("sync-stall", "allocator"): "stop the caching allocator from synchronizing every step (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
                                 "no empty_cache() in the loop, fewer shape changes), then re-measure",
    # set from the job section (traceread.ranks): whom the other ranks' waiting is for
    ("pipeline-bubble", "stage-imbalance"): "rebalance layers across pipeline stages (fewer on the slow stage the job "
                                            "section names; a different schedule does not remove this wait), then "
                                            "re-measure",
    ("pipeline-bubble", "straggler"): "fix the straggler rank first (the job section names it and why it is slow), "
                                      "then re-measure",
    ("comm-bound", "straggler"): "fix the straggler rank first (the job section names it and why it is slow): the "
                                 "collectives wait for it, not for the interconnect; then re-measure",
}
EVIDENCE_LEVERS: dict[tuple[str, str], tuple[str, ...]] = {
    ("data-starved", "pageable-copy"): (
        "Pin the batch: `DataLoader(..., pin_memory=True)` (or `tensor.pin_memory()` on a buffer reused every step): "
        "pageable copies are staged through a driver bounce buffer at a fraction of the link's rate and block the host.",
        "Copy with `tensor.to(device, non_blocking=True)` so the transfer overlaps compute; prefetch the next batch "
        "on a side stream.",
        "Then, if the copy still shows, shrink it: send compact dtypes (uint8 images, int32 ids) and convert on the GPU.",
        "Add data-loader workers (`num_workers`) only if the loader itself shows up next.",
    ),
    ("data-starved", "host-input"): (
        "Move decoding, transforms and collation into a `Dataset`/`DataLoader` with `num_workers > 0`, so the "
        "next batch is prepared while the GPU runs this one.",
        "Or prepare the next batch in a background thread/process and prefetch it (`prefetch_factor`).",
        "Preprocess offline, or decode on the GPU (DALI, torchvision.io GPU decode).",
        "Pin host memory (`pin_memory=True`) and copy with `non_blocking=True`.",
    ),
    ("sync-stall", "allocator"): (
        "Configure the caching allocator: `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` "
        "(`PYTORCH_HIP_ALLOC_CONF` on ROCm) so it grows segments instead of freeing and re-allocating.",
        "Remove `torch.cuda.empty_cache()` (and `gc.collect()` that frees tensors) from the training loop.",
        "Cut shape changes: pad or bucket sequence lengths so the same blocks are reused every step.",
        "Then remove remaining `.item()` / `.cpu()` / `torch.cuda.synchronize()` calls from the hot loop.",
    ),
    ("pipeline-bubble", "stage-imbalance"): (
        "Move layers off the slow stage (the job section names it and its compute per step against the others').",
        "Balance by measured time, not layer count: embedding and output layers make the first and last stages heavier.",
        "Only once the stages are balanced: an interleaved 1F1B or zero-bubble schedule for the remaining fill/drain.",
    ),
    ("pipeline-bubble", "straggler"): (
        "Fix the straggler rank named in the job section (its cause: compute, data stall, launch overhead, host sync).",
        "A slower GPU or host: check clocks, thermals and placement of that rank; replace or exclude the node.",
    ),
    ("comm-bound", "straggler"): (
        "Fix the straggler rank named in the job section (its cause: compute, data stall, launch overhead, host sync).",
        "A slower GPU or host: check clocks, thermals and placement of that rank; replace or exclude the node.",
    ),
}
EVIDENCE_TEXT: dict[str, str] = {
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
}


def first_response(cause: str, evidence: str = "") -> str:
    """The first response for ``cause`` ('' for an unknown name), following its largest named evidence
    when that evidence has a fix of its own."""
    return EVIDENCE_FIRST_RESPONSE.get((cause, evidence)) or FIRST_RESPONSES.get(cause, "")


def levers(cause: str, evidence: str = "") -> tuple[str, ...]:
    """The levers for ``cause`` in the order to try them (the evidence's own first when it has some)."""
    return EVIDENCE_LEVERS.get((cause, evidence)) or LEVERS[cause]
