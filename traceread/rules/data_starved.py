"""data-starved: compute idle while the host produces the next batch (positive evidence only).

::

    compute  ==kernels==|..............gap..............|==kernels==
    comm                |                               |
    host     launch ticks|=== DataLoader.__next__ ===|H2D|launch
    memcpy                                         |HtoD|            (pageable batch copy)

    host     [preprocess: read_video_pyav, numpy normalize ......]|.to(device)|launch
                                 (no DataLoader: the training thread produces the batch itself)

Signature: a data-loader annotation on the host covers at least ``data_loader_cover`` of the gap
and the GPU was not already holding its next kernel (a queued kernel means it was waiting on
something else); or a host-to-device copy covers that much of the gap (compute waits for its
input, whoever queued it); or **host-side input work**: in a gap longer than ``input_work_min_ns``
that the GPU did not hold its next kernel through, the launching thread ran Python frames, CPU ops
or user ranges with no kernel launch inside (``rules.host_work``) for at least ``data_loader_cover``
of it, runtime calls cover under ``launch_cpu_cover`` of it, and the work is input: the batch is
copied to the device in the gap,
or the frames say so (decode, preprocess, collate, ``__getitem__``: ``host_calls.INPUT_WORK``). A
quiet stretch of other host work (logging, checkpointing) is not data-starved. Idle with nothing to
show is never called data-starved.

Evidence kind ``host-input`` for host-side input work (first fix: move it into DataLoader workers).

Evidence kind ``pageable-copy``: the host-to-device copy, not a loader, holds the gap and most of
the copied time is from pageable memory (nsys ``srcKind``, Kineto ``Memcpy HtoD (Pageable ->
Device)`` or the ``copy_args`` memory kinds). Such a copy is staged through a driver bounce buffer
and blocks the host, so the fix is pinning the batch (``pin_memory=True``) and copying it with
``non_blocking=True``, not more loader workers. Otherwise the class name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.host_calls import INPUT_WORK, calls_matching
from traceread.rules import bus
from traceread.rules._base import Rule, RuleContext, cat, cat_where, fmt_ns, fmt_pct, nonempty, where
from traceread.rules._columns import Frame, Gaps, col, frac

NAME = "data-starved"
BUS_BOUND = "bus-bound"


def host_input(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Host-side input work holds the gap (see module doc)."""
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    dispatching = frac(gaps, "cpu_runtime") >= cfg.launch_cpu_cover
    named = _input_work(ctx.host_work_label)
    fed = col(gaps, "memcpy_htod_ns", dtype=np.int64) > 0
    held = (ctx.host_work_ns >= cfg.data_loader_cover * dur) & (dur > cfg.input_work_min_ns)
    return held & ~ctx.queued & ~dispatching & (named | fed)


def _input_work(labels: np.ndarray) -> np.ndarray:
    """Per label: does it name input work (``INPUT_WORK``)? Only the labelled gaps are tested (a label
    is named only for the long gaps host work holds), each distinct label once."""
    out = np.zeros(len(labels), dtype=bool)
    some = np.flatnonzero(nonempty(labels))
    if len(some):
        out[some] = calls_matching(pd.Series(labels[some], dtype=object).astype(str), INPUT_WORK)
    return out


