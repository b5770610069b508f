"""``traceread gaps``' stages: the steps, every gap and its class, with the heap given back between them."""

from __future__ import annotations

import pandas as pd

from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps
from traceread.engine.lanes import drop_selections
from traceread.engine.steps import StepResult, find_steps
from traceread.rules import classify
from traceread.runner import heap
from traceread.trace import Trace


def classified_gaps(trace: Trace, cfg: Thresholds, warmup_steps: int | None,
                    step_range: str | None) -> tuple[StepResult, pd.DataFrame]:
    """The steps of ``trace`` and its classified gaps (evidence as data, ``rules.classify(text=False)``)."""
    result = find_steps(trace, cfg, warmup_steps=warmup_steps, step_range=step_range, between=heap.trim)
    found = find_gaps(trace, result.steps, cfg, heap.trim)
    drop_selections(trace)  # the engine's: the rules and the tables after them read none of them
    heap.trim()
    return result, classify(found, result.steps, trace, cfg, text=False, between=heap.trim)
