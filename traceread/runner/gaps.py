"""``traceread gaps``' stages: the steps, every gap and its class, with the heap given back between them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pandas as pd

from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps
from traceread.engine.lanes import drop_selections
from traceread.engine.steps import StepResult, find_steps
from traceread.rules import classify
from traceread.runner import heap
from traceread.trace import Trace


@contextlib.contextmanager
def gaps_heap() -> Iterator[None]:
    """``traceread gaps``' malloc setting, from its load to its last output: freed heap pages reused
    (:func:`heap.reuse_freed_pages`, as ``analyze`` sets it) and none given back between the stages
    (:func:`heap.freed_pages_kept`). Each stage (decode, steps, gaps, rules, the writers' pieces) then
    takes the pages the last one freed, where pages given back were faulted in again by the next stage,
    zeroed by the kernel on the command's time. The peak grows only by what a stage cannot reuse. In small
    pages (:func:`heap.small_pages`), as ``analyze``'s."""
    heap.small_pages()
    heap.reuse_freed_pages()
    with heap.freed_pages_kept():
        yield


def classified_gaps(trace: Trace, cfg: Thresholds, warmup_steps: int | None,
                    step_range: str | None, evidence_data: bool = True) -> tuple[StepResult, pd.DataFrame]:
    """The steps of ``trace`` and its classified gaps (evidence as data, ``rules.classify(text=False)``;
    without it where ``evidence_data`` is False: no sentence is made)."""
    result = find_steps(trace, cfg, warmup_steps=warmup_steps, step_range=step_range, between=heap.trim)
    found = find_gaps(trace, result.steps, cfg, heap.trim)
    drop_selections(trace)  # the engine's: the rules and the tables after them read none of them
    heap.trim()
    return result, classify(found, result.steps, trace, cfg, text=False, between=heap.trim,
                            evidence_data=evidence_data)
