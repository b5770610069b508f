"""A note as data: what the analysis found worth a line of the method notes, worded only by the renderers.

``Note(kind, data)``: ``kind`` names the finding, ``data`` its figures as (name, value) pairs in order
(hashable, so equal notes are listed once). ``traceread.render.notes`` words each kind; a note the
analysis has no kind for yet travels as its sentence (a ``str``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The kinds the analysis makes (its job block), with their data:
# the comm-bound time on a job's other ranks that is waiting for a straggler: job, rank, cause, waiting_ns
STRAGGLER_COMM_BOUND = "straggler-comm-bound"
# how much of the other ranks' largest idle class is waiting for one rank or stage: idle_class, share, job,
# waits_on (rank | stage), who (its rank or stage)
WAITING_FOR = "waiting-for"


@dataclass(frozen=True)
class Note:
    """A finding of ``kind`` with its figures (``data``); :meth:`of` takes them as keywords."""

    kind: str
    data: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, kind: str, /, **data: Any) -> Note:
        return cls(kind, tuple(data.items()))

    @property
    def fields(self) -> dict[str, Any]:
        """``data`` as a dict (name -> value)."""
        return dict(self.data)
