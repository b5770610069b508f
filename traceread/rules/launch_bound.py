"""launch-bound: the GPU waits for the CPU to submit work while the CPU is busy dispatching.

::

    host     |op+launch|op+launch|op+launch|op+launch|     dense dispatch ticks
    compute     |k|..gap..|k|..gap..|k|..gap..|k|         tiny kernels marooned in idle
                      ^ next launch issued after the GPU went idle

Signature: the next kernel was submitted after the gap began (or its launch was still in flight),
and the host was dispatching during the gap: runtime/driver calls cover at least
``launch_cpu_cover`` of it, or it issued launches at least every ``launch_max_ns_per_launch``
(Python and framework dispatch between launches counts as launch overhead), or the launching
thread spent at least ``launch_cpu_cover`` of the gap inside the very operator that launched the
next kernel (host-side operator overhead: cuDNN planning, autograd bookkeeping). A long quiet host
stretch with no CUDA calls is the host's own work, not launch overhead: launch-bound with evidence kind
``host-work`` (the CPU is the bottleneck; its first response moves that work off the step, never CUDA
graphs) when launch-free frames on the launching thread (``rules.host_work``) or recurring child-free
stretches inside an op (``rules.host_stall``) hold ``launch_cpu_cover`` of the gap, or CPU samples of the
launching thread outside any CUDA call (``rules.sampled``, nsys) do in a gap whose next kernel was not queued
before it (its launch need not be recorded: the host was computing). Dispatch never
reads a gap held for most of its length by one CUDA call longer than ``launch_call_max_ns`` (driver
work such as a first launch's lazy module load or a ``cudaFree`` that initializes the context: a
one-time cost that CUDA graphs would not remove), nor one held for at least ``launch_cpu_cover`` of
its length by long child-free stretches inside an op (one long host call, not a wall of small
dispatch calls: one-time cost when it does not recur, host work when it does).
"""

from __future__ import annotations

import numpy as np

from traceread.config import Thresholds
from traceread.rules._base import (
    Rule,
    RuleContext,
    cat,
    cat_where,
    fmt_int,
    fmt_ns,
    fmt_pct,
    launch_calls,
    texts,
    where,
)
from traceread.rules._columns import Frame, Gaps, col, frac

NAME = "launch-bound"
HOST_WORK = "host-work"


