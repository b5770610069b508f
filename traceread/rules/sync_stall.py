"""sync-stall: the host blocked in a synchronization until the device drained.

::

    compute  ==queued kernels==|..........gap..........|==next==
    host     [cudaStreamSynchronize / .item() ....]|host work|launch
                                                  ^ returns at the drain; everything after it,
                                                    up to the next submission, is on the path

Signature: a host sync call (stream/device/event synchronize, blocking cudaMemcpy, allocator frees
that synchronize) was in progress when the GPU went idle, and the next kernel had not been queued
before the drain (unless the host was waiting on a point-to-point recv that recurs every step: that
is the pipeline schedule, a bubble). The whole gap, including the host work after the sync
returned, is the stall: without the sync the host would have queued that work while the GPU was
still busy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.rules._base import Rule, RuleContext, cat, col, fmt_ns, frac

NAME = "sync-stall"


def mask(gaps: pd.DataFrame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    # A host blocked on a pipeline's recurring p2p recv is waiting on the schedule: a bubble.
    structural = ctx.periodic & (frac(gaps, "comm_p2p") >= cfg.comm_cover)
    return ctx.judged & ctx.sync_at_drain & ~ctx.queued & ~structural


def evidence(gaps: pd.DataFrame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    start = col(gaps, "start_ns").astype(np.int64)
    end = col(gaps, "end_ns").astype(np.int64)
    after = np.maximum(end - np.maximum(ctx.sync_end_ns, start), 0)
    longest = col(gaps, "longest_cpu_name", "").astype(object)
    tail = np.where(longest != "", cat(" (longest host call: ", longest, ")"), "")
    return cat("host blocked in ", ctx.sync_name, " when the GPU drained; then ", fmt_ns(after),
               " of host work before the next submission", tail, "; ", fmt_ns(col(gaps, "dur_ns")), " gap")


RULE = Rule(NAME, mask, evidence)
