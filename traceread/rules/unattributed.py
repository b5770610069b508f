"""unattributed: no signature holds, or the gap is too short to judge. Never a forced class.

::

    compute  ==k==|.....gap.....|==k==
    host          [ something with no known signature ] (or nothing recorded at all)

The evidence lists what was seen during the gap and why no class fit, so that a reader can tell
a quiet host stretch (checkpointing, logging, garbage collection) from missing data.
"""

from __future__ import annotations

import numpy as np

from traceread.config import Thresholds
from traceread.rules._base import (
    Rule,
    RuleContext,
    cat,
    cat_where,
    choose,
    fmt_int,
    fmt_ns,
    fmt_ns_text,
    fmt_pct,
    launch_calls,
)
from traceread.rules._columns import Gaps, col, frac

NAME = "unattributed"
# The context fields ``evidence`` reads beyond the gap columns (as a rule's ``Rule.reads``).
READS = ("queued", "late", "turnaround", "api_call_ns", "api_call_name", "host_comm_ns", "host_comm_name")


def rest(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Every gap: the residual class takes what no rule before it claimed (``rules.classify`` starts every
    gap as unattributed and does not try this mask)."""
    return np.ones(len(gaps), dtype=bool)


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = col(gaps, "dur_ns", dtype=np.int64)
    # which of three sentences (an object array of references, not a fixed-width copy of each per row)
    who = np.where(ctx.queued, 0, np.where(ctx.late, 1, 2))
    launch = choose(who, ["next kernel was already queued", "next kernel submitted after the GPU went idle",
                          "next launch unknown"])
    longest = col(gaps, "longest_cpu_name", "").astype(object)
    host = cat_where(longest != "", "longest host call ", longest, " (", (fmt_ns, col(gaps, "longest_cpu_ns")), ")",
                     other="no host call recorded")
    # host communication library ranges (MPI, Gloo) under comm_cover of the gap: named, not a class
    hc = ctx.host_comm_ns if len(ctx.host_comm_ns) == len(dur) else np.zeros(len(dur), np.int64)
    names = ctx.host_comm_name if len(ctx.host_comm_name) == len(dur) else np.full(len(dur), "", dtype=object)
    on_host = cat_where(hc > 0, ", host-side communication ", (fmt_pct, hc / np.maximum(dur, 1)), " (", names, ")")
    seen = cat(launch, "; comm ", fmt_pct(frac(gaps, "comm")), on_host, ", loader ", fmt_pct(frac(gaps, "dataloader")),
               ", H2D ", fmt_pct(frac(gaps, "memcpy_htod")), ", runtime calls ", fmt_pct(frac(gaps, "cpu_runtime")),
               ", ", fmt_int(launch_calls(gaps)), " launch(es); ", host)
    reason = choose(who, ["the GPU held its next kernel but nothing visible was running for it to wait on, and the gap "
                          "does not recur every step",
                          "the host submitted late, but its CUDA calls were too sparse to be dispatch-bound",
                          "the next launch is not recorded, so who waited cannot be told"])
    short = dur < cfg.min_judged_gap_ns
    # build_context's reading (it knows the timestamps' tick); a hand-built context has none
    turnaround = ~short & (ctx.turnaround if len(ctx.turnaround) == len(dur)
                           else ~ctx.late & (dur < cfg.turnaround_max_ns))
    fits = ~short & ~turnaround
    driver = fits & (ctx.api_call_ns > cfg.launch_call_max_ns) & (ctx.api_call_ns / np.maximum(dur, 1)
                                                                   >= cfg.launch_cpu_cover)
    reason = cat_where(driver, "one CUDA call, ", ctx.api_call_name, ", held the host for ", (fmt_ns, ctx.api_call_ns),
                       ": driver work or a blocking wait, not dispatch, and no known one-time cost (not a first "
                       "launch, module load, capture or setup call)", other=reason)
    minimum = fmt_ns_text(cfg.min_judged_gap_ns)
    why = cat_where(short, "too short to judge (", (fmt_ns, dur), " < ", minimum, ")")
    why = cat_where(turnaround, "kernel-to-kernel turnaround (", (fmt_ns, dur), ", next kernel ",
                    choose(ctx.queued.astype(np.int64), ["launch not recorded)", "already queued)"]), other=why)
    why = cat_where(fits, "no signature fits the ", (fmt_ns, dur), " gap (", reason, ")", other=why)
    return cat(why, ": ", seen)


RULE = Rule(NAME, rest, evidence, reads=READS, facts=READS)
