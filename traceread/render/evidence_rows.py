"""Where the table writers read a gap's evidence sentence: a chunk of rows at a time."""

from __future__ import annotations

import numpy as np
import pandas as pd


def evidence_rows(gaps: pd.DataFrame, lo: int, hi: int) -> np.ndarray:
    """The evidence sentences of gap rows ``[lo, hi)`` (an object array): the one place the column-wise
    writers (``gaps --json/--csv``, ``analyze --json``) get them, so that the text need exist for the
    rows being written only."""
    return gaps["evidence"].to_numpy(dtype=object)[lo:hi]
