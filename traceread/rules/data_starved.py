"""data-starved: compute idle while the host produces the next batch (positive evidence only).

::

    compute  ==kernels==|..............gap..............|==kernels==
    comm                |                               |
    host     launch ticks|=== DataLoader.__next__ ===|H2D|launch
    memcpy                                         |HtoD|            (pageable batch copy)

Signature: a data-loader annotation on the host covers at least ``data_loader_cover`` of the gap
and the GPU was not already holding its next kernel (a queued kernel means it was waiting on
something else); or a host-to-device copy covers that much of the gap (compute waits for its
input, whoever queued it). Idle with nothing to show is never called data-starved.

Evidence kind ``pageable-copy``: the host-to-device copy, not a loader, holds the gap and most of
the copied time is from pageable memory (nsys ``srcKind``, Kineto ``Memcpy HtoD (Pageable ->
Device)`` or the ``copy_args`` memory kinds). Such a copy is staged through a driver bounce buffer
and blocks the host, so the fix is pinning the batch (``pin_memory=True``) and copying it with
``non_blocking=True``, not more loader workers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.rules._base import Rows, Rule, RuleContext, cat, col, fmt_ns, fmt_pct, frac

NAME = "data-starved"


def mask(gaps: pd.DataFrame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    loader = (frac(gaps, "dataloader") >= cfg.data_loader_cover) & ~ctx.queued
    copy = frac(gaps, "memcpy_htod") >= cfg.data_loader_cover
    return ctx.judged & (loader | copy)


def pageable_copy(gaps: pd.DataFrame | Rows) -> np.ndarray:
    """Per gap: the host-to-device copy holds it more than a loader does, and at least half of the
    copied time (union, ns) is from pageable memory."""
    htod_ns = col(gaps, "memcpy_htod_ns").astype(np.int64)
    pageable_ns = col(gaps, "memcpy_htod_pageable_ns").astype(np.int64)
    return (pageable_ns > 0) & (2 * pageable_ns >= htod_ns) & (frac(gaps, "memcpy_htod") > frac(gaps, "dataloader"))


def kind(gaps: pd.DataFrame | Rows, ctx: RuleContext) -> np.ndarray:
    """``pageable-copy`` where a pageable host-to-device copy holds the gap, else the class name."""
    return np.where(pageable_copy(gaps), "pageable-copy", NAME).astype(object)


def evidence(gaps: pd.DataFrame | Rows, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    loader = frac(gaps, "dataloader")
    htod = frac(gaps, "memcpy_htod")
    main = np.where(loader >= htod,
                    cat("data loader runs for ", fmt_pct(loader), " of the ", fmt_ns(col(gaps, "dur_ns")), " gap"),
                    cat(np.where(pageable_copy(gaps), "pageable host-to-device copy (unpinned batch) covers ",
                                 "host-to-device copy covers "), fmt_pct(htod), " of the ",
                        fmt_ns(col(gaps, "dur_ns")), " gap"))
    other = np.where((loader >= htod) & (htod > 0), cat("; H2D copy ", fmt_pct(htod)),
                     np.where((loader < htod) & (loader > 0), cat("; loader ", fmt_pct(loader)), ""))
    return cat(main, other, "; compute and communication idle")


RULE = Rule(NAME, mask, evidence, kind)
