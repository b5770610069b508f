"""unattributed: no signature holds, or the gap is too short to judge. Never a forced class.

::

    compute  ==k==|.....gap.....|==k==
    host          [ something with no known signature ] (or nothing recorded at all)

The evidence lists what was seen during the gap and why no class fit, so that a reader can tell
a quiet host stretch (checkpointing, logging, garbage collection) from missing data.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.rules._base import Rows, RuleContext, cat, col, fmt_int, fmt_ns, fmt_pct, frac, launch_calls

NAME = "unattributed"


def evidence(gaps: pd.DataFrame | Rows, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = col(gaps, "dur_ns", dtype=np.int64)
    short = dur < cfg.min_judged_gap_ns
    launch = np.where(ctx.queued, "next kernel was already queued",
                      np.where(ctx.late, "next kernel submitted after the GPU went idle", "next launch unknown"))
    longest = col(gaps, "longest_cpu_name", "").astype(object)
    host = np.where(longest != "", cat("longest host call ", longest, " (",
                                       fmt_ns(col(gaps, "longest_cpu_ns")), ")"), "no host call recorded")
    seen = cat(launch, "; comm ", fmt_pct(frac(gaps, "comm")), ", loader ", fmt_pct(frac(gaps, "dataloader")),
               ", H2D ", fmt_pct(frac(gaps, "memcpy_htod")), ", runtime calls ", fmt_pct(frac(gaps, "cpu_runtime")),
               ", ", fmt_int(launch_calls(gaps)), " launch(es); ", host)
    reason = np.where(ctx.queued, "the GPU held its next kernel but nothing visible was running for it to wait on, "
                                  "and the gap does not recur every step",
                      np.where(ctx.late, "the host submitted late, but its CUDA calls were too sparse to be dispatch-bound",
                               "the next launch is not recorded, so who waited cannot be told"))
    driver = (ctx.api_call_ns > cfg.launch_call_max_ns) & (ctx.api_call_ns / np.maximum(dur, 1) >= cfg.launch_cpu_cover)
    reason = np.where(driver, cat("one CUDA call, ", ctx.api_call_name, ", held the host for ",
                                  fmt_ns(ctx.api_call_ns), ": driver work or a blocking wait, not dispatch, and "
                                  "no known one-time cost (not a first launch, module load, capture or setup call)"),
                      reason)
    why = np.where(short, cat("too short to judge (", fmt_ns(dur), " < ", fmt_ns(np.full(len(dur),
                                                                                    cfg.min_judged_gap_ns)), ")"),
                   np.where(~ctx.late & (dur < cfg.turnaround_max_ns),
                            cat("kernel-to-kernel turnaround (", fmt_ns(dur), ", next kernel ",
                                np.where(ctx.queued, "already queued)", "launch not recorded)")),
                            cat("no signature fits the ", fmt_ns(dur), " gap (", reason, ")")))
    return cat(why, ": ", seen)
