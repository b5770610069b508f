"""What the reports show beyond the analysis' tables, made in the analysis layer: renderers format it.

``Analysis.findings`` is a :class:`Findings` over one analysis: the largest gaps with their evidence
sentences, each unit's own verdict, and the evidence of any selection of gaps, as sentences
(:meth:`Findings.with_evidence`) or block by block for a writer (:meth:`Findings.evidence_chunks`). The
sentences are made by the rules' evidence functions (``traceread.rules.evidence``) for the rows a
report shows or writes, when it asks (a multi-million-gap trace holds no sentence per gap); a verdict is
taken by the rule that names the run's (``traceread.attribution.verdict``). Renderers read these and
import neither module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from traceread.attribution import verdict
from traceread.engine.gaps import with_fractions
from traceread.rules.evidence import EvidenceChunks
from traceread.rules.evidence import with_evidence as _with_evidence
from traceread.vocabulary import PARTS, part_col

if TYPE_CHECKING:
    from traceread.analysis import Analysis

__all__ = ["Findings", "LargestGaps", "UnitVerdict"]


@dataclass(frozen=True)
class UnitVerdict:
    """One unit's (trace, rank, device) own dominant cause and its share of that unit's step time."""

    trace: int
    rank: int
    device: int
    cause: str
    share: float


@dataclass(frozen=True, eq=False)
class LargestGaps:
    """The longest judged gaps, longest first (``rows``: the gap columns, the ``X_frac`` fractions and the
    ``evidence`` sentence), of ``total`` gaps; ``unlisted``: gaps under the smallest judged gap, never
    listed, counted when they leave the table shorter than asked (else 0)."""

    rows: pd.DataFrame
    total: int
    unlisted: int


class Findings:
    """The findings of one analysis (module doc); each is made when asked."""

    def __init__(self, analysis: Analysis) -> None:
        self._a = analysis

    def with_evidence(self, gaps: pd.DataFrame) -> pd.DataFrame:
        """``gaps`` (rows of the analysis' gaps) with their ``evidence`` sentence, without the evidence data."""
        return _with_evidence(gaps, self._a.cfg)

    def evidence_chunks(self, gaps: pd.DataFrame | None = None) -> EvidenceChunks:
        """The sentences of ``gaps`` (default: every gap) for a writer going through the rows in order: called
        with ``(lo, hi)`` it gives those rows' sentences, ``parts(lo, hi)`` the same as text parts."""
        return EvidenceChunks(self._a.gaps if gaps is None else gaps, self._a.cfg)

    def largest_gaps(self) -> LargestGaps:
        """The ``top_gaps`` longest gaps of at least the smallest judged gap, with their evidence."""
        a = self._a
        g = a.gaps
        # Only the listed rows are taken from the frame (selecting the listable gaps first copied most of a
        # multi-million-row frame to keep ten of them).
        dur_ns = g["dur_ns"].to_numpy()
        listed = np.flatnonzero(dur_ns >= a.cfg.min_judged_gap_ns)
        longest = pd.Series(dur_ns[listed]).nlargest(a.top_gaps, keep="first").index.to_numpy()
        top = self.with_evidence(with_fractions(g.iloc[listed[longest]]))
        unlisted = len(g) - len(listed) if len(top) < a.top_gaps else 0
        return LargestGaps(top, len(g), unlisted)

    def unit_verdicts(self) -> tuple[UnitVerdict, ...]:
        """Each unit's own verdict, one per row of ``Analysis.attribution`` in its order, by the rule that
        gives the run's."""
        a = self._a
        out = []
        for _, r in a.attribution.iterrows():
            step_ns = float(r["step_ns"]) or 1.0
            own = verdict({p: r[part_col(p)] / step_ns for p in PARTS}, a.cfg)
            out.append(UnitVerdict(int(r["trace"]), int(r["rank"]), int(r["device"]), own.cause, own.share))
        return tuple(out)
