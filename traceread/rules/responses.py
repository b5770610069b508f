"""The first response a performance engineer should try for each cause (data, not logic).

Keys are the six gap classes and the two run-level verdicts; the texts follow the decision tree of
the profiling lesson (one lever per signature).
"""

from __future__ import annotations

FIRST_RESPONSES: dict[str, str] = {
    "launch-bound": "cut launches: capture the step as a CUDA graph, or torch.compile to fuse small ops",
    "comm-bound": "overlap the communication (prefetch earlier, resize buckets) and keep it intra-node",
    "data-starved": "feed the GPU: more DataLoader workers, prefetching, pinned memory (pin_memory=True)",
    "pipeline-bubble": "shrink pipeline fill/drain: interleaved 1F1B or a zero-bubble schedule, more micro-batches",
    "sync-stall": "take the synchronization out of the hot loop: keep values on the device, log every N steps",
    "unattributed": "inspect the evidence listed for the largest gaps; no known signature explains them",
    "memory-bound": "fuse memory-bound kernels (torch.compile, fused optimizers/norms) to cut HBM round trips",
    "healthy": "idle time is small and busy time is compute-bound: further gains are inside the kernels "
               "(MFU headroom: precision, tiling, larger GEMMs)",
}


def first_response(cause: str) -> str:
    """The first response for a gap class or run-level verdict ('' for an unknown name)."""
    return FIRST_RESPONSES.get(cause, "")