def _signatures(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> tuple[np.ndarray, np.ndarray]:
    """``(dispatch, host_work)`` per gap: the host dispatching (module doc), and the host busy with its own
    work instead: launch-free host frames on the launching thread (``rules.host_work``) or long child-free
    stretches inside an op that recur (``rules.host_stall``) over ``launch_cpu_cover`` of the gap."""
    runtime = frac(gaps, "cpu_runtime") >= cfg.launch_cpu_cover
    launches = np.maximum(col(gaps, "launch_count", dtype=np.int64), 1)
    dense = col(gaps, "dur_ns", dtype=np.int64) <= launches * cfg.launch_max_ns_per_launch
    dispatching = ctx.dispatch >= cfg.launch_cpu_cover
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    driver_work = (ctx.api_call_ns > cfg.launch_call_max_ns) & (ctx.api_call_ns / dur >= cfg.launch_cpu_cover)
    # A long child-free stretch inside an op holds the host, not dispatch (rules.host_stall)
    stalled = ctx.host_stall_ns / dur >= cfg.launch_cpu_cover
    base = ctx.judged & ctx.late & ~driver_work
    dispatch = base & ~stalled & (runtime | dense | dispatching)
    long = dur > cfg.input_work_min_ns
    own = (ctx.host_work_ns / dur >= cfg.launch_cpu_cover) & long
    host = base & ~dispatch & (own | (stalled & ctx.host_stall_recurs))
    # CPU samples of the launching thread's own work (rules.sampled) over most of a gap whose next kernel was
    # not queued before it: the host was computing, whether or not the next launch was recorded
    sampled = (ctx.sampled_ns / dur >= cfg.launch_cpu_cover) & long & ctx.judged & ~ctx.queued & ~driver_work
    return dispatch, host | (sampled & ~dispatch)


def mask(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dispatch, host = _signatures(gaps, ctx, cfg)
    return dispatch | host


def kind(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """``host-work`` where the host's own work (not dispatch) held the gap, else the class itself."""
    _, host = _signatures(gaps, ctx, cfg)
    out = texts(len(host), NAME)  # (one string object for every row, not one per row: np.full makes one each)
    out[host] = HOST_WORK
    return out


def _host_work_rows(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Among launch-bound rows: the host-work ones (no dispatch signature; see ``_signatures``)."""
    runtime = frac(gaps, "cpu_runtime") >= cfg.launch_cpu_cover
    launches = np.maximum(col(gaps, "launch_count", dtype=np.int64), 1)
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    stalled = ctx.host_stall_ns / dur >= cfg.launch_cpu_cover
    dispatch = ~stalled & (runtime | (dur <= launches * cfg.launch_max_ns_per_launch)
                           | (ctx.dispatch >= cfg.launch_cpu_cover))
    return ~dispatch


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    host = _host_work_rows(gaps, ctx, cfg)
    sampled = (ctx.sampled_label != "") & (ctx.sampled_ns > np.maximum(ctx.host_work_ns, ctx.host_stall_ns))
    what = where(sampled, cat("CPU samples outside CUDA calls and communication ranges: ", ctx.sampled_label),
                 where(ctx.host_work_label != "", ctx.host_work_label,
                       where(ctx.host_stall_op != "", cat(ctx.host_stall_op, " (no child op or CUDA call)"),
                             "frames and ranges with no launch inside")))
    busy = np.maximum(np.maximum(ctx.host_work_ns, ctx.host_stall_ns), ctx.sampled_ns) / dur
    own = cat_where(host, "the CPU is the bottleneck: the launching thread ran its own work, not dispatch, for ",
                    (fmt_pct, busy), " of the gap (", what, ")",
                    other=dispatch_evidence(gaps, ctx, cfg))
    # host-side communication beside it (rules.host_comm: under comm-bound's share, or it would have claimed it)
    comm = cat_where(host & (ctx.host_comm_ns > 0), "; host-side communication ", (fmt_pct, ctx.host_comm_ns / dur),
                     " (", ctx.host_comm_name, ")")
    return cat(own, comm)


def dispatch_evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    start = col(gaps, "start_ns", dtype=np.int64)
    lstart = col(gaps, "next_launch_start_ns", -1, dtype=np.int64)
    issued = cat_where(lstart >= start, "next kernel launched ", (fmt_ns, lstart - start), " after the GPU went idle",
                       other="next kernel's launch still in flight when the GPU went idle")
    op = cat_where(ctx.dispatch_op != "", "; host inside ", ctx.dispatch_op, " for ", (fmt_pct, ctx.dispatch),
                   " of the gap before the launch")
    comm = frac(gaps, "comm")
    beside = cat_where(comm > 0, "; communication ran for ", (fmt_pct, comm),
                       " of it alongside (hidden behind the host, not waited for)")
    return cat(issued, "; ",
               fmt_int(launch_calls(gaps)), " launch call(s) in the ",
               fmt_ns(col(gaps, "dur_ns")), " gap; runtime calls cover ", fmt_pct(frac(gaps, "cpu_runtime")), op,
               beside)


# The RuleContext fields this rule reads (in mask, kind, evidence and other rules' helpers it calls).
FACTS = ("judged", "queued", "late", "dispatch", "dispatch_op", "api_call_ns", "host_stall_ns", "host_stall_op",
         "host_stall_recurs", "host_work_ns", "host_work_label", "sampled_ns", "sampled_label", "host_comm_ns",
         "host_comm_name")

# Those ``kind`` reads (``_signatures``): the rows it names are many, their other facts are not taken for it.
KIND_FACTS = ("judged", "queued", "late", "dispatch", "api_call_ns", "host_stall_ns", "host_stall_recurs",
              "host_work_ns", "sampled_ns")

RULE = Rule(NAME, mask, evidence, kind, reads=("dispatch", "dispatch_op", "host_work_ns", "host_work_label",
                                               "host_stall_ns", "host_stall_op", "sampled_ns", "sampled_label",
                                               "host_comm_ns", "host_comm_name"),
            facts=FACTS, kind_reads_cfg=True, kind_facts=KIND_FACTS)
