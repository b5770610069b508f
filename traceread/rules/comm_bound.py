"""comm-bound: communication runs on the comm lane while compute waits for it.

::

    compute  ==kernels==|............gap............|==next (queued, waits on comm)==
    comm          |======== ncclAllReduce ========|
    host     launch, launch, launch ... (already ahead) or blocked in a sync on the result

Signature: communication kernels cover at least ``comm_cover`` of the gap, and compute was waiting
for them: the next kernel was already queued (or its launch is unknown), or the host sat in a sync
call for at least ``comm_cover`` of the gap; and the communication ran until shortly before the gap
ended (no more than ``comm_tail_max`` of the gap, or a turnaround, after the last one ended: compute
waiting for it starts as it ends). When the host was still submitting the next kernel and not waiting on the
device, the collective merely ran alongside a host-bound gap (launch-bound or unattributed); when it
ended long before the next kernel started, that kernel waited on something else.
A wait on a point-to-point transfer in a pipeline-parallel step is left to pipeline-bubble (the
stage waits on its neighbour); the collective type comes from collective identity, so an
all-to-all built from SendRecv kernels stays here.
"""

from __future__ import annotations

import numpy as np

from traceread.config import Thresholds
from traceread.rules import pipeline_bubble
from traceread.rules._base import Rule, RuleContext, cat, cat_where, fmt_ns, fmt_pct, waited_for_comm, where
from traceread.rules._columns import Frame, Gaps, col, frac

NAME = "comm-bound"


def mask(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    covered = frac(gaps, "comm") >= cfg.comm_cover
    # The host sat in a sync for most of the gap (a device sync returning at the drain does not).
    waited = ~ctx.late | (frac(gaps, "sync") >= cfg.comm_cover)
    p2p_dominant = frac(gaps, "comm_p2p") > frac(gaps, "comm_collective")
    structural = p2p_dominant & pipeline_bubble.takes(gaps, ctx, cfg)
    # ... and the communication ran until the next kernel could start (not over long before it).
    device = covered & waited & waited_for_comm(gaps, ctx.comm_tail_ns, cfg) & ~structural
    return ctx.judged & (device | on_host(gaps, ctx, cfg))


def on_host(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Host communication library ranges (MPI, Gloo: ``rules.host_comm``) cover ``comm_cover`` of the gap
    and the next kernel was not already queued (the host, exchanging data, submitted it late)."""
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    return (ctx.host_comm_ns / dur >= cfg.comm_cover) & ~ctx.queued


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    coll = frac(gaps, "comm_collective")
    p2p = frac(gaps, "comm_p2p")
    typ = col(gaps, "comm_type", "").astype(str).astype(object)
    what = where(coll >= p2p, where(typ != "", cat(typ, " collective"), "collective"), "point-to-point transfer")
    how = where(ctx.queued, "next kernel was already queued behind it",
                where(ctx.late, cat("host blocked in a sync for ", fmt_pct(frac(gaps, "sync")), " of it"),
                      "next kernel's launch not recorded"))
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    lane = cat(what, " on the communication lane covers ", fmt_pct(frac(gaps, "comm")), " of the ",
               fmt_ns(col(gaps, "dur_ns")), " gap; ", how)
    host = on_host(gaps, ctx, cfg) & (frac(gaps, "comm") < cfg.comm_cover)
    return cat_where(host, "host-side communication: ", ctx.host_comm_name, " and other communication-library "
                     "ranges on the host cover ", (fmt_pct, ctx.host_comm_ns / dur), " of the ", (fmt_ns, dur),
                     " gap (data exchanged through host memory; nothing on the GPU's communication lane)",
                     other=lane)


# The RuleContext fields this rule reads (in mask, kind, evidence and other rules' helpers it calls).
FACTS = ("judged", "queued", "late", "periodic", "comm_tail_ns", "host_comm_ns", "host_comm_name")

RULE = Rule(NAME, mask, evidence, reads=("queued", "late", "host_comm_ns", "host_comm_name"), facts=FACTS)
