"""The first response a performance engineer should try for each cause (data, not logic).

Keys are the seven gap classes and the two run-level verdicts; the texts follow the decision tree of
the profiling lesson (one lever per signature).
"""

from __future__ import annotations

FIRST_RESPONSES: dict[str, str] = {
    "launch-bound": "cut launches: capture the step as a CUDA graph, or torch.compile to fuse small ops",
    "comm-bound": "overlap the communication (prefetch earlier, resize buckets) and keep it intra-node",
    "data-starved": "feed the GPU: more DataLoader workers, prefetching, pinned memory (pin_memory=True)",
    "pipeline-bubble": "shrink pipeline fill/drain: interleaved 1F1B or a zero-bubble schedule, more micro-batches",
    "sync-stall": "take the synchronization out of the hot loop: keep values on the device, log every N steps",
    "one-time-cost": "not steady state: re-profile after warmup (torch.profiler schedule with warmup steps, or "
                     "nsys --capture-range) before fixing anything",
    "unattributed": "inspect the evidence listed for the largest gaps; no known signature explains them",
    "memory-bound": "fuse memory-bound kernels (torch.compile, fused optimizers/norms) to cut HBM round trips",
    "healthy": "idle time is small and busy time is compute-bound: further gains are inside the kernels "
               "(MFU headroom: precision, tiling, larger GEMMs)",
}


# When a class's time is held mostly by one named piece of evidence (``evidence_kind``), its own fix.
EVIDENCE_RESPONSES: dict[tuple[str, str], str] = {
    ("sync-stall", "allocator"): "stop the caching allocator thrashing: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
                                 "no torch.cuda.empty_cache() in the loop, fewer shape changes (pad or bucket shapes)",
}


def first_response(cause: str, evidence: str = "") -> str:
    """The first response for a gap class or run-level verdict ('' for an unknown name), following the
    named evidence that holds most of its time when that evidence has a fix of its own."""
    return EVIDENCE_RESPONSES.get((cause, evidence)) or FIRST_RESPONSES.get(cause, "")
