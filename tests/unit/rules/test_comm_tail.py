"""comm-bound needs the communication to run until the next kernel could start (``comm_tail_max``).

::

    compute  ==k==|.............. gap ..............|==next (queued long before)==
    comm        |==== all-reduce ====|                      ended 44% of the gap early: not what
    comm                     |===== all-reduce =====|       next waited on / ends at the gap's end
"""

from __future__ import annotations

import pandas as pd
import pytest
from _frames import api, comm, kernel, make_events

from traceread.config import Thresholds
from traceread.rules import classify

CFG = Thresholds()
US = 1_000


def _queued_gap(comm_start: int, comm_end: int) -> tuple[pd.DataFrame, object]:
    start, end = 100 * US, 1_000 * US
    covered = min(comm_end, end) - max(comm_start, start)
    row = dict(rank=0, device=0, step=1, start_ns=start, end_ns=end, dur_ns=end - start, offset_ns=start, phase=0.5,
               launch_count=0, longest_cpu_ns=0, longest_cpu_name="", python_frame="", next_kernel_name="k",
               next_launch_start_ns=20 * US, next_launch_end_ns=25 * US, launch_after_gap_start=False,
               queue_depth=1, comm_ns=covered, comm_collective_ns=covered, comm_type="all-reduce")
    for kind in ("comm_p2p", "memcpy_htod", "memcpy_dtoh", "memcpy_pageable", "cpu_runtime", "dataloader", "sync",
                 "alloc", "optimizer"):
        row[f"{kind}_ns"] = 0
    trace = make_events([kernel(0, start), api("cudaLaunchKernel", 20 * US, 25 * US), comm(comm_start, comm_end),
                         kernel(end, end + 100 * US)])
    return pd.DataFrame([row]), trace


@pytest.mark.parametrize(("comm_start", "comm_end", "expected"), [
    (450 * US, 998 * US, "comm-bound"),  # runs to the gap's end: the kernel waited for it
    (300 * US, 800 * US, "comm-bound"),  # 200 us (22%) after it ended: still within comm_tail_max
    (90 * US, 600 * US, "unattributed"),  # 400 us (44%) after it ended: the kernel waited on something else
])
def test_the_collective_must_run_until_the_next_kernel_could_start(comm_start, comm_end, expected):
    gaps, trace = _queued_gap(comm_start, comm_end)
    assert classify(gaps, None, trace, CFG).iloc[0]["class"] == expected


def test_without_a_trace_the_end_is_unknown_and_coverage_decides():
    gaps, _ = _queued_gap(90 * US, 600 * US)
    assert classify(gaps, None, None, CFG).iloc[0]["class"] == "comm-bound"
