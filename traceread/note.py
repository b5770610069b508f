"""A note as data: what the analysis found worth a line of the method notes, worded only by the renderers.

``Note(kind, data, label)``: ``kind`` names the finding, ``data`` its figures as (name, value) pairs in order
(hashable, so equal notes are listed once), ``label`` the input it is about (its file name, shown before the
words) or "". ``traceread.render.notes`` words each kind; a note the analysis has no kind for yet travels as
its sentence (a ``str``).
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
# The frame's sanity checks (traceread.frame.sanity):
# GPU activities the file holds more than once: count
REPEATED_GPU_ACTIVITY = "repeated-gpu-activity"
# compute kernels that start before the previous kernel on their stream ended: count
OVERLAPPING_KERNELS = "overlapping-kernels"
# holes in the GPU timeline of at least clock_jump_min_ns: count, min_ns, longest_ns
TIMELINE_HOLES = "timeline-holes"
# The pipeline-bubble rule (traceread.rules.pipeline_bubble):
# a rank/device with too few analysed steps to judge periodicity: rank, device, steps, needed
BUBBLES_NOT_JUDGED = "bubbles-not-judged"
# the rank/device pairs past the ones named, in one line: pairs, fewest, most (analysed steps)
BUBBLES_NOT_JUDGED_MORE = "bubbles-not-judged-more"


@dataclass(frozen=True)
class Note:
    """A finding of ``kind`` with its figures (``data``); :meth:`of` takes them as keywords."""

    kind: str
    data: tuple[tuple[str, Any], ...] = ()
    label: str = ""  # the input the note is about, shown before its words ("" for the whole analysis)

    @classmethod
    def of(cls, kind: str, /, **data: Any) -> Note:
        return cls(kind, tuple(data.items()))

    def under(self, label: str) -> Note:
        """This note about the input ``label`` (its file name)."""
        return Note(self.kind, self.data, label)

    @property
    def fields(self) -> dict[str, Any]:
        """``data`` as a dict (name -> value)."""
        return dict(self.data)
