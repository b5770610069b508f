"""The one-sentence diagnosis of a cause; what each cause means, its first response and its levers
live in :mod:`traceread.rules.responses` (one table, read here and by the other renderers).
"""

from __future__ import annotations

from traceread.rules.responses import (
    EVIDENCE_FIRST_RESPONSE,
    EVIDENCE_LEVERS,
    EVIDENCE_TEXT,
    FIRST_RESPONSES,
    LEVERS,
    MEANING,
    TITLE,
    first_response,
    levers,
)

__all__ = ["EVIDENCE_FIRST_RESPONSE", "EVIDENCE_LEVERS", "EVIDENCE_TEXT", "FIRST_RESPONSES", "LEVERS", "MEANING",
           "TITLE", "first_response", "levers", "verdict"]


def verdict(cause: str, share: float, evidence: str = "") -> str:
    """The one-sentence diagnosis: ``Data-starved: 38% of step time the GPUs wait ...; add ...``."""
    if cause == "one-time-cost":
        what = (f"the GPUs wait for one-time work, mostly {EVIDENCE_TEXT[evidence]}" if evidence in EVIDENCE_TEXT
                else MEANING[cause])
        return f"Not steady state: {share:.0%} of step time {what}; {first_response(cause, evidence)}."
    if cause == "healthy":
        # Not "dominated by compute-bound kernels": busy time may be mostly unclassified kernels.
        return (f"Healthy: only {share:.0%} of step time {MEANING['healthy']} and memory-bound kernels do not "
                f"dominate busy time; {FIRST_RESPONSES['healthy']}.")
    held = f", mostly {EVIDENCE_TEXT[evidence]}" if (cause, evidence) in EVIDENCE_FIRST_RESPONSE else ""
    return f"{TITLE[cause]}: {share:.0%} of step time {MEANING[cause]}{held}; {first_response(cause, evidence)}."
