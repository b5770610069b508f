"""The one-sentence diagnosis of a cause; what each cause means, its first response and its levers
are its record in :mod:`traceread.causes` (read here and by the other renderers, worded nowhere else).
"""

from __future__ import annotations

from traceread import causes
from traceread.causes import first_response, levers
from traceread.causes.builtin import EVIDENCE_TEXT, HEALTHY, ONE_TIME_COST

__all__ = ["meaning", "title", "first_response", "levers", "verdict"]


def meaning(cause: str) -> str:
    """What the time of ``cause`` is, completing "N% of step time ..."."""
    return causes.get(cause).meaning


def title(cause: str) -> str:
    return causes.get(cause).title


def verdict(cause: str, share: float, evidence: str = "") -> str:
    """The one-sentence diagnosis: ``Data-starved: 38% of step time the GPUs wait ...; add ...``."""
    c = causes.get(cause)
    if cause == ONE_TIME_COST:
        what = (f"the GPUs wait for one-time work, mostly {EVIDENCE_TEXT[evidence]}" if evidence in EVIDENCE_TEXT
                else c.meaning)
        return f"Not steady state: {share:.0%} of step time {what}; {c.response(evidence)}."
    if cause == HEALTHY:
        # Not "dominated by compute-bound kernels": busy time may be mostly unclassified kernels.
        return (f"Healthy: only {share:.0%} of step time {c.meaning} and memory-bound kernels do not "
                f"dominate busy time; {c.first_response}.")
    held = f", mostly {EVIDENCE_TEXT[evidence]}" if evidence in c.by_evidence else ""
    return f"{c.title}: {share:.0%} of step time {c.meaning}{held}; {c.response(evidence)}."
