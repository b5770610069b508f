"""``traceread diff BEFORE AFTER``: did the fix move the number, and where did the bottleneck go?

Data flow: :mod:`inputs` turns each side's path into captures of loaded traces; each capture goes
through :func:`traceread.runner.analyze` unchanged; :mod:`side` reads the analyses into
:class:`SideFacts`; :mod:`compare` judges comparability, runs the test (:mod:`stats`) and builds the
tables (:mod:`tables`, kernels matched with :mod:`kernel_key`); :mod:`render` writes Markdown and JSON.
"""

from __future__ import annotations

from typing import Any

from traceread.config import Thresholds
from traceread.diff.compare import DIFF_SCHEMA_VERSION, VERDICTS, Diff, compare, gate
from traceread.diff.side import Capture, SideFacts, capture_from_analysis, summarize_side
from traceread.trace import Trace

__all__ = ["diff", "Diff", "Capture", "SideFacts", "compare", "gate", "summarize_side", "capture_from_analysis",
           "VERDICTS", "DIFF_SCHEMA_VERSION"]


def diff(before: list[list[Trace]], after: list[list[Trace]], job_before: Any = None, job_after: Any = None,
         cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen, never mutated
         warmup_steps: int | None = None, step_range: str | None = None, fix: str | None = None) -> Diff:
    """Diff two sides, each a list of captures (the loaded traces of one run: its ranks). ``fix``: the
    fix that was made (a :data:`traceread.whatif.FIX_CAUSES` cause), checked against the before side's
    prediction (:mod:`traceread.diff.whatif`)."""
    from traceread.diff.whatif import attach
    from traceread.runner import analyze

    sides, before_caps = [], []
    for label, captures, workload in (("before", before, job_before), ("after", after, job_after)):
        notes: list[str] = []
        caps = [capture_from_analysis(analyze(c, workload=workload, cfg=cfg, warmup_steps=warmup_steps, step_range=step_range),
                                      cfg, notes) for c in captures]
        sides.append(summarize_side(label, caps, workload, cfg, notes))
        if label == "before":
            before_caps = caps
    return attach(compare(sides[0], sides[1], cfg), before_caps, fix, cfg.diff_fix_tolerance)