def mask(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    loader = (frac(gaps, "dataloader") >= cfg.data_loader_cover) & ~ctx.queued
    copy = frac(gaps, "memcpy_htod") >= cfg.data_loader_cover
    return ctx.judged & (loader | copy | host_input(gaps, ctx, cfg))


def pageable_copy(gaps: Gaps) -> np.ndarray:
    """Per gap: the host-to-device copy holds it more than a loader does, and at least half of the
    copied time (union, ns) is from pageable memory."""
    htod_ns = col(gaps, "memcpy_htod_ns", dtype=np.int64)
    pageable_ns = col(gaps, "memcpy_htod_pageable_ns", dtype=np.int64)
    return (pageable_ns > 0) & (2 * pageable_ns >= htod_ns) & (frac(gaps, "memcpy_htod") > frac(gaps, "dataloader"))


def bus_bound(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """Per gap: host-to-device copies (not pageable) hold it more than a loader does, moving at least
    ``bus_min_copy_bytes`` at ``bus_min_fraction`` or more of the link's measured rate (``rules.bus``)."""
    rate = bus.rate_bps(ctx.h2d_bytes, ctx.h2d_copy_ns)
    fast = (ctx.link_bps > 0) & (rate >= cfg.bus_min_fraction * ctx.link_bps)
    return fast & (ctx.h2d_bytes >= cfg.bus_min_copy_bytes) & (frac(gaps, "memcpy_htod") > frac(gaps, "dataloader")) \
        & ~pageable_copy(gaps)


def kind(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    """``host-input`` where no loader ran and host input work holds more of the gap than the H2D copy;
    else ``pageable-copy`` where a pageable host-to-device copy holds the gap; else ``bus-bound`` where
    copies at the link's rate hold it; else the class name."""
    no_loader = col(gaps, "dataloader_ns", dtype=np.int64) == 0
    larger = ctx.host_work_ns > col(gaps, "memcpy_htod_ns", dtype=np.int64)
    return np.where(no_loader & larger & (ctx.host_work_label != ""), "host-input",
                    np.where(pageable_copy(gaps), "pageable-copy",
                             np.where(bus_bound(gaps, ctx, cfg), BUS_BOUND, NAME))).astype(object)


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    loader = frac(gaps, "dataloader")
    htod = frac(gaps, "memcpy_htod")
    main = where(loader >= htod,
                    cat("data loader runs for ", fmt_pct(loader), " of the ", fmt_ns(col(gaps, "dur_ns")), " gap"),
                 cat(where(pageable_copy(gaps), "pageable host-to-device copy (unpinned batch) covers ",
                           "host-to-device copy covers "), fmt_pct(htod), " of the ",
                     fmt_ns(col(gaps, "dur_ns")), " gap"))
    other = where((loader >= htod) & (htod > 0), cat("; H2D copy ", fmt_pct(htod)),
                  where((loader < htod) & (loader > 0), cat("; loader ", fmt_pct(loader)), ""))
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    inline = cat("the training thread produced the batch itself (no DataLoader): host work with no launch inside ",
                 "holds ", fmt_pct(ctx.host_work_ns / dur), " of the ", fmt_ns(dur), " gap: ",
                 ctx.host_work_label, where(htod > 0, cat("; then its H2D copy ", fmt_pct(htod)), ""))
    rate = bus.rate_bps(ctx.h2d_bytes, ctx.h2d_copy_ns)
    on_bus = cat_where(bus_bound(gaps, ctx, cfg), "the bus is the limit: host-to-device copies move ",
                       (bus.fmt_gb, ctx.h2d_bytes), " GB in ", (fmt_ns, ctx.h2d_copy_ns), " (", (bus.fmt_gb, rate),
                       " GB/s, ", (fmt_pct, rate / np.maximum(ctx.link_bps, 1)),
                       " of the fastest rate this trace's large copies reached: ", (bus.fmt_gb, ctx.link_bps),
                       " GB/s) and cover ", (fmt_pct, htod), " of the ", (fmt_ns, dur), " gap; adding loader "
                       "workers does not move bytes faster", other="")
    which = kind(gaps, ctx, cfg)
    return where(which == "host-input", inline,
                 where(which == BUS_BOUND, on_bus, cat(main, other, "; compute and communication idle")))


# The RuleContext fields this rule reads (in mask, kind, evidence and other rules' helpers it calls).
FACTS = ("judged", "queued", "host_work_ns", "host_work_label", "h2d_bytes", "h2d_copy_ns", "link_bps")

RULE = Rule(NAME, mask, evidence, kind, reads=("host_work_ns", "host_work_label", "h2d_bytes", "h2d_copy_ns", "link_bps"),
            facts=FACTS, kind_reads_cfg=True)
